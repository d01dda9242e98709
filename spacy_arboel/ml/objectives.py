"""The registered objective functions (``[components.arbo_entity_linker.objective]``): one
versioned function per objective, FGSM and distillation as wrappers of another.
``objective_block`` is the config block of an objective chosen by name (the project's
``scripts/project.py train --objective``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from inspect import signature
from pathlib import Path
from typing import Any

from spacy.util import registry

from ..errors import Errors
from ..factories import ENTITY_LINKER, RERANKER, find_components
from ..kb.knowledge_base import KnowledgeBase
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


def _core(objective: type, setting: str) -> Any:
    """The default of ``setting`` that the core class ``objective`` declares: each
    registered function's defaults are its core's (one declaration per setting)."""
    return signature(objective.__init__).parameters[setting].default


@registry.misc("spacy_arboel.KnnNegativesObjective.v1")
def make_knn_negatives(n_negatives: int = _core(KnnNegatives, "n_negatives"),
                       negatives: str = KnnNegatives.default_negatives,
                       hard_fraction: float = _core(KnnNegatives, "hard_fraction")) -> Objective:
    """Cross-entropy against the k nearest other entities (``random``/``mixed``: PEL-CE)."""
    return KnnNegatives(n_negatives, negatives, hard_fraction)


@registry.misc("spacy_arboel.ArborescenceObjective.v1")
def make_arborescence(variant: str = _core(Arborescence, "variant"),
                      n_negatives: int = _core(Arborescence, "n_negatives"),
                      max_cluster: int = _core(Arborescence, "max_cluster")) -> Objective:
    """arboEL §2.3: positives from the gold cluster's minimum spanning arborescence."""
    return Arborescence(variant, n_negatives, max_cluster)


@registry.misc("spacy_arboel.ProxyObjective.v1")
def make_proxy(n_negatives: int = _core(Proxy, "n_negatives"),
               negatives: str = Proxy.default_negatives,
               hard_fraction: float = _core(Proxy, "hard_fraction"),
               alpha: float = _core(Proxy, "alpha"),
               margin: float = _core(Proxy, "margin")) -> Objective:
    """PEL eq. 3: the proxy-based loss over cosine similarities."""
    return Proxy(n_negatives, negatives, hard_fraction, alpha, margin)


@registry.misc("spacy_arboel.FGSMObjective.v1")
def make_fgsm(objective: Objective, epsilon: float = 0.01,
              weight: float = _core(FGSM, "weight")) -> Objective:
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
        teacher.check_state(kb, f"{path} ({teacher.name})")
        return teacher

    return load


@registry.misc("spacy_arboel.DistillationObjective.v1")
def make_distillation(objective: Objective, teacher_path: str,
                      temperature: float = _core(Distillation, "temperature"),
                      alpha: float = _core(Distillation, "alpha")) -> Objective:
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


def switched_objective(name: str, config_path: Path, overrides: Mapping[str, Any]
                       ) -> dict[str, Any]:
    """The block of objective ``name`` for the ``arbo_entity_linker`` of the training config
    at ``config_path`` with ``overrides``, keeping those settings of its current block that
    the function of ``name`` takes (the project's ``scripts/project.py train linker DATASET
    --objective NAME``)."""
    from confection import ConfigValidationError
    from spacy.util import load_config

    try:
        config = load_config(config_path, overrides=dict(overrides), interpolate=False)
    except ConfigValidationError as err:  # e.g. an override of a section the config lacks
        raise ValueError(Errors.E211.format(option=", ".join(overrides) or config_path,
                                            problem=" ".join(str(err).split()))) from None
    # a config without the block trains the factory's objective at its function's defaults
    return objective_block(name, config["components"][ENTITY_LINKER].get("objective"))
