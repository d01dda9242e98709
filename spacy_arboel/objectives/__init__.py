"""Training objectives: in-batch (BLINK), k-NN negatives, arborescence (arboEL), proxy (PEL)."""

from .arborescence import arborescence_parents
from .losses import edge_loss, get_loss, proxy_loss, softmax_loss
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

__all__ = [
    "Arborescence", "BatchPlan", "InBatch", "KnnNegatives", "MentionStore", "Objective",
    "PlanContext", "Proxy", "arborescence_parents", "edge_loss", "get_loss", "proxy_loss",
    "softmax_loss",
]
