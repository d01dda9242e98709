"""The schedule of one ``spacy train`` run, known before it starts: how many updates it
makes, at which steps spaCy evaluates (``step % eval_frequency == 0``), and where the
learning-rate schedule ends. spaCy saves ``model-best`` only at those evaluations, so a run
of fewer steps than ``eval_frequency`` evaluates only its step-0 model."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Schedule:
    """``steps``: the updates of the run (steps 0 … steps - 1; None when the corpus is
    streamed without ``max_steps``); ``eval_frequency``; ``lr_total_steps``: where a
    ``warmup_linear`` learning rate reaches 0 (None for other schedules)."""

    steps: int | None
    eval_frequency: int
    lr_total_steps: int | None = None
    batches_per_epoch: int | None = None

    @property
    def evaluated_steps(self) -> list[int]:
        """The steps at which spaCy's training loop evaluates (and may save model-best)."""
        if self.steps is None:
            return [0]
        return list(range(0, self.steps, self.eval_frequency))

    @property
    def last_step(self) -> int | None:
        return None if self.steps is None else self.steps - 1

    def problems(self) -> list[str]:
        """What in the schedule loses training: no evaluation after step 0 (spaCy's
        model-best would be the step-0 model), a learning rate at 0 before the end."""
        found = []
        if self.steps is not None and self.steps <= self.eval_frequency:
            found.append(
                f"the run makes {self.steps} updates and evaluates every "
                f"{self.eval_frequency}: spaCy evaluates only its step-0 model (project-train's "
                "final evaluation chooses model-best)")
        if (self.lr_total_steps is not None and self.steps is not None
                and self.lr_total_steps < self.last_step):
            found.append(
                f"the learning rate (warmup_linear, total_steps {self.lr_total_steps}) is 0 "
                f"for the last {self.last_step - self.lr_total_steps} of {self.steps} "
                "updates")
        return found


def plan_schedule(training: dict[str, Any], batches_per_epoch: int | None) -> Schedule:
    """The schedule of spaCy's training loop for an interpolated ``[training]`` section and
    the number of batches one epoch of its corpus gives (spaCy's ``train_while_improving``:
    ``max_epochs`` > 0 passes over the corpus, 0 without end, -1 streamed; it stops after
    step ``max_steps`` when that is set)."""
    max_steps, max_epochs = int(training["max_steps"]), int(training["max_epochs"])
    by_steps = max_steps + 1 if max_steps else None
    by_epochs = (max_epochs * batches_per_epoch
                 if max_epochs > 0 and batches_per_epoch is not None else None)
    bounds = [n for n in (by_steps, by_epochs) if n is not None]
    rate = training.get("optimizer", {}).get("learn_rate")
    total = rate.get("total_steps") if isinstance(rate, dict) else None
    return Schedule(min(bounds) if bounds else None, int(training["eval_frequency"]),
                    int(total) if isinstance(total, int | float) else None,
                    batches_per_epoch)
