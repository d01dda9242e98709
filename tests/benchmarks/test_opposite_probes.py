"""The probes of ``benchmarks/opposite_probes.py`` on a tiny made-up KB: pairs of opposite
names, the held-out mention, and the KB each setting links against."""

from __future__ import annotations

import sys
from pathlib import Path

from spacy_arboel.kb import Entity, KnowledgeBase

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from opposite_probes import probe_pairs, without_names  # noqa: E402

KB = KnowledgeBase([
    Entity("T", "Tall stature", aliases=("Increased body height",)),
    Entity("S", "Short stature", aliases=("Decreased body height", "Small stature")),
    Entity("W", "Broad thumb"),                   # broad / narrow: one scale
    Entity("N", "Narrow thumb"),                  # its one name is the mention
    Entity("X", "Short thumb"),                   # short / broad: two scales, no pair
    Entity("I", "Interleukin 12 level increased"),
    Entity("J", "Interleukin 10 level decreased"),  # another frame: digits count
])


def test_opposite_names_make_one_probe_each_way_and_nothing_else():
    probes = {(p["a"], p["b"]): p for p in probe_pairs(KB)}
    assert set(probes) == {("T", "S"), ("S", "T"), ("W", "N"), ("N", "W")}
    # the mention is another name of A than the one that made the pair, where A has one
    assert probes["T", "S"]["mention"] not in (probes["T", "S"]["pair_name"],)
    assert probes["N", "W"]["mention"] == "Narrow thumb"


def test_held_out_names_leave_the_kb_and_nameless_entities_go():
    kb, kept = without_names(KB, {"T": {"Tall stature"}, "N": {"Narrow thumb"}})
    assert kb["T"].name == "Increased body height" and kb["T"].aliases == ()
    assert "N" not in kb and kept == {"T", "S", "W", "X", "I", "J"}
