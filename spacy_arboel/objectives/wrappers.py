"""Objectives that wrap another: FGSM adversarial entities (PEL §4.2) and distillation from
a cross-encoder (BLINK §4.3). The wrapped objective plans the batch; the wrapper changes the
loss."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

import numpy as np
import torch

from ..errors import Errors
from .fgsm import adversarial_objective, fgsm_delta
from .losses import candidate_scores, distillation_loss
from .objectives import BatchPlan, Objective, PlanContext


class Teacher(Protocol):
    """What distillation needs of a cross-encoder: logits for candidate entity ids."""

    def score_candidates(self, texts: Sequence[str], spans: Sequence[Any],
                         candidate_ids: Sequence[Sequence[str]]) -> list[np.ndarray]: ...


class ObjectiveWrapper(Objective):
    """Plans as the wrapped objective does and scores as it does."""

    def __init__(self, objective: Objective) -> None:
        self.objective = objective
        self.name = objective.name
        self.loss = objective.loss
        self.similarity = objective.similarity
        self.needs_entity_index = objective.needs_entity_index
        self.needs_mention_index = objective.needs_mention_index
        self.captures_entity_embeddings = objective.captures_entity_embeddings

    def plan(self, ctx: PlanContext) -> BatchPlan:
        return self.objective.plan(ctx)

    def compute_loss(self, scores, valid, step=None):
        return self.objective.compute_loss(scores, valid, step)


class FGSM(ObjectiveWrapper):
    """PEL eq. 6–8: the wrapped loss plus ``weight`` times the same loss against entity rows
    whose input embeddings were moved by ε·sign of the gradient (negatives towards the
    mention, the positive away from it)."""

    def __init__(self, objective: Objective, epsilon: float, weight: float = 1.0) -> None:
        super().__init__(objective)
        if epsilon <= 0:
            raise ValueError(Errors.E011.format(name="fgsm epsilon", condition="> 0",
                                                value=epsilon))
        self.captures_entity_embeddings = True
        self.epsilon = epsilon
        self.weight = weight

    def compute_loss(self, scores, valid, step=None):
        clean = self.objective.compute_loss(scores, valid, step)
        entities, queries = step.leaves[0], step.leaves[1]
        entity_columns = (step.candidates >= 0) & (step.candidates < entities.shape[0])
        signs = adversarial_objective(scores, valid, entity_columns)
        (output_grad,) = torch.autograd.grad(signs, entities, retain_graph=True)
        embeddings, outputs = step.captured
        mask = torch.as_tensor(step.entity_batch[1], device=embeddings.device)
        delta = fgsm_delta(outputs, output_grad.to(outputs.device), embeddings, mask,
                           self.epsilon)
        adversarial = step.encode_entities(delta)
        adv_scores, adv_valid = candidate_scores(
            queries, torch.cat([adversarial, *step.leaves[1:]]), step.candidates,
            *step.similarity)
        return clean + self.weight * self.objective.compute_loss(adv_scores, adv_valid, step)


class Distillation(ObjectiveWrapper):
    """BLINK §4.3: the bi-encoder as a student of a cross-encoder over the wrapped
    objective's candidates (entity rows only): student cross-entropy weighted ``alpha``, the
    teacher's tempered softmax (``temperature``) as soft targets weighted 1 − ``alpha``.
    ``load_teacher`` gives the teacher for the retriever's KB on first use."""

    def __init__(self, objective: Objective, load_teacher: Callable[[Any], Teacher],
                 temperature: float = 2.0, alpha: float = 0.5) -> None:
        super().__init__(objective)
        if temperature <= 0 or not 0.0 <= alpha <= 1.0:
            raise ValueError(Errors.E011.format(name="distillation temperature and alpha",
                                                condition="> 0 and in [0, 1]",
                                                value=(temperature, alpha)))
        self.name = "distill"
        self.loss = "distill"
        self.load_teacher = load_teacher
        self.temperature = temperature
        self.alpha = alpha
        self.teacher: Teacher | None = None

    def compute_loss(self, scores, valid, step=None):
        if "teacher" not in step.cache:
            step.cache["teacher"] = self.teacher_logits(step).to(scores.device)
        return distillation_loss(scores, valid, step.cache["teacher"], self.temperature,
                                 self.alpha)

    def teacher_logits(self, step) -> torch.Tensor:
        """The teacher's logits for each mention's candidate entities, −inf at padding."""
        if self.teacher is None:
            self.teacher = self.load_teacher(step.retriever.kb)
        plan, retriever = step.plan, step.retriever
        if (plan.candidates >= len(plan.entity_rows)).any():
            raise ValueError(Errors.E052)
        owners = retriever.index.owners
        ids = [[retriever.kb.entity_at(int(owners[plan.entity_rows[c]])).id
                for c in row if c >= 0] for row in plan.candidates]
        logits = self.teacher.score_candidates(step.texts, step.spans, ids)
        out = torch.full(plan.candidates.shape, float("-inf"))
        for i, row in enumerate(logits):
            out[i, : len(row)] = torch.from_numpy(row)
        return out
