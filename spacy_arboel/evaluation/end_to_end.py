"""A spaCy scorer for end-to-end linking: InKB micro P/R/F1 and the retriever's recall@K.

Strong matching (BEER² §3.3): a predicted entity is right only when its character span is
exactly a gold span and its ``kb_id_`` is one of that span's gold ids.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from functools import partial
from typing import Any

import spacy
from spacy.tokens import Doc, Span
from spacy.training import Example

from ..data.ids import gold_ids
from ..data.pubtator import NO_ID
from ..extensions import PASSAGE_CANDIDATES_EXT, register_extensions
from ..kb.knowledge_base import NIL_ID
from ..spacy_data.gold_ids import kb_of, resolve_examples
from .metrics import KbIds, f1_score, kb_contains

# (start_char, end_char, gold ids) of an InKB gold mention
Mention = tuple[int, int, tuple[str, ...]]


def _ratio(numerator: int, denominator: int) -> float | None:
    return numerator / denominator if denominator else None


def micro_prf(tp: int, n_predicted: int, n_gold: int
              ) -> tuple[float | None, float | None, float | None]:
    """InKB micro precision, recall and F1: ``None`` without gold mentions; P and F are 0,
    not ``None``, when nothing is predicted on gold mentions (spaCy's training loop drops a
    score weight for good when its first evaluation gives ``None``)."""
    recall = _ratio(tp, n_gold)
    precision = _ratio(tp, n_predicted) if n_predicted or not n_gold else 0.0
    f1 = None if precision is None or recall is None else f1_score(precision, recall)
    return precision, recall, f1


def linked_spans(doc: Doc, spans_key: str | None = None) -> Sequence[Span]:
    """The spans a doc links: ``doc.spans[spans_key]`` when the key is given and the doc has
    that group (nested and overlapping ones too), else ``doc.ents``."""
    if spans_key is not None and spans_key in doc.spans:
        return doc.spans[spans_key]
    return doc.ents


def inkb_gold_mentions(doc: Doc, in_kb: Callable[[str], bool], nil_id: str,
                       spans_key: str | None = None) -> list[Mention]:
    """The gold mentions of ``doc`` (``linked_spans``) with at least one gold id in the KB
    ("-1", "" and the NIL id are no ids)."""
    mentions = []
    for ent in linked_spans(doc, spans_key):
        ids = tuple(i for i in gold_ids(ent.kb_id_) if i not in (NO_ID, nil_id))
        if any(in_kb(i) for i in ids):
            mentions.append((ent.start_char, ent.end_char, ids))
    return mentions


def strong_matches(gold: Sequence[Mention], predicted: Iterable[tuple[int, int, str]]) -> int:
    """True positives: predictions whose span is a gold span and whose id is one of its gold
    ids, each gold mention matched at most once."""
    unmatched = list(gold)
    tp = 0
    for start, end, kb_id in predicted:
        for i, (g_start, g_end, ids) in enumerate(unmatched):
            if (g_start, g_end) == (start, end) and kb_id in ids:
                del unmatched[i]
                tp += 1
                break
    return tp


def _candidate_ids(candidates: Iterable[Any]) -> set[str]:
    return {c if isinstance(c, str) else str(c[0]) for c in candidates}


def retriever_hits(passages: Iterable[Any], gold: Sequence[Mention]) -> tuple[int, int, int]:
    """(mentions found, passages containing a gold mention, such passages with all found).

    A mention is found when it lies inside a passage whose candidates hold one of its gold
    ids; a passage counts when it fully contains at least one mention, and is a hit when its
    candidates hold a gold id of every mention fully inside it.
    """
    found = [False] * len(gold)
    n_passages = passage_hits = 0
    for p_start, p_end, candidates in passages:
        ids = _candidate_ids(candidates or [])
        inside = [i for i, (s, e, _) in enumerate(gold) if s >= p_start and e <= p_end]
        if not inside:
            continue
        n_passages += 1
        hit = [i for i in inside if ids.intersection(gold[i][2])]
        passage_hits += len(hit) == len(inside)
        for i in hit:
            found[i] = True
    return sum(found), n_passages, passage_hits


def score_end_to_end(
    examples: Iterable[Example],
    *,
    kb_ids: KbIds | None = None,
    nil_id: str = NIL_ID,
    spans_key: str | None = None,
    **_: Any,
) -> dict[str, Any]:
    """InKB micro P/R/F1 with strong matching (BEER² §3.3) and the retriever's recall@K.

    ``spans_key``: score the span group of that key (``arbo_linker``'s every linked span,
    nested ones too) instead of ``doc.ents``, on both sides where a doc has it.

    Keys ``e2e_inkb_p`` (tp over every non-NIL prediction), ``e2e_inkb_r`` (tp over InKB gold
    mentions), ``e2e_inkb_f``, ``e2e_retriever_mention_recall`` (over the InKB gold mentions
    of docs with ``doc._.passage_candidates``), ``e2e_retriever_passage_recall`` and the
    counts ``e2e_n_gold``, ``e2e_n_predicted``, ``e2e_tp``. ``kb_ids`` is a container of ids,
    a predicate or the KB (then gold ids that are alternate ids are resolved to their
    entity's first, ``spacy_data.gold_ids``; ``None``: every id is in the KB). Without gold
    mentions the scores are ``None``; without predictions on gold mentions P and F are 0.
    """
    register_extensions()
    examples, _ = resolve_examples(examples, kb_of(kb_ids))
    in_kb = kb_contains(kb_ids)
    n_gold = n_predicted = tp = 0
    retrieved = mentions_found = mentions_retrieved = passages = passage_hits = 0
    for eg in examples:
        gold = inkb_gold_mentions(eg.reference, in_kb, nil_id, spans_key)
        predicted = sorted({
            (ent.start_char, ent.end_char, ent.kb_id_)
            for ent in linked_spans(eg.predicted, spans_key)
            if ent.kb_id_ and ent.kb_id_ != nil_id
        })
        n_gold += len(gold)
        n_predicted += len(predicted)
        tp += strong_matches(gold, predicted)
        candidates = eg.predicted._.get(PASSAGE_CANDIDATES_EXT)
        if candidates is None:
            continue
        retrieved += 1
        found, n_passages, hits = retriever_hits(candidates, gold)
        mentions_found += found
        mentions_retrieved += len(gold)
        passages += n_passages
        passage_hits += hits
    precision, recall, f1 = micro_prf(tp, n_predicted, n_gold)
    return {
        "e2e_inkb_p": precision,
        "e2e_inkb_r": recall,
        "e2e_inkb_f": f1,
        "e2e_retriever_mention_recall": (
            _ratio(mentions_found, mentions_retrieved) if retrieved else None
        ),
        "e2e_retriever_passage_recall": _ratio(passage_hits, passages) if retrieved else None,
        "e2e_n_gold": n_gold,
        "e2e_n_predicted": n_predicted,
        "e2e_tp": tp,
    }


@spacy.registry.scorers("spacy_arboel.end_to_end_scorer.v1")
def make_end_to_end_scorer(spans_key: str | None = None) -> Callable[..., dict[str, Any]]:
    """The registered scorer factory (``spacy_arboel.end_to_end_scorer.v1``);
    ``spans_key``: score that span group instead of ``doc.ents`` (``score_end_to_end``)."""
    register_extensions()
    return partial(score_end_to_end, spans_key=spans_key) if spans_key else score_end_to_end
