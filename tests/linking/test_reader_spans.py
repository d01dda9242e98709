"""Tests for the reader's span decoding (eq. 7–11) and the merging of linked spans."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from spacy_arboel.linking import reader_spans
from spacy_arboel.linking.reader_spans import (
    LinkedSpan,
    SpanPrediction,
    candidates_by_span,
    decode_spans,
    overlapping_none,
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


def _crosses(a: LinkedSpan, b: LinkedSpan) -> bool:
    return a.start_char < b.end_char and b.start_char < a.end_char


def _quadratic_resolve(spans: list[LinkedSpan]) -> list[LinkedSpan]:
    """The greedy as first written: each span compared with every span kept so far."""
    best: dict[tuple[int, int, str], LinkedSpan] = {}
    for span in spans:
        key = (span.start_char, span.end_char, span.kb_id)
        if key not in best or span.score > best[key].score:
            best[key] = span
    ranked = sorted(best.values(), key=lambda s: (-s.score, s.start_char - s.end_char,
                                                  s.start_char, s.kb_id))
    kept: list[LinkedSpan] = []
    for span in ranked:
        if not any(_crosses(span, other) for other in kept):
            kept.append(span)
    return sorted(kept, key=lambda s: (s.start_char, s.end_char))


def _random_spans(rng: random.Random, n: int, width: int) -> list[LinkedSpan]:
    """``n`` spans (empty ones too) within ``width`` characters: nested, crossing, touching,
    repeated with other scores, few distinct scores and ids (ties everywhere)."""
    spans = []
    for _ in range(n):
        if spans and rng.random() < 0.2:  # a duplicate key, its score redrawn or not
            old = rng.choice(spans)
            score = old.score if rng.random() < 0.5 else rng.choice((0.1, 0.5, 0.9))
            spans.append(_span(old.start_char, old.end_char, old.kb_id, score))
            continue
        start = rng.randrange(width)
        end = min(width, start + rng.choice((0, 1, 1, 2, 3, 5, 8, 20)))
        spans.append(_span(start, end, rng.choice("ABC"), rng.choice((0.1, 0.5, 0.5, 0.9))))
    return spans


def test_resolve_matches_the_quadratic_greedy():
    rng = random.Random(59)
    for trial in range(600):
        spans = _random_spans(rng, rng.randrange(0, 60), rng.choice((5, 20, 100)))
        assert resolve_spans(spans) == _quadratic_resolve(spans), (trial, spans)
    for _ in range(5):  # larger sets
        spans = _random_spans(rng, 2000, 3000)
        assert resolve_spans(spans) == _quadratic_resolve(spans)


def test_overlapping_none_matches_the_pairwise_test():
    rng = random.Random(6)
    for trial in range(400):
        width = rng.choice((5, 30))
        spans = _random_spans(rng, rng.randrange(0, 30), width)
        others = resolve_spans(_random_spans(rng, rng.randrange(0, 30), width))
        if rng.random() < 0.3:  # any spans, not only resolved (disjoint) ones
            others = _random_spans(rng, rng.randrange(0, 30), width)
        expected = [s for s in spans if not any(_crosses(s, h) for h in others)]
        assert overlapping_none(spans, others) == expected, (trial, spans, others)


_OVERLAPS = reader_spans._overlaps


def _comparisons(monkeypatch, spans: list[LinkedSpan]) -> int:
    """How many overlap tests ``resolve_spans`` makes on ``spans``."""
    calls = 0

    def counted(a: LinkedSpan, b: LinkedSpan) -> bool:
        nonlocal calls
        calls += 1
        return _OVERLAPS(a, b)

    monkeypatch.setattr(reader_spans, "_overlaps", counted)
    resolve_spans(spans)
    return calls


def _document_spans(n_words: int) -> list[LinkedSpan]:
    """A document's predictions: every word linked (disjoint, all kept) and, per word, a
    lower-scored span reaching over the next word (dropped)."""
    rng = random.Random(n_words)
    words = [_span(10 * i, 10 * i + 6, f"E{i % 7}", rng.uniform(0.5, 1.0))
             for i in range(n_words)]
    over = [_span(10 * i + 3, 10 * i + 16, "X", rng.uniform(0.1, 0.4)) for i in range(n_words)]
    spans = words + over
    rng.shuffle(spans)
    return spans


def test_resolve_compares_each_span_with_one_kept_span(monkeypatch):
    # the quadratic greedy compares a kept span with every span kept before it: n²/2 tests
    n = 300
    small, large = _document_spans(n), _document_spans(4 * n)
    small_count = _comparisons(monkeypatch, small)
    large_count = _comparisons(monkeypatch, large)
    assert small_count <= len(small) and large_count <= len(large)
    assert large_count <= 4 * small_count * math.log2(4 * n) / math.log2(n)
