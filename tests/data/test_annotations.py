"""Readers of JSONL (character spans and ids) and brat standoff corpora, and `convert`."""

import json

import pytest
import spacy
from spacy.tokens import DocBin
from typer.testing import CliRunner

from spacy_arboel.cli import app
from spacy_arboel.data.annotations import read_brat_documents, read_jsonl_documents
from spacy_arboel.data.readers import corpus_format

TEXT = "Aspirin induced cough and acute pain."


def test_jsonl_documents_with_spans_as_objects_or_lists(tmp_path):
    path = tmp_path / "docs.jsonl"
    path.write_text("\n".join(json.dumps(d) for d in [
        {"id": "a", "text": TEXT, "spans": [
            {"start": 16, "end": 21, "label": "Disease", "kb_id": "D003371"},
            {"start": 0, "end": 7, "label": "Chemical", "kb_id": "D001241"}]},
        {"text": "Fever and pain.", "entities": [[0, 5, "Disease", ["D005334", "D010146"]],
                                             [10, 14]]},
    ]) + "\n\n")
    first, second = read_jsonl_documents(path)
    assert first.pmid == "a" and first.text == TEXT  # the text as it is: no added space
    assert [(m.text, m.label, m.ids) for m in first.mentions] == [
        ("Aspirin", "Chemical", ("D001241",)), ("cough", "Disease", ("D003371",))]
    assert second.pmid == "2"  # its line number
    assert [(m.text, m.label, m.ids) for m in second.mentions] == [
        ("Fever", "Disease", ("D005334", "D010146")), ("pain", "ENTITY", ())]


@pytest.mark.parametrize("line, problem", [
    ("not json", "not JSON"),
    ('{"spans": []}', 'no.* "text"'),
    ('{"text": "abc", "spans": {}}', '"spans" is not a list'),
    ('{"text": "abc", "spans": [{"start": 2, "end": 9}]}', "within the text"),
    ('{"text": "abc", "spans": [{"start": 0, "end": 1, "label": 5}]}', "not text"),
    ('{"text": "abc", "spans": ["x"]}', "neither an object"),
])
def test_a_malformed_jsonl_line_is_E203_naming_the_line(tmp_path, line, problem):
    path = tmp_path / "docs.jsonl"
    path.write_text(json.dumps({"text": "fine"}) + "\n" + line + "\n")
    with pytest.raises(ValueError, match=rf"\[E203\] .*docs.jsonl:2: .*{problem}"):
        list(read_jsonl_documents(path))


def _brat(folder, ann: str, name: str = "doc1", text: str = TEXT):
    folder.mkdir(exist_ok=True)
    (folder / f"{name}.txt").write_text(text)
    (folder / f"{name}.ann").write_text(ann)
    return folder


def test_brat_mentions_take_their_ids_from_normalizations(tmp_path):
    folder = _brat(tmp_path / "brat", "T1\tChemical 0 7\tAspirin\n"
                                       "T2\tDisease 26 36\tacute pain\n"
                                       "T3\tDisease 16 21;26 31\tcough acute\n"
                                       "R1\tCauses Arg1:T1 Arg2:T2\n"
                                       "N1\tReference T1 MeSH:D001241\tAspirin\n"
                                       "N2\tReference T2 MeSH:D010146\tPain\n"
                                       "#1\tAnnotatorNotes T2\tacute\n")
    (document,) = read_brat_documents(folder)
    assert document.pmid == "doc1" and document.text == TEXT
    assert [(m.text, m.label, m.ids) for m in document.mentions] == [
        ("Aspirin", "Chemical", ("D001241",)), ("cough and acute", "Disease", ()),
        ("acute pain", "Disease", ("D010146",))]


@pytest.mark.parametrize("ann, problem", [
    ("T1\tChemical zero 7\tAspirin\n", "not START END"),
    ("T1\tChemical 0 700\tAspirin\n", "within the text"),
    ("T1\tChemical 0 7\tAspirin\nN1\tReference T1\tAspirin\n", "N<n><TAB>Reference"),
    ("N1\tReference T9 MeSH:D1\tx\n", "T9, which it does not define"),
])
def test_malformed_brat_is_E204_naming_the_file(tmp_path, ann, problem):
    folder = _brat(tmp_path / "brat", ann)
    with pytest.raises(ValueError, match=rf"\[E204\] .*doc1.ann.*{problem}"):
        list(read_brat_documents(folder))
    (folder / "doc1.txt").unlink()
    with pytest.raises(ValueError, match=r"\[E204\].*no doc1.txt"):
        list(read_brat_documents(folder))


def test_convert_reads_each_format_into_gold_docs(tmp_path):
    jsonl = tmp_path / "docs.jsonl"
    jsonl.write_text(json.dumps({"text": TEXT, "spans": [
        {"start": 0, "end": 7, "label": "Chemical", "kb_id": "D001241"}]}) + "\n")
    brat = _brat(tmp_path / "brat", "T1\tChemical 0 7\tAspirin\nN1\tReference T1 MeSH:D001241\t"
                                    "Aspirin\n")
    assert corpus_format(jsonl) == "jsonl" and corpus_format(brat) == "brat"
    nlp = spacy.blank("xx")
    for source in (jsonl, brat):
        output = tmp_path / f"{source.stem}.spacy"
        result = CliRunner().invoke(app, ["convert", str(source), str(output)])
        assert result.exit_code == 0, result.output
        (doc,) = DocBin().from_disk(output).get_docs(nlp.vocab)
        assert doc.text == TEXT
        assert [(e.text, e.label_, e.kb_id_) for e in doc.ents] == [
            ("Aspirin", "Chemical", "D001241")]
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{}\n")
    result = CliRunner().invoke(app, ["convert", str(bad), str(tmp_path / "bad.spacy")])
    assert result.exit_code != 0 and "[E203]" in result.output
    result = CliRunner().invoke(app, ["convert", str(bad), str(tmp_path / "x.spacy"),
                                      "--format", "csv"])
    assert result.exit_code != 0 and "[E007]" in result.output
