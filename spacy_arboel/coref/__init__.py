"""Cross-document coreference: arboEL's k-NN graph of mentions and entities, partitioned.

The spaCy-free core of ``arbo_coref``: :class:`MentionMemory` (the mentions clustered and
remembered across batches), :func:`cluster_mentions` (their clustering), the graph
(:func:`knn_graph`, :func:`build_graph`) and its partition (:func:`partition_graph`).
"""

from .graph import MentionGraph, build_graph, knn_graph
from .mention_memory import (
    ClusterSettings,
    MemoryFormatError,
    Mention,
    MentionMemory,
    cluster_link,
    cluster_mentions,
    text_key,
)
from .partition import Partition, partition_graph

__all__ = [
    "ClusterSettings",
    "MemoryFormatError",
    "Mention",
    "MentionGraph",
    "MentionMemory",
    "Partition",
    "build_graph",
    "cluster_link",
    "cluster_mentions",
    "knn_graph",
    "partition_graph",
    "text_key",
]
