"""Training objectives: in-batch and distillation (BLINK), k-NN negatives, arborescence
(arboEL), proxy (PEL)."""

from .arborescence import arborescence_parents
from .losses import distillation_loss, edge_loss, get_loss, proxy_loss, softmax_loss
from .mention_store import MentionStore
from .objectives import (
    Arborescence,
    BatchPlan,
    Distill,
    InBatch,
    KnnNegatives,
    Objective,
    PlanContext,
    Proxy,
)

__all__ = [
    "Arborescence", "BatchPlan", "Distill", "InBatch", "KnnNegatives", "MentionStore",
    "Objective", "PlanContext", "Proxy", "arborescence_parents", "distillation_loss",
    "edge_loss", "get_loss", "proxy_loss", "softmax_loss",
]
