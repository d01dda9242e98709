"""MeSH converters, alias and type harvesting, and the `build-kb` command."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from spacy_arboel.biomedical.mesh import (
    build_mesh_kb,
    read_mesh_descriptors,
    tree_types,
    type_by_tree_numbers,
)
from spacy_arboel.data.pubtator import parse_pubtator_string, read_pubtator
from spacy_arboel.kb import Entity, KnowledgeBase
from spacy_arboel.spacy_data.aliases import harvest_aliases, types_from_docs
from spacy_arboel.spacy_data.convert import docs_to_docbin, documents_to_docs, gold_ids

DATA_DIR = Path(__file__).parents[2].parent / "shared" / "data"
MESH_CSV = DATA_DIR / "mesh" / "mesh_descriptors_2026.csv"
MESH_TSV = DATA_DIR / "mesh" / "mesh_disease_synonyms.tsv"
BC5CDR_TEST = DATA_DIR / "bc5cdr" / "CDR_TestSet.PubTator.txt"

SMALL_CSV = (
    "id,scheme,subject\n"
    "https://id.nlm.nih.gov/mesh/D000008,MeSH,Abdominal Neoplasms\n"
    'https://id.nlm.nih.gov/mesh/D003371,MeSH,"Cough, Chronic"\n'
    "https://id.nlm.nih.gov/mesh/D015738,MeSH,Famotidine\n"
    "https://id.nlm.nih.gov/mesh/D000057,MeSH,Accident Proneness\n"
)
SMALL_TSV = (
    "mesh_id\tname\ttree_numbers\tsynonyms\n"
    "8\tSize Perception\tF02.463\tperception, size\n"
    "D000008\tAbdominal Neoplasms\tC04.588.033\tabdominal neoplasms|abdominal tumor|"
    "Abdominal Tumor|abdominal cancer\n"
    "D000057\tAccident Proneness\tF01.145.015\tproneness, accident\n"
    "D999999\tNot A Descriptor\tC01\tghost\n"
)
CORPUS = (
    "1|t|Famotidine and famotidine cause cough.\n"
    "1|a|FAMOTIDINE again; an abdominal tumour and cough.\n"
    "1\t0\t10\tFamotidine\tChemical\tD015738\n"
    "1\t15\t25\tfamotidine\tChemical\tD015738\n"
    "1\t32\t37\tcough\tDisease\tD003371\n"
    "1\t39\t49\tFAMOTIDINE\tChemical\tD015738\n"
    "1\t60\t76\tabdominal tumour\tDisease\tD000008|C000001\n"
    "1\t81\t86\tcough\tDisease\tD003371\n"
    "1\t50\t55\tagain\tChemical\t-1\n"
)


@pytest.fixture
def small_files(tmp_path):
    csv_path, tsv_path = tmp_path / "desc.csv", tmp_path / "syn.tsv"
    csv_path.write_text(SMALL_CSV, encoding="utf8")
    tsv_path.write_text(SMALL_TSV, encoding="utf8")
    return csv_path, tsv_path


def require_data(*paths: Path) -> None:
    for path in paths:
        if not path.exists():
            pytest.skip(f"real data not available at {path}")


def test_real_mesh_descriptors():
    require_data(MESH_CSV)
    entities = read_mesh_descriptors(MESH_CSV)
    assert len(entities) == 30532
    assert entities[0] == Entity("D000001", "Calcimycin")
    assert len({e.id for e in entities}) == len(entities)


def test_real_mesh_kb():
    require_data(MESH_CSV, MESH_TSV)
    stats: dict = {}
    kb = build_mesh_kb(MESH_CSV, MESH_TSV, stats)
    assert stats["skipped"] >= 1 and "8" in stats["skipped_ids"]
    assert "8" not in kb.ids
    assert len(kb) == 30532
    neoplasms = kb["D000008"]
    assert "abdominal tumor" in neoplasms.aliases
    assert neoplasms.types == ("Disease",)
    lowered = [a.lower() for a in neoplasms.aliases]
    assert len(lowered) == len(set(lowered)) and neoplasms.name.lower() not in lowered
    assert kb["D015738"].types == ()  # Famotidine: a chemical, no disease synonyms
    assert kb["D000067074"].types == ()  # Peer Influence: in the table, but not a disease


def test_small_mesh_kb_merges_dedupes_and_types(small_files):
    csv_path, tsv_path = small_files
    stats: dict = {}
    kb = build_mesh_kb(csv_path, tsv_path, stats)
    assert kb.ids == ["D000008", "D003371", "D015738", "D000057"]
    assert kb["D003371"].name == "Cough, Chronic"
    assert kb["D000008"].aliases == ("abdominal tumor", "abdominal cancer")
    assert kb["D000008"].types == ("Disease",)
    assert kb["D000057"].aliases == ("proneness, accident",)
    assert kb["D000057"].types == ()  # F01 tree: behaviour, not a disease
    assert stats["skipped"] == 1
    assert stats["synonym_ids_absent"] == ["D999999"]
    assert len(build_mesh_kb(csv_path)) == 4


def test_tree_numbers_type_every_descriptor():
    """C and F03 are diseases, D chemicals, any other tree its category's name: F01's
    *Depression* is not a disease, so a Disease mention's type rule can keep off it."""
    assert tree_types(["C10.228", "F03.600", "C23.888"]) == ("Disease",)
    assert tree_types(["D02.065", "D27.505"]) == ("Chemical",)
    assert tree_types(["F01.145.126.100"]) == ("Psychiatry and Psychology",)
    assert tree_types(["E04.579", "N02.421", "X99", ""]) == (
        "Analytical, Diagnostic and Therapeutic Techniques, and Equipment", "Health Care")
    kb = KnowledgeBase([Entity("D003863", "Depression"),
                        Entity("D001806", "Blood Urea Nitrogen", types=("Chemical",)),
                        Entity("D012640", "Seizures", types=("Disease",)),
                        Entity("D000001", "Untreed")])
    stats: dict = {}
    typed = type_by_tree_numbers(kb, {"D003863": ("F01.145",), "D001806": ("E01.370",),
                                      "D012640": ("C10.597",), "D999999": ("C01",)}, stats)
    assert typed["D003863"].types == ("Psychiatry and Psychology",)
    # a type the entity already has stays, first
    assert typed["D001806"].types == (
        "Chemical", "Analytical, Diagnostic and Therapeutic Techniques, and Equipment")
    assert typed["D012640"].types == ("Disease",) and typed["D000001"].types == ()
    assert stats["entities_typed"] == 2 and stats["types"]["Disease"] == 1


def test_synonym_rows_go_to_the_descriptor_they_name(tmp_path):
    """A row whose id is another descriptor's (the table's D007696 "Seizures") goes to the
    descriptor of its name; two rows on one descriptor merge; a name that no descriptor has
    keeps the row's id."""
    csv_path, tsv_path = tmp_path / "desc.csv", tmp_path / "syn.tsv"
    csv_path.write_text(
        "id,scheme,subject\n"
        '"https://id.nlm.nih.gov/mesh/D007696",MeSH,"Kindling, Neurologic"\n'
        "https://id.nlm.nih.gov/mesh/D012640,MeSH,Seizures\n"
        "https://id.nlm.nih.gov/mesh/D000001,MeSH,Calcimycin\n", encoding="utf8")
    tsv_path.write_text(
        "mesh_id\tname\ttree_numbers\tsynonyms\n"
        "D007696\tSeizures\tC10.597.742\tseizure|convulsions\n"
        "D012640\tseizures\tC23.888.592.742\tfits|seizure\n"
        "D000001\tCalcimycine\tC01\tcalcimycin a\n", encoding="utf8")
    stats: dict = {}
    kb = build_mesh_kb(csv_path, tsv_path, stats)
    assert kb["D007696"].aliases == () and kb["D007696"].types == ()
    assert kb["D012640"].aliases == ("seizure", "convulsions", "fits")
    assert kb["D012640"].types == ("Disease",)
    assert kb["D000001"].aliases == ("calcimycin a",)  # no descriptor is "Calcimycine"
    assert stats["synonym_rows_placed_by_name"] == 1


def test_real_mesh_kb_places_misfiled_synonym_rows():
    require_data(MESH_CSV, MESH_TSV)
    stats: dict = {}
    kb = build_mesh_kb(MESH_CSV, MESH_TSV, stats)
    assert stats["synonym_rows_placed_by_name"] > 1000
    assert "seizure" in [a.lower() for a in kb["D012640"].aliases]  # Seizures
    assert kb["D007696"].aliases == ()  # Kindling, Neurologic
    assert "breast cancer" in kb["D001943"].aliases  # Breast Neoplasms


def test_mesh_wrong_columns(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text("identifier,label\nD1,x\n", encoding="utf8")
    with pytest.raises(ValueError, match="expected the columns"):
        read_mesh_descriptors(path)


def test_harvest_aliases_and_types(nlp):
    docs = list(documents_to_docs(parse_pubtator_string(CORPUS), nlp))
    aliases = harvest_aliases(docs)
    # case-insensitive dedupe, most frequent spelling, ordered by frequency; the count is
    # the group's (the link counts of the mention prior)
    assert aliases["D015738"] == {"Famotidine": 3}  # three spellings, one each: the first wins
    assert aliases["D003371"] == {"cough": 2}
    assert aliases["D000008"] == {"abdominal tumour": 1}
    assert aliases["C000001"] == {"abdominal tumour": 1}  # composite: each id gets the text
    assert "" not in aliases and "-1" not in aliases
    types = types_from_docs(docs)
    assert types["D015738"] == Counter({"Chemical": 3})
    assert types["D003371"] == Counter({"Disease": 2})


def test_harvest_alias_order_by_frequency_then_first_seen(nlp):
    text = (
        "2|t|aa bb cc bb cc cc.\n2|a|x\n"
        "2\t0\t2\taa\tChemical\tD1\n2\t3\t5\tbb\tChemical\tD1\n2\t6\t8\tcc\tChemical\tD1\n"
        "2\t9\t11\tbb\tChemical\tD1\n2\t12\t14\tcc\tChemical\tD1\n2\t15\t17\tcc\tChemical\tD1\n"
    )
    docs = documents_to_docs(parse_pubtator_string(text), nlp)
    harvested = harvest_aliases(docs)
    assert harvested == {"D1": {"cc": 3, "bb": 2, "aa": 1}}
    assert list(harvested["D1"]) == ["cc", "bb", "aa"]


def test_bc5cdr_test_coverage_by_mesh_kb():
    require_data(MESH_CSV, MESH_TSV, BC5CDR_TEST)
    kb = build_mesh_kb(MESH_CSV, MESH_TSV)
    mentions = [m for doc in read_pubtator(BC5CDR_TEST) for m in doc.mentions if m.ids]
    covered = sum(m.ids[0] in kb for m in mentions) / len(mentions)
    assert 0.90 < covered < 0.97


def test_build_kb_command(small_files, tmp_path, nlp, cli):
    csv_path, tsv_path = small_files
    corpus_txt = tmp_path / "corpus.txt"
    corpus_txt.write_text(CORPUS, encoding="utf8")
    corpus_spacy = tmp_path / "corpus.spacy"
    docs_to_docbin(documents_to_docs(parse_pubtator_string(CORPUS), nlp), corpus_spacy)
    extra = tmp_path / "extra.jsonl"
    extra.write_text(json.dumps({"id": "C000001", "name": "Tumour X"}) + "\n"
                     + json.dumps({"id": "D015738", "name": "famotidin", "types": ["Drug"]})
                     + "\n", encoding="utf8")
    output = tmp_path / "kb" / "kb.jsonl"
    command = ["build-kb", output, "--mesh-descriptors", csv_path, "--disease-synonyms",
               tsv_path, "--jsonl", extra, "--alias-corpus", corpus_txt,
               "--alias-corpus", corpus_spacy]
    result = cli(*command)
    assert result.exit_code == 0, result.output
    kb = KnowledgeBase.from_jsonl(output)
    # the corpus's labels are no types unless asked (issue 62)
    assert kb["D015738"].types == ("Drug",) and kb["D003371"].types == ()
    result = cli(*command, "--types-from-labels")
    assert result.exit_code == 0, result.output
    kb = KnowledgeBase.from_jsonl(output)
    assert len(kb) == 5
    assert kb["D000008"].aliases[0] == "abdominal tumour"  # corpus aliases come first
    assert kb["D015738"].aliases == ("famotidin",)  # merged from the JSONL; "Famotidine" = name
    assert kb["D015738"].types == ("Drug", "Chemical")  # the KB's type, then the corpus's
    assert kb["D003371"].types == ("Disease",)  # had none: typed from the corpus
    assert kb["C000001"].aliases == ("abdominal tumour",)
    assert "entities" in result.output and "absent" in result.output


def test_build_kb_command_jsonl_only_and_absent_ids(tmp_path, cli):
    kb_in = tmp_path / "in.jsonl"
    KnowledgeBase([Entity("D003371", "Cough")]).to_jsonl(kb_in)
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(CORPUS, encoding="utf8")
    output = tmp_path / "out.jsonl"
    result = cli("build-kb", output, "--jsonl", kb_in, "--alias-corpus", corpus)
    assert result.exit_code == 0, result.output
    assert len(KnowledgeBase.from_jsonl(output)) == 1
    assert "C000001" in result.output  # corpus ids absent from the KB are named


def test_build_kb_command_needs_a_source(tmp_path, cli):
    result = cli("build-kb", tmp_path / "out.jsonl")
    assert result.exit_code != 0
    assert not (tmp_path / "out.jsonl").exists()


def test_gold_ids_is_the_composite_convention(nlp):
    (doc,) = documents_to_docs(parse_pubtator_string(CORPUS), nlp)
    composite = [e for e in doc.ents if len(gold_ids(e.kb_id_)) > 1]
    assert [gold_ids(e.kb_id_) for e in composite] == [("D000008", "C000001")]


@pytest.mark.parametrize("row, missing", [
    ("https://id.nlm.nih.gov/mesh/D000002,MeSH,  ", "no subject"),
    ("https://id.nlm.nih.gov/mesh/,MeSH,Temefos", "no id"),
    (",MeSH,Temefos", "no id"),
])
def test_a_descriptor_row_without_id_or_name_is_E150_not_dropped(tmp_path, row, missing):
    csv_path = tmp_path / "desc.csv"
    csv_path.write_text("id,scheme,subject\nhttps://id.nlm.nih.gov/mesh/D000001,MeSH,"
                        f"Calcimycin\n{row}\n", encoding="utf8")
    with pytest.raises(ValueError, match=rf"\[E150\] .*desc.csv, line 3: the row has {missing}"):
        read_mesh_descriptors(csv_path)


@pytest.mark.parametrize("row, code, problem", [
    ("https://id.nlm.nih.gov/mesh/NIL,MeSH,Nil", "E035", "the entity id 'NIL' is reserved"),
    ("https://id.nlm.nih.gov/mesh/D1|D2,MeSH,Two", "E035", "the entity id 'D1|D2' is reserved"),
    ("https://id.nlm.nih.gov/mesh/D000001,MeSH,Again", "E002", "again at {path}:4"),
])
def test_a_descriptor_id_the_kb_refuses_names_its_csv_line(tmp_path, row, code, problem):
    """The id of a descriptor row is checked where it is read (issue 59, 4a): the message
    names the CSV's line, not the entity's place in the KB (``<kb>:2``, ``entry 2``)."""
    csv_path = tmp_path / "desc.csv"
    csv_path.write_text("id,scheme,subject\nhttps://id.nlm.nih.gov/mesh/D000001,MeSH,"
                        f"Calcimycin\n\"https://id.nlm.nih.gov/mesh/D000002\",MeSH,Temefos\n"
                        f"{row}\n", encoding="utf8")
    for read in (read_mesh_descriptors, build_mesh_kb):
        with pytest.raises(ValueError) as caught:
            read(csv_path)
        message = str(caught.value)
        assert message.startswith(f"[{code}] ") and "<kb>" not in message, message
        assert problem.format(path=csv_path) in message
        if code != "E002":
            assert f"{csv_path}:4: " in message
