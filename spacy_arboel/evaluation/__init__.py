"""Evaluation of entity linking: metrics, the spaCy scorer and reports."""

from .metrics import KS, MentionOutcome, linking_metrics, mention_outcomes_from_examples
from .report import markdown_table, plot_recall_at_k, write_json
from .scorer import make_entity_linking_scorer, score_entity_linking

__all__ = [
    "KS",
    "MentionOutcome",
    "linking_metrics",
    "make_entity_linking_scorer",
    "markdown_table",
    "mention_outcomes_from_examples",
    "plot_recall_at_k",
    "score_entity_linking",
    "write_json",
]
