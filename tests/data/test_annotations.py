"""Readers of JSONL (character spans and ids) and brat standoff corpora, and `convert`."""

import json
import warnings

import pytest
import spacy
from spacy.tokens import DocBin

from spacy_arboel.data.annotations import read_brat_documents, read_jsonl_documents
from spacy_arboel.data.inputs import document_sources

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
    assert first.id == "a" and first.text == TEXT  # the text as it is: no added space
    assert [(m.text, m.label, m.ids) for m in first.mentions] == [
        ("Aspirin", "Chemical", ("D001241",)), ("cough", "Disease", ("D003371",))]
    assert second.id == "2"  # its line number
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
    with pytest.warns(UserWarning, match=r"\[W104\] .*doc1.ann: 1 discontinuous .*T3 "
                                         r"\(line 3\).*'cough and acute'"):
        (document,) = read_brat_documents(folder)
    assert document.id == "doc1" and document.text == TEXT
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


def test_convert_reads_each_format_into_gold_docs(tmp_path, cli):
    jsonl = tmp_path / "docs.jsonl"
    jsonl.write_text(json.dumps({"text": TEXT, "spans": [
        {"start": 0, "end": 7, "label": "Chemical", "kb_id": "D001241"}]}) + "\n")
    brat = _brat(tmp_path / "brat", "T1\tChemical 0 7\tAspirin\nN1\tReference T1 MeSH:D001241\t"
                                    "Aspirin\n")
    assert document_sources(jsonl) == [(jsonl, "jsonl")]
    assert document_sources(brat) == [(brat, "brat")]
    nlp = spacy.blank("xx")
    for source in (jsonl, brat):
        output = tmp_path / f"{source.stem}.spacy"
        result = cli("convert", source, output)
        assert result.exit_code == 0, result.output
        (doc,) = DocBin().from_disk(output).get_docs(nlp.vocab)
        assert doc.text == TEXT
        assert [(e.text, e.label_, e.kb_id_) for e in doc.ents] == [
            ("Aspirin", "Chemical", "D001241")]
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{}\n")
    result = cli("convert", bad, tmp_path / "bad.spacy")
    assert result.exit_code != 0 and "[E203]" in result.output
    result = cli("convert", bad, tmp_path / "x.spacy", "--format", "csv")
    assert result.exit_code != 0 and "[E007]" in result.output


def _no_warnings(read, *args):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return list(read(*args))


@pytest.mark.parametrize("span, problem", [
    ({"start": True, "end": 7}, '"start" that is not an integer'),
    ({"start": 0, "end": 7.0}, '"end" that is not an integer'),
    ({"start": "0", "end": 7}, '"start" that is not an integer'),
    ({"start": -1, "end": 7}, "a negative offset"),
    ({"start": 7, "end": 7}, "start >= end"),
    ({"start": 9, "end": 3}, "start >= end"),
    ({"start": 30, "end": 99}, "past the end of the text"),
    ([0, 7, "Chemical", ["D001241|D003371"]], "'|' joins the ids"),
    ([0, 7, "Chemical", ["D001241", " "]], "not text"),
    ([0, 7, "Chemical", [""]], "not text"),
    ([0, 7, "Chemical", [True]], "not text"),
    ([0, 7, "Chemical", ["D001241", "-1"]], "no id"),
    ({"start": 0, "end": 7, "kb_id": " "}, "empty or blank id"),
    ({"start": 0, "end": 7, "kb_id": "|"}, "empty or blank id"),
    ({"start": 0, "end": 7, "kb_id": "D001241||D003371"}, "empty or blank id"),
    ({"start": 0, "end": 7, "kb_id": 1.5}, "not text"),
    ({"start": 0, "end": 7, "kb_id": False}, "not text"),
    ({"start": 0, "end": 7, "kb_id": -1.0}, "not text"),
    ({"start": 0, "end": 7, "label": ["Chemical"]}, "label that is not text"),
    ({"start": 0, "end": 7, "label": "  "}, "label that is not text"),
    ({"start": 0, "end": 7, "text": 7}, '"text" that is not a string'),
])
def test_jsonl_spans_that_would_be_wrong_gold_are_E203(tmp_path, span, problem):
    """Bools and floats are not offsets (``true`` was read as 1), offsets stay within the
    text, and an id is one stripped non-empty string: a list element holding '|' became
    two gold ids, a blank id crashed render."""
    path = tmp_path / "docs.jsonl"
    path.write_text(json.dumps({"text": TEXT}) + "\n" + json.dumps(
        {"text": TEXT, "spans": [span]}) + "\n")
    with pytest.raises(ValueError, match=rf"\[E203\] .*docs.jsonl:2: .*{problem}"):
        list(read_jsonl_documents(path))


@pytest.mark.parametrize("doc_id", [None, True, "", "  ", ["a"], 1.5])
def test_jsonl_document_ids_that_are_not_ids_are_E203(tmp_path, doc_id):
    path = tmp_path / "docs.jsonl"
    path.write_text(json.dumps({"id": doc_id, "text": TEXT}) + "\n")
    with pytest.raises(ValueError, match=r"\[E203\] .*docs.jsonl:1: .*\"id\" must be"):
        list(read_jsonl_documents(path))


def test_jsonl_ids_follow_the_composite_id_convention(tmp_path):
    path = tmp_path / "docs.jsonl"
    path.write_text(json.dumps({"id": 17, "text": TEXT, "spans": [
        {"start": 0, "end": 7, "kb_id": " D001241 | D003371 "},
        {"start": 16, "end": 21, "kb_id": "-1", "label": ""},
        [26, 31, "Disease", [" D010146", 42, "D010146"]],
        {"start": 32, "end": 36, "kb_id": [], "text": "pain"}]}) + "\n")
    (document,) = _no_warnings(read_jsonl_documents, path)
    assert document.id == "17"
    assert [(m.text, m.label, m.ids) for m in document.mentions] == [
        ("Aspirin", "ENTITY", ("D001241", "D003371")), ("cough", "ENTITY", ()),
        ("acute", "Disease", ("D010146", "42")), ("pain", "ENTITY", ())]


def test_a_jsonl_span_text_that_differs_from_the_document_is_W103(tmp_path):
    path = tmp_path / "docs.jsonl"
    path.write_text(json.dumps({"text": TEXT, "spans": [
        {"start": 1, "end": 8, "text": "Aspirin", "kb_id": "D001241"}]}) + "\n")
    with pytest.warns(UserWarning, match=r"\[W103\] .*docs.jsonl:1: .*'Aspirin'.*'spirin '"):
        (document,) = read_jsonl_documents(path)
    assert document.mentions[0].text == "spirin "  # kept with its offsets, as PubTator's W100


def test_jsonl_that_is_not_utf8_names_the_file_and_line(tmp_path):
    path = tmp_path / "docs.jsonl"
    path.write_bytes(b'{"text": "fine"}\n{"text": "Caf\xe9"}\n')
    with pytest.raises(ValueError, match=r"\[E203\] .*docs.jsonl:2: .*not UTF-8"):
        list(read_jsonl_documents(path))


def test_brat_with_windows_line_ends_counts_offsets_as_brat_does(tmp_path, cli):
    """brat counts \\r\\n as two characters; reading the text with newline translation
    shifted each mention by one character per earlier line ("Aspirin given", exit 0)."""
    text = "Headache.\r\nPatients took Aspirin given daily.\r\nCough followed.\r\n"
    start = text.index("Aspirin")
    cough = text.index("Cough")
    folder = tmp_path / "brat"
    folder.mkdir()
    (folder / "doc1.txt").write_bytes(text.encode("utf8"))
    (folder / "doc1.ann").write_bytes(
        f"T1\tChemical {start} {start + 7}\tAspirin\r\nT2\tDisease {cough} {cough + 5}\t"
        f"Cough\r\nN1\tReference T1 MeSH:D001241\tAspirin\r\n".encode())
    (document,) = _no_warnings(read_brat_documents, folder)
    assert document.text == text
    assert [(m.text, m.ids) for m in document.mentions] == [
        ("Aspirin", ("D001241",)), ("Cough", ())]
    nlp = spacy.blank("en")
    output = tmp_path / "out.spacy"
    result = cli("convert", folder, output)
    assert result.exit_code == 0, result.output
    (doc,) = DocBin().from_disk(output).get_docs(nlp.vocab)
    assert [(e.text, e.kb_id_) for e in doc.ents] == [("Aspirin", "D001241"), ("Cough", "")]


def test_a_brat_text_column_that_differs_from_the_text_is_W103(tmp_path):
    folder = _brat(tmp_path / "brat", "T1\tChemical 0 7\tAspirin\nT2\tDisease 17 22\tcough\n")
    with pytest.warns(UserWarning, match=r"\[W103\] .*doc1.ann:2: the mention T2 at \[17:22\] "
                                         r"reads 'cough' .* 'ough '"):
        (document,) = read_brat_documents(folder)
    assert [m.text for m in document.mentions] == ["Aspirin", "ough "]


@pytest.mark.parametrize("ann, problem", [
    ("T1\tDisease 26 31;16 21\tacute cough\n", "fragments in order"),
    ("T1\tDisease 16 21;20 31\tx\n", "fragments in order"),
    ("T1\tDisease 16 16\t\n", "start before its end"),
    ("T1\tChemical 0 7\tAspirin\nT1\tDisease 16 21\tcough\n", "T1 is defined twice"),
    ("T1\tChemical 0 7\tAspirin\nN1\tReference T1 MeSH:D1|D2\tA\n", "no single id"),
    ("T1\tChemical 0 7\tAspirin\nN1\tReference T1 MeSH:\tA\n", "no single id"),
    ("T1\t 0 7\tAspirin\n", "not LABEL START END"),
])
def test_brat_that_would_be_wrong_gold_is_E204(tmp_path, ann, problem):
    folder = _brat(tmp_path / "brat", ann)
    with pytest.raises(ValueError, match=rf"\[E204\] .*doc1.ann:\d+: .*{problem}"):
        list(read_brat_documents(folder))


def test_a_brat_text_that_is_not_utf8_is_E204_naming_it(tmp_path, cli):
    folder = _brat(tmp_path / "brat", "T1\tChemical 0 7\tAspirin\n")
    (folder / "doc1.txt").write_bytes(b"Aspirin induced\ncough in caf\xe9s.")
    with pytest.raises(ValueError, match=r"\[E204\] .*doc1.txt: .*not UTF-8 text: byte 0xe9 "
                                         r"at line 2, column 13"):
        list(read_brat_documents(folder))
    result = cli("convert", folder, tmp_path / "out.spacy")
    assert result.exit_code == 1 and "[E204]" in result.output and "doc1.txt" in result.output


def test_a_jsonl_corpus_that_is_a_folder_is_E230_or_its_files(tmp_path, cli):
    """The JSONL reader refuses a folder (E230); ``convert --format jsonl`` reads a
    folder's .jsonl files, and one without any is E114."""
    (tmp_path / "docs.jsonl").mkdir()
    with pytest.raises(ValueError, match=r"\[E230\] .*docs.jsonl cannot be read as a JSONL"):
        list(read_jsonl_documents(tmp_path / "docs.jsonl"))
    result = cli("convert", tmp_path / "docs.jsonl", tmp_path / "out.spacy", "--format", "jsonl")
    assert result.exit_code == 1 and "[E114]" in result.output
    (tmp_path / "docs.jsonl" / "a.jsonl").write_text(json.dumps({"text": TEXT}) + "\n")
    result = cli("convert", tmp_path / "docs.jsonl", tmp_path / "out.spacy", "--format", "jsonl")
    assert result.exit_code == 0, result.output


def test_a_jsonl_document_id_seen_before_is_W101(tmp_path):
    path = tmp_path / "docs.jsonl"
    path.write_text(json.dumps({"id": "a", "text": TEXT}) + "\n" + json.dumps(
        {"id": "b", "text": TEXT}) + "\n" + json.dumps({"id": "a", "text": "Other."}) + "\n")
    with pytest.warns(UserWarning, match=r"\[W101\] .*docs.jsonl:3: .* a occurs again "
                                         r"\(first at line 1\)"):
        documents = list(read_jsonl_documents(path))
    assert [d.id for d in documents] == ["a", "b", "a"]


def test_brat_texts_without_annotations_are_named_not_dropped_unseen(tmp_path):
    folder = _brat(tmp_path / "brat", "T1\tChemical 0 7\tAspirin\n")
    (folder / "doc2.txt").write_text("Fever.")
    with pytest.warns(UserWarning, match=r"\[W106\] .*brat: 1 .txt file\(s\) have no .ann "
                                         r"beside them \(e.g. doc2.txt\)"):
        documents = list(read_brat_documents(folder))
    assert [d.id for d in documents] == ["doc1"]
    (folder / "doc2.ann").write_text("")
    assert [d.id for d in _no_warnings(read_brat_documents, folder)] == ["doc1", "doc2"]
