"""The registered objective functions (``[components.arbo_entity_linker.objective]``): one
versioned function per objective, FGSM and distillation as wrappers of another.
``objective_block`` is the config block of an objective chosen by name (``project-train
--objective``); ``spacy_arboel.Objective.v1``, the by-name function of earlier versions, is
kept only so that their saved pipelines load."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from inspect import signature
from pathlib import Path
from typing import Any

from spacy.util import registry

from ..errors import Errors, Warnings
from ..factories import RERANKER, find_components
from ..kb.knowledge_base import KnowledgeBase
from ..linking.cross_encoder_reranker import check_state
from ..objectives import (
    FGSM,
    Arborescence,
    Distillation,
    InBatch,
    KnnNegatives,
    Objective,
    Proxy,
)

# the registered function of each objective name; distill wraps knn_negatives
FUNCTIONS = {"in_batch": "spacy_arboel.InBatchObjective.v1",
             "knn_negatives": "spacy_arboel.KnnNegativesObjective.v1",
             "arborescence": "spacy_arboel.ArborescenceObjective.v1",
             "proxy": "spacy_arboel.ProxyObjective.v1",
             "distill": "spacy_arboel.DistillationObjective.v1"}


@registry.misc("spacy_arboel.InBatchObjective.v1")
def make_in_batch() -> Objective:
    """BLINK §3.2: the other gold entities of the batch are the negatives."""
    return InBatch()


@registry.misc("spacy_arboel.KnnNegativesObjective.v1")
def make_knn_negatives(n_negatives: int = 8, negatives: str = "hard",
                       hard_fraction: float = 0.5) -> Objective:
    """Cross-entropy against the k nearest other entities (``random``/``mixed``: PEL-CE)."""
    return KnnNegatives(n_negatives, negatives, hard_fraction)


@registry.misc("spacy_arboel.ArborescenceObjective.v1")
def make_arborescence(variant: str = "full", n_negatives: int = 8,
                      max_cluster: int = 512) -> Objective:
    """arboEL §2.3: positives from the gold cluster's minimum spanning arborescence."""
    return Arborescence(variant, n_negatives, max_cluster)


@registry.misc("spacy_arboel.ProxyObjective.v1")
def make_proxy(n_negatives: int = 8, negatives: str = "mixed", hard_fraction: float = 0.5,
               alpha: float = 32.0, margin: float = 0.0) -> Objective:
    """PEL eq. 3: the proxy-based loss over cosine similarities."""
    return Proxy(n_negatives, negatives, hard_fraction, alpha, margin)


@registry.misc("spacy_arboel.FGSMObjective.v1")
def make_fgsm(objective: Objective, epsilon: float = 0.01, weight: float = 1.0) -> Objective:
    """PEL eq. 6–8: ``objective`` plus ``weight`` times its loss on FGSM-moved entities."""
    return FGSM(objective, epsilon, weight)


def teacher_loader(path: str) -> Callable[[KnowledgeBase], Any]:
    """For distillation: a function giving the ``arbo_reranker`` of the pipeline at ``path``
    (found by its factory), checked to use the given KB (E012)."""

    def load(kb: KnowledgeBase) -> Any:
        import spacy

        nlp = spacy.load(path)
        names = find_components(nlp, RERANKER)
        if not names:
            raise ValueError(Errors.E055.format(path=path))
        teacher = nlp.get_pipe(names[0])
        teacher.ensure_ready()
        check_state(teacher.reranker.state(), kb, teacher.settings, f"{path} ({teacher.name})")
        return teacher

    return load


@registry.misc("spacy_arboel.DistillationObjective.v1")
def make_distillation(objective: Objective, teacher_path: str, temperature: float = 2.0,
                      alpha: float = 0.5) -> Objective:
    """BLINK §4.3: distil the ``arbo_reranker`` of the pipeline at ``teacher_path`` over the
    candidates ``objective`` plans (e.g. knn_negatives)."""
    if not teacher_path:
        raise ValueError(Errors.E053)
    return Distillation(objective, teacher_loader(teacher_path), temperature, alpha)


def objective_block(name: str, settings: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The config block of the objective ``name`` (a key of ``FUNCTIONS``; E007 otherwise)
    with those of ``settings`` its registered function takes, e.g. the ``n_negatives`` of
    the block it replaces; ``distill`` distils over ``knn_negatives`` (its ``teacher_path``,
    ``temperature`` and ``alpha`` from ``settings``)."""
    if name not in FUNCTIONS:
        raise ValueError(Errors.E007.format(what="objective", value=name,
                                            options=", ".join(FUNCTIONS)))
    settings = dict(settings or {})
    if name == "distill":
        return {"@misc": FUNCTIONS[name],
                "objective": objective_block("knn_negatives", settings),
                "teacher_path": settings.get("teacher_path") or "",
                **_taken("distill", settings, ("temperature", "alpha"))}
    return {"@misc": FUNCTIONS[name], **_taken(name, settings)}


def _taken(name: str, settings: Mapping[str, Any], names: tuple[str, ...] | None = None
           ) -> dict[str, Any]:
    """The entries of ``settings`` that the function of objective ``name`` takes."""
    takes = signature(registry.misc.get(FUNCTIONS[name])).parameters
    return {k: v for k, v in settings.items() if k in takes and k in (names or takes)
            and k != "objective"}


@registry.misc("spacy_arboel.Objective.v1")
def make_objective(
    name: str = "knn_negatives", variant: str = "full", n_negatives: int = 8,
    max_cluster: int = 512, negatives: str | None = None, hard_fraction: float = 0.5,
    alpha: float = 32.0, margin: float = 0.0, fgsm_epsilon: float = 0.0,
    fgsm_lambda: float = 1.0, teacher_path: str | None = None, temperature: float = 2.0,
    distill_alpha: float = 0.5,
) -> Objective:
    """Deprecated (W040): the by-name objective of pipelines saved by earlier versions; it
    builds the versioned function's objective (``named_objective_block``)."""
    block = named_objective_block(**locals())
    warnings.warn(Warnings.W040.format(name=name, function=FUNCTIONS[name]), stacklevel=2)
    return registry.resolve({"objective": block})["objective"]


def named_objective_block(name: str, negatives: str | None = None, fgsm_epsilon: float = 0.0,
                          fgsm_lambda: float = 1.0, distill_alpha: float | None = None,
                          **settings: Any) -> dict[str, Any]:
    """The config block of the versioned objective that ``Objective.v1``'s flat settings
    name (also what ``--components.arbo_entity_linker.objective.KEY`` overrides written for
    it mean): ``name = "proxy"`` is ``ProxyObjective.v1`` with the settings it takes,
    ``negatives`` applies to knn_negatives, proxy and distill (E054 otherwise),
    ``fgsm_epsilon`` > 0 wraps it in ``FGSMObjective.v1`` with weight ``fgsm_lambda``, and
    ``distill_alpha`` is distill's ``alpha`` (``alpha`` is proxy's)."""
    if negatives is not None and name not in ("knn_negatives", "proxy", "distill"):
        raise ValueError(Errors.E054.format(negatives=negatives, name=name))
    if fgsm_epsilon < 0:
        raise ValueError(Errors.E011.format(name="fgsm_epsilon", condition=">= 0 (0 turns "
                                            "FGSM off)", value=fgsm_epsilon))
    if name == "distill":
        settings["alpha"] = distill_alpha
    settings["negatives"] = negatives  # None: each objective's own default
    block = objective_block(name, {k: v for k, v in settings.items() if v is not None})
    if fgsm_epsilon > 0:
        block = {"@misc": "spacy_arboel.FGSMObjective.v1", "objective": block,
                 "epsilon": fgsm_epsilon, "weight": fgsm_lambda}
    return block


def switched_objective(name: str, config_path: Path, overrides: Mapping[str, Any]
                       ) -> dict[str, Any]:
    """The block of objective ``name`` for the ``arbo_entity_linker`` of the training config
    at ``config_path`` with ``overrides``, keeping those settings of its current block that
    the function of ``name`` takes (``project-train linker DATASET --objective NAME``)."""
    from spacy.util import load_config

    config = load_config(config_path, overrides=dict(overrides), interpolate=False)
    return objective_block(name, config["components"]["arbo_entity_linker"]["objective"])
