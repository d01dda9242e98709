"""Concept recognition scored at mention and document level (``evaluation.concept_recognition``)."""

import pytest

from spacy_arboel.evaluation.concept_recognition import concept_recognition_scores
from spacy_arboel.kb import Entity, KnowledgeBase


def test_mention_and_document_scores():
    kb = KnowledgeBase([Entity("HP:1", "Nail hypoplasia", alt_ids=("HP:9",)),
                        Entity("HP:2", "Nail aplasia"), Entity("HP:3", "Brachydactyly")])
    # nested gold mentions ("aplastic or hypoplastic nails" and "hypoplastic nails"), one
    # annotated with an older release's id
    gold = {"d1": [(0, 29, "HP:2"), (12, 29, "HP:9"), (31, 44, "HP:3")],
            "d2": [(0, 13, "HP:3")]}
    predicted = {"d1": [(12, 29, "HP:1"), (12, 29, "HP:1"), (0, 29, "HP:3"), (50, 60, "HP:2")],
                 "d2": []}
    scores = concept_recognition_scores(gold, predicted, kb.resolve_ids)
    mention = scores["mention"]
    # right: (12, 29, HP:1) once; wrong: the span of HP:2 read as HP:3, and a span not gold
    assert (mention["tp"], mention["predicted"], mention["gold"]) == (1, 3, 4)
    assert mention["precision"] == pytest.approx(1 / 3)
    assert mention["recall"] == pytest.approx(1 / 4)
    document = scores["document"]
    # d1: gold {HP:2, HP:1, HP:3}, found {HP:1, HP:3, HP:2}; d2: gold {HP:3}, found none
    assert (document["tp"], document["predicted"], document["gold"]) == (3, 3, 4)
    assert document["f1"] == pytest.approx(2 * 1 * 0.75 / 1.75)
    unresolved = concept_recognition_scores(gold, predicted)["mention"]
    assert unresolved["tp"] == 0  # without the KB the old id never matches


def test_predictions_for_an_unknown_document_are_refused():
    with pytest.raises(ValueError, match="d9"):
        concept_recognition_scores({"d1": []}, {"d9": [(0, 1, "X")]})
