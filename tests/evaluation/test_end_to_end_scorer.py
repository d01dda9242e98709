"""Tests for the end-to-end scorer: InKB micro P/R/F1 (strong matching) and retriever recall."""

from __future__ import annotations

import pytest
import spacy
from spacy.training import Example

from spacy_arboel.evaluation.end_to_end import score_end_to_end, strong_matches
from spacy_arboel.extensions import PASSAGE_CANDIDATES_EXT, register_extensions

register_extensions()

TEXT = "Aspirin induced cough and heart failure with fever ."
# Aspirin (0, 7), cough (16, 21), heart failure (26, 39), failure (32, 39), fever (45, 50)
OTHER = "Headache and pain and rash ."
# Headache (0, 8), pain (13, 17), rash (22, 26)
KB = {"C1", "D1", "D2", "D3", "D4", "D9", "P1"}


def _doc(nlp, text: str, ents: list[tuple[int, int, str]]):
    doc = nlp.make_doc(text)
    doc.ents = [doc.char_span(s, e, label="E", kb_id=kb_id) for s, e, kb_id in ents]
    return doc


def _examples(nlp) -> list[Example]:
    gold = _doc(nlp, TEXT, [(0, 7, "C1"), (16, 21, "D1"), (26, 39, "D2"), (45, 50, "D3|D4")])
    predicted = _doc(nlp, TEXT, [
        (0, 7, "C1"),  # right
        (16, 21, "D9"),  # wrong id on the right span
        (32, 39, "D2"),  # right id on a shifted span
        (45, 50, "D4"),  # one of the composite gold ids: right
    ])
    other_gold = _doc(nlp, OTHER, [(0, 8, "OUT"), (13, 17, "P1"), (22, 26, "-1")])
    other_pred = _doc(nlp, OTHER, [(0, 8, "NIL"), (13, 17, ""), (22, 26, "NIL")])
    return [Example(predicted, gold), Example(other_pred, other_gold)]


def test_inkb_micro_prf(nlp):
    scores = score_end_to_end(_examples(nlp), kb_ids=KB)
    # InKB gold: Aspirin, cough, heart failure, fever, pain (OUT not in KB, -1 has no id);
    # predictions: C1, D9, D2, D4 (NIL and empty ignored); right: C1 and D4
    assert (scores["e2e_n_gold"], scores["e2e_n_predicted"], scores["e2e_tp"]) == (5, 4, 2)
    assert scores["e2e_inkb_p"] == pytest.approx(0.5)
    assert scores["e2e_inkb_r"] == pytest.approx(0.4)
    assert scores["e2e_inkb_f"] == pytest.approx(2 * 0.5 * 0.4 / 0.9)
    assert scores["e2e_retriever_mention_recall"] is None
    assert scores["e2e_retriever_passage_recall"] is None
    assert all(not isinstance(v, dict | list) for v in scores.values())


def test_kb_ids_none_and_predicate(nlp):
    scores = score_end_to_end(_examples(nlp))  # every id counts: OUT too, "-1" still not
    assert (scores["e2e_n_gold"], scores["e2e_tp"]) == (6, 2)
    scores = score_end_to_end(_examples(nlp), kb_ids=lambda i: i.startswith("D"))
    # in KB: cough, heart failure, fever; precision still counts every prediction
    assert (scores["e2e_n_gold"], scores["e2e_n_predicted"], scores["e2e_tp"]) == (3, 4, 1)


def test_composite_needs_an_in_kb_part(nlp):
    gold = _doc(nlp, TEXT, [(45, 50, "X1|D4")])
    predicted = _doc(nlp, TEXT, [(45, 50, "X1")])
    scores = score_end_to_end([Example(predicted, gold)], kb_ids={"D4"})
    # the mention is InKB through D4; X1 is also one of its gold ids, so the link is right
    assert (scores["e2e_n_gold"], scores["e2e_tp"]) == (1, 1)


def test_each_gold_mention_matched_once():
    gold = [(0, 5, ("A", "B"))]
    assert strong_matches(gold, [(0, 5, "A"), (0, 5, "B")]) == 1
    assert strong_matches(gold * 2, [(0, 5, "A"), (0, 5, "B")]) == 2
    assert strong_matches(gold, [(0, 4, "A"), (1, 5, "B"), (0, 5, "C")]) == 0


def test_empty_docs_give_none_and_no_predictions_zero(nlp):
    empty = Example(nlp.make_doc(""), nlp.make_doc(""))
    for examples in ([], [empty]):
        scores = score_end_to_end(examples)
        assert scores["e2e_inkb_p"] is None and scores["e2e_inkb_r"] is None
        assert scores["e2e_inkb_f"] is None
        assert (scores["e2e_n_gold"], scores["e2e_n_predicted"], scores["e2e_tp"]) == (0, 0, 0)
    no_links = Example(_doc(nlp, TEXT, []), _doc(nlp, TEXT, [(0, 7, "C1")]))
    scores = score_end_to_end([no_links])
    # nothing predicted on a gold mention: 0, not None (spaCy's training loop would drop the
    # score weight of a None score for the rest of training)
    assert scores["e2e_inkb_p"] == 0.0 and scores["e2e_inkb_r"] == 0.0
    assert scores["e2e_inkb_f"] == 0.0
    wrong = Example(_doc(nlp, TEXT, [(0, 7, "D1")]), _doc(nlp, TEXT, [(0, 7, "C1")]))
    assert score_end_to_end([wrong])["e2e_inkb_f"] == 0.0


def _retrieval_example(nlp, passages) -> Example:
    gold = _doc(nlp, TEXT, [(0, 7, "C1"), (16, 21, "D1"), (26, 39, "D2"), (45, 50, "D3|D4")])
    predicted = nlp.make_doc(TEXT)
    predicted._.set(PASSAGE_CANDIDATES_EXT, passages)
    return Example(predicted, gold)


def test_retriever_recall(nlp):
    passages = [
        (0, 30, [("C1", 0.9), ("D1", 0.8)]),  # Aspirin and cough; heart failure is cut
        (0, 22, [("C1", 0.9), ("D7", 0.1)]),  # Aspirin and cough, cough's id missing
        (30, 52, [("D2", 0.7), ("D4", 0.6)]),  # fever (composite); heart failure is cut
        (39, 45, [("D2", 0.5)]),  # no gold mention inside: not counted
    ]
    scores = score_end_to_end([_retrieval_example(nlp, passages)], kb_ids=KB)
    # found: Aspirin, cough, fever; heart failure lies inside no passage although D2 is retrieved
    assert scores["e2e_retriever_mention_recall"] == pytest.approx(3 / 4)
    assert scores["e2e_retriever_passage_recall"] == pytest.approx(2 / 3)
    whole = [(0, 52, ["C1", "D1", "D2", "D3"])]  # bare ids work too
    scores = score_end_to_end([_retrieval_example(nlp, whole)], kb_ids=KB)
    assert scores["e2e_retriever_mention_recall"] == 1.0
    assert scores["e2e_retriever_passage_recall"] == 1.0
    scores = score_end_to_end([_retrieval_example(nlp, [(0, 52, [("C1", 1.0)])])], kb_ids=KB)
    assert scores["e2e_retriever_mention_recall"] == pytest.approx(1 / 4)
    assert scores["e2e_retriever_passage_recall"] == 0.0


def test_retriever_recall_skips_docs_without_candidates(nlp):
    with_candidates = _retrieval_example(nlp, [(0, 30, [("C1", 0.9), ("D1", 0.8)])])
    without = Example(nlp.make_doc(OTHER), _doc(nlp, OTHER, [(13, 17, "P1")]))
    scores = score_end_to_end([with_candidates, without], kb_ids=KB)
    assert scores["e2e_retriever_mention_recall"] == pytest.approx(2 / 4)
    assert scores["e2e_retriever_passage_recall"] == 1.0
    no_passages = _retrieval_example(nlp, [])
    scores = score_end_to_end([no_passages], kb_ids=KB)
    assert scores["e2e_retriever_mention_recall"] == 0.0
    assert scores["e2e_retriever_passage_recall"] is None


def test_registered_scorer(nlp):
    scorer = spacy.registry.scorers.get("spacy_arboel.end_to_end_scorer.v1")()
    assert scorer is score_end_to_end
    scores = scorer(_examples(nlp), kb_ids=KB, nil_id="NIL", threshold=0.03)  # extra cfg ignored
    assert scores["e2e_tp"] == 2
