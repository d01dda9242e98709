"""BioSyn's lexical score: character n-gram TF-IDF search per entity, its union with dense
candidates, and the choice of λ."""

import numpy as np
import pytest
from sklearn.feature_extraction.text import TfidfVectorizer

from spacy_arboel.kb import Entity
from spacy_arboel.linking.lexical import (
    LexicalIndex,
    LexicalSettings,
    best_weight,
    name_rows,
    rank_combined,
    union_positions,
)

ENTITIES = [
    Entity("D001241", "Aspirin", aliases=("acetylsalicylic acid",)),
    Entity("D007052", "Ibuprofen"),
    Entity("D000082", "Acetaminophen", aliases=("paracetamol", "tylenol")),
    Entity("D003371", "Cough", aliases=("coughing",)),
    Entity("D006973", "Hypertension", aliases=("high blood pressure",)),
    Entity("D007022", "Hypotension", aliases=("low blood pressure",)),
    Entity("D003920", "Diabetes Mellitus"),
    Entity("D009203", "Myocardial Infarction", aliases=("heart attack",)),
]
NAMES, OWNERS = name_rows(ENTITIES)
POSITION = {e.id: i for i, e in enumerate(ENTITIES)}


@pytest.fixture(scope="module")
def index():
    return LexicalIndex(NAMES, OWNERS)


def brute_force(queries, settings=LexicalSettings()):
    """Every row's TF-IDF cosine, maxed per entity (BioSyn's score matrix, per entity)."""
    vectorizer = TfidfVectorizer(analyzer=settings.analyzer, ngram_range=settings.ngram_range,
                                 lowercase=settings.lowercase)
    rows = vectorizer.fit_transform(NAMES)
    scores = (vectorizer.transform(queries) @ rows.T).toarray()
    return np.stack([scores[:, OWNERS == p].max(axis=1) for p in range(len(ENTITIES))], 1)


def test_name_rows_are_names_then_aliases():
    assert NAMES[:3] == ["Aspirin", "acetylsalicylic acid", "Ibuprofen"]
    assert OWNERS.tolist()[:5] == [0, 0, 1, 2, 2] and OWNERS.dtype == np.int64


def test_exact_name_ranks_its_entity_first(index):
    scores, positions = index.search(["Aspirin", "hypotension", "Myocardial Infarction"], k=3)
    assert positions[:, 0].tolist() == [POSITION["D001241"], POSITION["D007022"],
                                        POSITION["D009203"]]
    assert np.allclose(scores[:, 0], 1.0, atol=1e-5)
    assert scores.dtype == np.float32 and positions.dtype == np.int64
    assert (np.diff(scores, axis=1) <= 0).all()


def test_typo_and_reordered_query_still_find_the_entity(index):
    _, positions = index.search(["asprin", "Acetaminophn", "infarction, myocardial",
                                 "mellitus diabetes"], k=2)
    assert positions[:, 0].tolist() == [POSITION["D001241"], POSITION["D000082"],
                                        POSITION["D009203"], POSITION["D003920"]]


def test_entity_scores_as_its_best_row(index):
    queries = ["paracetamol", "blood pressure high", "cough", "tylenol 500"]
    expected = brute_force(queries)
    scores, positions = index.search(queries, k=len(ENTITIES))
    assert positions[0, 0] == POSITION["D000082"] and scores[0, 0] == pytest.approx(1.0)
    assert positions[1, 0] == POSITION["D006973"]  # by its alias, not "Hypertension"
    for row in range(len(queries)):
        found = positions[row] >= 0
        assert np.allclose(scores[row, found], expected[row, positions[row, found]], atol=1e-5)
        assert (expected[row, np.setdiff1d(np.arange(len(ENTITIES)), positions[row])] == 0).all()
    everyone = np.tile(np.arange(len(ENTITIES)), (len(queries), 1))
    assert np.allclose(index.score(queries, everyone), expected, atol=1e-5)


def test_score_pads_and_gives_zero_where_nothing_is_shared(index):
    positions = np.array([[POSITION["D001241"], -1, POSITION["D007052"]], [0, 1, 2]])
    scores = index.score(["aspirin", ""], positions)
    assert scores[0, 0] == pytest.approx(1.0) and scores[0, 1] == -np.inf
    assert scores[1].tolist() == [0.0, 0.0, 0.0]  # an empty query shares nothing
    with pytest.raises(ValueError, match=r"\[E163\]"):
        index.score(["aspirin"], np.array([[len(ENTITIES)]]))
    with pytest.raises(ValueError, match=r"\[E163\]"):
        index.score(["aspirin", "cough"], np.array([[0]]))


def test_empty_and_unknown_queries_are_padded(index):
    scores, positions = index.search(["", "   ", "§§§¤", "cough"], k=3)
    assert (positions[:3] == -1).all() and np.isneginf(scores[:3]).all()
    assert positions[3, 0] == POSITION["D003371"]
    empty_scores, empty_positions = index.search([], k=3)
    assert empty_scores.shape == (0, 3) and empty_positions.shape == (0, 3)


def test_k_beyond_the_entities_is_padded(index):
    scores, positions = index.search(["aspirin"], k=20)
    assert positions.shape == (1, 20)
    found = positions[0] >= 0
    assert found.sum() <= len(ENTITIES) and not found[len(ENTITIES):].any()
    assert len(set(positions[0, found].tolist())) == found.sum()
    assert np.isneginf(scores[0, ~found]).all()
    with pytest.raises(ValueError, match=r"\[E164\]"):
        index.search(["aspirin"], k=0)


def test_batches_give_the_results_of_one_batch():
    queries = ["asprin", "heart attack", "", "coughs", "diabetes", "Asprin", "pressure"] * 3
    whole = LexicalIndex(NAMES, OWNERS).search(queries, k=4)
    for options in ({"batch_size": 1}, {"batch_size": 2}, {"block_elements": 3 * len(NAMES)}):
        parts = LexicalIndex(NAMES, OWNERS, **options).search(queries, k=4)
        assert np.array_equal(whole[0], parts[0]) and np.array_equal(whole[1], parts[1])


def test_rebuild_is_deterministic_and_saved_as_settings():
    settings = LexicalSettings("char_wb", [2, 3])
    first = LexicalIndex(NAMES, OWNERS, settings)
    shuffled = np.random.default_rng(0).permutation(len(NAMES))  # row order does not matter
    second = LexicalIndex([NAMES[i] for i in shuffled], OWNERS[shuffled],
                          LexicalSettings.from_dict(settings.to_dict()))
    queries = ["asprin", "low pressure", "tylenol"]
    a, b = first.search(queries, k=5), second.search(queries, k=5)
    assert np.array_equal(a[1], b[1]) and np.allclose(a[0], b[0], atol=1e-6)
    assert first.fingerprint == second.fingerprint == settings.fingerprint
    assert LexicalSettings().fingerprint != settings.fingerprint
    assert settings.to_dict() == {"analyzer": "char_wb", "ngram_range": [2, 3],
                                  "lowercase": True}
    again = LexicalIndex(NAMES, OWNERS, settings).search(queries, k=5)
    assert np.array_equal(a[0], again[0]) and np.array_equal(a[1], again[1])


def test_from_entities_keeps_entities_without_rows_addressable():
    index = LexicalIndex.from_entities(ENTITIES[:3])
    assert index.n_entities == 3 and index.n_rows == 6
    sparse_index = LexicalIndex(["aspirin"], np.array([2]), n_entities=4)
    assert sparse_index.search(["aspirin"], 2)[1].tolist() == [[2, -1]]
    assert sparse_index.score(["aspirin"], np.array([[3, 2]]))[0, 0] == 0.0


def test_combine_ranks_the_union_by_weight(index):
    query = "asprin"
    sparse_order = index.search([query], k=3)[1][0]
    assert sparse_order[0] == POSITION["D001241"]
    dense_positions = np.array([[POSITION["D003920"], POSITION["D007052"]]])
    dense_scores = np.array([[0.9, 0.8]], dtype="float32")
    calls = []

    def dense_score(query_indices, positions):
        calls.append((query_indices.tolist(), positions.tolist()))
        return np.full(len(positions), 0.1)

    dense_first = index.combine([query], dense_scores, dense_positions, dense_score, 0.0,
                                n_sparse=3)
    assert dense_first.positions[0, :2].tolist() == dense_positions[0].tolist()
    assert set(dense_first.positions[0].tolist()) == set(dense_positions[0]) | set(sparse_order)
    assert len(calls) == 1 and calls[0][0] == [0] * len(calls[0][1])
    assert set(calls[0][1]) == set(sparse_order) - set(dense_positions[0])
    sparse_first = index.combine([query], dense_scores, dense_positions, dense_score, 100.0,
                                 n_sparse=3)
    assert sparse_first.positions[0, 0] == POSITION["D001241"]
    assert np.allclose(sparse_first.scores, sparse_first.dense + 100 * sparse_first.sparse)
    kept = index.combine([query], dense_scores, dense_positions, dense_score, 0.5, k=2)
    assert kept.positions.shape == (1, 2)
    wide = index.combine([query], dense_scores, dense_positions, dense_score, 0.5, k=9)
    assert wide.positions.shape == (1, 9) and (wide.positions[0, 5:] == -1).all()
    with pytest.raises(ValueError, match=r"\[E164\]"):
        index.combine([query], dense_scores, dense_positions, lambda q, p: [0.0], 0.5)


def test_union_and_ranking_helpers():
    positions, (values,) = union_positions(np.array([[3, 1, -1], [2, -1, -1]]),
                                           np.array([[1, 4], [2, -1]]),
                                           (np.array([[0.3, 0.1, -np.inf], [0.2, -np.inf,
                                                                            -np.inf]]),
                                            np.array([[9.0, 0.4], [9.0, -np.inf]])))
    assert positions.tolist() == [[3, 1, 4], [2, -1, -1]]
    assert np.allclose(values, [[0.3, 0.1, 0.4], [0.2, -np.inf, -np.inf]])
    ranked = rank_combined(np.array([[0.5, 0.4, -np.inf]]), np.array([[0.0, 0.2, -np.inf]]),
                           np.array([[7, 8, -1]]), weight=1.0)
    assert ranked.positions.tolist() == [[8, 7, -1]]
    assert ranked.scores[0, 0] == pytest.approx(0.6) and ranked.scores[0, 2] == -np.inf


def test_best_weight_picks_the_weight_that_is_right():
    # mention 0: dense is right, sparse wrong (right while λ < 0.6); mention 1: sparse fixes
    # dense when λ > 0.4; mention 2: needs λ > 1; mention 3: both agree
    dense = np.array([[0.9, 0.6], [0.7, 0.6], [0.9, 0.1], [0.8, 0.2]], dtype="float32")
    lexical = np.array([[0.2, 0.7], [0.2, 0.45], [0.1, 0.9], [0.9, 0.1]], dtype="float32")
    positions = np.array([[0, 1], [2, 3], [4, 5], [6, 7]])
    gold = np.array([[0, -1], [9, 3], [5, -1], [6, -1]])  # composite: any one counts
    weight, r1 = best_weight(dense, lexical, positions, gold)
    assert weight == 0.5
    grid = {0.0: 0.5, 0.1: 0.5, 0.25: 0.5, 0.5: 0.75, 0.75: 0.5, 1.0: 0.5, 1.5: 0.75,
            2.0: 0.75, 3.0: 0.75}
    # the edge (3.0) ties the best: six doublings past it, none higher, so 0.5 stays
    assert r1 == {**grid, **{3.0 * 2 ** i: 0.75 for i in range(1, 7)}}
    # a tie goes to the first weight of the grid
    assert best_weight(dense, lexical, positions, gold, grid=(3.0, 0.5))[0] == 3.0
    assert best_weight(dense, lexical, positions, gold[:, 0], grid=(0.0, 0.5))[1] == {
        0.0: 0.5, 0.5: 0.5, 1.0: 0.25}  # the edge ties: one doubling, and R@1 falls
    with pytest.raises(ValueError, match=r"\[E164\]"):
        best_weight(dense, lexical[:2], positions, gold)


def test_best_weight_searches_past_the_grid_edge_for_large_dense_scores():
    # dot products 20x a cosine: sparse fixes mention 1 only once λ > 10 (past the grid),
    # and mention 0 stays right until λ > 40
    dense = 20 * np.array([[0.9, 0.6], [0.7, 0.6], [0.8, 0.2]], dtype="float32")
    lexical = np.array([[0.2, 0.4], [0.2, 0.45], [0.9, 0.1]], dtype="float32")
    positions = np.array([[0, 1], [2, 3], [4, 5]])
    gold = np.array([0, 3, 4])
    weight, r1 = best_weight(dense, lexical, positions, gold)
    assert weight == 12.0 and r1[12.0] == 1.0
    assert r1[0.0] == r1[3.0] == r1[6.0] == pytest.approx(2 / 3)  # flat up to the edge
    assert r1[24.0] == 1.0 and r1[48.0] == pytest.approx(2 / 3)  # stopped after a fall
    assert 96.0 not in r1
    assert best_weight(dense, lexical, positions, gold, max_doublings=0)[0] == 0.0


@pytest.mark.parametrize("settings", [{"analyzer": "word"}, {"ngram_range": (3, 2)},
                                      {"ngram_range": (0, 2)}, {"lowercase": "yes"}])
def test_bad_settings_are_coded_errors(settings):
    with pytest.raises(ValueError, match=r"\[E160\]"):
        LexicalSettings(**settings)


def test_bad_names_are_coded_errors():
    with pytest.raises(ValueError, match=r"\[E161\]"):
        LexicalIndex([], np.zeros(0, dtype="int64"))
    with pytest.raises(ValueError, match=r"\[E161\]"):
        LexicalIndex(["", ""], np.array([0, 1]))
    with pytest.raises(ValueError, match=r"\[E162\]"):
        LexicalIndex(["a", "b"], np.array([0]))
    with pytest.raises(ValueError, match=r"\[E162\]"):
        LexicalIndex(["a", "b"], np.array([0, -1]))
    with pytest.raises(ValueError, match=r"\[E162\]"):
        LexicalIndex(["a", "b"], np.array([0, 3]), n_entities=2)
