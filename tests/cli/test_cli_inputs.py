"""The commands that read documents take them through the one input layer
(``data.inputs``): ``convert`` and ``build-kb --alias-corpus`` read every format, a folder
file by file, a ``.txt`` by the one rule."""

import json

import spacy
from spacy.tokens import DocBin

from spacy_arboel.kb.knowledge_base import Entity, KnowledgeBase

PUBTATOR = "1|t|Aspirin induced cough.\n1|a|\n1\t0\t7\tAspirin\tChemical\tD001241\n"
JSONL = json.dumps({"id": "j", "text": "Fever and pain.", "spans": [
    {"start": 0, "end": 5, "label": "Disease", "kb_id": "D005334"}]}) + "\n"


def test_convert_reads_a_folder_file_by_file(tmp_path, cli):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.txt").write_text(PUBTATOR)
    (corpus / "b.jsonl").write_text(JSONL)
    (corpus / "c.txt").write_text("Plain text, no gold.")
    result = cli("convert", corpus, tmp_path / "out.spacy")
    assert result.exit_code == 0, result.output
    docs = list(DocBin().from_disk(tmp_path / "out.spacy").get_docs(spacy.blank("xx").vocab))
    assert [(d.user_data["pmid"], [e.kb_id_ for e in d.ents]) for d in docs] == [
        ("1", ["D001241"]), ("j", ["D005334"]), ("c", [])]
    (corpus / "d.spacy").write_bytes((tmp_path / "out.spacy").read_bytes())
    result = cli("convert", corpus, tmp_path / "again.spacy")
    assert result.exit_code == 1 and "[E206]" in result.output
    assert not (tmp_path / "again.spacy").exists()


def test_alias_corpora_of_any_format_add_aliases(tmp_path, cli):
    kb_in = tmp_path / "in.jsonl"
    KnowledgeBase([Entity("D005334", "Fever"), Entity("D001241", "Aspirin")]).to_jsonl(kb_in)
    (tmp_path / "gold.jsonl").write_text(json.dumps({"text": "Pyrexia.", "spans": [
        {"start": 0, "end": 7, "label": "Disease", "kb_id": "D005334"}]}) + "\n")
    brat = tmp_path / "brat"
    brat.mkdir()
    (brat / "d.txt").write_text("ASA induced cough.")
    (brat / "d.ann").write_text("T1\tChemical 0 3\tASA\nN1\tReference T1 MeSH:D001241\tASA\n")
    output = tmp_path / "kb.jsonl"
    result = cli("build-kb", output, "--jsonl", kb_in, "--alias-corpus", tmp_path / "gold.jsonl",
                 "--alias-corpus", brat)
    assert result.exit_code == 0, result.output
    kb = KnowledgeBase.from_jsonl(output)
    assert "Pyrexia" in kb["D005334"].aliases and "ASA" in kb["D001241"].aliases
    (tmp_path / "x.csv").write_text("a,b")
    result = cli("build-kb", output, "--jsonl", kb_in, "--alias-corpus", tmp_path / "x.csv")
    assert result.exit_code == 1 and "[E114]" in result.output
