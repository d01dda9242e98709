"""The type rule: which KB types an ent label may link to."""

import pytest

from spacy_arboel.kb.type_rule import TypeRule

TYPES = {"D1": ("Disease",), "C1": ("Chemical",), "X1": (), "B1": ("Chemical", "Disease")}
RULE = {"Chemical": ["Chemical"], "Disease": ["Disease"]}


def test_fits_acts_only_on_what_the_kb_and_the_label_say():
    rule = TypeRule.from_settings(RULE)
    assert rule.fits("Chemical", TYPES["C1"]) and not rule.fits("Chemical", TYPES["D1"])
    assert rule.fits("Chemical", TYPES["X1"])  # an untyped entity
    assert rule.fits("Gene", TYPES["D1"])  # a label the rule does not map
    assert rule.fits("Disease", TYPES["B1"])  # one shared type is enough


def test_restrict_drops_and_prefer_ranks_last():
    candidates = [("D1", 0.9), ("X1", 0.8), ("C1", 0.7), ("B1", 0.1)]
    restrict = TypeRule.from_settings(RULE)
    assert restrict.apply("Chemical", candidates, TYPES.get) == [
        ("X1", 0.8), ("C1", 0.7), ("B1", 0.1)]
    prefer = TypeRule.from_settings(RULE, "prefer")
    assert prefer.apply("Chemical", candidates, TYPES.get) == [
        ("X1", 0.8), ("C1", 0.7), ("B1", 0.1), ("D1", 0.9)]
    assert prefer.apply("Gene", candidates, TYPES.get) == candidates
    # clusters: the candidates as they are; the rule holds for arbo_coref only
    clusters = TypeRule.from_settings(RULE, "clusters")
    assert clusters.apply("Chemical", candidates, TYPES.get) == candidates
    assert not clusters.compatible("Chemical", "Disease")


def test_compatible_labels_and_the_label_of_an_entity():
    rule = TypeRule.from_settings({**RULE, "Drug": ["Chemical"]})
    assert not rule.compatible("Chemical", "Disease")
    assert rule.compatible("Chemical", "Drug") and rule.compatible("Chemical", "ENTITY")
    assert rule.label_for(("Disease",)) == "Disease"
    assert rule.label_for(("Chemical",)) == "Chemical"  # the first in the map's order
    assert rule.label_for(("Gene",)) is None


@pytest.mark.parametrize("bad", [{"Chemical": "Chemical"}, {"Chemical": [1]}, ["Chemical"]])
def test_a_malformed_map_is_E223(bad):
    with pytest.raises(ValueError, match=r"\[E223\]"):
        TypeRule.from_settings(bad)
    with pytest.raises(ValueError, match=r"\[E007\].*restrict, prefer, clusters"):
        TypeRule.from_settings(RULE, "drop")
    assert TypeRule.from_settings(None) is None and TypeRule.from_settings({}) is None


def test_the_json_text_of_a_map_is_the_map():
    """How a config override
    (`--components.arbo_entity_linker.get_candidates.label_types '{...}'`) gives it:
    confection reads a dict override as a section."""
    assert TypeRule.from_settings('{"Chemical": ["Chemical"]}') == TypeRule.from_settings(
        {"Chemical": ["Chemical"]})
    with pytest.raises(ValueError, match=r"\[E223\]"):
        TypeRule.from_settings('{"Chemical": ')
