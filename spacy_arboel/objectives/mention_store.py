"""The training mentions with their gold entities, gold clusters and cached embeddings."""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from ..errors import Errors
from ..kb.index import blas_search


class MentionStore:
    """Every gold training mention: wordpiece ids, gold entity position, cluster, embedding.

    Gold clusters are the mentions sharing a gold id (arboEL §2.3). Embeddings are a cache,
    refreshed on the training schedule, used to build arborescences and mine negatives.
    """

    def __init__(self) -> None:
        self.keys: dict[tuple[str, int, int], int] = {}
        self.inputs: list[list[int]] = []
        self.gold: list[int] = []
        self.clusters: dict[int, list[int]] = defaultdict(list)
        self.embeddings: np.ndarray | None = None
        self._index = None

    def __len__(self) -> int:
        return len(self.inputs)

    def add(self, key: tuple[str, int, int], input_ids: list[int], gold: int) -> int:
        if key in self.keys:
            return self.keys[key]
        position = len(self.inputs)
        self.keys[key] = position
        self.inputs.append(input_ids)
        self.gold.append(gold)
        self.clusters[gold].append(position)
        return position

    def lookup(self, key: tuple[str, int, int]) -> int:
        """The store position of a mention, or -1 if it is not a training mention."""
        return self.keys.get(key, -1)

    def set_embeddings(self, embeddings: np.ndarray) -> None:
        import faiss

        self.embeddings = np.ascontiguousarray(embeddings, dtype="float32")
        self._index = faiss.IndexFlatIP(self.embeddings.shape[1])
        self._index.add(self.embeddings)

    def nearest(self, queries: np.ndarray, k: int) -> np.ndarray:
        """Store positions of the ``k`` nearest training mentions of each query."""
        if self._index is None:
            raise RuntimeError(Errors.E106)
        k = max(1, min(k, len(self)))
        with blas_search():
            _, rows = self._index.search(np.ascontiguousarray(queries, dtype="float32"), k)
        return rows
