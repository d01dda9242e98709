"""``span._.candidates`` holds ``Candidate`` records; ``kb_candidates`` and ``kb_raw_scores``
are views of them that can be set, and survive a ``DocBin``."""

import pytest
import spacy
from spacy.tokens import DocBin

from spacy_arboel.extensions import Candidate, register_extensions


def test_the_candidate_views_read_and_set_the_records():
    register_extensions()
    nlp = spacy.blank("en")
    doc = nlp("Aspirin caused fever.")
    span = doc[0:1]
    assert span._.candidates is None and span._.kb_candidates is None
    span._.candidates = [Candidate("D1", 0.9, 12.0), Candidate("D2", 0.1, 9.5)]
    assert span._.kb_candidates == [("D1", 0.9), ("D2", 0.1)]
    assert span._.kb_raw_scores == [12.0, 9.5]
    span._.kb_raw_scores = [1.0, 2.0]
    assert span._.candidates == [Candidate("D1", 0.9, 1.0), Candidate("D2", 0.1, 2.0)]
    with pytest.raises(ValueError, match=r"E262.*\(2\), got 1 scores"):
        span._.kb_raw_scores = [1.0]
    span._.kb_candidates = [("D3", 0.5)]  # set as pairs: the raw score is the score
    assert span._.candidates == [Candidate("D3", 0.5, 0.5)]
    doc.ents = [doc.char_span(0, 7, label="Chemical")]
    loaded = list(DocBin(docs=[doc], store_user_data=True).get_docs(nlp.vocab))[0]
    assert loaded.ents[0]._.kb_candidates == [("D3", 0.5)]
    assert loaded.ents[0]._.kb_raw_scores == [0.5]
