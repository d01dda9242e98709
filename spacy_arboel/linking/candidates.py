"""How a mention's retrieved entities become its ranked candidates: ``arbo_entity_linker``'s
candidate policy, spaCy's ``get_candidates`` over a dense retriever (registered as
``spacy_arboel.candidates.v1``; a subclass registered under another name swaps it). No spaCy
here.

One call (``CandidatePolicy.__call__``, the shape of spaCy's ``get_candidates_batch``: a KB
with its index, the retriever, and a batch of mentions in, candidates per mention out)
retrieves each mention's nearest entities (with BioSyn's lexical union when ``lexical_weight``
is set), puts their scores on the policy's scale, joins the KB's mention prior to them, drops
those whose names say the opposite of the mention (``linking.opposites``), applies the type
rule and keeps the first ``top_k``, as ``Candidate`` records.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import NamedTuple

import numpy as np

from ..encoders.inputs import MentionSpan
from ..extensions import Candidate
from ..kb.knowledge_base import PRIOR_PSEUDO_LINKS, KnowledgeBase
from ..kb.type_rule import TYPE_RULES, TypeRule
from ..settings import NonNegativeFloat, check_fields, choices
from .dense_retriever import PROBABILITY_POOL
from .opposites import unopposed

# what a candidate's score is: p(e | m) among the retrieved candidates, or the raw score
SCORE_SCALES = ("probability", "raw")


class Retrieved(NamedTuple):
    """What the policy gives a batch of mentions: each one's candidates, best first, and
    its vector (None for a mention with nothing to encode: only whitespace)."""

    candidates: list[list[Candidate]]
    vectors: list[np.ndarray | None]


@dataclass(frozen=True)
class CandidatePolicy:
    """``scores``: ``probability`` makes a candidate's score p(e | m), the softmax of the raw
    scores over the mention's ``PROBABILITY_POOL`` nearest entities as retrieved, before the
    type rule acts (so a threshold reads the same number whatever ``top_k`` and
    ``label_types`` keep); ``raw`` keeps the dot product or cosine. ``lexical_weight``:
    BioSyn's λ (its score, dense + λ · sparse, over the union of the dense and the character
    n-gram top-k; ``None``: dense alone). ``label_types``/``type_rule``: the type
    rule (``kb.type_rule.TypeRule``; a map, or its JSON text as a config override gives it).
    ``incl_prior`` (spaCy's ``entity_linker`` setting): join the KB's mention prior
    p_prior(e | m) (``KnowledgeBase.mention_prior``: the link counts a corpus gave it,
    ``build-kb --alias-corpus``) to each candidate's p(e | m) as spaCy combines them,
    p + p_prior - p · p_prior, and rank by that; a KB without link counts, a text they
    never saw, or the ``raw`` scale (no probability to join) leave the scores as they are.
    ``prior_smoothing``: the links to an entity the counts never saw that smooth the prior
    (``KnowledgeBase.mention_prior``). ``opposites``: drop the candidates whose names say the
    opposite of the mention ("short stature" is never *Tall stature*; ``linking.opposites``),
    keeping the others' scores, so that the next one is linked, or NIL below the threshold.
    """

    scores: choices(SCORE_SCALES) = "probability"
    lexical_weight: NonNegativeFloat | None = None
    label_types: Mapping[str, Sequence[str]] | str | None = None
    type_rule: choices(TYPE_RULES) = "restrict"
    # the workflow's model-best, BC5CDR test R@1 0.941 -> 0.949, NCBI 0.928 -> 0.931, by the
    # train/dev link counts of its KB (dev: +43 and +4 mentions; BENCHMARKS.md, issue 41)
    incl_prior: bool = True
    opposites: bool = True
    # one example of a text gives 0.5, not a certainty; 0 is spaCy's unsmoothed share (BC5CDR
    # test over MeSH with its train/dev counts, untrained: R@1 0.9271 -> 0.9258, first
    # candidates at 0.999 or more 75% -> 20%; BENCHMARKS.md, issue 62)
    prior_smoothing: NonNegativeFloat = PRIOR_PSEUDO_LINKS

    def __post_init__(self) -> None:
        check_fields(self)
        self.rule  # noqa: B018  (E223/E225 for bad label_types, as it is made)

    @cached_property
    def rule(self) -> TypeRule | None:
        """The type rule (None without ``label_types``)."""
        return TypeRule.from_settings(self.label_types, self.type_rule)

    def check_kb(self, kb: KnowledgeBase) -> KnowledgeBase:
        """``kb``; E225/W022 when the type rule names types it lacks."""
        if self.rule is not None:
            self.rule.check_types(kb.types())
        return kb

    def scaled(self, raw: list[float], probabilities: Callable[[list[float]], list[float]]
               ) -> list[float]:
        """A mention's raw candidate scores, best first, on the policy's scale
        (``probabilities``: the retriever's p(e | m) of raw scores)."""
        return probabilities(raw) if self.scores == "probability" else raw

    def retrieval_k(self, top_k: int) -> int:
        """How many entities to retrieve for ``top_k`` candidates: the probabilities'
        normaliser needs ``PROBABILITY_POOL`` of them."""
        return max(top_k, PROBABILITY_POOL) if self.scores == "probability" else top_k

    def __call__(self, retriever, texts: Sequence[str], spans: Sequence[MentionSpan],
                 labels: Sequence[str], top_k: int, *, language: str = "en") -> Retrieved:
        """The first ``top_k`` candidates of each mention (``spans`` index into ``texts``;
        ``labels``: their ent labels, for the type rule) from ``retriever`` (a
        ``DenseRetriever``: the KB, its index and the encoders), and each mention's vector;
        ``language``: the pipeline's, for the opposites check."""
        kb = retriever.kb
        scores, positions, vectors = retriever.link(
            texts, spans, self.retrieval_k(top_k), lexical_weight=self.lexical_weight)

        def types_of(kb_id: str) -> tuple[str, ...]:  # the type rule asks for each candidate
            return kb[kb_id].types

        def names_of(kb_id: str) -> tuple[str, ...]:  # the opposites check asks for some
            return kb[kb_id].names

        candidates, kept_vectors = [], []
        for span, label, retrieved, vector in zip(
                spans, labels, retriever.candidates(scores, positions), vectors, strict=True):
            text = texts[span.doc_index][span.start_char:span.end_char]
            candidates.append(self.rank(
                label, retrieved, retriever.probabilities, types_of, top_k,
                kb.mention_prior(text, self.prior_smoothing), mention=text,
                names_of=names_of, language=language))
            kept_vectors.append(vector if retrieved else None)
        return Retrieved(candidates, kept_vectors)

    def rank(self, label: str, retrieved: Sequence[tuple[str, float]],
             probabilities: Callable[[list[float]], list[float]],
             types_of: Callable[[str], Iterable[str]], top_k: int,
             prior: Mapping[str, float] | None = None, *, mention: str = "",
             names_of: Callable[[str], Iterable[str]] | None = None,
             language: str = "en") -> list[Candidate]:
        """A ``label`` mention's first ``top_k`` candidates, best first: ``retrieved``
        (``(id, raw score)``, best first) scored on the policy's scale (``probabilities``:
        the retriever's p(e | m) of raw scores) and joined with ``prior`` (the mention's
        p_prior(e | m) by id, under ``incl_prior``), without the opposites of the text
        ``mention`` (under ``opposites``; ``names_of``: an entity's name and aliases;
        ``language``: the pipeline's), then the type rule (``types_of``: an entity's KB
        types)."""
        raw = [float(score) for _, score in retrieved]
        scores = self.scaled(raw, probabilities)
        scored = [Candidate(i, s, r) for (i, _), s, r in zip(retrieved, scores, raw, strict=True)]
        if prior and self.incl_prior and self.scores == "probability":
            joined = [Candidate(i, p + prior.get(i, 0.0) * (1.0 - p), r) for i, p, r in scored]
            scored = sorted(joined, key=lambda candidate: -candidate[1])  # stable on ties
        if self.opposites and names_of is not None:
            scored = unopposed(mention, scored, names_of, language)
        if self.rule is not None:
            scored = self.rule.apply(label, scored, types_of)
        return scored[:top_k]
