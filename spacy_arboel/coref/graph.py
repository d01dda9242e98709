"""arboEL's inference graph (appendix A.2, eq. 7) over a collection of mentions.

Nodes: the entities that some mention retrieves (first), then the mentions. For each mention
``m``: an edge from each of its ``k`` nearest mentions to ``m``, and one from its nearest
entity to ``m``; the weight is the negative dot product (a dissimilarity, arboEL eq. 2-4).
"""

from __future__ import annotations

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


def nearest_mentions(
    vectors: np.ndarray, k: int, groups: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` nearest other mentions of each mention by dot product (FAISS, exact), and
    the scores; -1 where fewer exist. With ``groups``, only mentions of the same group (e.g.
    document) are neighbours."""
    import faiss

    vectors = np.ascontiguousarray(vectors, dtype="float32")
    n = len(vectors)
    neighbours = np.full((n, k), -1, dtype="int64")
    scores = np.full((n, k), -np.inf, dtype="float32")
    if n < 2 or k < 1:
        return neighbours, scores
    if groups is None:
        members = [np.arange(n)]
    else:
        groups = np.asarray(groups)
        order = np.argsort(groups, kind="stable")
        members = np.split(order, np.flatnonzero(np.diff(groups[order])) + 1)
    for rows in members:
        if len(rows) < 2:
            continue
        index = faiss.IndexFlatIP(vectors.shape[1])
        index.add(vectors[rows])
        fetch = min(k + 1, len(rows))
        with blas_search():
            found_scores, found = index.search(vectors[rows], fetch)
        for i, row in enumerate(rows):
            keep = (found[i] >= 0) & (found[i] != i)
            others = rows[found[i][keep]][:k]
            neighbours[row, : len(others)] = others
            scores[row, : len(others)] = found_scores[i][keep][:k]
    return neighbours, scores


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
