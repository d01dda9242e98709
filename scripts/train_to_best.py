"""``spacy train`` as ``project-train`` runs it: the schedule checked first, every
evaluation recorded (``evaluations.jsonl`` in the output folder), and the final model
evaluated after the last step and kept as ``model-best`` where it is the best (see
``checkpoints``): a finished training never leaves its step-0 model as ``model-best``."""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from wasabi import msg

from spacy_arboel.atomic import atomic_folder, write_text_atomic
from training_checkpoints import (
    LOG_NAME,
    LOGGER,
    Choice,
    Evaluation,
    choose_model_best,
    read_log,
)
from training_schedule import Schedule, plan_schedule


def count_batches(interpolated: Any) -> int:
    """The batches of one epoch of an interpolated config's training corpus, as its batcher
    makes them (a blank pipeline of the config's language tokenises the corpus)."""
    import spacy
    from spacy.schemas import ConfigSchemaTraining
    from spacy.util import registry, resolve_dot_names

    training = registry.resolve(interpolated["training"], schema=ConfigSchemaTraining)
    corpus = resolve_dot_names(interpolated, [training["train_corpus"]])[0]
    examples = list(corpus(spacy.blank(interpolated["nlp"]["lang"])))
    return sum(1 for _ in training["batcher"](examples))


def schedule_of(config: Any) -> Schedule:
    """The schedule of training ``config`` (a loaded, not interpolated, spaCy config)."""
    interpolated = config.interpolate()
    epochs = int(interpolated["training"]["max_epochs"])
    return plan_schedule(interpolated["training"],
                         count_batches(interpolated) if epochs > 0 else None)


# what a training folder holds: spacy train's two pipelines, the evaluation log, and the
# hidden temporary folders and locks of atomic saves (a killed run may leave one)
TRAINING_OUTPUTS = ("model-best", "model-last", LOG_NAME)


def is_training_output(name: str) -> bool:
    """Whether ``name`` in a training folder is what a training writes."""
    return name in TRAINING_OUTPUTS or name.startswith(".")


def record_evaluations(config: Any, output: Path) -> None:
    """Route the config's training logger through the evaluation log of ``output``."""
    logger = config["training"].get("logger")
    if isinstance(logger, dict) and logger.get("@loggers") == LOGGER:
        logger = logger.get("logger")
    config["training"]["logger"] = {"@loggers": LOGGER, "path": str(output / LOG_NAME),
                                    **({"logger": logger} if logger else {})}


def train_to_best(config_path: Path, output: Path, *, use_gpu: int = -1,
                  overrides: dict[str, Any] | None = None) -> Choice:
    """``spacy train config_path --output output`` with ``overrides``, then the final
    model evaluated and kept as model-best where :func:`choose_model_best` says so."""
    from spacy.training.initialize import init_nlp
    from spacy.training.loop import train as train_nlp
    from spacy.util import load_config

    setup_gpu(use_gpu)
    with show_validation_error(config_path):
        config = load_config(config_path, overrides=overrides or {}, interpolate=False)
    schedule = schedule_of(config)
    report_schedule(schedule)
    output.mkdir(parents=True, exist_ok=True)  # once the config and schedule are checked
    record_evaluations(config, output)
    msg.divider("Initializing pipeline")
    with show_validation_error(config_path, hint_fill=False):
        nlp = init_nlp(config, use_gpu=use_gpu)
    msg.divider("Training pipeline")
    nlp, _ = train_nlp(nlp, output, use_gpu=use_gpu, stdout=sys.stdout, stderr=sys.stderr)
    return keep_best(nlp, output)


def setup_gpu(use_gpu: int) -> None:
    """Use GPU ``use_gpu`` (-1: the CPU) and say which, as ``spacy train`` does."""
    from thinc.api import require_gpu
    from thinc.util import gpu_is_available

    if use_gpu >= 0:
        msg.info(f"Using GPU: {use_gpu}")
        require_gpu(use_gpu)
    else:
        msg.info("Using CPU")
        if gpu_is_available():
            msg.info("To switch to GPU 0, use the option: --gpu-id 0")


@contextmanager
def show_validation_error(config_path: Path, *, hint_fill: bool = True) -> Iterator[None]:
    """Exit (1) with the config's validation errors printed, as ``spacy train`` does,
    where the block raises one."""
    from configparser import InterpolationError

    from confection import ConfigValidationError

    try:
        yield
    except ConfigValidationError as err:
        msg.fail(err.title)
        print(err.from_error(err, title="").text.strip())
        if hint_fill and "value_error.missing" in err.error_types:
            msg.text("If your config contains missing values, you can run the 'init "
                     "fill-config' command to fill in all the defaults, if possible:",
                     spaced=True)
            print(f"python -m spacy init fill-config {config_path} {config_path} \n")
        sys.exit(1)
    except InterpolationError as err:
        msg.fail("Config validation error", err, exits=1)


def report_schedule(schedule: Schedule) -> None:
    shown = schedule.evaluated_steps[:6]
    more = ", …" if len(schedule.evaluated_steps) > len(shown) else ""
    if schedule.steps is not None:
        epoch = (f" ({schedule.batches_per_epoch} batches an epoch)"
                 if schedule.batches_per_epoch is not None else "")
        msg.info(f"{schedule.steps} updates{epoch}; spaCy evaluates at steps "
                 f"{', '.join(map(str, shown))}{more}; the final model is evaluated after "
                 "the last step")
    for problem in schedule.problems():
        msg.warn(f"Schedule: {problem}")


def keep_best(nlp: Any, output: Path) -> Choice:
    """Evaluate the trained ``nlp`` (unless spaCy evaluated its last step), record it in
    ``evaluations.jsonl`` and in model-last's meta.json, and copy model-last over
    model-best where it is the one to keep."""
    from spacy.schemas import ConfigSchemaTraining
    from spacy.training.loop import create_evaluation_callback
    from spacy.util import registry, resolve_dot_names

    log = read_log(output / LOG_NAME)
    last = (log.steps or 1) - 1
    done = next((e for e in log.evaluations if e.step == last), None)
    if done is None:
        config = nlp.config.interpolate()
        training = registry.resolve(config["training"], schema=ConfigSchemaTraining)
        dev = resolve_dot_names(config, [training["dev_corpus"]])[0]
        score, scores = create_evaluation_callback(nlp, dev, training["score_weights"])()
        done = Evaluation(last, float(score))
        _set_performance(output / "model-last", training["score_weights"], scores)
    choice = choose_model_best(log, done)
    with (output / LOG_NAME).open("a", encoding="utf8") as file_:
        file_.write(json.dumps({"final": {"step": last, "score": done.score},
                                "model_best_step": choice.model_best}) + "\n")
    if choice.promote and log.spacy_best is not None and log.spacy_best.step != last:
        with atomic_folder(output / "model-best") as temp:
            shutil.copytree(output / "model-last", temp)
    msg.good(f"model-best: the model of step {choice.model_best} (score "
             f"{done.score if choice.promote else log.spacy_best.score:.4f}; final step "
             f"{last})")
    if choice.below_step_0:
        msg.warn("The step-0 model scored higher on dev than every later evaluation: the "
                 "training lowered the score. model-best is the final model; check the "
                 "learning rate and the corpus.")
    return choice


def _set_performance(folder: Path, weights: dict[str, Any], scores: dict[str, Any]) -> None:
    """The final evaluation's scores in ``folder/meta.json`` (as spaCy's ``update_meta``)."""
    meta = json.loads((folder / "meta.json").read_text(encoding="utf8"))
    performance = meta.get("performance") or {}
    performance.update({metric: scores.get(metric, 0.0) for metric in weights
                        if metric is not None})
    meta["performance"] = performance
    write_text_atomic(folder / "meta.json", json.dumps(meta, indent=2) + "\n")


def ship_kb(output: Path, kb_path: Path, linker: str) -> None:
    """Give the pipelines of ``output`` (model-best, model-last) the KB at ``kb_path``:
    they were trained, and model-best chosen on dev, with another (``prepare``'s
    kb-train.jsonl, without dev's surface forms), and ship the one with them. The index is
    brought up to date with the rows of the new KB's text only (``IndexedKB.refresh``)."""
    from spacy_arboel.kb.knowledge_base import KnowledgeBase
    from spacy_arboel.pipeline.knowledge_bases import swap_kb
    from spacy_arboel.pipeline.loading import load_pipeline, save_pipeline

    kb = KnowledgeBase.from_jsonl(kb_path)
    for name in ("model-best", "model-last"):
        if not (output / name).is_dir():
            continue
        nlp = load_pipeline(output / name)
        swap_kb(nlp, kb, linker)
        nlp.get_pipe(linker).ensure_ready()
        save_pipeline(nlp, output / name)
    msg.good(f"{output}/model-best and model-last link with {kb_path} ({len(kb)} entities)")

