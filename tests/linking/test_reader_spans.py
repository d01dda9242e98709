"""Tests for the reader's span decoding (eq. 7–11) and the merging of linked spans."""

from __future__ import annotations

import math

import numpy as np
import pytest

from spacy_arboel.linking.reader_spans import (
    LinkedSpan,
    SpanPrediction,
    candidates_by_span,
    decode_spans,
    resolve_spans,
)

K, L, OFFSET, N = 2, 10, 1, 5  # [CLS] at 0, passage pieces at 1..5, entity text/padding 6..9
BIG = 10.0


def _softmax_share(big: float, n_others: int) -> float:
    """The softmax probability of one logit ``big`` among ``n_others`` zero logits."""
    return math.exp(big) / (math.exp(big) + n_others)


def _logits() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Candidate 0 points at pieces 1..2; candidate 1 points at [CLS] (no span)."""
    start, end = np.zeros((K, L)), np.zeros((K, L))
    start[0, OFFSET + 1] = BIG
    end[0, OFFSET + 2] = BIG
    start[1, 0] = BIG
    end[1, 0] = BIG
    # huge logits on the entity text and padding: they must get no probability mass
    start[:, OFFSET + N :] = 50.0
    end[:, OFFSET + N :] = 50.0
    return start, end, np.array([3.0, 0.0])


def _expected_best() -> float:
    p1 = p2 = _softmax_share(BIG, N)  # [CLS] + 5 pieces are allowed: 5 zero logits besides
    return p1 * p2 * _softmax_share(3.0, 1)


def test_strong_two_piece_span_has_eq11_score():
    predictions = decode_spans(*_logits(), n_pieces=N, offset=OFFSET)
    assert predictions[0].candidate == 0
    assert (predictions[0].first, predictions[0].last) == (1, 2)
    assert predictions[0].score == pytest.approx(_expected_best(), rel=1e-9)
    assert predictions[0].score > 0.03
    assert len(predictions) == 1  # every other span is far below 0.03


def test_candidate_pointing_at_cls_yields_nothing():
    predictions = decode_spans(*_logits(), n_pieces=N, offset=OFFSET)
    assert all(p.candidate != 1 for p in predictions)
    assert all(p.candidate != 1 for p in decode_spans(*_logits(), N, OFFSET, threshold=1e-6))


def test_masked_positions_get_no_mass():
    start, end, rank = _logits()
    reference = decode_spans(start, end, rank, N, OFFSET, threshold=-1.0)
    start[:, OFFSET + N :] = np.array([-5.0, 100.0, 7.0, 0.0])
    end[:, OFFSET + N :] = -np.inf
    changed = decode_spans(start, end, rank, N, OFFSET, threshold=-1.0)
    assert changed == reference
    # with the masked positions ignored, each candidate's span scores plus the [CLS] terms
    # sum to p_rank: all p1/p2 mass is on [CLS] and the passage
    full = decode_spans(start, end, rank, N, OFFSET, threshold=-1.0, max_span_length=N)
    p_rank = np.exp(rank) / np.exp(rank).sum()
    for j in range(K):
        p1 = np.exp(start[j, : OFFSET + N]) / np.exp(start[j, : OFFSET + N]).sum()
        p2 = np.exp(end[j, : OFFSET + N]) / np.exp(end[j, : OFFSET + N]).sum()
        expected = sum(
            p1[OFFSET + x] * p2[OFFSET + y] * p_rank[j]
            for x in range(N)
            for y in range(x, N)
        )
        got = sum(p.score for p in full if p.candidate == j)
        assert got == pytest.approx(expected, rel=1e-9)


def test_only_valid_spans_inside_the_passage():
    start, end, rank = _logits()
    start[0, OFFSET + N - 1] = 20.0  # last piece of the passage
    end[0, OFFSET + N + 1] = 20.0  # inside the entity text: crosses the passage end
    start[1, OFFSET + 3] = 20.0  # end before start
    end[1, OFFSET + 1] = 20.0
    for max_len in (1, 2, 16):
        predictions = decode_spans(start, end, rank, N, OFFSET, threshold=-1.0,
                                   max_span_length=max_len)
        per_candidate = sum(min(max_len, N - x) for x in range(N))
        assert len(predictions) == K * per_candidate
        assert all(0 <= p.first <= p.last < N for p in predictions)
        assert all(p.last - p.first < max_len for p in predictions)
    predictions = decode_spans(start, end, rank, N, OFFSET)
    assert not any(p.candidate == 1 and (p.first, p.last) == (3, 1) for p in predictions)
    assert all(p.last < N for p in predictions)


def test_max_span_length():
    start, end, rank = np.zeros((1, L)), np.zeros((1, L)), np.zeros(1)
    start[0, OFFSET] = BIG
    end[0, OFFSET + 4] = BIG  # a 5-piece span
    assert decode_spans(start, end, rank, N, OFFSET, max_span_length=4) == []
    [prediction] = decode_spans(start, end, rank, N, OFFSET, max_span_length=5)
    assert (prediction.first, prediction.last) == (0, 4)
    assert prediction.score == pytest.approx(_softmax_share(BIG, N) ** 2)


def test_threshold_is_strict_and_respected():
    score = _expected_best()
    assert len(decode_spans(*_logits(), N, OFFSET, threshold=score * 0.999)) == 1
    assert decode_spans(*_logits(), N, OFFSET, threshold=score * 1.001) == []
    [best] = decode_spans(*_logits(), N, OFFSET)
    assert decode_spans(*_logits(), N, OFFSET, threshold=best.score) == []  # P > thr, strictly
    predictions = decode_spans(*_logits(), N, OFFSET, threshold=1e-5)
    assert len(predictions) > 1
    assert all(p.score > 1e-5 for p in predictions)
    assert [p.score for p in predictions] == sorted((p.score for p in predictions), reverse=True)


def test_ties_are_deterministic_and_types_plain():
    start, end, rank = np.zeros((2, L)), np.zeros((2, L)), np.zeros(2)
    predictions = decode_spans(start, end, rank, N, OFFSET, threshold=-1.0, max_span_length=2)
    keys = [(p.candidate, p.first, p.last) for p in predictions if p.last == p.first]
    assert keys == sorted(keys)
    first = predictions[0]
    assert isinstance(first, SpanPrediction)
    assert type(first.candidate) is int and type(first.score) is float


def test_bad_shapes_and_offsets():
    start, end, rank = _logits()
    with pytest.raises(ValueError):
        decode_spans(start, end, rank, N, offset=0)  # would overlap [CLS]
    with pytest.raises(ValueError):
        decode_spans(start, end, rank, L, OFFSET)  # passage past the last position
    with pytest.raises(ValueError):
        decode_spans(start, end[:, :-1], rank, N, OFFSET)
    with pytest.raises(ValueError):
        decode_spans(start, end, rank[:1], N, OFFSET)
    assert decode_spans(start, end, rank, 0, OFFSET) == []


def _span(start: int, end: int, kb_id: str, score: float) -> LinkedSpan:
    return LinkedSpan(start, end, kb_id, score)


def test_resolve_merges_duplicates_keeping_max():
    spans = [_span(0, 5, "A", 0.2), _span(0, 5, "A", 0.7), _span(0, 5, "A", 0.4)]
    assert resolve_spans(spans) == [_span(0, 5, "A", 0.7)]


@pytest.mark.parametrize("outer_wins", [True, False])
def test_resolve_nested_kwazulu(outer_wins: bool):
    outer = _span(0, 13, "KwaZulu-Natal", 0.8 if outer_wins else 0.3)  # "kwazulu-natal"
    inner = _span(0, 7, "KwaZulu", 0.3 if outer_wins else 0.8)  # "kwazulu"
    assert resolve_spans([inner, outer]) == [outer if outer_wins else inner]
    assert resolve_spans([outer, inner]) == [outer if outer_wins else inner]


def test_resolve_crossing_and_disjoint():
    left, crossing, far = _span(0, 10, "A", 0.5), _span(5, 15, "B", 0.6), _span(20, 25, "C", 0.1)
    assert resolve_spans([left, crossing, far]) == [crossing, far]
    touching = _span(15, 20, "D", 0.05)  # end-exclusive: touching spans do not overlap
    assert resolve_spans([far, touching, left]) == [left, touching, far]


def test_resolve_same_span_different_ids_keeps_best():
    assert resolve_spans([_span(3, 8, "A", 0.4), _span(3, 8, "B", 0.6)]) == [_span(3, 8, "B", 0.6)]


def test_resolve_ties_are_deterministic():
    longer, shorter = _span(0, 10, "A", 0.5), _span(0, 6, "A", 0.5)
    assert resolve_spans([shorter, longer]) == [longer] == resolve_spans([longer, shorter])
    early, late = _span(0, 5, "B", 0.5), _span(3, 8, "A", 0.5)
    assert resolve_spans([late, early]) == [early]
    a, b = _span(0, 5, "B", 0.5), _span(0, 5, "A", 0.5)
    assert resolve_spans([a, b]) == [b] == resolve_spans([b, a])
    assert resolve_spans([]) == []


def test_candidates_by_span():
    spans = [
        _span(0, 5, "A", 0.2), _span(0, 5, "B", 0.5), _span(0, 5, "A", 0.6),
        _span(0, 5, "C", 0.5), _span(6, 9, "A", 0.1),
    ]
    assert candidates_by_span(spans) == {
        (0, 5): [("A", 0.6), ("B", 0.5), ("C", 0.5)],
        (6, 9): [("A", 0.1)],
    }
