"""`project-train`: a project.yml training step with its dataset's settings
(configs/datasets.yml), the command line's overrides winning."""

from pathlib import Path

import pytest
import spacy
import srsly
from spacy.tokens import DocBin
from spacy.util import load_config

from dataset_settings import DATASET_FIELDS, SETTINGS, dataset_settings
from project import app as project
from spacy_arboel.configs import packaged_config
from spacy_arboel.pipeline.configs import fill_components

ROOT = Path(__file__).parents[2]
DATASETS = srsly.read_yaml(ROOT / SETTINGS)
STEPS = [(d, s) for d, steps in DATASETS.items() for s in steps if s not in DATASET_FIELDS]


@pytest.mark.parametrize("dataset,step", STEPS)
def test_every_setting_names_a_config_and_keys_it_has(dataset, step):
    config, overrides = dataset_settings(ROOT / SETTINGS, step, dataset)
    assert config.exists()
    base = fill_components(load_config(config, interpolate=False))  # the factories' too
    for key in overrides:  # each key is a setting the config has (no typo is ignored)
        node = base
        for part in key.split("."):
            assert part in node, f"{config.name} has no {key}"
            node = node[part]
    load_config(config, overrides=overrides)


def test_every_dataset_sets_every_step_and_real_data_uses_the_transformer_ner():
    assert set(DATASETS) == {"toy", "bc5cdr", "ncbi"}
    assert all(set(steps) - {"synonyms", "normalisers"}
               == {"kb", "linker", "ner", "reranker", "e2e"} for steps in DATASETS.values())
    assert DATASETS["bc5cdr"]["synonyms"] == ["drug-ner", "gilda", "mondo", "doid",
                                              "mesh-terms"]  # measured better
    assert DATASETS["ncbi"]["synonyms"] == DATASETS["bc5cdr"]["synonyms"]  # measured better
    assert DATASETS["toy"]["ner"]["config"] == "ner"
    assert DATASETS["bc5cdr"]["ner"]["config"] == "ner_trf"
    assert DATASETS["ncbi"]["ner"]["config"] == "ner_trf"


def test_the_biomedical_datasets_turn_the_mention_normalisers_on():
    """Declared once per dataset, set on the steps whose component reads mentions (the
    linker and the re-ranker), none for the toy data (a general KB's default)."""
    biomedical = ["american_spelling", "element_symbols"]
    for dataset, expected in (("bc5cdr", biomedical), ("ncbi", biomedical), ("toy", None)):
        for step, component in (("linker", "arbo_entity_linker"),
                                ("reranker", "arbo_reranker")):
            _, overrides = dataset_settings(ROOT / SETTINGS, step, dataset)
            assert overrides.get(f"components.{component}.normalisers") == expected
        for step in ("ner", "e2e"):
            _, overrides = dataset_settings(ROOT / SETTINGS, step, dataset)
            assert not any(key.endswith(".normalisers") for key in overrides)


def test_project_train_runs_spacy_train_with_the_settings(toy_examples, tmp_path, monkeypatch, cli):
    monkeypatch.chdir(ROOT)  # the settings path is relative to the project
    DocBin(docs=[eg.reference for eg in toy_examples]).to_disk(tmp_path / "train.spacy")
    out = tmp_path / "ner"
    result = cli(
        "train", "ner", "toy", "--output", out, "--paths.train", tmp_path / "train.spacy",
        "--paths.dev", tmp_path / "train.spacy", "--training.max_steps", "3", app=project)
    assert result.exit_code == 0, result.output
    assert "python -m spacy train configs/ner.cfg" in result.output
    config = spacy.load(out / "model-last").config
    assert config["training"]["max_steps"] == 3  # the command line wins
    assert config["training"]["eval_frequency"] == 50  # the toy setting
    result = cli("train", "ner", "pubmed", "--output", out, app=project)
    assert result.exit_code == 1 and "E118" in result.output
    # a folder of other files is not a training output: nothing is written into it
    # (issue 40, item 3); a training folder (above) is trained into again
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "todo.txt").write_text("mine")
    result = cli("train", "ner", "toy", "--output", notes, app=project)
    assert result.exit_code == 1 and "[E244]" in result.output, result.output
    assert sorted(p.name for p in notes.iterdir()) == ["todo.txt"]


def test_the_linker_objective_is_the_datasets_unless_given(tmp_path, monkeypatch, cli):
    """--objective default: the dataset's (arborescence on the toy data, whose coref step
    needs it; on the real data none is set: the factory's, knn_negatives); a name given
    wins, with the settings of the block it replaces; other steps refuse it."""
    import train_to_best

    monkeypatch.chdir(ROOT)
    seen = []
    monkeypatch.setattr(train_to_best, "train_to_best",
                        lambda config, output, use_gpu, overrides: seen.append(overrides))
    key = "components.arbo_entity_linker.objective"
    arborescence = {"@misc": "spacy_arboel.ArborescenceObjective.v1"}
    factorys = None  # no override: the factory's objective
    for dataset, extra, expected in (
            ("toy", [], arborescence), ("bc5cdr", [], factorys),
            ("toy", ["--objective", "in_batch"], {"@misc": "spacy_arboel.InBatchObjective.v1"}),
            ("bc5cdr", ["--objective", "arborescence"], arborescence),
            ("toy", ["--objective", "proxy"], {"@misc": "spacy_arboel.ProxyObjective.v1"}),
            ("ncbi", ["--objective", "default"], factorys)):
        result = cli("train", "linker", dataset, "--output", tmp_path / "out", *extra, app=project)
        assert result.exit_code == 0, result.output
        assert seen[-1].get(key) == expected
        load_config(packaged_config("arbo_entity_linker"), overrides=seen[-1])
    result = cli("train", "linker", "toy", "--output", tmp_path / "out", "--objective", "softmax",
                 app=project)
    assert result.exit_code == 1 and "E007" in result.output and "knn_negatives" in result.output
    result = cli("train", "ner", "toy", "--output", tmp_path / "out", "--objective", "in_batch",
                 app=project)
    assert result.exit_code == 1 and "linker step" in result.output


def test_an_override_of_a_section_the_config_lacks_is_a_coded_error(tmp_path, cli):
    """Switching the objective reads the config with the dataset's overrides: one naming a
    section the config has not is E211 naming it, not a traceback."""
    settings = tmp_path / "datasets.yml"
    settings.write_text("toy:\n  linker:\n    config: arbo_entity_linker\n"
                        "    overrides: {components.no_such.k: 4}\n")
    result = cli("train", "linker", "toy", "--output", tmp_path / "out", "--settings", settings,
                 "--objective", "in_batch", app=project)
    assert result.exit_code == 1 and "[E211]" in result.output, result.output
    assert "components.no_such.k" in result.output and not (tmp_path / "out").exists()


def test_a_hostile_datasets_file_is_refused(tmp_path):
    from dataset_settings import read_datasets

    datasets = tmp_path / "datasets.yml"
    datasets.write_text("[" * 100_000 + "]" * 100_000)  # nested too deeply for the parser
    with pytest.raises(ValueError, match="E153.*datasets.yml"):
        read_datasets(datasets)
    for missing, problem in ((tmp_path / "typo.yml", "it does not exist"),
                             (tmp_path, "it is a folder")):  # never read as no settings
        with pytest.raises(ValueError, match=f"E153.*{problem}"):
            read_datasets(missing)
    datasets.write_text("toy: [linker]\n1: {}\n")  # a dataset that is no mapping
    with pytest.raises(ValueError, match="E118"):
        dataset_settings(datasets, "linker", "toy")


def test_the_linker_trains_on_one_kb_and_ships_another(toy_examples, toy_kb_path,
                                                        tiny_encoder, tmp_path, monkeypatch,
                                                        cli):
    """Issue 64, item 5: the linker trains and chooses model-best with --paths.kb (prepare's
    kb-train.jsonl, without dev's surface forms), and its pipelines ship --shipped-kb."""
    import dataclasses

    from spacy_arboel.kb.knowledge_base import KnowledgeBase

    monkeypatch.chdir(ROOT)
    DocBin(docs=[eg.reference for eg in toy_examples]).to_disk(tmp_path / "train.spacy")
    kb = KnowledgeBase.from_jsonl(toy_kb_path)
    shipped = tmp_path / "shipped.jsonl"
    KnowledgeBase(entity if entity.id != "D005334" else dataclasses.replace(
        entity, aliases=(*entity.aliases, "hyperpyrexia")) for entity in kb).to_jsonl(shipped)
    out = tmp_path / "linker"
    result = cli("train", "linker", "toy", "--output", out, "--paths.train",
                 tmp_path / "train.spacy", "--paths.dev", tmp_path / "train.spacy",
                 "--paths.kb", toy_kb_path, "--paths.encoder", tiny_encoder,
                 "--shipped-kb", shipped, "--training.max_steps", "2",
                 "--training.eval_frequency", "1", app=project)
    assert result.exit_code == 0, result.output
    shipped.unlink()  # the pipelines hold the KB they ship
    for name in ("model-best", "model-last"):
        nlp = spacy.load(out / name)
        pipe = nlp.get_pipe("arbo_entity_linker")
        assert "hyperpyrexia" in pipe.kb["D005334"].aliases
        assert nlp.config["components"]["arbo_entity_linker"]["kb_path"] is None
        pipe.ensure_ready()  # its index is the shipped KB's (a near-duplicate row may go)
        assert "hyperpyrexia" in pipe.retriever.entities.row_texts()
        assert pipe.retriever.entities.index.meta.kb_fingerprint == pipe.kb.fingerprint()
    result = cli("train", "ner", "toy", "--output", tmp_path / "ner", "--shipped-kb",
                 toy_kb_path, app=project)
    assert result.exit_code == 1 and "linker step" in result.output
