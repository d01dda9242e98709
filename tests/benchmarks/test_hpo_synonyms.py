"""The held-out selection of ``benchmarks/hpo_synonyms.py`` on a tiny made-up KB."""

from __future__ import annotations

import sys
from pathlib import Path

from spacy_arboel.kb import Entity, KnowledgeBase

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from hpo_synonyms import held_out_synonyms, name_key  # noqa: E402

ENTITIES = [
    Entity("HP:1", "Seizure", aliases=("Epileptic seizure", "EPILEPTIC  SEIZURE", "Fits",
                                       "Convulsion")),
    Entity("HP:2", "Fever", aliases=("Pyrexia", "Hyperthermia")),
    Entity("HP:3", "Cough", aliases=("Coughing",)),  # its exact synonym is its name
    Entity("HP:4", "Tremor", aliases=("Shaking",)),  # a related synonym only
    Entity("HP:5", "Heat intolerance", aliases=("Hyperthermia",)),
    Entity("HP:6", "Ataxia"),
]
EXACT = {"HP:1": ["Convulsion", "Epileptic seizure"], "HP:2": ["Hyperthermia"],
         "HP:3": ["cough"], "HP:5": ["Hyperthermia"]}


def names_of(entity: Entity) -> set[str]:
    return {name_key(text) for text in (entity.name, *entity.aliases)}


def test_one_exact_synonym_per_term_is_held_out_and_gone_from_its_term():
    kb, held, counts = held_out_synonyms(KnowledgeBase(ENTITIES), EXACT, seed=0)
    assert [h.entity_id for h in held] == ["HP:1", "HP:2", "HP:5"]
    for h in held:
        original = {name_key(s) for s in EXACT[h.entity_id]}
        assert name_key(h.text) in original  # an exact synonym, never a related one
        assert name_key(h.text) not in names_of(kb[h.entity_id])  # not there in any case
        # only that synonym and its case/spacing variants were removed
        before = KnowledgeBase(ENTITIES)[h.entity_id]
        assert names_of(kb[h.entity_id]) == names_of(before) - {name_key(h.text)}
        assert kb[h.entity_id].name == before.name
    assert kb["HP:3"] == ENTITIES[2]  # its exact synonym is its name: nothing held out
    assert kb["HP:4"] == ENTITIES[3] and kb["HP:6"] == ENTITIES[5]
    assert counts["with_exact_synonym"] == 4 and counts["no_eligible_synonym"] == 1
    assert counts["held_out"] == 3 and counts["entities"] == 6


def test_case_variants_go_with_the_held_out_synonym():
    for seed in range(20):
        kb, held, counts = held_out_synonyms(KnowledgeBase(ENTITIES), EXACT, seed=seed)
        seizure = next(h for h in held if h.entity_id == "HP:1")
        if name_key(seizure.text) == "epileptic seizure":
            assert kb["HP:1"].aliases == ("Fits", "Convulsion")
            assert counts["case_variants_removed"] == 1
            break
    else:
        raise AssertionError("no seed held out 'Epileptic seizure'")


def test_a_synonym_of_another_term_stays_there_and_is_counted_ambiguous():
    kb, held, counts = held_out_synonyms(KnowledgeBase(ENTITIES), EXACT, seed=0)
    by_id = {h.entity_id: h for h in held}
    # both HP:2 and HP:5 hold "Hyperthermia" out: gone from both, still ambiguous
    assert by_id["HP:2"].text == "Hyperthermia" and by_id["HP:5"].text == "Hyperthermia"
    assert by_id["HP:2"].other_ids == ("HP:5",) and by_id["HP:5"].other_ids == ("HP:2",)
    assert by_id["HP:1"].other_ids == () and counts["held_out_ambiguous"] == 2
    only_one = {"HP:2": ["Hyperthermia"]}  # HP:5 keeps it as its alias
    kb, held, counts = held_out_synonyms(KnowledgeBase(ENTITIES), only_one, seed=0)
    assert held[0].other_ids == ("HP:5",) and "Hyperthermia" in kb["HP:5"].aliases
    assert counts["held_out_ambiguous"] == 1


def test_the_selection_is_deterministic_and_independent_of_the_kb_order():
    first = held_out_synonyms(KnowledgeBase(ENTITIES), EXACT, seed=3)
    again = held_out_synonyms(KnowledgeBase(ENTITIES), EXACT, seed=3)
    reversed_ = held_out_synonyms(KnowledgeBase(ENTITIES[::-1]), EXACT, seed=3)
    assert first[1] == again[1] and first[2] == again[2]
    assert sorted(first[1], key=lambda h: h.entity_id) == sorted(
        reversed_[1], key=lambda h: h.entity_id)
    chosen = {name_key(h.text) for seed in range(20)
              for h in held_out_synonyms(KnowledgeBase(ENTITIES), EXACT, seed=seed)[1]
              if h.entity_id == "HP:1"}
    assert chosen == {"convulsion", "epileptic seizure"}  # the seed picks among them
