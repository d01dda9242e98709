"""arboEL's constrained partition, against hand-built graphs and brute force."""

import itertools

import numpy as np
import pytest

from spacy_arboel.coref import partition_graph


def _partition(n, entities, edges, **kwargs):
    sources, targets, weights = (np.array(x) for x in zip(*edges, strict=True))
    return partition_graph(n, np.array(entities), sources, targets, weights, **kwargs)


def _groups(part):
    groups = {}
    for node, cluster in enumerate(part.cluster.tolist()):
        groups.setdefault(cluster, []).append(node)
    return sorted(groups.values())


def test_undirected_cuts_the_heaviest_edge_between_two_entities():
    # entities 0 and 1; mentions 2 (a) and 3 (b). a-b is heavy but b's only link.
    edges = [(0, 2, 1.0), (2, 1, 3.0), (2, 3, 5.0)]
    part = _partition(4, [0, 1], edges, directed=False)
    assert _groups(part) == [[0, 2, 3], [1]]
    assert part.entity.tolist() == [0, 1, 0, 0]
    assert part.bottleneck[3] == 5.0


def test_directed_keeps_the_edge_whose_loss_would_orphan_a_mention():
    # entity 0; mentions 1 (a), 2 (b). b->a is the lightest edge, but only 0->a->b lets the
    # entity reach b: dropping a->b would orphan b.
    edges = [(0, 1, 1.0), (1, 2, 2.0), (2, 1, 0.5)]
    part = _partition(3, [0], edges, directed=True)
    assert part.entity.tolist() == [0, 0, 0]
    assert part.bottleneck.tolist()[1:] == [1.0, 2.0]


def test_directed_edges_are_not_followed_backwards():
    # mention 2 points at mention 1, which the entity reaches; nothing reaches 2
    edges = [(0, 1, 1.0), (2, 1, 0.1)]
    directed = _partition(3, [0], edges, directed=True)
    assert directed.entity.tolist() == [0, 0, -1]
    assert _groups(directed) == [[0, 1], [2]]
    assert _partition(3, [0], edges, directed=False).entity.tolist() == [0, 0, 0]


def test_directed_mention_goes_to_its_minimax_entity():
    # mention 2 reaches entity 0 directly at 2.0, entity 1 through mention 3 at max(1, 3)
    edges = [(0, 2, 2.0), (3, 2, 1.0), (1, 3, 3.0)]
    part = _partition(4, [0, 1], edges, directed=True)
    assert part.entity.tolist() == [0, 1, 0, 1]


def test_threshold_drops_edges_and_leaves_entity_less_clusters():
    edges = [(0, 2, 1.0), (2, 3, 9.0), (3, 4, 0.5), (5, 4, 0.7)]
    part = _partition(6, [0, 1], edges, directed=True, threshold=5.0)
    assert part.entity.tolist() == [0, 1, 0, -1, -1, -1]
    # the entity-less cluster {3, 4, 5} (weakly connected) is numbered by its smallest node
    assert part.cluster.tolist() == [0, 1, 0, 3, 3, 3]
    assert np.isinf(part.bottleneck[3])


def test_no_edges_no_entities_and_bad_endpoints():
    part = partition_graph(3, np.array([], "int64"), np.array([]), np.array([]), np.array([]))
    assert part.entity.tolist() == [-1, -1, -1] and part.cluster.tolist() == [0, 1, 2]
    with pytest.raises(ValueError, match="node numbers"):
        _partition(2, [0], [(0, 2, 1.0)])


def _kruskal(n, entities, edges):
    """Constrained single linkage, written plainly: merge the most similar pairs first,
    never two clusters that both hold an entity."""
    parent = list(range(n))
    has_entity = [node in entities for node in range(n)]

    def find(x):
        while parent[x] != x:
            x = parent[x]
        return x

    for u, v, _ in sorted(edges, key=lambda e: e[2]):
        ru, rv = find(u), find(v)
        if ru != rv and not (has_entity[ru] and has_entity[rv]):
            parent[rv] = ru
            has_entity[ru] = has_entity[ru] or has_entity[rv]
    groups = {}
    for node in range(n):
        groups.setdefault(find(node), []).append(node)
    return sorted(groups.values())


def _random_graph(rng, n, n_entities, n_edges, directed):
    edges = set()
    while len(edges) < n_edges:
        u, v = rng.integers(0, n, size=2)
        if u == v or (directed and v < n_entities):  # no edge into an entity
            continue
        edges.add((int(u), int(v)))
    weights = rng.permutation(len(edges)).astype(float)  # distinct weights
    return [(u, v, w) for (u, v), w in zip(sorted(edges), weights, strict=True)]


@pytest.mark.parametrize("seed", range(30))
def test_undirected_equals_constrained_single_linkage(seed):
    rng = np.random.default_rng(seed)
    n, n_entities = 14, 3
    edges = _random_graph(rng, n, n_entities, 20, directed=False)
    part = _partition(n, list(range(n_entities)), edges, directed=False)
    assert _groups(part) == _kruskal(n, set(range(n_entities)), edges)


@pytest.mark.parametrize("seed", range(30))
def test_directed_assignment_has_the_minimax_dissimilarity(seed):
    rng = np.random.default_rng(seed)
    n, n_entities = 12, 3
    edges = _random_graph(rng, n, n_entities, 22, directed=True)
    part = _partition(n, list(range(n_entities)), edges, directed=True)
    # brute force: the smallest threshold at which some entity reaches each node
    levels = sorted({w for *_, w in edges})
    for node in range(n_entities, n):
        best = np.inf
        for level, entity in itertools.product(levels, range(n_entities)):
            if level < best and node in _reach(entity, edges, level):
                best = level
        assert part.bottleneck[node] == best
        if np.isfinite(best):
            owner = part.entity[node]
            assert node in _reach(owner, edges, best)
            # the cluster is connected from its entity inside the cluster
            members = set(np.flatnonzero(part.entity == owner).tolist())
            inner = [e for e in edges if e[0] in members and e[1] in members]
            assert node in _reach(owner, inner, best)
        else:
            assert part.entity[node] == -1


def _reach(start, edges, level):
    seen, stack = {start}, [start]
    while stack:
        node = stack.pop()
        for u, v, w in edges:
            if u == node and w <= level and v not in seen:
                seen.add(v)
                stack.append(v)
    return seen
