"""Minimum spanning arborescences over a gold cluster (arboEL §2.3)."""

from __future__ import annotations

from collections import deque

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import minimum_spanning_tree


def arborescence_parents(entity_affinity: np.ndarray, mention_affinity: np.ndarray) -> np.ndarray:
    """The parent of each mention in the minimum spanning arborescence rooted at the entity.

    Nodes: the entity (root, index -1 in the result) and ``n`` mentions. Edge weights are
    negative affinities (arboEL eq. 2–3): ``entity_affinity[j]`` = ψ(e, m_j) and
    ``mention_affinity[i, j]`` = φ(m_i, m_j). Because φ is a dot product it is symmetric and
    the root has only outgoing edges, so every spanning tree oriented away from the root is
    an arborescence of the same weight: the minimum spanning arborescence is the undirected
    minimum spanning tree oriented from the entity (no Chu–Liu/Edmonds needed). It is what
    the paper's edge-dropping procedure with λ = ∞ keeps.

    Returns an int array of length n: -1 where the parent is the entity, else the index of
    the parent mention.
    """
    n = len(entity_affinity)
    if n == 0:
        return np.zeros(0, dtype="int64")
    weights = np.zeros((n + 1, n + 1), dtype="float64")
    weights[0, 1:] = -np.asarray(entity_affinity, dtype="float64")
    weights[1:, 1:] = -np.asarray(mention_affinity, dtype="float64")
    upper = np.triu_indices(n + 1, k=1)
    values = weights[upper]
    # scipy treats 0 as "no edge": shift all weights to be strictly positive (an MST is
    # invariant under adding a constant to every edge).
    values = values - values.min() + 1.0
    graph = csr_matrix((values, upper), shape=(n + 1, n + 1))
    tree = minimum_spanning_tree(graph)
    tree = (tree + tree.T).tocsr()
    parents = np.full(n + 1, -2, dtype="int64")
    parents[0] = -1
    queue = deque([0])
    while queue:
        node = queue.popleft()
        for child in tree.indices[tree.indptr[node] : tree.indptr[node + 1]]:
            if parents[child] == -2:
                parents[child] = node
                queue.append(child)
    # shift back: node 0 is the entity (-1), node i is mention i - 1
    return parents[1:] - 1
