"""``arbo_entity_linker``'s decisions, without spaCy: a mention's candidates (its
``CandidatePolicy``, one call over the ``DenseRetriever``), then its link, or NIL below the
threshold or on a tie; the NIL threshold a KB gives itself (``linking.abstention``), kept
with the index it was set on, saved and restored; and which saved threshold still holds
when a pipeline is loaded (E224)::

    policy, settings = CandidatePolicy(), LinkSettings(top_k=8)
    check_linkable(retriever.kb, policy, settings)
    linker = MentionLinker(retriever, policy, settings)
    links = linker.link(["Aspirin caused fever."], [MentionSpan(0, 0, 7)], ["Chemical"])
    links[0].kb_id, links[0].candidates[0].score
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from ..encoders.inputs import MentionSpan
from ..errors import Errors
from ..kb.knowledge_base import NIL_ID, KnowledgeBase
from ..settings import PositiveInt, Recall, check_fields
from .abstention import held_out_first_scores, recall_threshold
from .candidates import Candidate, CandidatePolicy
from .dense_retriever import DenseRetriever

# the share of the KB's held-out names whose right link the default NIL threshold keeps
# (``linking.abstention``): BC5CDR/NCBI with a fifth of their entities out of MeSH, 50%/21%
# of those mentions abstained for 1.9 points of in-KB R@1 (BENCHMARKS.md, issue 61)
NIL_RECALL = 0.95
# two candidates whose raw scores differ by no more than this tie (a name both entities have)
TIE = 1e-6


@dataclass(frozen=True)
class LinkSettings:
    """``top_k``: the candidates kept per mention. ``threshold``: the score (on the policy's
    scale) below which a mention is ``nil_id``; ``None``: the one that keeps ``nil_recall``
    of the right links of the KB's own names held out as mentions (``linking.abstention``;
    set from the KB with no corpus, once per index), and both ``None``: never NIL."""

    top_k: PositiveInt = 64
    threshold: float | None = None
    nil_recall: Recall | None = NIL_RECALL
    nil_id: str = NIL_ID

    def __post_init__(self) -> None:
        check_fields(self)


class Link(NamedTuple):
    """A mention's link (``nil_id`` when it abstains), its candidates, best first, and its
    vector (None for a mention with nothing to encode)."""

    kb_id: str
    candidates: list[Candidate]
    vector: np.ndarray | None


class MentionLinker:
    """Links mentions with a retriever and a candidate policy under ``settings`` (a KB is
    checked for them by ``check_linkable``)."""

    def __init__(self, retriever: DenseRetriever, policy: CandidatePolicy,
                 settings: LinkSettings) -> None:
        self.retriever, self.policy, self.settings = retriever, policy, settings
        # the NIL threshold taken from the KB: (what it was set for, its value)
        self._kb_threshold: tuple[tuple, float | None] | None = None

    def link(self, texts: Sequence[str], spans: Sequence[MentionSpan],
             labels: Sequence[str], *, language: str = "en") -> list[Link]:
        """Each mention's link (``spans`` index into ``texts``; ``labels``: their ent
        labels): its first candidate, or ``nil_id`` when its score is below the NIL
        threshold or the first two tie, as a name two entities share does (when there is a
        threshold). An index older than the encoders is an error (E050)."""
        if not self.retriever.entities.is_current:
            raise ValueError(Errors.E050)
        found = self.policy(self.retriever, texts, spans, labels, self.settings.top_k,
                            language=language)
        threshold = self.nil_threshold()
        return [Link(self.decide(candidates, threshold), candidates, vector)
                for candidates, vector in zip(*found, strict=True)]

    def decide(self, candidates: Sequence[Candidate], threshold: float | None) -> str:
        """The first candidate's id, or ``nil_id`` (none, or below ``threshold``, or a
        tie)."""
        if not candidates:
            return self.settings.nil_id
        tie = len(candidates) > 1 and candidates[0].raw - candidates[1].raw <= TIE
        if threshold is None or (candidates[0].score >= threshold and not tie):
            return candidates[0].id
        return self.settings.nil_id

    # --- the NIL threshold of the KB (issue 61) ----------------------------------------------

    def _kb_threshold_key(self) -> tuple:
        """What the KB's NIL threshold depends on: the index, the mention encoder, the
        share kept and the score scale."""
        return (id(self.retriever.entities.index), self.retriever.mention_fingerprint(),
                self.settings.nil_recall, self.policy.scores)

    def nil_threshold(self) -> float | None:
        """The score below which a mention is NIL: ``threshold``, else the one
        ``nil_recall`` takes from the KB's held-out names (None for a KB with too few
        entities of two names), else None (never NIL); set once per index."""
        if self.settings.threshold is not None or self.settings.nil_recall is None:
            return self.settings.threshold
        retriever = self.retriever
        retriever.entities.ensure_index()  # before the key: it names the current index
        key = self._kb_threshold_key()
        if self._kb_threshold is None or self._kb_threshold[0] != key:
            first, right = held_out_first_scores(
                retriever, lambda raw: self.policy.scaled(raw, retriever.probabilities)[0],
                self.policy.retrieval_k(self.settings.top_k))
            value = recall_threshold(first, right, self.settings.nil_recall)
            # rounded as cfg.json keeps it, so that a loaded pipeline reads the same number
            self._kb_threshold = (key, None if value is None else round(value, 6))
        return self._kb_threshold[1]

    def saved_state(self) -> dict[str, Any]:
        """What ``cfg.json`` keeps of the linking: the scale, the threshold given and the
        KB's (with the share and scale it was set for, when it is the current one)."""
        kb_threshold = None
        if self._kb_threshold is not None \
                and self._kb_threshold[0] == self._kb_threshold_key():
            kb_threshold = {"nil_recall": self.settings.nil_recall,
                            "scores": self.policy.scores, "value": self._kb_threshold[1]}
        return {"scores": self.policy.scores, "threshold": self.settings.threshold,
                "kb_threshold": kb_threshold}

    def restore_kb_threshold(self, saved: dict[str, Any] | None) -> None:
        """Take a saved KB threshold (``saved_state``'s) when it was set for this share and
        scale, on the index loaded with it (else it is set again when first needed)."""
        if saved and self.settings.nil_recall is not None \
                and math.isclose(saved["nil_recall"], self.settings.nil_recall) \
                and saved["scores"] == self.policy.scores:
            self._kb_threshold = (self._kb_threshold_key(), saved["value"])


def check_linkable(kb: KnowledgeBase, policy: CandidatePolicy, settings: LinkSettings,
                   name: str = "the linker") -> KnowledgeBase:
    """``kb`` if ``name`` can link with it under ``policy`` and ``settings``: E035 when it
    holds the NIL id, E225/W022 when the type rule names types it lacks, E011 for a
    probability threshold outside [0, 1]."""
    check_threshold_scale(policy, settings.threshold)
    if settings.nil_id in kb:
        raise ValueError(Errors.E035.format(where="the knowledge base", entity_id=settings.nil_id,
                                            reason=f"it is {name}'s nil_id"))
    return policy.check_kb(kb)


def check_saved_scale(saved: dict[str, Any], threshold: float | None,
                      policy: CandidatePolicy, name: str) -> None:
    """E224 when a pipeline saved on one score scale is loaded on another with the saved
    threshold (``saved``: its ``cfg.json``): a threshold holds on the scale it was chosen
    on, never a silent change; a threshold given at load with the scale is the user's own
    (with ``cfg.json`` left out, the config's are taken as they are)."""
    saved_scores = saved.get("scores", policy.scores)
    if threshold is not None and saved_scores != policy.scores \
            and threshold == saved.get("threshold", threshold):
        raise ValueError(Errors.E224.format(name=name, saved=saved_scores,
                                            threshold=threshold, scores=policy.scores))


def check_threshold_scale(policy: CandidatePolicy, threshold: float | None) -> None:
    """E011 for a NIL threshold on probabilities outside [0, 1] (a raw-score threshold
    kept with ``scores = "probability"`` would make every mention NIL, or none)."""
    if threshold is not None and policy.scores == "probability" \
            and not 0.0 <= threshold <= 1.0:
        raise ValueError(Errors.E011.format(
            name="threshold", value=threshold, condition='in [0, 1] with scores = '
            '"probability" (a threshold on raw scores needs scores = "raw")'))
