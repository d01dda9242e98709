"""PubTator reading, conversion to Docs and DocBins, the registered corpus reader, `convert`."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import spacy
from spacy.tokens import DocBin

from spacy_arboel.data.documents import Mention
from spacy_arboel.data.pubtator import parse_pubtator_string, read_pubtator
from spacy_arboel.spacy_data.convert import (
    docs_to_docbin,
    document_to_doc,
    documents_to_docs,
    gold_ids,
)

DATA_DIR = Path(__file__).parents[2].parent / "shared" / "data"
BC5CDR_TEST = DATA_DIR / "bc5cdr" / "CDR_TestSet.PubTator.txt"

NCBI_SNIPPET = (
    "7574457|t|Pelizaeus-Merzbacher disease.\n"
    "7574457|a|A rare, sex-linked recessive, dysmyelinating disease of the brain.\n"
    "7574457\t0\t28\tPelizaeus-Merzbacher disease\tSpecificDisease\tD020371\n"
    "7574457\t32\t95\trare, sex-linked recessive, dysmyelinating disease of the brain"
    "\tDiseaseClass\tD020279+D035583\n"
    "\n"
    "100562|t|Familial deficiency of C7.\n"
    "100562|a|Absence of functional C7 was found.\n"
    "100562\t0\t25\tFamilial deficiency of C7\tSpecificDisease\tOMIM:610102 \n"
    "100562\t27\t51\tAbsence of functional C7\tModifier\tOMIM:610102\n"
)

# "Sjögren" and "β" check that offsets are characters, not bytes.
COMPOSITE = (
    "1|t|Sjögren's syndrome and β-blocker use.\n"
    "1|a|Hemorrhagic and interstitial cystitis after drug X daily.\n"
    "1\t0\t18\tSjögren's syndrome\tDisease\tD012859\n"
    "1\t23\t32\tβ-blocker\tChemical\tD000319\n"
    "1\t38\t75\tHemorrhagic and interstitial cystitis\tDisease\tD006470|D003556"
    "\tHemorrhagic cystitis|interstitial cystitis\n"
    "1\t67\t75\tcystitis\tDisease\tD003556\n"
    "1\t82\t88\tdrug X\tChemical\t-1\n"
    "1\tCID\tD000319\tD003556\n"
)


def require_data(path: Path) -> Path:
    if not path.exists():
        pytest.skip(f"real data not available at {path}")
    return path


def test_read_real_bc5cdr_first_two_docs():
    path = require_data(BC5CDR_TEST)
    reader = read_pubtator(path)
    docs = [next(reader), next(reader)]
    first, second = docs
    assert first.id == "8701013"
    assert first.text.startswith("Famotidine-associated delirium. A series of six cases. ")
    assert len(first.mentions) == 11  # the CID relation line is skipped
    assert first.mentions[0] == Mention(0, 10, "Famotidine", "Chemical", ("D015738",))
    assert first.mentions[1] == Mention(22, 30, "delirium", "Disease", ("D003693",))
    assert second.id == "439781"
    assert len(second.mentions) == 12
    for doc in docs:
        for mention in doc.mentions:
            assert doc.text[mention.start:mention.end] == mention.text


def test_ncbi_snippet_plus_composite_and_omim():
    docs = parse_pubtator_string(NCBI_SNIPPET)
    assert [d.id for d in docs] == ["7574457", "100562"]
    assert docs[0].mentions[1].ids == ("D020279", "D035583")
    assert docs[0].mentions[1].label == "DiseaseClass"
    assert docs[1].mentions[0].ids == ("OMIM:610102",)  # trailing space stripped
    assert docs[1].text == "Familial deficiency of C7. Absence of functional C7 was found."


def test_composite_pipe_and_no_id():
    (doc,) = parse_pubtator_string(COMPOSITE)
    assert [m.ids for m in doc.mentions] == [
        ("D012859",), ("D000319",), ("D006470", "D003556"), ("D003556",), (),
    ]
    assert doc.mentions[0].text == "Sjögren's syndrome"


@pytest.mark.parametrize(
    "bad_line,expected",
    [
        ("5\tx\t9\tword\tChemical\tD1", "integers"),
        ("5\t0\t4\tword\tChemical\tD1\textra\tmore", "found 8"),
        ("5\t0\t4", "found 3"),
        ("6\t0\t4\tword\tChemical\tD1", "PMID 6"),
        ("nonsense without structure", "expected"),
        ("5\t4\t2\tword\tChemical\tD1", "invalid mention offsets"),
        ("5\t9\t20\tone two\tChemical\tD1", "past the end of its document's text"),
        ("5\t0\t4\tword\t \tD1", "no type"),
    ],
)
def test_malformed_lines_name_the_line(tmp_path, bad_line, expected):
    path = tmp_path / "bad.txt"
    path.write_text(f"5|t|word one\n5|a|two\n{bad_line}\n", encoding="utf8")
    with pytest.raises(ValueError, match=expected) as info:
        list(read_pubtator(path))
    assert f"{path}" in str(info.value)
    assert "line 3" in str(info.value)


def test_abstract_without_title_is_an_error():
    with pytest.raises(ValueError, match="line 1"):
        parse_pubtator_string("5|a|abstract first\n")


def test_mismatched_mention_text_is_kept_with_warning():
    text = "9|t|Cough and fever.\n9|a|None.\n9\t0\t5\tCoufh\tDisease\tD003371\n"
    with pytest.warns(UserWarning, match=r"PMID 9.*\[0:5\]"):
        (doc,) = parse_pubtator_string(text)
    assert doc.mentions == [Mention(0, 5, "Coufh", "Disease", ("D003371",))]


def test_duplicated_pmid_kept_with_warning():
    text = "9|t|One.\n9|a|A.\n\n9|t|Two.\n9|a|B.\n"
    with pytest.warns(UserWarning, match="PMID 9 occurs again"):
        docs = parse_pubtator_string(text)
    assert [d.text for d in docs] == ["One. A.", "Two. B."]


def test_the_text_is_title_space_abstract():
    """Offsets count into the title, a space and the abstract (the title and a space
    without an abstract line); a second abstract line is refused."""
    first, second = parse_pubtator_string("1|t|Title.\n1|a|Abstract.\n\n2|t|Alone.\n"
                                          "2\t0\t5\tAlone\tDisease\tD1\n")
    assert (first.id, first.text) == ("1", "Title. Abstract.")
    assert (second.text, second.mentions) == ("Alone. ", [Mention(0, 5, "Alone", "Disease",
                                                                  ("D1",))])
    with pytest.raises(ValueError, match=r"E010.*line 3: second abstract line"):
        parse_pubtator_string("1|t|Title.\n1|a|One.\n1|a|Two.\n")


def test_gold_ids():
    assert gold_ids("D006470|D003556") == ("D006470", "D003556")
    assert gold_ids("D1") == ("D1",)
    assert gold_ids("") == ()


def test_convert_to_doc(nlp):
    (document,) = parse_pubtator_string(COMPOSITE)
    doc = document_to_doc(document, nlp)
    assert doc.text == document.text
    assert doc.user_data["pmid"] == "1"
    ents = [(e.text, e.label_, e.kb_id_) for e in doc.ents]
    assert ents == [
        ("Sjögren's syndrome", "Disease", "D012859"),
        ("β-blocker", "Chemical", "D000319"),
        ("Hemorrhagic and interstitial cystitis", "Disease", "D006470|D003556"),
        ("drug X", "Chemical", ""),
    ]
    # the nested "cystitis" cannot be an ent, but no annotation is lost
    spans = [(s.text, s.kb_id_) for s in doc.spans["pubtator"]]
    assert len(spans) == 5
    assert ("cystitis", "D003556") in spans


def test_convert_expands_to_token_boundaries(nlp):
    text = "3|t|CYP)-induced harm.\n3|a|x\n3\t0\t3\tCYP\tChemical\tD003520\n"
    doc = document_to_doc(parse_pubtator_string(text)[0], nlp)
    assert doc.ents[0].start_char == 0
    assert doc.ents[0].end_char >= 3
    assert doc.user_data["pubtator_misaligned"] == 1


def test_docbin_round_trip(nlp, tmp_path):
    documents = parse_pubtator_string(COMPOSITE) + parse_pubtator_string(NCBI_SNIPPET)
    docs = list(documents_to_docs(documents, nlp))
    path = tmp_path / "corpus.spacy"
    summary = docs_to_docbin(docs, path)
    assert summary == {"docs": 3, "mentions": 9, "ents": 8, "dropped_overlaps": 1,
                       "misaligned": 0, "unaligned": 0}
    loaded = list(DocBin().from_disk(path).get_docs(nlp.vocab))
    assert len(loaded) == 3
    for before, after in zip(docs, loaded, strict=True):
        assert after.text == before.text
        assert after.user_data["pmid"] == before.user_data["pmid"]
        assert [(e.start, e.end, e.label_, e.kb_id_) for e in after.ents] == [
            (e.start, e.end, e.label_, e.kb_id_) for e in before.ents
        ]
        assert [(s.start, s.end, s.kb_id_) for s in after.spans["pubtator"]] == [
            (s.start, s.end, s.kb_id_) for s in before.spans["pubtator"]
        ]
    assert loaded[1].ents[1].kb_id_ == "D020279|D035583"


def test_registered_reader(nlp, tmp_path):
    path = tmp_path / "corpus.txt"
    path.write_text(COMPOSITE + "\n" + NCBI_SNIPPET, encoding="utf8")
    create_reader = spacy.registry.readers.get("spacy_arboel.PubtatorCorpus.v1")
    examples = list(create_reader(path)(nlp))
    assert len(examples) == 3
    example = examples[0]
    assert example.predicted.text == example.reference.text
    assert len(example.predicted.ents) == 0
    assert example.reference.ents[2].kb_id_ == "D006470|D003556"
    assert len(list(create_reader(path, limit=2)(nlp))) == 2


def test_registered_reader_real_data(nlp):
    path = require_data(BC5CDR_TEST)
    create_reader = spacy.registry.readers.get("spacy_arboel.PubtatorCorpus.v1")
    examples = list(create_reader(path, limit=2)(nlp))
    assert [e.reference.user_data["pmid"] for e in examples] == ["8701013", "439781"]
    assert [e.text for e in examples[0].reference.ents[:2]] == ["Famotidine", "delirium"]


def test_convert_command(tmp_path, cli):
    import spacy_arboel.cli.data_commands  # noqa: F401  (registers the commands)

    source = tmp_path / "in.txt"
    source.write_text(COMPOSITE + "\n" + NCBI_SNIPPET, encoding="utf8")
    output = tmp_path / "out" / "train.spacy"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = cli("convert", source, output, "--limit", "2")
    assert result.exit_code == 0, result.output
    assert "dropped overlaps" in result.output
    docs = list(DocBin().from_disk(output).get_docs(spacy.blank("xx").vocab))
    assert [d.user_data["pmid"] for d in docs] == ["1", "7574457"]


def test_a_byte_order_mark_is_not_part_of_the_first_pmid_or_column(tmp_path):
    """Windows editors start UTF-8 files with a byte-order mark: it became part of the
    first PMID ('\\ufeff5'), a document without mentions kept it silently."""
    from spacy_arboel.biomedical.mesh import read_mesh_descriptors
    from spacy_arboel.data.annotations import read_jsonl_documents

    path = tmp_path / "bom.txt"
    path.write_bytes(b"\xef\xbb\xbf5|t|word one\n5|a|two\n\n6|t|Three.\n6|a|Four.\n")
    assert [d.id for d in read_pubtator(path)] == ["5", "6"]
    jsonl = tmp_path / "bom.jsonl"
    jsonl.write_bytes(b'\xef\xbb\xbf{"id": "a", "text": "Aspirin."}\n')
    assert [d.id for d in read_jsonl_documents(jsonl)] == ["a"]
    csv_path = tmp_path / "bom.csv"
    csv_path.write_bytes(b"\xef\xbb\xbfid,scheme,subject\nhttps://x/D000001,MeSH,One\n")
    assert [e.id for e in read_mesh_descriptors(csv_path)] == ["D000001"]
