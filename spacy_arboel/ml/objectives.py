"""The registered objective functions (``[components.arbo_entity_linker.objective]``): one
versioned function per objective, FGSM and distillation as wrappers of another, and
``spacy_arboel.Objective.v1`` to pick any of them by name on the command line."""

from __future__ import annotations

from spacy.util import registry

from ..errors import Errors
from ..objectives import (
    FGSM,
    Arborescence,
    Distillation,
    InBatch,
    KnnNegatives,
    Objective,
    Proxy,
)

OBJECTIVES = ("in_batch", "knn_negatives", "arborescence", "proxy", "distill")


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


@registry.misc("spacy_arboel.DistillationObjective.v1")
def make_distillation(objective: Objective, teacher_path: str, temperature: float = 2.0,
                      alpha: float = 0.5) -> Objective:
    """BLINK §4.3: distil the ``arbo_reranker`` of the pipeline at ``teacher_path`` over the
    candidates ``objective`` plans (e.g. knn_negatives)."""
    from ..components.arbo_reranker import teacher_loader

    if not teacher_path:
        raise ValueError(Errors.E053)
    return Distillation(objective, teacher_loader(teacher_path), temperature, alpha)


@registry.misc("spacy_arboel.Objective.v1")
def make_objective(
    name: str = "knn_negatives", variant: str = "full", n_negatives: int = 8,
    max_cluster: int = 512, negatives: str | None = None, hard_fraction: float = 0.5,
    alpha: float = 32.0, margin: float = 0.0, fgsm_epsilon: float = 0.0,
    fgsm_lambda: float = 1.0, teacher_path: str | None = None, temperature: float = 2.0,
    distill_alpha: float = 0.5,
) -> Objective:
    """Any objective by name, so one config switches between them on the command line
    (``--components.arbo_entity_linker.objective.name arborescence``); the same objects as
    the per-objective functions above.

    ``negatives`` (``hard``/``random``/``mixed``, default hard for knn_negatives and distill,
    mixed for proxy) and ``hard_fraction`` apply to knn_negatives, proxy and distill;
    ``alpha`` and ``margin`` to proxy; ``teacher_path``, ``temperature`` and
    ``distill_alpha`` to distill (over knn_negatives); ``fgsm_epsilon`` > 0 wraps any
    objective in FGSM with weight ``fgsm_lambda``."""
    if negatives is not None and name not in ("knn_negatives", "proxy", "distill"):
        raise ValueError(Errors.E054.format(negatives=negatives, name=name))
    if fgsm_epsilon < 0:
        raise ValueError(Errors.E011.format(name="fgsm_epsilon", condition=">= 0 (0 turns "
                                            "FGSM off)", value=fgsm_epsilon))
    if name == "in_batch":
        objective = make_in_batch()
    elif name in ("knn_negatives", "distill"):
        objective = make_knn_negatives(n_negatives, negatives or "hard", hard_fraction)
    elif name == "arborescence":
        objective = make_arborescence(variant, n_negatives, max_cluster)
    elif name == "proxy":
        objective = make_proxy(n_negatives, negatives or "mixed", hard_fraction, alpha, margin)
    else:
        raise ValueError(Errors.E007.format(what="objective", value=name,
                                            options=", ".join(OBJECTIVES)))
    if name == "distill":
        objective = make_distillation(objective, teacher_path or "", temperature,
                                      distill_alpha)
    if fgsm_epsilon > 0:
        objective = make_fgsm(objective, fgsm_epsilon, fgsm_lambda)
    return objective
