"""Evaluate ``arbo_reranker`` on gold mentions, also in arboEL's oracle settings (§4.3):
``self`` injects the gold entity into the linker's candidates, ``union`` into the union of
several linkers' candidates; ``none`` re-ranks the candidates as retrieved."""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
from spacy.language import Language
from spacy.tokens import Doc

from ..data.ids import gold_ids
from ..data.readers import with_gold_mentions
from ..encoders.inputs import MentionSpan

ORACLES = ("none", "self", "union")


def linker_candidates(nlp: Language, gold_docs: Sequence[Doc],
                      linker: str = "arbo_entity_linker") -> list[list[list[str]]]:
    """Per doc, per gold mention, the ranked candidate ids of ``nlp``'s linker alone."""
    names = [n for n in nlp.pipe_names if n != linker]
    docs = [with_gold_mentions(nlp.make_doc(g.text), g) for g in gold_docs]
    with nlp.select_pipes(disable=names):
        linked = list(nlp.pipe(docs, batch_size=256))
    return [[[c for c, _ in (e._.kb_candidates or [])] for e in doc.ents] for doc in linked]


def union_candidates(lists: Sequence[Sequence[str]], k: int) -> list[str]:
    """The top ``k`` of each list, merged rank by rank (first list first), without repeats."""
    merged: list[str] = []
    for rank in range(k):
        for ids in lists:
            if rank < len(ids) and ids[rank] not in merged:
                merged.append(ids[rank])
    return merged


def oracle_candidates(retrieved: Sequence[str], gold: Sequence[str], oracle: str,
                      k: int) -> list[str]:
    """The candidates the re-ranker scores: the top ``k`` (``none``), with the gold entity in
    place of the last when missing (``self``), or the union with gold appended (``union``;
    ``retrieved`` is then the union already)."""
    if oracle not in ORACLES:
        raise ValueError(f"Unknown oracle '{oracle}': use one of {ORACLES}.")
    ids = list(retrieved) if oracle == "union" else list(retrieved[:k])
    if oracle == "none" or not gold or any(g in ids for g in gold):
        return ids
    return ids + [gold[0]] if oracle == "union" else ids[: k - 1] + [gold[0]]


def evaluate_reranker(
    nlp: Language, gold_docs: Iterable[Doc], *, oracle: str = "none",
    union_with: Sequence[Language] = (), reranker: str = "arbo_reranker",
    linker: str = "arbo_entity_linker",
) -> dict[str, Any]:
    """Accuracy of the bi-encoder's top 1 and of the re-ranked top 1 on in-KB gold mentions
    (also normalised: on mentions whose gold is among the candidates, and seen/unseen), and
    the re-ranker's speed."""
    gold_docs = list(gold_docs)
    rerank = nlp.get_pipe(reranker)
    k = rerank.cfg["top_k"]
    retrieved = linker_candidates(nlp, gold_docs, linker)
    others = [linker_candidates(other, gold_docs, linker) for other in union_with]
    if oracle == "union" and not others:
        raise ValueError("The union oracle needs other pipelines (union_with) to merge with.")
    kb = rerank.kb
    seen_ids = nlp.get_pipe(linker).seen_ids
    texts = [g.text for g in gold_docs]
    rows: list[dict[str, Any]] = []
    for d, gold_doc in enumerate(gold_docs):
        for m, ent in enumerate(gold_doc.ents):
            gold = [i for i in gold_ids(ent.kb_id_) if i in kb]
            if not gold:
                continue
            own = retrieved[d][m]
            pool = union_candidates([own] + [o[d][m] for o in others], k) if oracle == "union" \
                else own
            rows.append({"span": MentionSpan(d, ent.start_char, ent.end_char), "gold": gold,
                         "bi_top1": own[0] if own else None,
                         "candidates": oracle_candidates(pool, gold, oracle, k),
                         "seen": any(i in seen_ids for i in gold)})
    start = time.perf_counter()
    scores = rerank.score_candidates(texts, [r["span"] for r in rows],
                                     [r["candidates"] for r in rows])
    seconds = time.perf_counter() - start
    for row, s in zip(rows, scores, strict=True):
        row["cross_top1"] = row["candidates"][int(np.argmax(s))] if len(s) else None
        row["gold_in_candidates"] = any(g in row["candidates"] for g in row["gold"])

    def accuracy(key: str, subset: list[dict]) -> float | None:
        return sum(r[key] in r["gold"] for r in subset) / len(subset) if subset else None

    covered = [r for r in rows if r["gold_in_candidates"]]
    n_pairs = sum(len(r["candidates"]) for r in rows)
    return {
        "oracle": oracle, "top_k": k, "n_in_kb": len(rows),
        "bi_encoder": {"accuracy": accuracy("bi_top1", rows)},
        "cross_encoder": {
            "accuracy": accuracy("cross_top1", rows),
            "normalized_accuracy": accuracy("cross_top1", covered),
            "seen_accuracy": accuracy("cross_top1", [r for r in rows if r["seen"]]),
            "unseen_accuracy": accuracy("cross_top1", [r for r in rows if not r["seen"]]),
            "candidate_recall": len(covered) / len(rows) if rows else None,
            "mean_candidates": n_pairs / len(rows) if rows else None,
        },
        "bi_encoder_seen_unseen": {
            "seen_accuracy": accuracy("bi_top1", [r for r in rows if r["seen"]]),
            "unseen_accuracy": accuracy("bi_top1", [r for r in rows if not r["seen"]]),
        },
        "timings": {"rerank_seconds": round(seconds, 2),
                    "mentions_per_s": round(len(rows) / seconds, 1) if seconds else None,
                    "pairs_per_s": round(n_pairs / seconds, 1) if seconds else None},
    }
