"""The KB-ablation benchmark's bookkeeping (issue 61): which ids are removed and how an
operating point is read."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from kb_ablation import operating_point, removed_ids  # noqa: E402


def test_removed_ids_are_a_seeded_share_of_the_gold_ids_the_kb_holds():
    gold = [("A",), ("B", "C"), ("D",), ("Z",), ("A",)]
    kb = {"A", "B", "C", "D", "E"}
    removed = removed_ids(gold, kb, 0.5, seed=0)
    assert len(removed) == 2 and removed <= {"A", "B", "C", "D"}
    assert removed == removed_ids(gold, kb, 0.5, seed=0)


def test_an_operating_point_counts_abstentions_apart_from_wrong_links():
    # (in the KB, first candidate right, its probability, linked by the default)
    rows = [(True, True, 0.9, True), (True, True, 0.3, False), (True, False, 0.2, False),
            (False, False, 0.8, True), (False, False, 0.1, False)]
    never = operating_point(rows, None)
    assert never == {"threshold": None, "out_of_kb_abstained": 0.0,
                     "precision_of_links": 0.4, "in_kb_r1": 0.6667}
    default = operating_point(rows, 0.5, default=True)
    assert default["out_of_kb_abstained"] == 0.5
    assert default["in_kb_r1"] == 0.3333
    assert default["precision_of_links"] == 0.5
    swept = operating_point(rows, 0.25)
    assert swept["out_of_kb_abstained"] == 0.5 and swept["in_kb_r1"] == 0.6667
