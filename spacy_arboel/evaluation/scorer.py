"""A spaCy scorer for entity linking: flat ``nel_*`` keys for ``spacy train``/``spacy evaluate``."""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable
from typing import Any

import spacy
from spacy.scorer import Scorer
from spacy.training import Example

from ..extensions import register_extensions
from ..kb.knowledge_base import NIL_ID
from ..spacy_data.gold_ids import kb_of, resolve_examples
from .metrics import KS, linking_metrics, mention_outcomes_from_examples


def score_entity_linking(
    examples: Iterable[Example],
    *,
    kb_ids: Container[str] | Callable[[str], bool] | None = None,
    seen_ids: Container[str] | None = None,
    nil_id: str = NIL_ID,
    **cfg: Any,
) -> dict[str, Any]:
    """Score linked entities: ``nel_inkb_recall@k``, ``nel_inkb_acc``, ``nel_recall@k``,
    ``nel_acc``, ``nel_seen_acc``, ``nel_unseen_acc``, ``nel_nil_acc``, ``nel_per_type`` and
    ``nel_ece`` (the first candidate's expected calibration error, ``metrics.calibration``),
    and spaCy's own ``nel_micro_p``/``_r``/``_f``, ``nel_macro_*`` and ``nel_f_per_type``
    (``Scorer.score_links``, the keys of spaCy's ``entity_linker``: a ``nil_id`` or empty
    prediction is no prediction, a wrong id is a false positive and a false negative).

    ``kb_ids`` (ids, a predicate, or the KB: then gold ids that are alternate ids are
    resolved to their entity's first, ``spacy_data.gold_ids``) decides which gold mentions
    are in the KB (``None``: all are); ``seen_ids`` are the gold ids of the training corpus.
    Other keyword arguments (the component's cfg, passed on by spaCy) are ignored. Empty
    groups score ``None``.
    """
    del cfg
    register_extensions()
    examples, _ = resolve_examples(examples, kb_of(kb_ids))
    outcomes = mention_outcomes_from_examples(examples, kb_ids, seen_ids, nil_id=nil_id)
    metrics = linking_metrics(outcomes, KS, nil_id=nil_id)
    scores: dict[str, Any] = {}
    for prefix, group in (("nel_inkb_", "in_kb"), ("nel_", "all")):
        for k in KS:
            scores[f"{prefix}recall@{k}"] = metrics[group][f"recall@{k}"]
        scores[f"{prefix}acc"] = metrics[group]["accuracy"]
    scores["nel_seen_acc"] = metrics["seen"]["accuracy"]
    scores["nel_unseen_acc"] = metrics["unseen"]["accuracy"]
    scores["nel_nil_acc"] = metrics["out_of_kb"]["nil_accuracy"]
    scores["nel_inkb_abstained"] = metrics["in_kb"]["abstained"]
    scores["nel_ece"] = metrics["calibration"]["ece"]
    scores["nel_per_type"] = {
        label: {
            "acc": group["accuracy"],
            **{f"recall@{k}": group[f"recall@{k}"] for k in KS},
        }
        for label, group in metrics["per_type"].items()
    }
    scores.update(Scorer.score_links(examples, negative_labels=[nil_id, ""]))
    return scores


@spacy.registry.scorers("spacy_arboel.entity_linking_scorer.v1")
def make_entity_linking_scorer() -> Callable[..., dict[str, Any]]:
    """The registered scorer factory (``spacy_arboel.entity_linking_scorer.v1``)."""
    register_extensions()
    return score_entity_linking
