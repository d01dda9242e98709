"""Entity-linking metrics: recall@k of the ranked candidates and accuracy of the chosen id.

The metric code knows nothing of spaCy: it works on :class:`MentionOutcome` records, one per
gold mention. :func:`mention_outcomes_from_examples` builds them from spaCy ``Example`` objects
(spaCy is only touched through the objects passed in).

Conventions: a gold ``kb_id_`` may join several ids with ``"|"`` and a prediction is correct if
it equals any of them; mentions without a gold id are counted apart (``no_gold_id``); a
mention is *in KB* when one of its gold ids is in the KB and *seen* when one of its gold ids
occurs as a gold id in the training corpus.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..data.ids import gold_ids
from ..extensions import CANDIDATES_EXT
from ..kb.knowledge_base import NIL_ID

KS: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64)
CALIBRATION_BINS = 10

KbIds = Container[str] | Callable[[str], bool]


def f1_score(precision, recall):
    """The harmonic mean of precision and recall, 0 where both are 0 (scalars or arrays)."""
    p, r = np.asarray(precision, dtype=float), np.asarray(recall, dtype=float)
    total = p + r
    f1 = np.divide(2 * p * r, total, out=np.zeros_like(total), where=total > 0)
    return float(f1) if f1.ndim == 0 else f1


def prf(tp, predicted, actual):
    """Precision (``tp / predicted``, 0 where nothing is predicted), recall (``tp / actual``, 0
    where nothing is to find) and F1, for scalars or arrays of counts: the one P/R/F of the
    metrics (end-to-end linking, NIL detection, coreference)."""
    tp, predicted, actual = (np.asarray(x, dtype=float) for x in (tp, predicted, actual))
    precision = np.divide(tp, predicted, out=np.zeros(np.broadcast(tp, predicted).shape),
                          where=predicted > 0)
    recall = np.divide(tp, actual, out=np.zeros(np.broadcast(tp, actual).shape),
                       where=actual > 0)
    f1 = f1_score(precision, recall)
    if precision.ndim == 0:
        return float(precision), float(recall), float(f1)
    return precision, recall, f1


@dataclass
class MentionOutcome:
    """What the linker did for one gold mention.

    gold_ids: the gold ids (empty when the mention has no gold id).
    candidates: the retrieved KB ids, best first.
    predicted: the chosen id, the NIL id, or "" when no predicted span matched the mention.
    label: the gold entity label (type).
    in_kb: whether at least one gold id is in the KB.
    seen: whether at least one gold id occurs in the training corpus (None: unknown).
    confidence: the first candidate's score (None: no candidate, or no score).
    """

    gold_ids: tuple[str, ...]
    candidates: list[str]
    predicted: str
    label: str = ""
    in_kb: bool = True
    seen: bool | None = None
    confidence: float | None = None


def _group_metrics(outcomes: Sequence[MentionOutcome], ks: Sequence[int],
                   nil_id: str = NIL_ID) -> dict[str, Any]:
    """n, recall@k for each k (of the candidates, whatever was linked), accuracy (of the
    links: NIL is wrong in the KB) and the share abstained (NIL); out-of-KB mentions are
    never correct."""
    n = len(outcomes)
    result: dict[str, Any] = {"n": n}
    for k in ks:
        hits = sum(
            1 for o in outcomes if o.in_kb and any(c in o.gold_ids for c in o.candidates[:k])
        )
        result[f"recall@{k}"] = hits / n if n else None
    correct = sum(1 for o in outcomes if o.in_kb and o.predicted in o.gold_ids)
    result["accuracy"] = correct / n if n else None
    result["abstained"] = sum(o.predicted == nil_id for o in outcomes) / n if n else None
    return result


def linking_metrics(
    outcomes: Iterable[MentionOutcome], ks: Sequence[int] = KS, *, nil_id: str = NIL_ID
) -> dict[str, Any]:
    """Recall@k and accuracy overall, in and out of the KB, seen/unseen and per entity type.

    Mentions without a gold id are excluded from every group and only counted
    (``no_gold_id``). Empty groups have ``n == 0`` and ``None`` for every metric.
    """
    ks = sorted(set(ks))
    scored: list[MentionOutcome] = []
    no_gold = 0
    for outcome in outcomes:
        if outcome.gold_ids:
            scored.append(outcome)
        else:
            no_gold += 1
    in_kb = [o for o in scored if o.in_kb]
    out_of_kb = [o for o in scored if not o.in_kb]
    n_out = len(out_of_kb)
    n_nil = sum(1 for o in out_of_kb if o.predicted == nil_id)
    labels = sorted({o.label for o in in_kb})
    return {
        "all": _group_metrics(scored, ks, nil_id),
        "in_kb": _group_metrics(in_kb, ks, nil_id),
        "out_of_kb": {"n": n_out, "nil_accuracy": n_nil / n_out if n_out else None},
        "seen": _group_metrics([o for o in in_kb if o.seen is True], ks, nil_id),
        "unseen": _group_metrics([o for o in in_kb if o.seen is False], ks, nil_id),
        "per_type": {
            label: _group_metrics([o for o in in_kb if o.label == label], ks, nil_id)
            for label in labels
        },
        "no_gold_id": no_gold,
        "calibration": calibration(scored),
    }


def calibration(outcomes: Sequence[MentionOutcome], bins: int = CALIBRATION_BINS
                ) -> dict[str, Any]:
    """How well the first candidate's score reads as the chance that it is right: the
    reliability diagram's ``bins`` equal-width bins of [0, 1] (each with its mentions, mean
    score and share right) and the expected calibration error, ECE = sum over bins of
    n_b / n * |share right_b - mean score_b| (Guo et al., 2017), over the mentions with a
    scored candidate (``n``). Scores outside [0, 1] (a raw scale) are no probability: None."""
    scored = [o for o in outcomes if o.confidence is not None and o.candidates]
    if not scored or not all(0.0 <= o.confidence <= 1.0 for o in scored):
        return {"n": len(scored), "ece": None, "bins": []}
    confidence = np.array([o.confidence for o in scored])
    right = np.array([o.in_kb and o.candidates[0] in o.gold_ids for o in scored], dtype=float)
    which = np.minimum((confidence * bins).astype(int), bins - 1)
    table, ece = [], 0.0
    for b in range(bins):
        members = which == b
        n = int(members.sum())
        if not n:
            continue
        mean, share = float(confidence[members].mean()), float(right[members].mean())
        ece += n / len(scored) * abs(share - mean)
        table.append({"lower": b / bins, "upper": (b + 1) / bins, "n": n,
                      "confidence": round(mean, 4), "accuracy": round(share, 4)})
    return {"n": len(scored), "ece": round(ece, 4), "bins": table}


def kb_contains(kb_ids: KbIds | None) -> Callable[[str], bool]:
    if kb_ids is None:
        return lambda _id: True
    if callable(kb_ids):
        return kb_ids
    return lambda entity_id: entity_id in kb_ids


def _candidates(span: Any) -> list:
    """A predicted span's ranked candidates (``span._.kb_candidates``: ids or (id, score)
    pairs), or [] for no span or none."""
    if span is None or not span.has_extension(CANDIDATES_EXT):
        return []
    return getattr(span._, CANDIDATES_EXT) or []


def _first_score(candidates: list) -> float | None:
    """The first candidate's score, or None (no candidate, or ids alone)."""
    if not candidates or isinstance(candidates[0], str):
        return None
    return float(candidates[0][1])


def mention_outcomes_from_examples(
    examples: Iterable[Any],
    kb_ids: KbIds | None = None,
    seen_ids: Container[str] | None = None,
    nil_id: str = NIL_ID,
) -> list[MentionOutcome]:
    """One :class:`MentionOutcome` per gold entity of spaCy ``Example`` objects.

    Gold spans (``example.reference.ents``) are matched to predicted spans
    (``example.predicted.ents``) by exact character offsets; an unmatched gold span gets no
    candidates and the prediction "". ``kb_ids`` is a container of KB ids or a predicate
    (``None``: every id is in the KB); ``seen_ids`` the gold ids of the training corpus
    (``None``: seen is unknown). A matched predicted span with an empty ``kb_id_`` (the
    linker abstained) counts as predicting ``nil_id``.
    """
    in_kb = kb_contains(kb_ids)
    outcomes: list[MentionOutcome] = []
    for example in examples:
        predicted = {(s.start_char, s.end_char): s for s in example.predicted.ents}
        for gold in example.reference.ents:
            ids = gold_ids(gold.kb_id_)
            span = predicted.get((gold.start_char, gold.end_char))
            ranked = _candidates(span)
            outcomes.append(
                MentionOutcome(
                    gold_ids=ids,
                    candidates=[c if isinstance(c, str) else str(c[0]) for c in ranked],
                    predicted="" if span is None else span.kb_id_ or nil_id,
                    label=gold.label_,
                    in_kb=any(in_kb(i) for i in ids),
                    seen=None if seen_ids is None else any(i in seen_ids for i in ids),
                    confidence=_first_score(ranked),
                )
            )
    return outcomes
