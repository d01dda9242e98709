"""arboEL's inference graph: k nearest mentions and the nearest entity of each mention."""

import numpy as np

from spacy_arboel.coref.graph import build_graph, knn_graph


def test_knn_graph_exclude_self_and_respect_groups():
    vectors = np.array([[1, 0], [0.9, 0.1], [0, 1], [0.1, 0.9]], dtype="float32")
    neighbours, scores = knn_graph(vectors, 1)
    assert neighbours[:, 0].tolist() == [1, 0, 3, 2]
    assert np.allclose(scores[0, 0], 0.9)
    # mentions 0 and 2 in one document, 1 and 3 in another
    grouped, _ = knn_graph(vectors, 2, groups=np.array([0, 1, 0, 1]))
    assert grouped.tolist() == [[2, -1], [3, -1], [0, -1], [1, -1]]


def test_single_and_identical_mentions():
    assert knn_graph(np.ones((1, 4), "float32"), 3)[0].tolist() == [[-1, -1, -1]]
    neighbours, _ = knn_graph(np.ones((3, 4), "float32"), 5)
    for i, row in enumerate(neighbours.tolist()):
        assert sorted(row[:2]) == sorted({0, 1, 2} - {i}) and row[2:] == [-1, -1, -1]


def test_graph_edges_point_into_each_mention():
    neighbours = np.array([[1], [0], [-1]])
    scores = np.array([[0.5], [0.5], [-np.inf]], dtype="float32")
    # mentions 0 and 1 retrieve KB entity 7, mention 2 retrieves nothing
    graph = build_graph(neighbours, scores, np.array([7, 7, -1]), np.array([2.0, 1.0, 0.0]))
    assert graph.n_entities == 1 and graph.entity_positions.tolist() == [7]
    edges = sorted(zip(graph.sources.tolist(), graph.targets.tolist(), graph.weights.tolist(),
                       strict=True))
    # node 0 is entity 7; mentions are nodes 1-3
    assert edges == [(0, 1, -2.0), (0, 2, -1.0), (1, 2, -0.5), (2, 1, -0.5)]
