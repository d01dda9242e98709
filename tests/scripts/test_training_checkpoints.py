"""A finished training never leaves its step-0 model as model-best (issue 29, item 0):
the schedule, the evaluation log and the choice of model-best, then `project-train` for
real on a small corpus with every dataset's own settings."""

import json
from pathlib import Path

import pytest
import spacy
import srsly
from spacy.tokens import DocBin
from spacy.util import load_config, load_model_from_config

from dataset_settings import DATASET_FIELDS
from project import app as project
from spacy_arboel.configs import packaged_config
from training_checkpoints import (
    Evaluation,
    TrainingLog,
    choose_model_best,
    read_log,
)
from training_schedule import plan_schedule

ROOT = Path(__file__).parents[2]
DATASETS = srsly.read_yaml(ROOT / "configs" / "datasets.yml")
STEPS = [(d, s) for d, steps in DATASETS.items() for s in steps if s not in DATASET_FIELDS]


def _training(max_steps=0, max_epochs=1, eval_frequency=250, total_steps=250):
    return {"max_steps": max_steps, "max_epochs": max_epochs,
            "eval_frequency": eval_frequency,
            "optimizer": {"learn_rate": {"@schedules": "warmup_linear.v1",
                                         "total_steps": total_steps}}}


def test_an_epoch_shorter_than_the_evaluation_frequency_is_found():
    """BC5CDR's linker: 500 docs in batches of 2, one epoch, eval_frequency 250."""
    schedule = plan_schedule(_training(), batches_per_epoch=250)
    assert schedule.steps == 250 and schedule.evaluated_steps == [0]
    assert "evaluates only its step-0 model" in schedule.problems()[0]
    fitted = plan_schedule(_training(eval_frequency=125), batches_per_epoch=250)
    assert fitted.evaluated_steps == [0, 125] and fitted.problems() == []


def test_max_steps_and_epochs_bound_the_run_and_the_learning_rate_is_checked():
    # spaCy stops after step max_steps: steps 0 … max_steps
    assert plan_schedule(_training(1500, 0, 250, 1500), None).steps == 1501
    assert plan_schedule(_training(200, 1, 200, 200), 250).evaluated_steps == [0, 200]
    assert plan_schedule(_training(0, 2, 100, 500), 250).steps == 500
    assert plan_schedule(_training(0, -1, 100, 500), None).steps is None
    short_rate = plan_schedule(_training(0, 2, 100, 250), 250)
    assert "is 0 for the last 249 of 500 updates" in short_rate.problems()[0]


def test_model_best_is_never_the_step_0_model():
    final = Evaluation(249, 0.91)
    # spaCy evaluated only step 0: the final model, even when it scores lower
    assert choose_model_best(TrainingLog([Evaluation(0, 0.6)], 250), final).promote
    lower = choose_model_best(TrainingLog([Evaluation(0, 0.95)], 250), final)
    assert lower.promote and lower.model_best == 249 and lower.below_step_0
    # a better intermediate model that spaCy saved is kept
    kept = choose_model_best(TrainingLog([Evaluation(0, 0.6), Evaluation(125, 0.93)], 250),
                             final)
    assert not kept.promote and kept.model_best == 125 and not kept.below_step_0
    # a tie goes to the later model, as in spaCy
    tie = choose_model_best(TrainingLog([Evaluation(0, 0.6), Evaluation(125, 0.91)], 250),
                            final)
    assert tie.promote and tie.model_best == 249
    # spaCy's best was step 0, a later unsaved one scored more than the final: final kept
    lost = choose_model_best(TrainingLog([Evaluation(0, 0.9), Evaluation(125, 0.8)], 250),
                             Evaluation(249, 0.7))
    assert lost.promote and lost.model_best == 249 and lost.below_step_0


def test_a_damaged_evaluation_log_is_a_coded_error(tmp_path):
    path = tmp_path / "evaluations.jsonl"
    path.write_text('{"step": 0, "epoch": 0, "score": 0.5}\n' + "[" * 100000 + "\n")
    with pytest.raises(ValueError, match=r"E138.*evaluations.jsonl:2.*nested"):
        read_log(path)
    path.write_bytes(b'{"step": 0, "epoch": 0, "score": 0.5}\n{"steps": "\xff"}\n')
    with pytest.raises(ValueError, match=r"E138.*evaluations.jsonl:2.*UTF-8"):
        read_log(path)


@pytest.fixture(scope="module")
def small_corpus(tmp_path_factory, tiny_encoder):
    """Train and dev corpora of the toy sentences, the toy KB, and a saved linker (the
    reranker and arbo_linker steps start from one)."""
    from conftest import TOY_ENTITIES, TOY_SENTENCES

    folder = tmp_path_factory.mktemp("small_corpus")
    nlp = spacy.blank("xx")
    docs = []
    for text, ents in TOY_SENTENCES:
        doc = nlp.make_doc(text)
        doc.ents = [doc.char_span(s, e, label=label, kb_id=kb) for s, e, label, kb in ents]
        docs.append(doc)
    DocBin(docs=docs).to_disk(folder / "train.spacy")
    DocBin(docs=docs[:3]).to_disk(folder / "dev.spacy")
    (folder / "kb.jsonl").write_text("".join(json.dumps(e) + "\n" for e in TOY_ENTITIES))
    config = load_config(packaged_config("arbo_entity_linker"), interpolate=True,
                         overrides={"paths.kb": str(folder / "kb.jsonl"),
                                    "paths.train": str(folder / "train.spacy"),
                                    "paths.dev": str(folder / "dev.spacy"),
                                    "paths.encoder": tiny_encoder})
    linker = load_model_from_config(config, auto_fill=True)  # the workflow's linker
    linker.initialize()
    linker.to_disk(folder / "linker")
    return folder


# Steps whose workflow schedule is bounded by max_steps in the hundreds or thousands are
# capped here (the failure is a run that ends before an evaluation after step 0: the cap
# keeps each run below its eval_frequency); epoch-bound steps run their real schedule.
MAX_STEPS_CAP = 3


@pytest.mark.parametrize("dataset,step", STEPS)
def test_project_train_keeps_a_trained_model_best(dataset, step, small_corpus, tiny_encoder,
                                                  tmp_path, monkeypatch, cli):
    monkeypatch.chdir(ROOT)  # configs/datasets.yml is read relative to the project
    overrides = DATASETS[dataset][step].get("overrides", {})
    extra = ["--paths.train", str(small_corpus / "train.spacy"),
             "--paths.dev", str(small_corpus / "dev.spacy")]
    if step == "linker":
        extra += ["--paths.kb", str(small_corpus / "kb.jsonl"), "--paths.encoder",
                  tiny_encoder]
    if step in ("reranker", "e2e"):
        extra += ["--paths.linker", str(small_corpus / "linker")]
    if step == "reranker":
        extra += ["--paths.encoder", tiny_encoder,
                  "--components.arbo_reranker.train_top_k", "3"]
    if step == "e2e":
        extra += ["--components.arbo_linker.passage_length", "48",
                  "--components.arbo_linker.passage_stride", "40"]
    if step == "ner" and DATASETS[dataset]["ner"]["config"] == "ner_trf":
        extra += ["--paths.encoder", tiny_encoder]
    if overrides.get("training.max_steps", 0) > MAX_STEPS_CAP:
        extra += ["--training.max_steps", str(MAX_STEPS_CAP)]
    out = tmp_path / "out"
    result = cli("train", step, dataset, "--output", out, *extra, app=project)
    assert result.exit_code == 0, result.output
    log = read_log(out / "evaluations.jsonl")
    assert [e.step for e in log.evaluations] == [0]  # spaCy evaluated only step 0 here
    record = json.loads((out / "evaluations.jsonl").read_text().splitlines()[-1])
    assert record["model_best_step"] == log.steps - 1 > 0
    best, last = out / "model-best", out / "model-last"
    assert (best / "meta.json").read_text() == (last / "meta.json").read_text()
    for name in spacy.load(last).pipe_names:  # the same weights: the same saved files
        for path in (last / name).rglob("*"):
            if path.is_file():
                assert path.read_bytes() == (best / name / path.relative_to(last / name)
                                             ).read_bytes(), path


def test_an_invalid_config_exits_with_its_validation_errors(tmp_path, capsys):
    from confection import ConfigValidationError

    from train_to_best import show_validation_error

    error = ConfigValidationError(config={"training": {}}, errors=[
        {"loc": ["training", "max_steps"], "msg": "field required",
         "type": "value_error.missing"}])
    with pytest.raises(SystemExit) as exit_, show_validation_error(tmp_path / "x.cfg"):
        raise error
    assert exit_.value.code == 1
    output = capsys.readouterr().out
    assert "training -> max_steps" in output and "field required" in output
    assert f"init fill-config {tmp_path / 'x.cfg'}" in output
