"""Cross-document coreference: arboEL's k-NN graph of mentions and entities, partitioned."""

from .partition import Partition, partition_graph

__all__ = ["Partition", "partition_graph"]
