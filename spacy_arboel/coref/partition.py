"""arboEL's constrained graph partition (§2.3, appendix A.2), in O(E log E).

Nodes are mentions and entities; an edge ``(u, v, w)`` runs from ``u`` to ``v`` with
dissimilarity ``w`` (arboEL uses the negative dot product). Edges heavier than the threshold
λ are dropped. Every cluster holds at most one entity.

The paper describes a reverse-delete procedure: visit the edges from the most to the least
dissimilar, drop an edge whose cluster would hold two entities, and drop an edge of an
entity's cluster when its target stays reachable from an entity without it, "maintaining
... our minimax dissimilarity function f". We compute what that is meant to keep directly:
each mention joins the entity with the smallest minimax (bottleneck) path dissimilarity
``f(e, m)`` (arboEL eq. 1) among the entities that reach it, by a multi-source bottleneck
search from all entities (Dijkstra with ``max`` in place of ``+``), in O(E log E) instead
of one reachability search per edge. (On directed graphs the literal pass can lose a
mention's minimax path; BENCHMARKS.md gives the example, a test checks it.)

- ``directed=True``: paths follow edge directions, so a mention belongs to an entity's
  cluster only if the entity reaches it (the cluster is an arborescence rooted at the
  entity);
- ``directed=False``: edges are traversed both ways; this equals constrained single-linkage
  (Kruskal merging the most similar pairs first, never merging two entities).

Mentions that no entity reaches form entity-less clusters: the weakly connected components
of the edges among them (the paper prunes no edge of a cluster without an entity).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from ..errors import Errors


@dataclass(frozen=True)
class Partition:
    """Per node: the entity node its cluster holds (-1 if none) and a cluster number.

    Clusters with an entity are numbered by their entity node; the others by their smallest
    node, so the numbering depends only on the graph.
    """

    entity: np.ndarray
    cluster: np.ndarray
    bottleneck: np.ndarray  # minimax dissimilarity from the cluster's entity (inf if none)


def partition_graph(
    n_nodes: int,
    entity_nodes: np.ndarray,
    sources: np.ndarray,
    targets: np.ndarray,
    weights: np.ndarray,
    *,
    directed: bool = True,
    threshold: float | None = None,
) -> Partition:
    """Partition the graph so that each cluster holds at most one entity (see module doc)."""
    sources = np.asarray(sources, dtype="int64")
    targets = np.asarray(targets, dtype="int64")
    weights = np.asarray(weights, dtype="float64")
    entity_nodes = np.asarray(entity_nodes, dtype="int64")
    if not (len(sources) == len(targets) == len(weights)):
        raise ValueError(Errors.E062.format(n_sources=len(sources), n_targets=len(targets),
                                            n_weights=len(weights)))
    if len(sources):
        low = min(sources.min(), targets.min())
        high = max(sources.max(), targets.max())
        if low < 0 or high >= n_nodes:
            raise ValueError(Errors.E063.format(n_nodes=n_nodes, low=low, high=high))
    keep = sources != targets
    if threshold is not None:
        keep &= weights <= threshold
    sources, targets, weights = sources[keep], targets[keep], weights[keep]
    if not directed:
        sources, targets = np.concatenate([sources, targets]), np.concatenate([targets, sources])
        weights = np.concatenate([weights, weights])

    entity, bottleneck = _bottleneck_search(n_nodes, entity_nodes, sources, targets, weights)
    cluster = entity.copy()
    free = entity < 0
    if free.any():
        among_free = free[sources] & free[targets]
        graph = coo_matrix(
            (np.ones(int(among_free.sum())), (sources[among_free], targets[among_free])),
            shape=(n_nodes, n_nodes),
        )
        _, component = connected_components(graph, directed=True, connection="weak")
        # number each entity-less cluster by its smallest node
        smallest = np.full(n_nodes, n_nodes, dtype="int64")
        nodes = np.flatnonzero(free)
        np.minimum.at(smallest, component[nodes], nodes)
        cluster[nodes] = smallest[component[nodes]]
    return Partition(entity=entity, cluster=cluster, bottleneck=bottleneck)


def _bottleneck_search(
    n_nodes: int, entity_nodes: np.ndarray, sources: np.ndarray, targets: np.ndarray,
    weights: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """For every node, the entity with the smallest minimax path to it, and that minimax."""
    order = np.argsort(sources, kind="stable")
    sources, targets, weights = sources[order], targets[order], weights[order]
    starts = np.searchsorted(sources, np.arange(n_nodes + 1))
    best_l = [np.inf] * n_nodes
    owner_l = [-1] * n_nodes
    done_l = [False] * n_nodes
    heap: list[tuple[float, int, int]] = []
    for node in entity_nodes.tolist():
        best_l[node] = -np.inf
        owner_l[node] = node
        heap.append((-np.inf, node, node))
    heapq.heapify(heap)
    targets_l, weights_l, starts_l = targets.tolist(), weights.tolist(), starts.tolist()
    while heap:
        value, entity, node = heapq.heappop(heap)
        if done_l[node]:
            continue
        done_l[node] = True
        for edge in range(starts_l[node], starts_l[node + 1]):
            target = targets_l[edge]
            if done_l[target]:
                continue
            candidate = max(value, weights_l[edge])
            # ties go to the smaller entity node, so the result does not depend on edge order
            if candidate < best_l[target] or (
                candidate == best_l[target] and entity < owner_l[target]
            ):
                best_l[target] = candidate
                owner_l[target] = entity
                heapq.heappush(heap, (candidate, entity, target))
    # entities are settled first (at -inf) and never re-assigned: one entity per cluster
    return np.asarray(owner_l, dtype="int64"), np.asarray(best_l)
