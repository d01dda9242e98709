"""The registered candidate policy of ``arbo_entity_linker`` (spaCy's ``get_candidates``):
``[components.arbo_entity_linker.get_candidates]`` names it; its defaults are
``linking.candidates.CandidatePolicy``'s."""

from spacy.util import registry

from ..kb.type_rule import TYPE_RULES
from ..linking.candidates import SCORE_SCALES, CandidatePolicy
from ..settings import NonNegativeFloat, choices


@registry.misc("spacy_arboel.candidates.v1")
def make_candidates(
    scores: choices(SCORE_SCALES) = CandidatePolicy.scores,
    lexical_weight: NonNegativeFloat | None = CandidatePolicy.lexical_weight,
    label_types: dict[str, list[str]] | str | None = CandidatePolicy.label_types,
    type_rule: choices(TYPE_RULES) = CandidatePolicy.type_rule,
    incl_prior: bool = CandidatePolicy.incl_prior,
    opposites: bool = CandidatePolicy.opposites,
    prior_smoothing: NonNegativeFloat = CandidatePolicy.prior_smoothing,
) -> CandidatePolicy:
    """A mention's candidates on the ``scores`` scale (``probability``: p(e | m); ``raw``),
    with BioSyn's lexical score at ``lexical_weight`` (``tune-lexical`` chooses it) and the
    type rule of ``label_types`` (ent label -> KB types) in ``type_rule`` mode (``restrict``,
    ``prefer``, ``clusters``), joined with the KB's mention prior under ``incl_prior`` (spaCy's
    setting; a KB without link counts has none) smoothed by ``prior_smoothing`` links to an
    unseen entity, without the candidates whose names say the
    opposite of the mention under ``opposites``."""
    return CandidatePolicy(scores, lexical_weight, label_types, type_rule, incl_prior,
                           opposites, prior_smoothing)
