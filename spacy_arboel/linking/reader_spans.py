"""Decoding the reader's outputs into linked spans (BEER² §2.1.2, eq. 7–11).

numpy only: the reader gives, for each (passage, candidate e_j) pair, start and end logits over
the pair's positions and one rank logit per candidate; this module turns them into scored
(candidate, span) pairs and resolves the spans predicted by overlapping passages.
"""

from __future__ import annotations

import math
import re
from bisect import bisect_left
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from itertools import accumulate

import numpy as np
from scipy.special import softmax


@dataclass(frozen=True)
class SpanPrediction:
    """One reader prediction: a candidate and a wordpiece span of the passage.

    candidate: index of the candidate within its passage's candidate list.
    first: first wordpiece index within the passage (0-based, not counting [CLS]).
    last: last wordpiece index, inclusive.
    score: P(e_j, x, y) of eq. 11.
    """

    candidate: int
    first: int
    last: int
    score: float


@dataclass(frozen=True)
class LinkedSpan:
    """A character span of the document linked to a KB id with the reader's score."""

    start_char: int
    end_char: int
    kb_id: str
    score: float


def _masked_softmax(logits: np.ndarray, allowed: np.ndarray) -> np.ndarray:
    """Softmax over the last axis restricted to ``allowed`` positions (0 elsewhere)."""
    return softmax(np.where(allowed, logits, -np.inf), axis=-1)


def decode_spans(
    start_logits: np.ndarray,
    end_logits: np.ndarray,
    rank_logits: np.ndarray,
    n_pieces: int,
    offset: int,
    threshold: float = 0.03,
    max_span_length: int = 16,
) -> list[SpanPrediction]:
    """Every (candidate, span) whose P of eq. 11 exceeds ``threshold``, best first.

    ``start_logits``/``end_logits``: (K, L) over the pair positions; ``rank_logits``: (K,).
    p1/p2 (eq. 7–8) are softmaxes over position 0 ([CLS], "no span") and the passage's pieces
    at ``offset .. offset + n_pieces - 1`` only (entity text and padding get no mass);
    p_rank (eq. 10) a softmax over the K candidates; P = p1[x]·p2[y]·p_rank[j] (eq. 9, 11).
    Spans have x <= y and y - x < ``max_span_length``; [CLS] is never returned. Ties are
    broken by candidate, then first, then last piece.
    """
    start = np.asarray(start_logits, dtype=np.float64)
    end = np.asarray(end_logits, dtype=np.float64)
    rank = np.asarray(rank_logits, dtype=np.float64)
    if start.ndim != 2 or start.shape != end.shape or rank.shape != start.shape[:1]:
        raise ValueError(
            f"expected start/end logits (K, L) and rank logits (K,), got {start.shape}, "
            f"{end.shape} and {rank.shape}"
        )
    n_candidates, length = start.shape
    if n_pieces < 0 or offset < 1 or offset + n_pieces > length:
        raise ValueError(
            f"passage pieces {offset}..{offset + n_pieces - 1} do not fit positions 1..{length - 1}"
        )
    if n_candidates == 0 or n_pieces == 0 or max_span_length < 1:
        return []
    allowed = np.zeros(length, dtype=bool)
    allowed[0] = True
    allowed[offset : offset + n_pieces] = True
    passage = slice(offset, offset + n_pieces)
    p1 = _masked_softmax(start, allowed)[:, passage]  # (K, n)
    p2 = _masked_softmax(end, allowed)[:, passage]  # (K, n)
    p_rank = softmax(rank, axis=-1)  # (K,)
    scores = p1[:, :, None] * p2[:, None, :] * p_rank[:, None, None]  # (K, n, n)
    width = np.arange(n_pieces)[None, :] - np.arange(n_pieces)[:, None]  # y - x
    valid = (width >= 0) & (width < max_span_length)
    keep = valid[None, :, :] & (scores > threshold)
    candidates, firsts, lasts = np.nonzero(keep)  # lexicographic order
    kept = scores[candidates, firsts, lasts]
    order = np.argsort(-kept, kind="stable")
    return [
        SpanPrediction(int(candidates[i]), int(firsts[i]), int(lasts[i]), float(kept[i]))
        for i in order
    ]


def _overlaps(a: LinkedSpan, b: LinkedSpan) -> bool:
    return a.start_char < b.end_char and b.start_char < a.end_char


def _best_by_key(spans: Iterable[LinkedSpan]) -> dict[tuple[int, int, str], LinkedSpan]:
    """One span per (start, end, kb_id): the highest-scoring one."""
    best: dict[tuple[int, int, str], LinkedSpan] = {}
    for span in spans:
        key = (span.start_char, span.end_char, span.kb_id)
        if key not in best or span.score > best[key].score:
            best[key] = span
    return best


def _priority(span: LinkedSpan) -> tuple[float, int, int, str]:
    """Greedy order: higher score, then longer span, then earlier start, then kb_id."""
    return (-span.score, span.start_char - span.end_char, span.start_char, span.kb_id)


WORD_OR_SIGN = re.compile(r"\w+|[^\w\s]")


def longest_first(text: str) -> Callable[[LinkedSpan], tuple[int, int, float, str]]:
    """Greedy order of dictionary spans of ``text``: more words (a word or sign: spaCy's
    tokens, near enough), then earlier start, then higher score, then kb_id (spaCy's
    ``filter_spans``: of nested names the longest is the mention)."""
    def priority(span: LinkedSpan) -> tuple[int, int, float, str]:
        words = len(WORD_OR_SIGN.findall(text, span.start_char, span.end_char))
        return (-words, span.start_char, -span.score, span.kb_id)

    return priority


def best_per_span(spans: Iterable[LinkedSpan]) -> list[LinkedSpan]:
    """One link per (start, end): the highest-scoring (ties: kb_id), sorted by offsets."""
    best: dict[tuple[int, int], LinkedSpan] = {}
    for span in spans:
        key = (span.start_char, span.end_char)
        old = best.get(key)
        if old is None or (-span.score, span.kb_id) < (-old.score, old.kb_id):
            best[key] = span
    return [best[key] for key in sorted(best)]


class _FurthestEnd:
    """Spans added one by one, asked for the one ending last among those starting before a
    position: a Fenwick tree of maxima over the sorted distinct ``starts`` the spans may have
    (O(log n) per call)."""

    def __init__(self, starts: Iterable[int]) -> None:
        self.starts = sorted(set(starts))
        self.ends: list[float] = [-math.inf] * (len(self.starts) + 1)  # a node's furthest end
        self.spans: list[LinkedSpan | None] = [None] * (len(self.starts) + 1)  # and its span

    def add(self, span: LinkedSpan) -> None:
        ends, spans, end = self.ends, self.spans, span.end_char
        i = bisect_left(self.starts, span.start_char) + 1
        while i < len(ends):
            if ends[i] < end:
                ends[i], spans[i] = end, span
            i += i & -i

    def before(self, end_char: int) -> LinkedSpan | None:
        """Of the added spans with ``start_char < end_char``, one ending last (None: none)."""
        ends = self.ends
        i = bisect_left(self.starts, end_char)
        furthest, at = -math.inf, 0
        while i:
            if ends[i] > furthest:
                furthest, at = ends[i], i
            i &= i - 1
        return self.spans[at]


def resolve_spans(spans: Iterable[LinkedSpan],
                  priority: Callable[[LinkedSpan], tuple] = _priority) -> list[LinkedSpan]:
    """Merge the predictions of overlapping passages and resolve conflicting spans.

    Duplicates of (start, end, kb_id) keep their highest score; then, greedily by
    ``priority`` (default: score, ties: longer span, earlier start, kb_id), a span is kept
    when it overlaps no kept span, so of nested or crossing spans (BEER²'s "kwazulu-natal"
    vs "kwazulu") the best scored wins (``longest_first``: the longest).
    Returns the kept spans sorted by start_char. O(n log n): a span overlaps some kept span
    exactly when it overlaps the one ending last among those starting before its end, the
    only one compared.
    """
    ranked = sorted(_best_by_key(spans).values(), key=priority)
    index = _FurthestEnd(span.start_char for span in ranked)
    kept: list[LinkedSpan] = []
    for span in ranked:
        other = index.before(span.end_char)
        if other is None or not _overlaps(span, other):
            kept.append(span)
            index.add(span)
    return sorted(kept, key=lambda s: (s.start_char, s.end_char))


def overlapping_none(spans: Iterable[LinkedSpan], others: Sequence[LinkedSpan]
                     ) -> list[LinkedSpan]:
    """The ``spans`` that overlap none of ``others``, in their order (O((n + m) log m))."""
    ordered = sorted(others, key=lambda s: s.start_char)
    starts = [s.start_char for s in ordered]
    reach = list(accumulate((s.end_char for s in ordered), max))  # furthest end so far
    out = []
    for span in spans:
        before = bisect_left(starts, span.end_char)  # the others starting before its end
        if not before or reach[before - 1] <= span.start_char:
            out.append(span)
    return out


def candidates_by_span(
    spans: Iterable[LinkedSpan],
) -> dict[tuple[int, int], list[tuple[str, float]]]:
    """For each (start_char, end_char), every kb_id predicted for it with its best score,
    best first (ties by kb_id)."""
    grouped: dict[tuple[int, int], list[tuple[str, float]]] = {}
    for span in _best_by_key(spans).values():
        grouped.setdefault((span.start_char, span.end_char), []).append((span.kb_id, span.score))
    return {
        key: sorted(ids, key=lambda item: (-item[1], item[0])) for key, ids in grouped.items()
    }


@dataclass
class DocLinks:
    """What a reader found in one text: linked spans (no two overlapping), each
    span's candidates, each passage's ``(start_char, end_char, [(kb_id, p_rank), …])``, and
    ``all_spans``: every linked span before overlaps were resolved, nested and crossing ones
    too (one link per span, the best)."""

    spans: list[LinkedSpan] = field(default_factory=list)
    candidates: dict[tuple[int, int], list[tuple[str, float]]] = field(default_factory=dict)
    passages: list[tuple[int, int, list[tuple[str, float]]]] = field(default_factory=list)
    all_spans: list[LinkedSpan] = field(default_factory=list)
