"""Run a pipeline over gold-mention docs and measure linking quality and throughput."""

from __future__ import annotations

import time
from collections.abc import Container, Iterable, Sequence
from typing import Any

import numpy as np
from spacy.language import Language
from spacy.tokens import Doc
from spacy.training import Example

from ..encoders.inputs import MentionSpan
from ..factories import ENTITY_LINKER
from ..spacy_data.gold_ids import resolve_gold_docs
from ..spacy_data.readers import with_gold_mentions
from .gold import check_gold
from .metrics import KS, linking_metrics, mention_outcomes_from_examples

WARMUP_DOCS = 50


def evaluate_linker(
    nlp: Language,
    gold_docs: Iterable[Doc],
    *,
    component: str = ENTITY_LINKER,
    batch_size: int = 256,
    measure_encoder: bool = True,
    seen_ids: Container[str] | None = None,
    ks: Sequence[int] = KS,
) -> dict[str, Any]:
    """Link the gold mentions of ``gold_docs`` with ``nlp`` and compute the metrics.
    ``seen_ids``: the ids that count as seen in training (default: those of the linker's
    own training corpus; give a corpus's ids to split an untrained linker's scores alike);
    ``ks``: the k of the recall@k reported (``metrics.KS`` by default).

    Timings, after an untimed warm-up on the first ``WARMUP_DOCS`` docs:
    ``linking_mentions_per_s`` through ``nlp.pipe`` (tokenisation, encoding,
    search, annotation) and, with ``measure_encoder``, ``encoder_mentions_per_s``: the raw
    forward rate of the mention encoder alone on the same inputs, batch for batch. Raises
    a ValueError when no gold mention has a gold id. Gold ids that are alternate ids of
    the linker's KB are resolved first (``gold_ids_resolved`` counts them).
    """
    gold_docs = list(gold_docs)
    check_gold(gold_docs)
    linker = nlp.get_pipe(component)
    gold_docs, resolved = resolve_gold_docs(gold_docs, linker.kb)
    examples = [Example(with_gold_mentions(nlp.make_doc(g.text), g), g) for g in gold_docs]
    docs = [eg.predicted for eg in examples]
    n_mentions = sum(len(d.ents) for d in docs)
    linker.ensure_ready()  # building the index is set-up, not linking
    # Warm-up, untimed: torch's first forward passes of a process run ~10% slower, which
    # would otherwise be charged to linking and not to the encoder timed after it.
    for _ in nlp.pipe(docs[:WARMUP_DOCS], batch_size=batch_size):
        pass
    start = time.perf_counter()
    for _ in nlp.pipe(docs, batch_size=batch_size):
        pass
    link_seconds = time.perf_counter() - start
    outcomes = mention_outcomes_from_examples(
        examples, kb_ids=linker.kb,
        seen_ids=seen_ids if seen_ids is not None else linker.seen_ids or None,
        nil_id=linker.linking.nil_id,
    )
    metrics = linking_metrics(outcomes, ks, nil_id=linker.linking.nil_id)
    metrics["gold_ids_resolved"] = resolved
    index = getattr(getattr(linker, "retriever", None), "index", None)
    timings: dict[str, Any] = {
        # where the index searched: faiss-gpu, torch-cuda or faiss-cpu (kb.torch_search)
        "search_engine": getattr(index, "engine", None),
        "mentions": n_mentions,
        "docs": len(docs),
        "linking_seconds": round(link_seconds, 3),
        "linking_mentions_per_s": round(n_mentions / link_seconds, 1) if link_seconds else None,
    }
    if measure_encoder and n_mentions:
        timings.update(encoder_rate(linker, docs))
        timings["linking_vs_encoder"] = round(
            timings["linking_mentions_per_s"] / timings["encoder_mentions_per_s"], 3
        )
    metrics["timings"] = timings
    return metrics


def encoder_rate(linker, docs: list[Doc]) -> dict[str, float]:
    """Forward rate of the mention encoder alone over pre-tokenised, pre-padded batches
    (the same weights, fp32 or int8, that the linker uses)."""
    retriever = linker.retriever
    spans = [MentionSpan(i, e.start_char, e.end_char)
             for i, d in enumerate(docs) for e in linker.span_getter(d)]
    inputs = retriever.builder.mention_ids([d.text for d in docs], spans)
    # length-sorted, padded, as linking makes them
    batches = retriever.builder.sorted_batches(inputs, retriever.settings.batch_size)[1]
    start = time.perf_counter()
    for ids, mask in batches:
        retriever.forward("mention", ids, mask)
    seconds = time.perf_counter() - start
    lengths = [int(n) for _, mask in batches for n in mask.sum(axis=1)]
    return {
        "encoder_seconds": round(seconds, 3),
        "encoder_mentions_per_s": round(len(lengths) / seconds, 1),
        "mean_wordpieces": round(float(np.mean(lengths)), 1),
    }
