"""Corpora as spaCy reads them (``spacy_data.readers``): documents with ``.spacy`` DocBins
beside the other formats, and the gold docs of ``build-kb --alias-corpus``."""

import json

import pytest
import spacy
from spacy.tokens import DocBin, Span

from spacy_arboel.data.documents import Mention
from spacy_arboel.spacy_data.convert import SPAN_KEY
from spacy_arboel.spacy_data.readers import (
    read_corpus_docs,
    read_corpus_documents,
    read_docbin_documents,
)

JSONL = json.dumps({"id": "j", "text": "Aspirin induced cough.", "spans": [
    {"start": 0, "end": 7, "label": "Chemical", "kb_id": "D001241"},
    {"start": 0, "end": 15, "label": "Chemical", "kb_id": "D9"}]}) + "\n"


def _docbin(path, nlp):
    named = nlp("Fever and cough.")
    named.ents = [Span(named, 0, 1, label="Disease", kb_id="D005334|-1"),
                  Span(named, 2, 3, label="Disease", kb_id="-1")]
    named.user_data["id"] = "n1"
    DocBin(docs=[named, nlp("Plain.")], store_user_data=True).to_disk(path)


def test_docbins_are_read_as_documents_beside_the_other_formats(tmp_path, nlp):
    _docbin(tmp_path / "b.spacy", nlp)
    (tmp_path / "a.jsonl").write_text(JSONL)
    documents = list(read_corpus_documents(tmp_path))
    assert [(d.id, d.text) for d in documents] == [
        ("j", "Aspirin induced cough."), ("n1", "Fever and cough."), ("b:1", "Plain.")]
    assert documents[1].mentions == [Mention(0, 5, "Fever", "Disease", ("D005334",)),
                                     Mention(10, 15, "cough", "Disease")]
    assert documents[1].gold_links == ((0, 5, "D005334"),)  # "-1" is no id
    (tmp_path / "bad.spacy").write_bytes(b"not a DocBin")
    with pytest.raises(ValueError, match=r"E155.*bad.spacy"):
        list(read_docbin_documents(tmp_path / "bad.spacy"))


def test_alias_corpora_are_gold_docs_of_any_format(tmp_path, nlp):
    """A DocBin's docs as saved (their span groups kept); the documents of the other
    formats made docs, every mention in the span group (the overlapping ones too)."""
    _docbin(tmp_path / "b.spacy", nlp)
    (tmp_path / "a.jsonl").write_text(JSONL)
    (tmp_path / "c.txt").write_text("1|t|Cough.\n1|a|\n1\t0\t5\tCough\tDisease\tD003371\n")
    docs = list(read_corpus_docs([tmp_path / "a.jsonl", tmp_path / "b.spacy",
                                  tmp_path / "c.txt"], nlp))
    assert [d.text for d in docs] == ["Aspirin induced cough.", "Fever and cough.", "Plain.",
                                      "Cough. "]
    assert [(s.text, s.kb_id_) for s in docs[0].spans[SPAN_KEY]] == [
        ("Aspirin induced", "D9"), ("Aspirin", "D001241")]
    assert [e.kb_id_ for e in docs[1].ents] == ["D005334|-1", "-1"]  # as saved
    (tmp_path / "x.csv").write_text("a,b")
    with pytest.raises(ValueError, match="E114"):
        list(read_corpus_docs([tmp_path / "x.csv"], nlp))
    (tmp_path / "a.jsonl").write_text(JSONL.replace("15", "99"))
    with pytest.raises(ValueError, match=r"E203.*a.jsonl:1"):  # gold: read strictly
        list(read_corpus_docs([tmp_path / "a.jsonl"], nlp))


def test_the_pubtator_corpus_reader_takes_a_folder_of_pubtator_files(tmp_path, nlp):
    (tmp_path / "a.txt").write_text("1|t|Cough.\n1|a|\n1\t0\t5\tCough\tDisease\tD003371\n")
    (tmp_path / "b.pubtator").write_text("2|t|Fever.\n2|a|\n")
    reader = spacy.registry.readers.get("spacy_arboel.PubtatorCorpus.v1")
    examples = list(reader(tmp_path)(nlp))
    assert [e.reference.user_data["pmid"] for e in examples] == ["1", "2"]
    assert [e.reference.ents[0].kb_id_ for e in examples[:1]] == ["D003371"]
    assert len(list(reader(tmp_path, limit=1)(nlp))) == 1
