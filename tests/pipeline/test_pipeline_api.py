"""The pipeline API behind the commands: finding components by factory, loading with
overrides, swapping a KB, arbo_coref's settings, the datasets of ``prepare``."""

import json
from dataclasses import asdict

import pytest
import spacy
from click import NoSuchOption
from spacy.language import Language

from spacy_arboel.cli.overrides import parse_overrides
from spacy_arboel.factories import pipeline_kb
from spacy_arboel.kb.knowledge_base import Entity, KnowledgeBase
from spacy_arboel.pipeline import (
    component_factories,
    factory_defaults,
    find_component,
    find_components,
    linked_corpus_settings,
    load_pipeline,
    load_with_coref,
    merge_coref_settings,
    pipeline_config,
    read_tuned_settings,
    save_pipeline,
    swap_kb,
    without_kb_paths,
)


def _two_linkers() -> Language:
    nlp = spacy.blank("xx")
    nlp.add_pipe("sentencizer")
    nlp.add_pipe("arbo_coref", name="coref")
    nlp.add_pipe("arbo_coref", name="other_coref")
    return nlp


def test_components_are_found_by_factory_in_a_pipeline_and_in_its_config():
    nlp = _two_linkers()
    assert component_factories(nlp) == {"sentencizer": "sentencizer", "coref": "arbo_coref",
                                        "other_coref": "arbo_coref"}
    for pipeline in (nlp, nlp.config):
        assert find_components(pipeline, "arbo_coref") == ["coref", "other_coref"]
        assert find_components(pipeline, ("sentencizer", "arbo_coref"))[0] == "sentencizer"
        assert find_component(pipeline, "arbo_coref", "other_coref") == "other_coref"
        assert find_component(pipeline, "sentencizer") == "sentencizer"
    nlp.disable_pipe("coref")  # a disabled component is still the pipeline's
    assert find_components(nlp, "arbo_coref") == ["coref", "other_coref"]


@pytest.mark.parametrize("factory, name, problem", [
    ("arbo_entity_linker", None, "has no component made by arbo_entity_linker"),
    ("arbo_coref", None, "has several components made by arbo_coref"),
    ("arbo_coref", "sentencizer", "has no component 'sentencizer' made by arbo_coref"),
])
def test_a_component_that_does_not_fit_is_named_with_those_present(factory, name, problem):
    nlp = _two_linkers()
    with pytest.raises(ValueError, match=r"E210") as err:
        find_component(nlp, factory, name, where="the toy pipeline")
    message = str(err.value)
    assert f"the toy pipeline {problem}" in message
    assert "sentencizer (sentencizer), coref (arbo_coref), other_coref (arbo_coref)" in message


def test_overrides_are_parsed_as_spacy_parses_them(monkeypatch):
    monkeypatch.delenv("SPACY_CONFIG_OVERRIDES", raising=False)
    args = ["--components.a.k", "4", "--components.a.flag", "--paths.train=corpus/t.spacy",
            "--components.a.threshold", "null", "--components.a.ks", "[1, 2]"]
    assert parse_overrides(args) == {
        "components.a.k": 4, "components.a.flag": True, "paths.train": "corpus/t.spacy",
        "components.a.threshold": None, "components.a.ks": [1, 2]}
    assert args[0] == "--components.a.k"  # the caller's list is left as it was
    # a float reads as written (srsly's reader would give 0.020035999999999998)
    assert parse_overrides(["--components.a.threshold", "0.020036"]) == {
        "components.a.threshold": 0.020036}
    # a JSON object stays text: confection would read a dict override as a section
    assert parse_overrides(["--components.a.label_types", '{"Chemical": ["Chemical"]}']) == {
        "components.a.label_types": '{"Chemical": ["Chemical"]}'}
    with pytest.raises(NoSuchOption):
        parse_overrides(["--top-k", "3"])  # no dot: an unknown option of the command
    with pytest.raises(ValueError, match=r"E211.*'components.a.k'"):
        parse_overrides(["components.a.k", "3"])
    monkeypatch.setenv("SPACY_CONFIG_OVERRIDES", "--components.a.k 8 --nlp.batch_size 2")
    assert parse_overrides(["--components.a.k", "4"]) == {"components.a.k": 8,
                                                          "nlp.batch_size": 2}
    monkeypatch.setenv("SPACY_CONFIG_OVERRIDES", "--batch_size 2")
    with pytest.raises(ValueError, match=r"E211.*top-level"):
        parse_overrides([])


def test_a_pipeline_loads_with_its_overrides_and_disabled_components(saved_linker):
    nlp = load_pipeline(saved_linker / "pipeline",
                        {"components.arbo_entity_linker.top_k": 3,
                         "components.arbo_entity_linker.threshold": 0.5})
    assert nlp.get_pipe("arbo_entity_linker").linking.top_k == 3
    assert nlp.config["components"]["arbo_entity_linker"]["threshold"] == 0.5
    nlp = load_pipeline(saved_linker / "pipeline", disable=["arbo_entity_linker"])
    assert nlp.pipe_names == [] and pipeline_kb(nlp) is None
    # a dict setting under a dotted key (confection refuses it) is given as its JSON text
    key = "components.arbo_entity_linker.get_candidates.label_types"
    with pytest.raises(Exception, match="not a section value"):
        spacy.load(saved_linker / "pipeline", config={key: {"Chemical": ["Chemical"]}})
    typed = load_pipeline(saved_linker / "pipeline", {key: {"Chemical": ["Chemical"]}})
    rule = typed.get_pipe("arbo_entity_linker").get_candidates.rule
    assert dict(rule.label_types) == {"Chemical": frozenset({"Chemical"})}


def test_coref_defaults_are_the_factorys():
    defaults = factory_defaults("arbo_coref")
    assert defaults == Language.get_factory_meta("arbo_coref").default_config
    made = spacy.blank("xx").add_pipe("arbo_coref")
    assert {key: defaults[key] for key in asdict(made.settings)} == asdict(made.settings)
    settings, same_doc_only = linked_corpus_settings("no/such/model")
    assert settings == {key: defaults[key] for key in ("k", "threshold", "directed",
                                                       "nil_prefix")}
    assert same_doc_only is False


def test_coref_settings_merge_tuned_given_and_overridden_in_that_order(tmp_path):
    merged, others = merge_coref_settings(
        "coref", {"components.coref.k": 3, "components.linker.top_k": 2, "nlp.x.y": 1},
        tuned={"k": 16, "threshold": -1.5, "directed": False}, buffer_size=None,
        keep_state=True, directed=True)
    assert merged == {"k": 3, "threshold": -1.5, "directed": True, "keep_state": True}
    assert others == {"components.linker.top_k": 2, "nlp.x.y": 1}
    nlp = spacy.blank("xx")
    nlp.add_pipe("arbo_coref", config={"k": 4, "same_doc_only": True, "nil_prefix": "NEW_"})
    nlp.to_disk(tmp_path / "model")
    settings, same_doc_only = linked_corpus_settings(
        tmp_path / "model", "arbo_coref", {"components.arbo_coref.threshold": -2.0,
                                           "components.arbo_coref.buffer_size": 5},
        tuned={"k": 2, "threshold": 1.0, "directed": False})
    assert settings == {"k": 2, "threshold": -2.0, "directed": False, "nil_prefix": "NEW_"}
    assert same_doc_only is True
    loaded = load_with_coref(tmp_path / "model", "arbo_coref",
                             {"components.arbo_coref.k": 6}, buffer_size=7)
    assert loaded.get_pipe("arbo_coref").settings.k == 6
    assert loaded.config["components"]["arbo_coref"]["buffer_size"] == 7  # saved with it
    added = load_with_coref(tmp_path / "model", "coref2", tuned={"k": 5, "threshold": None,
                                                                 "directed": True})
    assert added.get_pipe_meta("coref2").factory == "arbo_coref"
    assert added.get_pipe("coref2").settings.k == 5


def test_a_tuned_settings_file_that_is_not_one_is_a_coded_error(tmp_path):
    (tmp_path / "tuned.json").write_text(json.dumps({"best": {"k": 2}}))
    with pytest.raises(ValueError, match=r"E151.*KeyError"):
        read_tuned_settings(tmp_path / "tuned.json")
    (tmp_path / "tuned.json").write_text(json.dumps(
        {"best": {"k": 2, "threshold": None, "directed": False, "value": 0.5}}))
    assert read_tuned_settings(tmp_path / "tuned.json") == {"k": 2, "threshold": None,
                                                            "directed": False}


def test_a_swapped_kb_is_used_by_every_component_that_holds_one(
        tiny_encoder, toy_kb_path, toy_examples, tmp_path):
    nlp = spacy.blank("xx")
    nlp.add_pipe("arbo_entity_linker", name="linker", config={
        "kb_path": str(toy_kb_path), "top_k": 4, "model": {"encoder_name": tiny_encoder}})
    nlp.add_pipe("arbo_reranker", config={"linker": "linker", "top_k": 3,
                                          "model": {"encoder_name": tiny_encoder}})
    nlp.add_pipe("arbo_coref", config={"linker": "linker", "keep_state": True})
    nlp.initialize(lambda: toy_examples)
    list(nlp.pipe(eg.predicted.copy() for eg in toy_examples))
    assert len(nlp.get_pipe("arbo_coref").state) > 0
    assert without_kb_paths(nlp, "linker") == {"components.linker.kb_path": None,
                                               "components.arbo_reranker.kb_path": None}
    # one entity, named as every toy mention: every mention must link to it
    new_kb = KnowledgeBase([Entity("X1", "Aspirin", aliases=("cough", "fever", "pain"))])
    cleared = swap_kb(nlp, new_kb, "linker")
    assert cleared == ["arbo_coref"] and len(nlp.get_pipe("arbo_coref").state) == 0
    for name in ("linker", "arbo_reranker"):
        assert nlp.get_pipe(name).kb.fingerprint() == new_kb.fingerprint()
    assert pipeline_kb(nlp).fingerprint() == new_kb.fingerprint()
    doc = nlp(toy_examples[0].predicted.copy())
    assert {e.kb_id_ for e in doc.ents} == {"X1"}
    assert all([c for c, _ in e._.kb_candidates] == ["X1"] for e in doc.ents)
    save_pipeline(nlp, tmp_path / "swapped")
    loaded = load_pipeline(tmp_path / "swapped", without_kb_paths(nlp, "linker"))
    for name in ("linker", "arbo_reranker"):
        loaded.get_pipe(name).ensure_ready()
        assert loaded.get_pipe(name).kb.fingerprint() == new_kb.fingerprint()


def test_a_folder_that_is_no_pipeline_is_a_coded_error(tmp_path, saved_linker, cli):
    """E229 (not spaCy's OSError) for a folder without a readable config.cfg, from the
    config reader, the loader and a command that reads the config first."""
    assert pipeline_config(saved_linker / "pipeline")["nlp"]["pipeline"]
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "config.cfg").write_text("[nlp\nlang = en\n")
    for folder in (tmp_path, tmp_path / "broken"):
        with pytest.raises(ValueError, match=f"E229.*{folder.name}"):
            pipeline_config(folder)
        with pytest.raises(ValueError, match="E229"):
            load_pipeline(folder)
    result = cli("distill-mentions", tmp_path / "broken", saved_linker / "gold.spacy",
                 "--output", tmp_path / "out")
    assert result.exit_code == 1 and "[E229]" in result.output, result.output
    assert not (tmp_path / "out").exists()
