"""A spaCy scorer for ``arbo_coref``: flat ``coref_*`` keys for ``spacy evaluate``."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import spacy
from spacy.training import Example

from ..data.ids import gold_ids
from ..extensions import CLUSTER_EXT, register_extensions
from ..kb.knowledge_base import KnowledgeBase
from ..spacy_data.gold_ids import resolve_examples
from .coref_metrics import coref_metrics


def mention_clusters(
    examples: Iterable[Example],
) -> tuple[list[str], list[str], list[tuple[str, str]]]:
    """Gold and predicted cluster labels of the mentions found in both docs of each example,
    and the (gold id, predicted kb_id) of those with a gold id.

    A mention without a gold id is a gold singleton; gold clusters are the mentions sharing
    a gold id (composite ids as written, e.g. ``D1|D2``).
    """
    register_extensions()
    gold, predicted, links = [], [], []
    for number, eg in enumerate(examples):
        found = {(e.start_char, e.end_char): e for e in eg.predicted.ents}
        for ent in eg.reference.ents:
            pred = found.get((ent.start_char, ent.end_char))
            if pred is None or pred._.get(CLUSTER_EXT) is None:
                continue
            ids = gold_ids(ent.kb_id_)
            key = f"#{number}:{ent.start_char}:{ent.end_char}"
            gold.append("|".join(ids) if ids else key)
            predicted.append(pred._.get(CLUSTER_EXT))
            if ids:
                links.append(("|".join(ids), pred.kb_id_))
    return gold, predicted, links


def score_coref(examples: Iterable[Example], *, kb: KnowledgeBase | None = None, **cfg: Any
                ) -> dict[str, Any]:
    """``coref_nmi``, ``coref_ari``, ``coref_muc_f``, ``coref_b3_f``, ``coref_ceafe_f``,
    ``coref_conll_f1`` and ``coref_link_acc`` (the kb_id_ set from the clusters, against the
    gold ids, those that are alternate ids of ``kb`` resolved to their entity's); ``None``
    when no mention was clustered."""
    del cfg
    examples, _ = resolve_examples(examples, kb)
    gold, predicted, links = mention_clusters(examples)
    metrics = coref_metrics(gold, predicted)
    if not metrics["n"]:
        keys = ("nmi", "ari", "muc_f", "b3_f", "ceafe_f", "conll_f1", "link_acc")
        return {f"coref_{key}": None for key in keys}
    correct = sum(pred in gold_ids(gold_id) for gold_id, pred in links)
    return {
        "coref_nmi": metrics["nmi"],
        "coref_ari": metrics["ari"],
        "coref_muc_f": metrics["muc"]["f"],
        "coref_b3_f": metrics["b3"]["f"],
        "coref_ceafe_f": metrics["ceafe"]["f"],
        "coref_conll_f1": metrics["conll_f1"],
        "coref_link_acc": correct / len(links) if links else None,
    }


@spacy.registry.scorers("spacy_arboel.coref_scorer.v1")
def make_coref_scorer() -> Callable[..., dict[str, Any]]:
    """The registered scorer factory (``spacy_arboel.coref_scorer.v1``)."""
    return score_coref
