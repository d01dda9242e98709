"""arboEL's inference graph (appendix A.2, eq. 7) over a collection of mentions.

Nodes: the entities that some mention retrieves (first), then the mentions. For each mention
``m``: an edge from each of its ``k`` nearest mentions to ``m`` (``knn_graph``, the one k-NN
search of mentions, in memory or over a corpus's memory-mapped shards), and one from its
nearest entity to ``m``; the weight is the negative dot product (a dissimilarity, arboEL
eq. 2-4).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..kb.index import blas_search


@dataclass(frozen=True)
class MentionGraph:
    """Edges ``sources[i] -> targets[i]`` with dissimilarity ``weights[i]``."""

    n_entities: int
    n_mentions: int
    entity_positions: np.ndarray  # KB position of entity node i (i < n_entities)
    sources: np.ndarray
    targets: np.ndarray
    weights: np.ndarray

    @property
    def n_nodes(self) -> int:
        return self.n_entities + self.n_mentions

    def mention_node(self, mention: int) -> int:
        return self.n_entities + mention


RESCORE_BLOCK = 4_096


def take_rows(vectors, rows: np.ndarray) -> np.ndarray:
    """The float32 vectors of ``rows`` of an array or a ``ShardedVectors``."""
    if isinstance(vectors, np.ndarray):
        return np.ascontiguousarray(vectors[rows], dtype="float32")
    return vectors.take(rows)


def knn_graph(vectors, k: int, *, groups: np.ndarray | None = None, index=None,
              batch_size: int = 16_384, on_rows: Callable[[int], object] | None = None
              ) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` nearest other mentions of each mention by dot product, and the scores (-1
    and -inf where fewer exist; a mention with a zero vector neither has nor is a
    neighbour): arboEL's mention-mention edges (appendix A.2).

    ``vectors``: an array, or a ``ShardedVectors`` read ``batch_size`` rows at a time.
    ``index``: a FAISS index over all rows (``corpus_knn.mention_index``); exact search by
    default. An approximate index (one with ``nprobe``) proposes ``2k`` neighbours, which are
    re-scored exactly from ``vectors``: edge weights are always exact dot products, only
    which neighbours are found is approximate. With ``groups``, only mentions of the same
    group (e.g. document) are neighbours (exact search within each group)."""
    n = len(vectors)
    neighbours = np.full((n, k), -1, dtype="int64")
    scores = np.full((n, k), -np.inf, dtype="float32")
    if n < 2 or k < 1:
        return neighbours, scores
    if groups is not None:
        groups = np.asarray(groups)
        order = np.argsort(groups, kind="stable")
        for rows in np.split(order, np.flatnonzero(np.diff(groups[order])) + 1):
            found, found_scores = knn_graph(take_rows(vectors, rows), k)
            neighbours[rows] = np.where(found >= 0, rows[np.maximum(found, 0)], -1)
            scores[rows] = found_scores
        return neighbours, scores
    if index is None:
        import faiss

        index = faiss.IndexFlatIP(vectors.shape[1])
        index.add(np.ascontiguousarray(vectors[0:n], dtype="float32"))
    approximate = hasattr(index, "nprobe")
    fetch = min(n, 2 * k + 1 if approximate else k + 1)
    for start in range(0, n, batch_size):
        queries = take_rows(vectors, np.arange(start, min(n, start + batch_size)))
        with blas_search():
            found_scores, found = index.search(queries, fetch)
        for low in range(0, len(queries), RESCORE_BLOCK):
            block = slice(low, low + RESCORE_BLOCK)
            rows = np.arange(start + low, start + low + len(queries[block]))
            _keep_best(queries[block], found[block],
                       None if approximate else found_scores[block], rows, vectors, k,
                       neighbours, scores)
        if on_rows is not None:
            on_rows(len(queries))
    return neighbours, scores


def _keep_best(queries: np.ndarray, found: np.ndarray, found_scores: np.ndarray | None,
               rows: np.ndarray, vectors, k: int, neighbours: np.ndarray,
               scores: np.ndarray) -> None:
    """Drop the mention itself, unfound slots and zero vectors from the proposed neighbours,
    score them (exactly from ``vectors`` unless ``found_scores`` are exact already) and write
    the best ``k`` into ``neighbours`` and ``scores`` at ``rows``."""
    candidates = take_rows(vectors, np.maximum(found, 0).ravel()).reshape(*found.shape, -1)
    exact = (np.einsum("qd,qfd->qf", queries, candidates) if found_scores is None
             else found_scores)
    valid = ((found >= 0) & (found != rows[:, None])
             & (np.abs(candidates).sum(-1) > 0) & (np.abs(queries).sum(-1) > 0)[:, None])
    exact = np.where(valid, exact, -np.inf)
    order = np.argsort(-exact, axis=1, kind="stable")[:, :k]
    best = np.take_along_axis(exact, order, axis=1)
    neighbours[rows, :order.shape[1]] = np.where(np.isfinite(best),
                                                 np.take_along_axis(found, order, axis=1), -1)
    scores[rows, :order.shape[1]] = best


def build_graph(
    neighbours: np.ndarray,
    neighbour_scores: np.ndarray,
    entity_positions: np.ndarray,
    entity_scores: np.ndarray,
) -> MentionGraph:
    """The graph of eq. 7 from each mention's nearest mentions and its nearest entity
    (KB position, -1 if it retrieved none)."""
    n_mentions = len(neighbours)
    entity_positions = np.asarray(entity_positions, dtype="int64")
    has_entity = entity_positions >= 0
    kb_positions, entity_nodes = np.unique(entity_positions[has_entity], return_inverse=True)
    n_entities = len(kb_positions)
    mentions = np.arange(n_mentions)
    valid = neighbours >= 0
    mention_targets = np.broadcast_to(mentions[:, None], neighbours.shape)[valid]
    sources = np.concatenate([neighbours[valid] + n_entities, entity_nodes])
    targets = np.concatenate([mention_targets + n_entities, mentions[has_entity] + n_entities])
    weights = -np.concatenate([neighbour_scores[valid], entity_scores[has_entity]])
    return MentionGraph(n_entities, n_mentions, kb_positions, sources, targets,
                        weights.astype("float64"))
