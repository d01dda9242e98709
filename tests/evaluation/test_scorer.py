"""Tests for the spaCy scorer, the outcome alignment and the compare-runs command."""

import json

import pytest
import spacy
from spacy.tokens import Span
from spacy.training import Example

from spacy_arboel.evaluation import (
    linking_metrics,
    mention_outcomes_from_examples,
    score_entity_linking,
    write_json,
)

TEXT = "Cough and fever after aspirin and ibuprofen ."


@pytest.fixture(scope="module")
def nlp():
    return spacy.blank("xx")


def _span(doc, start, end, label, kb_id, candidates=None):
    span = Span(doc, start, end, label=label, kb_id=kb_id)
    if candidates is not None:
        span._.kb_candidates = candidates
    return span


def _examples(nlp) -> list[Example]:
    # make sure the extension exists before the predicted spans are built
    spacy.registry.scorers.get("spacy_arboel.entity_linking_scorer.v1")()
    reference = nlp.make_doc(TEXT)
    reference.ents = [
        _span(reference, 0, 1, "Disease", "D1"),  # Cough
        _span(reference, 2, 3, "Disease", "D2|D3"),  # fever (composite)
        _span(reference, 4, 5, "Chemical", "C1"),  # aspirin
        _span(reference, 6, 7, "Chemical", ""),  # ibuprofen: no gold id
    ]
    predicted = nlp.make_doc(TEXT)
    predicted.ents = [
        _span(predicted, 0, 1, "Disease", "D1", [("D1", 0.9), ("D2", 0.5)]),
        _span(predicted, 2, 3, "Disease", "D9", [("D9", 0.8), ("D3", 0.7)]),
        # aspirin not predicted; an extra predicted span that matches no gold one
        _span(predicted, 5, 6, "Chemical", "C1", [("C1", 0.9)]),
        _span(predicted, 6, 7, "Chemical", "C2", [("C2", 0.9)]),
    ]
    other_ref = nlp.make_doc("Headache .")
    other_ref.ents = [_span(other_ref, 0, 1, "Disease", "OUT")]  # not in KB
    other_pred = nlp.make_doc("Headache .")
    other_pred.ents = [_span(other_pred, 0, 1, "Disease", "NIL", None)]  # candidates None
    return [Example(predicted, reference), Example(other_pred, other_ref)]


KB = {"D1", "D2", "D3", "D9", "C1", "C2"}


def test_outcomes_alignment(nlp):
    outcomes = mention_outcomes_from_examples(_examples(nlp), KB, seen_ids={"D1", "C1"})
    assert [o.gold_ids for o in outcomes] == [("D1",), ("D2", "D3"), ("C1",), (), ("OUT",)]
    assert outcomes[0].candidates == ["D1", "D2"] and outcomes[0].predicted == "D1"
    assert outcomes[1].candidates == ["D9", "D3"] and outcomes[1].predicted == "D9"
    assert outcomes[2].candidates == [] and outcomes[2].predicted == ""
    assert outcomes[4].candidates == [] and outcomes[4].predicted == "NIL"
    assert [o.in_kb for o in outcomes] == [True, True, True, False, False]
    assert [o.seen for o in outcomes] == [True, False, True, False, False]
    assert [o.label for o in outcomes] == ["Disease", "Disease", "Chemical", "Chemical", "Disease"]


def test_outcomes_kb_predicate_and_unknown_seen(nlp):
    outcomes = mention_outcomes_from_examples(_examples(nlp), lambda i: i != "C1")
    assert [o.in_kb for o in outcomes] == [True, True, False, False, True]
    assert all(o.seen is None for o in outcomes)


def test_outcomes_unlinked_span_is_nil(nlp):
    ref = nlp.make_doc("Cough .")
    ref.ents = [Span(ref, 0, 1, label="Disease", kb_id="D1")]
    pred = nlp.make_doc("Cough .")
    pred.ents = [Span(pred, 0, 1, label="Disease")]
    (outcome,) = mention_outcomes_from_examples([Example(pred, ref)], nil_id="NONE")
    assert outcome.predicted == "NONE"


def test_score_entity_linking(nlp):
    scores = score_entity_linking(_examples(nlp), kb_ids=KB, seen_ids={"D1", "C1"})
    # in KB: Cough (rank 1, correct), fever (gold D3 at rank 2, wrong), aspirin (missed)
    assert scores["nel_inkb_recall@1"] == pytest.approx(1 / 3)
    assert scores["nel_inkb_recall@2"] == pytest.approx(2 / 3)
    assert scores["nel_inkb_recall@64"] == pytest.approx(2 / 3)
    assert scores["nel_inkb_acc"] == pytest.approx(1 / 3)
    # all: Headache (out of KB) added as an error
    assert scores["nel_recall@1"] == pytest.approx(1 / 4)
    assert scores["nel_recall@64"] == pytest.approx(2 / 4)
    assert scores["nel_acc"] == pytest.approx(1 / 4)
    assert scores["nel_seen_acc"] == pytest.approx(1 / 2)
    assert scores["nel_unseen_acc"] == pytest.approx(0.0)
    assert scores["nel_nil_acc"] == pytest.approx(1.0)
    assert set(scores["nel_per_type"]) == {"Disease", "Chemical"}
    assert scores["nel_per_type"]["Disease"]["acc"] == pytest.approx(1 / 2)
    assert scores["nel_per_type"]["Disease"]["recall@2"] == pytest.approx(1.0)
    assert scores["nel_per_type"]["Chemical"]["recall@1"] == pytest.approx(0.0)
    # spaCy's entity_linker keys, over the spans both sides have (aspirin is not): Cough
    # right (TP), fever wrong (FP and FN), ibuprofen linked without a gold id (FP),
    # Headache's out-of-KB id predicted NIL (FN)
    assert scores["nel_micro_p"] == pytest.approx(1 / 3)
    assert scores["nel_micro_r"] == pytest.approx(1 / 3)
    assert scores["nel_micro_f"] == pytest.approx(1 / 3)
    assert set(scores["nel_f_per_type"]) == {"Disease", "Chemical"}
    # flat keys only hold numbers or None, apart from the per-type dicts and spaCy's label
    flat = {k: v for k, v in scores.items()
            if k not in ("nel_per_type", "nel_f_per_type", "nel_score_desc")}
    assert all(v is None or isinstance(v, float) for v in flat.values())


def test_score_without_kb_counts_everything_in_kb(nlp):
    scores = score_entity_linking(_examples(nlp), threshold=0.5, labels=("x",))
    # Headache now in KB, predicted NIL, no candidates
    assert scores["nel_inkb_acc"] == pytest.approx(1 / 4)
    assert scores["nel_acc"] == scores["nel_inkb_acc"]
    assert scores["nel_seen_acc"] is None and scores["nel_unseen_acc"] is None
    assert scores["nel_nil_acc"] is None


def test_score_empty():
    scores = score_entity_linking([])
    assert scores["nel_inkb_acc"] is None and scores["nel_recall@64"] is None
    assert scores["nel_per_type"] == {}


def test_registered_scorer(nlp):
    scorer = spacy.registry.scorers.get("spacy_arboel.entity_linking_scorer.v1")()
    assert scorer is score_entity_linking
    assert Span.has_extension("kb_candidates")
    assert scorer(_examples(nlp), kb_ids=KB)["nel_inkb_acc"] == pytest.approx(1 / 3)


def test_compare_runs_cli(nlp, tmp_path, cli):
    import spacy_arboel.cli.eval_commands  # noqa: F401  (registers the command)

    outcomes = mention_outcomes_from_examples(_examples(nlp), KB)
    write_json(linking_metrics(outcomes), tmp_path / "baseline.json")
    write_json({"name": "arbo", **linking_metrics(outcomes[:1])}, tmp_path / "second.json")
    md, png = tmp_path / "out" / "table.md", tmp_path / "out" / "recall.png"
    result = cli("compare-runs", tmp_path / "baseline.json", tmp_path / "second.json",
                 "--markdown", md, "--plot", png)
    assert result.exit_code == 0, result.output
    table = md.read_text()
    assert "| baseline | 0.333 |" in table
    assert "| arbo | 1.000 |" in table
    assert png.stat().st_size > 0


def test_compare_runs_rejects_bad_json(tmp_path, cli):
    import spacy_arboel.cli.eval_commands  # noqa: F401

    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([1, 2]))
    result = cli("compare-runs", bad)
    assert result.exit_code != 0
