"""Opposite links (issue 61): a mention is never linked to a term whose names say the
opposite of it, and nothing else is dropped."""

import pytest

from spacy_arboel.linking.candidates import CandidatePolicy
from spacy_arboel.linking.dense_retriever import pooled_probabilities
from spacy_arboel.linking.opposites import opposes, polarity

NAMES = {
    "HP:0000098": ("Tall stature", "Increased body height"),
    "HP:0004322": ("Short stature", "Decreased body height", "Small stature"),
    "HP:0025502": ("Overweight",),
    "HP:0004325": ("Decreased body weight", "Underweight"),
    "HP:0000316": ("Hypertelorism", "Wide-set eyes", "Widely spaced eyes"),
    "HP:0001662": ("Bradycardia", "Slow heart rate"),
    "HP:0001649": ("Tachycardia", "Fast heart rate", "Rapid heartbeat"),
    "HP:0000540": ("Hypermetropia", "Farsightedness", "Long-sightedness"),
    "HP:0000252": ("Microcephaly", "Small head"),
    "HP:0000790": ("Hematuria", "Blood in urine"),
    "HP:0000582": ("Upslanted palpebral fissure",),
    "HP:0000494": ("Downslanted palpebral fissures",),
    "HP:0000322": ("Short philtrum", "Decreased length of philtrum"),
}


@pytest.mark.parametrize("mention, entity", [
    ("underweight", "HP:0025502"),          # over- / under-
    ("short stature", "HP:0000098"),        # tall / short, whatever its other names say
    ("narrow-set eyes", "HP:0000316"),      # a hyphenated word is read as its parts
    ("slow heart rate", "HP:0001649"),      # slow / tachy-, fast, rapid
    ("short-sighted", "HP:0000540"),        # one name of the entity is enough ("long-")
    ("large head", "HP:0000252"),           # micro- / large
    ("upslanting eyes", "HP:0000494"),      # another scale: up / down
    ("elongated philtrum", "HP:0000322"),
    ("hypo-autofluorescent lesion", "HP:0000316"),  # hypo alone, hyphenated
])
def test_a_term_that_says_the_opposite_is_an_opposite(mention, entity):
    assert opposes(mention, NAMES[entity])


@pytest.mark.parametrize("mention, entity", [
    ("short stature", "HP:0004322"),        # the right term
    ("small head", "HP:0000252"),           # one side in other words
    ("low weight", "HP:0004325"),
    ("microscopic hematuria", "HP:0000790"),  # the entity says no side
    ("broad short thumbs", "HP:0004322"),   # broad says nothing of short
    ("hematuria", "HP:0004322"),            # the mention says no side
    ("increased or decreased height", "HP:0000098"),  # the mention says both
    ("slow heart rate", "HP:0001662"),
])
def test_what_does_not_say_the_opposite_is_kept(mention, entity):
    assert not opposes(mention, NAMES[entity])


def test_prefixes_need_a_word_after_them_and_other_languages_have_no_markers():
    assert polarity("hypoxia") == {("degree", -1)}
    assert polarity("Overgrowth") == {("degree", 1)}
    assert polarity("upper limb") == polarity("overt bleeding") == frozenset()
    assert polarity("short long bones") == {("length", -1)}  # a long bone is a kind of bone
    assert polarity("low-density lipoprotein") == frozenset()
    assert polarity("Kleinwuchs", "de") == frozenset()
    assert not opposes("short stature", NAMES["HP:0000098"], language="xx")


def _rank(policy, mention, retrieved):
    return policy.rank("", retrieved, lambda raw: pooled_probabilities(raw, 1.0),
                       lambda _: (), 64, mention=mention, names_of=NAMES.__getitem__)


def test_the_policy_drops_opposites_and_keeps_the_other_scores():
    retrieved = [("HP:0000098", 3.0), ("HP:0004322", 2.0), ("HP:0000790", 0.0)]
    full = _rank(CandidatePolicy(opposites=False), "short stature", retrieved)
    ranked = _rank(CandidatePolicy(), "short stature", retrieved)
    assert [i for i, _, _ in full] == ["HP:0000098", "HP:0004322", "HP:0000790"]
    assert ranked == full[1:]  # the next is first, its p(e | m) as it was
    # nothing left but the opposite: no candidate, the mention is NIL
    assert _rank(CandidatePolicy(), "short stature", retrieved[:1]) == []


def test_opposite_entities_pairs_names_that_differ_by_a_marker_of_the_other_side():
    from types import SimpleNamespace

    from spacy_arboel.linking.opposites import opposite_entities

    entities = [SimpleNamespace(id=i, names=names) for i, names in (
        ("T", ("Tall stature",)), ("S", ("Short stature", "Small stature")),
        ("H", ("Hypertelorism",)), ("O", ("Hypotelorism",)), ("C", ("Cough",)),
        ("L", ("Long stature bones",)))]
    assert opposite_entities(entities) == {
        ("H", "O"): "Hypertelorism", ("O", "H"): "Hypotelorism",
        ("S", "T"): "Short stature", ("T", "S"): "Tall stature"}
