"""The one way in for documents (``data.inputs``): the formats ``auto`` finds, the one rule
for ``.txt``, folders, a format given, and the JSONL reader's strict and lenient uses."""

import json
import warnings

import pytest

from spacy_arboel.data.documents import Mention
from spacy_arboel.data.inputs import document_files, document_sources, read_documents

PUBTATOR = ("7|t|Aspirin induced cough.\n7|a|Fever followed.\n"
            "7\t0\t7\tAspirin\tChemical\tD001241\n\n")


def _ids_and_texts(path, *args, **kwargs):
    return [(d.id, d.text) for d in read_documents(path, *args, **kwargs)]


def test_a_txt_is_pubtator_when_its_first_line_is_a_title_line_else_plain_text(tmp_path):
    (tmp_path / "pub.txt").write_text("\n\n" + PUBTATOR)
    (tmp_path / "plain.txt").write_text("Aspirin induced cough.\n7|t|not a title here\n")
    (tmp_path / "blank.txt").write_text(" \n\n")
    (tmp_path / "broken.txt").write_text("7\t0\t7\tAspirin\tChemical\tD001241\n")
    assert document_sources(tmp_path / "pub.txt") == [(tmp_path / "pub.txt", "pubtator")]
    (document,) = read_documents(tmp_path / "pub.txt")
    assert (document.id, document.text) == ("7", "Aspirin induced cough. Fever followed.")
    assert document.mentions == [Mention(0, 7, "Aspirin", "Chemical", ("D001241",))]
    assert _ids_and_texts(tmp_path / "plain.txt") == [
        ("plain", "Aspirin induced cough.\n7|t|not a title here\n")]
    assert _ids_and_texts(tmp_path / "blank.txt") == []  # a blank file holds no document
    # a PubTator file whose first line is no title line is plain text, unless said
    assert _ids_and_texts(tmp_path / "broken.txt")[0][0] == "broken"
    with pytest.raises(ValueError, match=r"E010.*broken.txt.*line 1: annotation line before"):
        read_documents(tmp_path / "broken.txt", "pubtator").__next__()


def test_auto_reads_a_folder_file_by_file_and_a_brat_folder_whole(tmp_path):
    (tmp_path / "a.jsonl").write_text(json.dumps({"id": "j", "text": "Cough."}) + "\n")
    (tmp_path / "b.pubtator").write_text(PUBTATOR)
    (tmp_path / "c.txt").write_text("Plain.")
    (tmp_path / "notes.md").write_text("not a document file")
    assert [fmt for _, fmt in document_sources(tmp_path)] == ["jsonl", "pubtator", "text"]
    assert [d.id for d in read_documents(tmp_path)] == ["j", "7", "c"]
    brat = tmp_path / "brat"
    brat.mkdir()
    (brat / "d.txt").write_text("Aspirin.")
    (brat / "d.ann").write_text("T1\tChemical 0 7\tAspirin\nN1\tReference T1 MeSH:D001241\t"
                                "Aspirin\n")
    assert document_sources(brat) == [(brat, "brat")]
    (document,) = read_documents(brat)
    assert document.mentions == [Mention(0, 7, "Aspirin", "Chemical", ("D001241",))]


def test_a_format_given_reads_files_whatever_their_suffix(tmp_path):
    (tmp_path / "a.txt").write_text(PUBTATOR)
    (tmp_path / "b.pubtator").write_text("8|t|Fever.\n8|a|\n")
    (tmp_path / "c.jsonl").write_text(json.dumps({"text": "Cough."}) + "\n")
    assert document_files(tmp_path, "pubtator") == [tmp_path / "a.txt", tmp_path / "b.pubtator"]
    assert [d.id for d in read_documents(tmp_path, "pubtator")] == ["7", "8"]
    assert _ids_and_texts(tmp_path / "a.txt", "text") == [("a", PUBTATOR)]
    (tmp_path / "d.txt").write_text(json.dumps({"text": "Fever."}) + "\n")
    assert _ids_and_texts(tmp_path / "d.txt", "jsonl") == [("1", "Fever.")]


def test_what_cannot_be_read_is_a_coded_error(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"E103.*missing.txt: no such file"):
        list(read_documents(tmp_path / "missing.txt"))
    (tmp_path / "x.csv").write_text("a,b")
    with pytest.raises(ValueError, match=r"E114.*x.csv"):
        list(read_documents(tmp_path / "x.csv"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match=r"E114.*empty"):
        list(read_documents(tmp_path / "empty"))
    with pytest.raises(ValueError, match=r"E007.*'csv'"):
        list(read_documents(tmp_path / "x.csv", "csv"))
    (tmp_path / "docs.spacy").write_bytes(b"")
    with pytest.raises(ValueError, match=r"E206.*docs.spacy is a .spacy DocBin"):
        list(read_documents(tmp_path / "docs.spacy"))


def test_one_jsonl_reader_strict_for_gold_and_lenient_for_texts_to_link(tmp_path):
    """The same lines: strict refuses a bad span (E203) and warns about a repeated id
    (W101); lenient skips the span (W105), keeps the rest, and names documents without an
    id after their file."""
    path = tmp_path / "docs.jsonl"
    path.write_text(json.dumps({"text": "Aspirin induced cough.", "spans": [
        {"start": 16, "end": 21, "kb_id": "D003371"},
        {"start": 0, "end": 7, "kb_id": "D001241"},
        {"start": 0, "end": 99, "kb_id": "D1"}]}) + "\n"
        + json.dumps({"id": "1", "text": "Fever."}) + "\n")
    with pytest.raises(ValueError, match=r"\[E203\] .*docs.jsonl:1: .*past the end"):
        list(read_documents(path))
    with pytest.warns(UserWarning, match=r"\[W105\] .*docs.jsonl:1: .*past the end"):
        first, second = read_documents(path, strict=False)
    assert (first.id, second.id) == ("docs:1", "1")
    assert first.gold_links == ((0, 7, "D001241"), (16, 21, "D003371"))  # in text order
    path.write_text(json.dumps({"text": "Cough."}) + "\n" + json.dumps(
        {"id": "1", "text": "Fever."}) + "\n")
    with pytest.warns(UserWarning, match=r"\[W101\] .*docs.jsonl:2: .* 1 occurs again"):
        assert [d.id for d in read_documents(path)] == ["1", "1"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert [d.id for d in read_documents(path, strict=False)] == ["docs:1", "1"]
    path.write_text('{"text": "fine"}\n{"id": null, "text": "x"}\n')
    with pytest.raises(ValueError, match=r"\[E115\] .*docs.jsonl, line 2: .*\"id\" must be"):
        list(read_documents(path, strict=False))


def test_a_suffix_is_matched_whatever_its_case(tmp_path):
    """BioRED ships ``Train.PubTator``: a file or a folder's file of any case of a known
    suffix is that format (issue 62)."""
    (tmp_path / "Train.PubTator").write_text(PUBTATOR)
    (tmp_path / "NOTES.JSONL").write_text(json.dumps({"id": "j", "text": "Cough."}) + "\n")
    assert document_sources(tmp_path / "Train.PubTator") == [
        (tmp_path / "Train.PubTator", "pubtator")]
    assert [fmt for _, fmt in document_sources(tmp_path)] == ["jsonl", "pubtator"]
    assert [d.id for d in read_documents(tmp_path)] == ["j", "7"]
