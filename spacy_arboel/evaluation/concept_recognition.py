"""Concept recognition from raw text, scored as the phenotype tools score it on GSC+
(FastHPOCR, PhenoTagger): at mention level, a predicted ``(start, end, id)`` is right when a
gold mention has that span and that id among its ids (each gold mention matched once; micro
P/R/F1 over all documents: ``end_to_end.strong_matches``); at document level, over the set of
``(document, id)`` pairs. Gold ids are resolved through the KB's alternate ids first, so a
corpus of an older ontology release scores a right concept right. No spaCy is needed to call
it: annotations are plain tuples."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ..data.ids import gold_ids
from .end_to_end import micro_prf, strong_matches

# (start_char, end_char, id or ids joined by "|")
Annotation = tuple[int, int, str]


def concept_recognition_scores(
    gold: Mapping[str, Iterable[Annotation]],
    predicted: Mapping[str, Iterable[Annotation]],
    resolve: Callable[[Iterable[str]], Iterable[str]] = tuple,
) -> dict[str, Any]:
    """Mention- and document-level micro P/R/F1 of ``predicted`` against ``gold`` (both:
    document id -> annotations; a document missing from ``predicted`` has none).
    ``resolve`` maps a mention's gold ids to the ids a linker predicts
    (``KnowledgeBase.resolve_ids``); a prediction is counted once per span and id."""
    mentions = {"tp": 0, "predicted": 0, "gold": 0}
    documents = {"tp": 0, "predicted": 0, "gold": 0}
    for doc_id, written in gold.items():
        golds = [(start, end, tuple(resolve(gold_ids(ids)))) for start, end, ids in written]
        found = sorted(set(predicted.get(doc_id, ())))
        mentions["tp"] += strong_matches(golds, found)
        mentions["predicted"] += len(found)
        mentions["gold"] += len(golds)
        gold_concepts = {i for _, _, ids in golds for i in ids}
        found_concepts = {kb_id for _, _, kb_id in found}
        documents["tp"] += len(gold_concepts & found_concepts)
        documents["predicted"] += len(found_concepts)
        documents["gold"] += len(gold_concepts)
    unscored = set(predicted) - set(gold)
    if unscored:
        raise ValueError(f"predictions for documents the gold does not have: "
                         f"{', '.join(sorted(unscored)[:5])}")
    return {level: _prf(counts) for level, counts in (("mention", mentions),
                                                       ("document", documents))}


def _prf(counts: dict[str, int]) -> dict[str, Any]:
    precision, recall, f1 = micro_prf(counts["tp"], counts["predicted"], counts["gold"])
    return {"precision": precision, "recall": recall, "f1": f1, **counts}
