"""Training objectives: in-batch and distillation (BLINK), k-NN negatives, arborescence
(arboEL), proxy and FGSM (PEL), and SapBERT's multi-similarity loss with its hard-pair miner
(``multi_similarity``, used by ``linking.self_alignment``). spaCy-free; their registered
functions live in ``spacy_arboel.ml.objectives``."""

from .arborescence import arborescence_parents
from .losses import distillation_loss, edge_loss, get_loss, proxy_loss, softmax_loss
from .mention_store import MentionStore
from .objectives import (
    Arborescence,
    BatchPlan,
    InBatch,
    KnnNegatives,
    Objective,
    PlanContext,
    Proxy,
)
from .wrappers import FGSM, Distillation, ObjectiveWrapper

__all__ = [
    "FGSM", "Arborescence", "BatchPlan", "Distillation", "InBatch", "KnnNegatives",
    "MentionStore", "Objective", "ObjectiveWrapper", "PlanContext", "Proxy",
    "arborescence_parents", "distillation_loss", "edge_loss", "get_loss", "proxy_loss",
    "softmax_loss",
]
