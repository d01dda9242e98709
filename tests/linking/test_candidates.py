"""The candidate policy: the scale, the KB's mention prior joined as spaCy joins it, the type
rule after them."""

import numpy as np
import pytest

from spacy_arboel.linking.candidates import CandidatePolicy
from spacy_arboel.linking.dense_retriever import pooled_probabilities

RETRIEVED = [("A", 2.0), ("B", 1.5), ("C", 0.0)]
TYPES = {"A": ("Disease",), "B": ("Disease",), "C": ("Chemical",)}


def _rank(policy: CandidatePolicy, prior=None, label="Disease", top_k=64):
    return policy.rank(label, RETRIEVED, lambda raw: pooled_probabilities(raw, 1.0),
                       TYPES.__getitem__, top_k, prior)


def test_the_prior_joins_p_e_m_as_spacy_does_and_reorders():
    p = pooled_probabilities([s for _, s in RETRIEVED], 1.0)
    ranked = _rank(CandidatePolicy(), {"B": 0.8, "Z": 0.2})
    assert [i for i, _, _ in ranked] == ["B", "A", "C"]
    assert ranked[0][1] == pytest.approx(p[1] + 0.8 - p[1] * 0.8)
    assert ranked[1][1] == pytest.approx(p[0])  # no link count: its own p(e | m)
    assert [r for _, _, r in ranked] == [1.5, 2.0, 0.0]  # the raw scores go with them
    assert all(0.0 <= s <= 1.0 for _, s, _ in ranked)  # a threshold still reads [0, 1]


@pytest.mark.parametrize("policy, prior", [
    (CandidatePolicy(incl_prior=False), {"B": 1.0}),   # turned off
    (CandidatePolicy(scores="raw"), {"B": 1.0}),       # no probability to join it to
    (CandidatePolicy(), {}),                           # a text the counts never saw
    (CandidatePolicy(), None),                         # a KB without link counts
])
def test_the_order_stays_without_a_prior_to_join(policy, prior):
    assert [i for i, _, _ in _rank(policy, prior)] == ["A", "B", "C"]


def test_the_type_rule_acts_after_the_prior():
    typed = {"Disease": ["Disease"]}
    restrict = _rank(CandidatePolicy(label_types=typed), {"C": 1.0})
    assert [i for i, _, _ in restrict] == ["A", "B"]  # the prior brings no other type back
    prefer = _rank(CandidatePolicy(label_types=typed, type_rule="prefer"), {"C": 1.0})
    assert [i for i, _, _ in prefer] == ["A", "B", "C"]
    assert prefer[2][1] == pytest.approx(1.0)
    assert [i for i, _, _ in _rank(CandidatePolicy(), {"C": 1.0}, top_k=1)] == ["C"]
    assert np.isclose(_rank(CandidatePolicy(), {"C": 1.0})[0][1], 1.0)
