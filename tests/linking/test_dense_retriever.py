"""The spaCy-free dense retriever: linking from texts and spans, saving and loading."""


import numpy as np
import pytest

from spacy_arboel.encoders.inputs import MentionSpan
from spacy_arboel.kb import KnowledgeBase
from spacy_arboel.linking import DenseRetriever, RetrieverSettings

TEXTS = ["Aspirin induced cough.", "   "]
SPANS = [MentionSpan(0, 0, 7), MentionSpan(0, 16, 21), MentionSpan(1, 0, 3)]


def test_links_saves_and_loads_without_spacy(tiny_encoder, toy_kb_path, tmp_path):
    retriever = DenseRetriever.from_pretrained(
        KnowledgeBase.from_jsonl(toy_kb_path), tiny_encoder,
        RetrieverSettings(entity_granularity="alias", share_weights=True))
    with pytest.raises(RuntimeError, match="E050"):
        retriever.link(TEXTS, SPANS, k=3)  # no index yet
    retriever.entities.refresh()
    scores, positions, vectors = retriever.link(TEXTS, SPANS, k=3)
    candidates = retriever.candidates(scores, positions)
    assert [len(c) for c in candidates] == [3, 3, 0]  # whitespace: nothing to encode
    assert not vectors[2].any() and vectors.shape[1] == retriever.vector_width
    assert sorted(retriever.save(tmp_path / "r")) == sorted(
        ["kb.jsonl", "tokenizer", "mention_encoder", "index", "retriever.json"])
    loaded = DenseRetriever.load(tmp_path / "r", batch_size=2)
    assert loaded.settings.batch_size == 2 and loaded.settings.share_weights
    found = loaded.candidates(*loaded.link(TEXTS, SPANS, k=3)[:2])
    assert [[i for i, _ in c] for c in found] == [[i for i, _ in c] for c in candidates]
    np.testing.assert_allclose([s for c in found for _, s in c],
                               [s for c in candidates for _, s in c], rtol=1e-5)
    retriever.entities.changed()  # trained since: the index is stale until refreshed
    assert not retriever.entities.is_current


