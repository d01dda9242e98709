"""KB names as pseudo-mentions in corpus training (``linking.name_pairs``, the trainer's
``name_pairs``), and the trainer's ``skip_own_name``: a corpus mention's positive is another
name of its gold entity."""

from __future__ import annotations

import random

import pytest
import spacy
from confection import ConfigValidationError

from spacy_arboel.encoders.inputs import MentionSpan
from spacy_arboel.kb import Entity, KnowledgeBase
from spacy_arboel.linking.name_pairs import NamePairSampler

KB = KnowledgeBase([
    Entity("D1", "Cough", aliases=("coughing", "COUGH "), types=("Disease",)),
    Entity("D2", "Fever", aliases=("pyrexia",), types=("Disease",)),
    Entity("D3", "Aspirin", aliases=("acetylsalicylic acid",), types=("Chemical",)),
    Entity("D4", "Pain", types=("Disease",)),  # one name: no pair
    Entity("D5", "Tussis", aliases=("tussis",), types=("Disease",)),  # one name, twice
])
# one index row per name, in entity order
ROW_TEXTS = ["Cough", "coughing", "COUGH ", "Fever", "pyrexia", "Aspirin",
             "acetylsalicylic acid", "Pain", "Tussis", "tussis"]
ROWS_OF = [[0, 1, 2], [3, 4], [5, 6], [7], [8, 9]]


def test_sampler_draws_entities_with_two_names_of_the_corpus_types():
    sampler = NamePairSampler(KB, ROWS_OF, ROW_TEXTS, types={"Disease": 3})
    assert sampler.entities == [0, 1]  # no chemical, no single-name entity
    assert len(NamePairSampler(KB, ROWS_OF, ROW_TEXTS)) == 3  # no types: every type
    assert len(NamePairSampler(KB, ROWS_OF, ROW_TEXTS, types={"Chemical": 0})) == 0


def test_sampler_draws_types_as_often_as_the_corpus_mentions_carry_them():
    sampler = NamePairSampler(KB, ROWS_OF, ROW_TEXTS, types={"Disease": 1, "Chemical": 9},
                              rng=random.Random(0))
    drawn = [sampler.sample(1)[0].entity for _ in range(400)]
    assert 0.8 < drawn.count(2) / len(drawn) < 0.97  # Aspirin, the one chemical: ~90%
    assert {0, 1} <= set(drawn)
    assert sorted(p.entity for p in sampler.sample(3)) == [0, 1, 2]  # distinct, all types


def test_a_pseudo_mention_has_its_entitys_other_names_as_positives():
    sampler = NamePairSampler(KB, ROWS_OF, ROW_TEXTS, rng=random.Random(3))
    seen = set()
    for _ in range(30):
        drawn = sampler.sample(2)
        assert len({p.entity for p in drawn}) == 2  # distinct entities in one draw
        for pseudo in drawn:
            seen.add(pseudo.text)
            assert pseudo.positive_rows
            assert set(pseudo.positive_rows) < set(ROWS_OF[pseudo.entity])
            # no positive spells the mention itself, case and spaces aside
            assert all(ROW_TEXTS[r].strip().casefold() != pseudo.text.casefold()
                       for r in pseudo.positive_rows)
    assert "COUGH" in seen  # whitespace normalised
    assert {p.text for p in sampler.sample(2)} <= set(t.strip() for t in ROW_TEXTS)
    assert len(sampler.sample(10)) == 3  # no more than are eligible


def _linker(nlp, tiny_encoder, kb_path, **config):
    return nlp.add_pipe("arbo_entity_linker", config={
        "kb_path": str(kb_path), "model": {"encoder_name": tiny_encoder}, **config})


def _first_step(linker, example):
    """The ``TrainingStep`` of one training step on ``example``'s gold mentions."""
    trainer, seen = linker.trainer, []
    compute_loss = trainer.objective.compute_loss
    trainer.objective.compute_loss = lambda scores, valid, step=None: (
        seen.append(step) or compute_loss(scores, valid, step))
    spans = [MentionSpan(0, e.start_char, e.end_char) for e in example.reference.ents]
    try:
        assert trainer.step([example.reference.text], spans,
                            [[e.kb_id_] for e in example.reference.ents]) > 0.0
    finally:
        trainer.objective.compute_loss = compute_loss
    [step] = seen
    return step


def test_training_steps_mix_name_pairs_into_the_batch(tiny_encoder, toy_kb_path,
                                                       toy_examples):
    nlp = spacy.blank("xx")
    linker = _linker(nlp, tiny_encoder, toy_kb_path, name_pairs=2)
    nlp.initialize(lambda: toy_examples)
    trainer = linker.trainer
    assert trainer.settings.name_pairs == 2
    assert set(trainer.gold_types) == {"Chemical", "Disease"}  # weighted by mentions
    assert trainer.gold_types["Disease"] > trainer.gold_types["Chemical"] > 0
    step = _first_step(linker, toy_examples[0])
    spans = toy_examples[0].reference.ents
    assert len(step.texts) == 3 and len(step.spans) == len(spans) + 2
    assert step.leaves[1].shape[0] == len(spans) + 2  # the batch's mention vectors
    entities, index = linker.retriever.entities, linker.retriever.entities.index
    row_texts = entities.row_texts()
    for i, span in enumerate(step.spans[len(spans):], start=len(spans)):
        text = step.texts[span.doc_index]
        assert (span.start_char, span.end_char) == (0, len(text))
        positive = step.plan.entity_rows[int(step.candidates[i, 0])]
        owner = int(index.owners[positive])
        assert text.casefold() in {n.casefold() for n in
                                   (linker.kb.entity_at(owner).name,
                                    *linker.kb.entity_at(owner).aliases)}
        assert row_texts[int(index.rows[positive])].casefold() != text.casefold()


def test_name_pairs_is_validated_and_off_by_default(tiny_encoder, toy_kb_path):
    nlp = spacy.blank("xx")
    assert _linker(nlp, tiny_encoder, toy_kb_path).settings.name_pairs == 0
    with pytest.raises(ConfigValidationError):
        _linker(spacy.blank("xx"), tiny_encoder, toy_kb_path, name_pairs=-1)


@pytest.mark.parametrize("skip", [False, True])
def test_skip_own_name_makes_another_name_the_positive(tiny_encoder, toy_kb_path,
                                                       toy_examples, skip):
    nlp = spacy.blank("xx")
    linker = _linker(nlp, tiny_encoder, toy_kb_path, skip_own_name=skip)
    nlp.initialize(lambda: toy_examples)
    assert linker.trainer.settings.skip_own_name is skip
    entities, index = linker.retriever.entities, linker.retriever.entities.index
    row_texts, checked = entities.row_texts(), 0
    for example in toy_examples[:4]:
        step = _first_step(linker, example)
        assert len(step.spans) == len(example.reference.ents)
        for i, ent in enumerate(example.reference.ents):
            entity = linker.kb[ent.kb_id_]
            names = {n.casefold() for n in (entity.name, *entity.aliases)}
            if ent.text.casefold() not in names or len(names) < 2:
                continue  # no own name in the KB, or nothing else to take
            positive = step.plan.entity_rows[int(step.candidates[i, 0])]
            assert linker.kb.entity_at(int(index.owners[positive])).id == ent.kb_id_
            own = row_texts[int(index.rows[positive])].strip().casefold() == ent.text.casefold()
            assert own is not skip  # the own name is the closest row unless it is skipped
            checked += 1
    assert checked


def test_skip_own_name_keeps_an_entitys_only_name(tiny_encoder, toy_kb_path, toy_examples):
    nlp = spacy.blank("xx")
    linker = _linker(nlp, tiny_encoder, toy_kb_path, skip_own_name=True)
    nlp.initialize(lambda: toy_examples)
    trainer = linker.trainer
    rows = linker.retriever.entities.rows_of[0]
    texts = linker.retriever.entities.index_row_texts()
    assert trainer.positive_rows(rows[:1], texts[rows[0]]) == rows[:1]
    if len(rows) > 1:
        kept = trainer.positive_rows(rows, f"  {texts[rows[0]].upper()} ")
        assert rows[0] not in kept and kept
    assert linker.trainer.positive_rows(rows, "no name of it") == rows
    # under BLINK's inputs the mention is read in context: its own name stays a positive
    blink = _linker(spacy.blank("xx"), tiny_encoder, toy_kb_path, skip_own_name=True,
                    inputs="blink")
    blink.initialize(lambda: toy_examples)
    rows = blink.retriever.entities.rows_of[0]
    name = blink.retriever.entities.index_row_texts()[rows[0]]
    assert blink.trainer.positive_rows(rows, name) == rows
