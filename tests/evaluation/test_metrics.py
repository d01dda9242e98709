"""Tests for the spaCy-free linking metrics and the reports."""

import json

import pytest

from spacy_arboel.data.ids import gold_ids
from spacy_arboel.evaluation.metrics import (
    KS,
    MentionOutcome,
    linking_metrics,
)
from spacy_arboel.evaluation.report import markdown_table, plot_recall_at_k, write_json


def _outcomes() -> list[MentionOutcome]:
    return [
        # gold at rank 1, predicted correctly; seen Disease
        MentionOutcome(("A",), ["A", "B", "C"], "A", label="Disease", seen=True),
        # gold at rank 2, wrong prediction; unseen Disease
        MentionOutcome(("B",), ["X", "B", "C"], "X", label="Disease", seen=False),
        # composite gold: second id at rank 3, predicted the first id -> correct; seen Chemical
        MentionOutcome(("C", "D"), ["X", "Y", "D", "C"], "C", label="Chemical", seen=True),
        # gold not retrieved at all, predicted NIL; unseen Chemical
        MentionOutcome(("E",), ["X", "Y"], "NIL", label="Chemical", seen=False),
        # out of KB, predicted NIL (correct NIL), and one wrongly linked
        MentionOutcome(("Z1",), ["X"], "NIL", label="Disease", in_kb=False, seen=False),
        MentionOutcome(("Z2",), ["X"], "X", label="Disease", in_kb=False, seen=False),
        # no gold id: counted apart
        MentionOutcome((), ["A"], "A", label="Disease"),
    ]


def test_gold_ids_splits_composites():
    assert gold_ids("D001") == ("D001",)
    assert gold_ids("D001|D002") == ("D001", "D002")
    assert gold_ids("D001| D002 |D001") == ("D001", "D002")
    assert gold_ids("") == ()
    assert gold_ids("|") == ()


def test_in_kb_recall_and_accuracy():
    m = linking_metrics(_outcomes())
    in_kb = m["in_kb"]
    assert in_kb["n"] == 4
    assert in_kb["recall@1"] == pytest.approx(1 / 4)
    assert in_kb["recall@2"] == pytest.approx(2 / 4)
    assert in_kb["recall@4"] == pytest.approx(3 / 4)
    assert in_kb["recall@64"] == pytest.approx(3 / 4)
    assert in_kb["accuracy"] == pytest.approx(2 / 4)
    assert set(in_kb) == {"n", "accuracy", "abstained", *(f"recall@{k}" for k in KS)}


def test_all_counts_out_of_kb_as_errors():
    m = linking_metrics(_outcomes())
    assert m["all"]["n"] == 6
    assert m["all"]["recall@1"] == pytest.approx(1 / 6)
    assert m["all"]["recall@64"] == pytest.approx(3 / 6)
    assert m["all"]["accuracy"] == pytest.approx(2 / 6)


def test_out_of_kb_and_no_gold_are_apart():
    m = linking_metrics(_outcomes())
    assert m["out_of_kb"] == {"n": 2, "nil_accuracy": pytest.approx(1 / 2)}
    assert m["no_gold_id"] == 1
    # a custom NIL id
    m = linking_metrics(_outcomes(), nil_id="X")
    assert m["out_of_kb"]["nil_accuracy"] == pytest.approx(1 / 2)


def test_out_of_kb_never_correct_even_if_candidate_matches():
    m = linking_metrics([MentionOutcome(("A",), ["A"], "A", in_kb=False)])
    assert m["all"]["recall@1"] == 0.0
    assert m["all"]["accuracy"] == 0.0
    assert m["in_kb"]["n"] == 0


def test_seen_unseen_split():
    m = linking_metrics(_outcomes())
    assert m["seen"]["n"] == 2
    assert m["seen"]["accuracy"] == pytest.approx(1.0)
    assert m["seen"]["recall@1"] == pytest.approx(1 / 2)
    assert m["seen"]["recall@4"] == pytest.approx(1.0)
    assert m["unseen"]["n"] == 2
    assert m["unseen"]["accuracy"] == pytest.approx(0.0)
    assert m["unseen"]["recall@2"] == pytest.approx(1 / 2)


def test_seen_unknown_goes_to_neither():
    m = linking_metrics([MentionOutcome(("A",), ["A"], "A")])
    assert m["seen"]["n"] == 0 and m["unseen"]["n"] == 0
    assert m["in_kb"]["accuracy"] == 1.0


def test_per_type_uses_in_kb_mentions():
    per_type = linking_metrics(_outcomes())["per_type"]
    assert sorted(per_type) == ["Chemical", "Disease"]
    assert per_type["Disease"]["n"] == 2
    assert per_type["Disease"]["accuracy"] == pytest.approx(1 / 2)
    assert per_type["Disease"]["recall@2"] == pytest.approx(1.0)
    assert per_type["Chemical"]["n"] == 2
    assert per_type["Chemical"]["recall@1"] == pytest.approx(0.0)
    assert per_type["Chemical"]["recall@4"] == pytest.approx(1 / 2)


def test_empty_input_has_no_division_by_zero():
    m = linking_metrics([])
    for group in ("all", "in_kb", "seen", "unseen"):
        assert m[group]["n"] == 0
        assert m[group]["accuracy"] is None
        assert all(m[group][f"recall@{k}"] is None for k in KS)
    assert m["out_of_kb"] == {"n": 0, "nil_accuracy": None}
    assert m["per_type"] == {}
    assert m["no_gold_id"] == 0


def test_custom_ks():
    m = linking_metrics(_outcomes(), ks=(3, 1))
    assert set(m["in_kb"]) == {"n", "accuracy", "abstained", "recall@1", "recall@3"}
    assert m["in_kb"]["recall@3"] == pytest.approx(3 / 4)


def test_write_json_round_trip(tmp_path):
    m = linking_metrics(_outcomes())
    path = write_json(m, tmp_path / "sub" / "run.json")
    assert json.loads(path.read_text()) == json.loads(json.dumps(m))


def test_markdown_table():
    runs = {"good": linking_metrics(_outcomes()), "empty": linking_metrics([])}
    table = markdown_table(runs)
    lines = table.strip().splitlines()
    assert len(lines) == 4
    assert lines[0].startswith("| run | in-KB R@1 | in-KB R@64 |")
    good = [c.strip() for c in lines[2].strip("|").split("|")]
    # no scores in the outcomes: no ECE
    assert good == ["good", "0.250", "0.750", "0.500", "1.000", "0.000", "0.167", "0.500", "–",
                    "6"]
    empty = [c.strip() for c in lines[3].strip("|").split("|")]
    assert empty[0] == "empty" and empty[1:-1] == ["–"] * 8 and empty[-1] == "0"


def test_plot_reliability(tmp_path):
    from spacy_arboel.evaluation.report import plot_reliability

    scored = [MentionOutcome(("A",), ["A"], "A", confidence=0.8),
              MentionOutcome(("A",), ["B"], "B", confidence=0.3)]
    runs = {"scored": linking_metrics(scored), "unscored": linking_metrics(_outcomes())}
    path = plot_reliability(runs, tmp_path / "plots" / "reliability.png")
    assert path.read_bytes()[:4] == b"\x89PNG"


def test_plot_recall_at_k(tmp_path):
    runs = {"good": linking_metrics(_outcomes()), "empty": linking_metrics([])}
    path = plot_recall_at_k(runs, tmp_path / "plots" / "recall.png")
    data = path.read_bytes()
    assert len(data) > 0
    assert data[:8] == b"\x89PNG\r\n\x1a\n"


def test_calibration_bins_the_first_score_and_weighs_each_bin_by_its_mentions():
    from spacy_arboel.evaluation.metrics import calibration

    outcomes = [  # 0.9: three right of four; 0.25: one wrong; out of the KB: never right
        *(MentionOutcome(("A",), ["A"], "A", confidence=0.9) for _ in range(3)),
        MentionOutcome(("A",), ["B"], "B", confidence=0.9),
        MentionOutcome(("A",), ["B"], "B", confidence=0.25),
        MentionOutcome(("Z",), ["Z"], "Z", in_kb=False, confidence=0.25),
        MentionOutcome(("A",), [], ""),  # no candidate: not scored
    ]
    result = calibration(outcomes)
    assert result["n"] == 6
    assert [(b["lower"], b["n"], b["accuracy"]) for b in result["bins"]] == [
        (0.2, 2, 0.0), (0.9, 4, 0.75)]
    assert result["ece"] == pytest.approx(2 / 6 * 0.25 + 4 / 6 * 0.15, abs=1e-4)
    # a score of 1.0 falls in the last bin; raw scores are no probability
    assert calibration([MentionOutcome(("A",), ["A"], "A", confidence=1.0)])["ece"] == 0.0
    assert calibration([MentionOutcome(("A",), ["A"], "A", confidence=3.2)])["ece"] is None
    assert linking_metrics(outcomes)["calibration"] == result


def test_an_abstained_mention_is_counted_apart_from_its_candidates():
    """NIL for an in-KB mention: its R@1 still reads the candidates, its accuracy is wrong,
    and the group's ``abstained`` share counts it (issue 61: abstentions counted apart)."""
    outcomes = [MentionOutcome(("A",), ["A", "B"], "NIL"),
                MentionOutcome(("B",), ["B"], "B"),
                MentionOutcome(("C",), ["A"], "A"),
                MentionOutcome(("Z",), ["A"], "NIL", in_kb=False)]
    metrics = linking_metrics(outcomes)
    assert metrics["in_kb"]["recall@1"] == pytest.approx(2 / 3)
    assert metrics["in_kb"]["accuracy"] == pytest.approx(1 / 3)
    assert metrics["in_kb"]["abstained"] == pytest.approx(1 / 3)
    assert metrics["all"]["abstained"] == pytest.approx(2 / 4)
    assert metrics["out_of_kb"]["nil_accuracy"] == 1.0
