"""Run a pipeline over raw text and measure end-to-end linking and its retriever."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np
from spacy.language import Language
from spacy.tokens import Doc
from spacy.training import Example

from ..factories import LINKER, find_components, pipeline_kb
from ..kb.knowledge_base import NIL_ID
from ..spacy_data.gold_ids import resolve_gold_docs
from .end_to_end import (
    inkb_gold_mentions,
    kb_contains,
    micro_prf,
    retriever_hits,
    score_end_to_end,
    strong_matches,
)
from .gold import check_gold

RECALL_KS = (1, 2, 4, 8, 16, 32, 64)
WARMUP_DOCS = 5


def evaluate_end_to_end(
    nlp: Language, gold_docs: Iterable[Doc], *, batch_size: int = 8,
    recall_ks: Sequence[int] = RECALL_KS, nil_id: str = NIL_ID,
) -> dict[str, Any]:
    """Link the raw text of ``gold_docs`` with ``nlp`` (any pipeline that sets ``doc.ents``
    with ``kb_id_``): InKB micro P/R/F1 with strong matching, and docs/s after an untimed
    warm-up. With an ``arbo_linker``, also its retriever's recall@K at mention and passage
    level for each K of ``recall_ks``: ``retriever_cls`` (the passage reader's [CLS]
    retrieval) or ``retriever_spans`` (the span reader: the top K of the candidates its
    proposed spans retrieved in each passage). Gold ids that are alternate ids of the KB
    are resolved first (``gold_ids_resolved`` counts them). Raises a ValueError when no
    gold mention has a gold id."""
    gold_docs = list(gold_docs)
    check_gold(gold_docs)
    kb = pipeline_kb(nlp)
    gold_docs, resolved = resolve_gold_docs(gold_docs, kb)
    examples = [Example(nlp.make_doc(g.text), g) for g in gold_docs]
    for _ in nlp.pipe([nlp.make_doc(g.text) for g in gold_docs[:WARMUP_DOCS]]):
        pass
    start = time.perf_counter()
    predicted = list(nlp.pipe([eg.predicted for eg in examples], batch_size=batch_size))
    seconds = time.perf_counter() - start
    examples = [Example(doc, eg.reference) for doc, eg in zip(predicted, examples, strict=True)]
    scores = score_end_to_end(examples, kb_ids=kb, nil_id=nil_id)
    metrics: dict[str, Any] = {
        "in_kb": {"precision": scores["e2e_inkb_p"], "recall": scores["e2e_inkb_r"],
                  "f1": scores["e2e_inkb_f"], "n_gold": scores["e2e_n_gold"],
                  "n_predicted": scores["e2e_n_predicted"], "tp": scores["e2e_tp"]},
        "retriever_final": {"mention_recall": scores["e2e_retriever_mention_recall"],
                            "passage_recall": scores["e2e_retriever_passage_recall"]},
        "gold_ids_resolved": resolved,
    }
    linkers = [name for name in find_components(nlp, LINKER) if name in nlp.pipe_names]
    linker = nlp.get_pipe(linkers[0]) if linkers else None
    # an untrained arbo_linker links dictionary proposals: its heads' retrieval is not used
    # (``retriever_final`` scores the candidates of what it linked)
    if linker is not None and getattr(linker, "uses_heads", True):
        # the passage reader retrieves with each passage's [CLS], the span reader per span
        key = "retriever_cls" if linker.model.attrs["reader"] == "passage" else "retriever_spans"
        metrics[key] = retriever_recall(linker, gold_docs, recall_ks, nil_id=nil_id)
    n_chars = sum(len(g.text) for g in gold_docs)
    metrics["timings"] = {"docs": len(gold_docs), "seconds": round(seconds, 2),
                          "docs_per_s": round(len(gold_docs) / seconds, 2) if seconds else None,
                          "chars_per_s": round(n_chars / seconds, 1) if seconds else None}
    return metrics


def retriever_recall(linker, gold_docs: Sequence[Doc], ks: Sequence[int], *,
                     nil_id: str = NIL_ID) -> dict[str, Any]:
    """Mention- and passage-level recall@K of the linker's retrieval (its reader's
    ``retrieve``), for each K."""
    linker.ensure_ready()
    retrieved = linker.reader.retrieve([g.text for g in gold_docs], max(ks))
    in_kb = kb_contains(linker.kb)
    golds = [inkb_gold_mentions(g, in_kb, nil_id) for g in gold_docs]
    out: dict[str, Any] = {}
    n_mentions = sum(len(g) for g in golds)
    for k in ks:
        found = passages = hits = 0
        for passages_of_doc, gold in zip(retrieved, golds, strict=True):
            f, n, h = retriever_hits([(s, e, ids[:k]) for s, e, ids in passages_of_doc], gold)
            found, passages, hits = found + f, passages + n, hits + h
        out[f"mention_recall@{k}"] = found / n_mentions if n_mentions else None
        out[f"passage_recall@{k}"] = hits / passages if passages else None
    return out


# p_span × p_rank of the passage reader is small, p(m)·p(e | m) of the span reader larger;
# steps of 0.05 from 0.3 up, where the span reader's best lies (0.4 to 0.6 on BC5CDR dev,
# with 1 point of dev F1 between neighbours 0.1 apart)
THRESHOLDS = (0.001, 0.002, 0.005, 0.01, 0.02, 0.03, 0.05, 0.1, 0.2, 0.3, 0.35, 0.4, 0.45, 0.5,
              0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95)


def tune_threshold(linker, gold_docs: Sequence[Doc], thresholds: Sequence[float] = THRESHOLDS,
                   *, nil_id: str = NIL_ID) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """InKB micro P/R/F1 (strong matching on character spans) of ``arbo_linker`` at each
    threshold on its link score (p_span × p_rank, or p(m)·p(e | m)), from one reading of
    ``gold_docs``; returns the row with the best F1 (ties: the higher threshold) and all rows.
    The passage reader's span-based retrieval keeps the configured threshold, so a row
    approximates the pipeline saved with its threshold.
    Raises a ValueError when no gold mention has a gold id."""
    from ..linking.reader_spans import resolve_spans

    if not thresholds or min(thresholds) < 0:
        raise ValueError(f"thresholds must be a non-empty list of values >= 0, got {thresholds}")
    check_gold(gold_docs)
    linker.ensure_ready()
    found, _ = linker.reader.scored_spans([g.text for g in gold_docs],
                                          threshold=min(thresholds))
    rows = threshold_rows(gold_docs, linker.kb, sorted(set(thresholds)), lambda i, threshold: [
        (s.start_char, s.end_char, s.kb_id)
        for s in resolve_spans(s for s in found[i] if s.score > threshold)], nil_id)
    best = max(rows, key=lambda r: (r["f1"], r["threshold"]))
    return best, rows


def threshold_rows(gold_docs: Sequence[Doc], kb, thresholds: Sequence[float | None],
                   kept: Callable[[int, float | None], list[tuple[int, int, str]]],
                   nil_id: str = NIL_ID) -> list[dict[str, Any]]:
    """One InKB micro P/R/F1 row (strong matching) per threshold; ``kept(i, threshold)``:
    the ``(start_char, end_char, kb_id)`` predictions of doc ``i`` at that threshold; gold
    ids that are alternate ids of ``kb`` are resolved."""
    gold_docs, _ = resolve_gold_docs(gold_docs, kb)
    in_kb = kb_contains(kb)
    golds = [inkb_gold_mentions(g, in_kb, nil_id) for g in gold_docs]
    n_gold = sum(len(g) for g in golds)
    rows = []
    for threshold in thresholds:
        tp = n_predicted = 0
        for i, gold in enumerate(golds):
            predictions = kept(i, threshold)
            n_predicted += len(predictions)
            tp += strong_matches(gold, predictions)
        precision, recall, f1 = (x or 0.0 for x in micro_prf(tp, n_predicted, n_gold))
        rows.append({"threshold": threshold, "precision": precision, "recall": recall,
                     "f1": f1, "n_predicted": n_predicted, "tp": tp, "n_gold": n_gold})
    return rows


# score quantiles of the linked ents that give the candidate thresholds of a dense linker
SCORE_QUANTILES = (0.01, 0.02, 0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5)


def tune_linker_threshold(nlp: Language, gold_docs: Sequence[Doc], component: str,
                          thresholds: Sequence[float] | None = None, *, nil_id: str = NIL_ID
                          ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """InKB micro P/R/F1 on raw text of a pipeline whose ``arbo_entity_linker`` links the
    ents found before it (``ner``), at each NIL threshold on the best candidate's score: an
    ent below it links to NIL and is no InKB prediction (spurious spans and out-of-KB
    mentions are dropped). The pipeline up to the linker (``arbo_coref`` after it would
    re-link by clusters) reads ``gold_docs``' texts once, and each ent's first candidate is
    taken whatever its ``kb_id_``; the candidates are the ``None`` row (no threshold) and
    quantiles of the ents' best scores (``SCORE_QUANTILES``) unless given. Returns the best
    row (ties: the lower threshold) and every row. Raises a ValueError when no gold mention
    has a gold id."""
    check_gold(gold_docs)
    linker = nlp.get_pipe(component)
    linker.ensure_ready()
    after = nlp.pipe_names[nlp.pipe_names.index(component) + 1:]
    with nlp.select_pipes(disable=after):  # each ent's first candidate, whatever its kb_id_
        docs = list(nlp.pipe(g.text for g in gold_docs))
    found = [[(e.start_char, e.end_char, e._.kb_candidates[0][0], e._.kb_candidates[0][1])
              for e in doc.ents if e._.kb_candidates] for doc in docs]
    if thresholds is None:
        scores = [score for spans in found for *_, score in spans]
        thresholds = sorted({round(float(q), 4) for q in np.quantile(scores, SCORE_QUANTILES)}
                            ) if scores else []
    rows = threshold_rows(gold_docs, linker.kb, [None, *sorted(set(thresholds))],
                          lambda i, threshold: [(s, e, kb_id) for s, e, kb_id, score in found[i]
                                                if threshold is None or score >= threshold],
                          nil_id)
    best = max(rows, key=lambda r: (r["f1"], -(r["threshold"] or float("-inf"))))
    return best, rows

