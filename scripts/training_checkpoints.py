"""Which model a finished training keeps as ``model-best``. spaCy saves ``model-best`` at
its evaluations only (every ``eval_frequency`` steps, the first at step 0), so a run whose
last steps fall between evaluations, or that has fewer steps than ``eval_frequency``, would
keep an earlier model, possibly the step-0 one. ``project-train`` records every evaluation
(:func:`evaluation_log`), evaluates the final model when spaCy did not, and keeps as
``model-best`` the best of the evaluations after step 0 and the final model
(:func:`choose_model_best`). No spaCy here except the registered logger."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from spacy import registry

from project_errors import ProjectErrors
from spacy_arboel.parsing import parse_json

LOG_NAME = "evaluations.jsonl"
# the logger that writes it; registered when this module is imported (train_to_best does)
LOGGER = "arboel_project.EvaluationLog.v1"


@dataclass(frozen=True)
class Evaluation:
    step: int
    score: float


@dataclass(frozen=True)
class TrainingLog:
    """What :func:`evaluation_log` recorded: spaCy's evaluations in order and the number of
    updates (None when the run did not finish its logging)."""

    evaluations: list[Evaluation]
    steps: int | None

    @property
    def spacy_best(self) -> Evaluation | None:
        """The evaluation spaCy saved as model-best: the highest score, the later of equal
        ones (``score == max(results)`` in ``train_while_improving``)."""
        if not self.evaluations:
            return None
        return max(self.evaluations, key=lambda e: (e.score, e.step))


@dataclass(frozen=True)
class Choice:
    """``model_best``: the step of the model kept as model-best; ``promote``: copy
    model-last over model-best; ``below_step_0``: the step-0 model scored higher than
    every later one (the training lowered the dev score)."""

    model_best: int
    promote: bool
    below_step_0: bool


def choose_model_best(log: TrainingLog, final: Evaluation) -> Choice:
    """The best of spaCy's evaluations after step 0 and of the ``final`` model (later wins
    a tie, as in spaCy). The step-0 model is never chosen: when spaCy's model-best is the
    step-0 one, the final model takes its place even where it scores lower."""
    later = [e for e in log.evaluations if e.step > 0 and e.step != final.step]
    best = max([*later, final], key=lambda e: (e.score, e.step))
    saved = log.spacy_best
    # only spaCy's own model-best is on disk besides model-last: a better intermediate
    # model that spaCy did not save (its model-best was step 0's) cannot be restored
    if saved is None or saved.step == 0 or best.step == final.step:
        best = final
    step_0 = next((e for e in log.evaluations if e.step == 0), None)
    return Choice(best.step, best.step == final.step,
                  step_0 is not None and step_0.score > best.score)


def read_log(path: Path) -> TrainingLog:
    """The evaluations and step count that :func:`evaluation_log` wrote to ``path`` (E138
    when a line is not one of its records)."""
    evaluations, steps = [], None
    with path.open("rb") as lines:
        for number, line in enumerate(lines, 1):
            try:
                record = parse_json(line)
                if "steps" in record:
                    steps = int(record["steps"])
                elif "final" not in record:  # the final evaluation, written after training
                    evaluations.append(Evaluation(int(record["step"]), float(record["score"])))
            except (ValueError, KeyError, TypeError) as err:
                raise ValueError(ProjectErrors.E138.format(path=path, line=number,
                                                    problem=f"{type(err).__name__}: {err}")
                                 ) from None
    return TrainingLog(evaluations, steps)


@registry.loggers(LOGGER)
def evaluation_log(path: str, logger: Callable | None = None) -> Callable:
    """A spaCy training logger that writes each evaluation (step, epoch, score) and, at the
    end, the number of updates to ``path`` (JSONL, replaced at the start of a run), and
    passes every step on to ``logger`` (e.g. ``spacy.ConsoleLogger.v1``)."""

    def setup(nlp: Any, stdout: IO = None, stderr: IO = None):
        log_step, finalize = (logger(nlp, stdout, stderr) if logger is not None
                              else (lambda info: None, lambda: None))
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        file_ = Path(path).open("w", encoding="utf8")
        steps = 0

        def step(info: dict[str, Any] | None) -> None:
            nonlocal steps
            steps += 1
            if info is not None:
                file_.write(json.dumps({"step": info["step"], "epoch": info["epoch"],
                                        "score": info["score"]}) + "\n")
                file_.flush()
            log_step(info)

        def finish() -> None:
            file_.write(json.dumps({"steps": steps}) + "\n")
            file_.close()
            finalize()

        return step, finish

    return setup
