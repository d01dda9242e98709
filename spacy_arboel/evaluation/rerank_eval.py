"""Evaluate ``arbo_reranker`` on gold mentions, also in arboEL's oracle settings (§4.3):
``self`` injects the gold entity into the linker's candidates, ``union`` into the union of
several linkers' candidates; ``none`` re-ranks the candidates as retrieved."""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import Any

from spacy.language import Language
from spacy.tokens import Doc

from ..data.ids import gold_ids
from ..encoders.inputs import MentionSpan
from ..errors import Errors
from ..factories import ENTITY_LINKER, RERANKER
from ..spacy_data.gold_ids import resolve_gold_docs
from ..spacy_data.readers import with_gold_mentions
from .gold import check_gold

ORACLES = ("none", "self", "union")


def linker_candidates(nlp: Language, gold_docs: Sequence[Doc],
                      linker: str = ENTITY_LINKER) -> list[list[list[str]]]:
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


def check_oracle(oracle: str) -> None:
    if oracle not in ORACLES:
        raise ValueError(Errors.E007.format(what="oracle", value=oracle,
                                            options=", ".join(ORACLES)))


def oracle_candidates(retrieved: Sequence[str], gold: Sequence[str], oracle: str,
                      k: int) -> list[str]:
    """The candidates the re-ranker scores: the top ``k`` (``none``), with the gold entity in
    place of the last when missing (``self``), or the union with gold appended (``union``;
    ``retrieved`` is then the union already)."""
    check_oracle(oracle)
    ids = list(retrieved) if oracle == "union" else list(retrieved[:k])
    if oracle == "none" or not gold or any(g in ids for g in gold):
        return ids
    return ids + [gold[0]] if oracle == "union" else ids[: k - 1] + [gold[0]]


def evaluate_reranker(
    nlp: Language, gold_docs: Iterable[Doc], *, oracles: Sequence[str] = ("none",),
    top_ks: Sequence[int] = (), union_with: Sequence[Language] = (),
    reranker: str = RERANKER, linker: str = ENTITY_LINKER,
) -> dict[str, Any]:
    """Accuracy of the bi-encoder's top 1 and of the re-ranked top 1 on in-KB gold mentions
    (also normalised: on mentions whose gold is among the candidates, and seen/unseen) for
    each oracle and each K in ``top_ks`` (default: the re-ranker's ``top_k``), with one
    ``run`` each. Every (mention, candidate) pair is scored once for all runs; the pair rate
    of that pass gives each run's mentions/s. Raises a ValueError when no gold mention has a
    gold id."""
    gold_docs = list(gold_docs)
    check_gold(gold_docs)
    for oracle in oracles:  # before the linkers run
        check_oracle(oracle)
    rerank = nlp.get_pipe(reranker)
    gold_docs, resolved = resolve_gold_docs(gold_docs, rerank.kb)
    top_ks = list(top_ks) or [rerank.settings.top_k]
    retrieved = linker_candidates(nlp, gold_docs, linker)
    others = [linker_candidates(other, gold_docs, linker) for other in union_with]
    if "union" in oracles and not others:
        raise ValueError(Errors.E073)
    kb = rerank.kb
    seen_ids = nlp.get_pipe(linker).seen_ids
    mentions: list[dict[str, Any]] = []
    for d, gold_doc in enumerate(gold_docs):
        for m, ent in enumerate(gold_doc.ents):
            gold = [i for i in gold_ids(ent.kb_id_) if i in kb]
            if not gold:
                continue
            own = retrieved[d][m]
            candidates = {}
            for oracle in oracles:
                for k in top_ks:
                    pool = union_candidates([own] + [o[d][m] for o in others], k) \
                        if oracle == "union" else own
                    candidates[oracle, k] = oracle_candidates(pool, gold, oracle, k)
            mentions.append({"span": MentionSpan(d, ent.start_char, ent.end_char),
                             "gold": gold, "bi_top1": own[0] if own else None,
                             "candidates": candidates,
                             "seen": any(i in seen_ids for i in gold)})
    # each mention's distinct candidates over all runs, scored in one pass
    pools = [list(dict.fromkeys(c for ids in r["candidates"].values() for c in ids))
             for r in mentions]
    start = time.perf_counter()
    scores = rerank.score_candidates([g.text for g in gold_docs],
                                     [r["span"] for r in mentions], pools)
    seconds = time.perf_counter() - start
    n_pairs = sum(len(p) for p in pools)
    pairs_per_s = n_pairs / seconds if seconds else None
    for row, pool, s in zip(mentions, pools, scores, strict=True):
        row["score"] = dict(zip(pool, s.tolist(), strict=True))
    runs = [_run_metrics(mentions, oracle, k, pairs_per_s) for oracle in oracles
            for k in top_ks]
    return {"runs": runs, "gold_ids_resolved": resolved,
            "timings": {"rerank_seconds": round(seconds, 2), "pairs": n_pairs,
                        "pairs_per_s": round(pairs_per_s, 1) if pairs_per_s else None}}


def _run_metrics(mentions: list[dict[str, Any]], oracle: str, k: int,
                 pairs_per_s: float | None) -> dict[str, Any]:
    rows = []
    for mention in mentions:
        candidates = mention["candidates"][oracle, k]
        # every candidate of every run was scored in the shared pass
        best = max(candidates, key=mention["score"].get) if candidates else None
        rows.append({"gold": mention["gold"], "seen": mention["seen"],
                     "bi_top1": mention["bi_top1"], "cross_top1": best,
                     "n": len(candidates),
                     "covered": any(g in candidates for g in mention["gold"])})

    def accuracy(key: str, subset: list[dict]) -> float | None:
        return sum(r[key] in r["gold"] for r in subset) / len(subset) if subset else None

    covered = [r for r in rows if r["covered"]]
    n_pairs = sum(r["n"] for r in rows)
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
        # at the measured pair rate of the shared scoring pass
        "timings": {"mentions_per_s": round(len(rows) * pairs_per_s / n_pairs, 1)
                    if pairs_per_s and n_pairs else None},
    }
