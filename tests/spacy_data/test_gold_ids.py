"""Alternate ids are one id everywhere (issue 59): a corpus annotated with an older release
of its ontology names entities by an ``alt_id`` (or an obsolete id ``replaced_by`` one),
and training, evaluation, the scorers and the aliases harvested from it read those ids as
the ids of their entities."""

from __future__ import annotations

import json

import pytest
import spacy
from spacy.tokens import DocBin, Span
from spacy.training import Example

from spacy_arboel.evaluation.end_to_end import score_end_to_end
from spacy_arboel.evaluation.scorer import score_entity_linking
from spacy_arboel.kb import Entity, KnowledgeBase
from spacy_arboel.kb.build import build_kb
from spacy_arboel.kb.readers import KBSource
from spacy_arboel.spacy_data.aliases import harvest_aliases, types_from_docs
from spacy_arboel.spacy_data.gold_ids import resolve_gold_doc, resolved_gold_ids
from tests.conftest import TOY_ENTITIES

# Cough keeps its old id as an alternate id; the corpus still uses the old one
OLD_COUGH = "D999001"


@pytest.fixture
def alt_kb_path(tmp_path):
    entities = [dict(e, alt_ids=[OLD_COUGH]) if e["id"] == "D003371" else e
                for e in TOY_ENTITIES]
    path = tmp_path / "alt_kb.jsonl"
    path.write_text("\n".join(json.dumps(e) for e in entities) + "\n")
    return path


def _old_release(examples):
    """The toy examples with Cough's gold id written as its old one."""
    out = []
    for eg in examples:
        gold = eg.reference.copy()
        gold.ents = [Span(gold, e.start, e.end, label=e.label_,
                          kb_id=OLD_COUGH if e.kb_id_ == "D003371" else e.kb_id_)
                     for e in gold.ents]
        out.append(Example(eg.predicted.copy(), gold))
    return out


def _scored(cli, nlp, corpora, folder, command, *options):
    """``nlp`` saved, then scored by ``command`` (run by ``cli``) on each corpus (name ->
    examples): the metrics JSON and the printed output of each."""
    nlp.to_disk(folder / "model")
    runs, printed = {}, {}
    for name, examples in corpora.items():
        DocBin(docs=[eg.reference for eg in examples]).to_disk(folder / f"{name}.spacy")
        result = cli(command, folder / "model", folder / f"{name}.spacy",
                     "--output", folder / f"{name}.json", *options)
        assert result.exit_code == 0, result.output
        runs[name] = json.loads((folder / f"{name}.json").read_text())
        printed[name] = result.output
    return runs, printed


def test_resolve_gold_doc_copies_only_docs_that_need_it():
    kb = KnowledgeBase([Entity("HP:1", "One", alt_ids=("HP:9",)), Entity("HP:2", "Two")])
    nlp = spacy.blank("en")
    doc = nlp("one two three")
    doc.ents = [Span(doc, 0, 1, label="P", kb_id="HP:9"),
                Span(doc, 2, 3, label="P", kb_id="HP:9|HP:2")]
    doc.spans["all"] = [Span(doc, 0, 1, label="P", kb_id="HP:9"),
                        Span(doc, 1, 2, label="P", kb_id="-1")]
    resolved, count = resolve_gold_doc(doc, kb)
    assert count == 2 and resolved is not doc  # the first mention once, though in both
    assert [e.kb_id_ for e in resolved.ents] == ["HP:1", "HP:1|HP:2"]
    assert [s.kb_id_ for s in resolved.spans["all"]] == ["HP:1", "-1"]
    assert [e.kb_id_ for e in doc.ents] == ["HP:9", "HP:9|HP:2"]  # the caller's doc kept
    same, none = resolve_gold_doc(resolved, kb)
    assert same is resolved and none == 0
    assert resolved_gold_ids("HP:9|HP:1|X:1", kb) == ("HP:1", "X:1")
    assert resolved_gold_ids("HP:9", None) == ("HP:9",)


def test_scorers_count_a_link_to_an_alternate_ids_entity_right():
    """The old code scored the gold id ``HP:9`` out of the KB and the link to HP:1 wrong."""
    kb = KnowledgeBase([Entity("HP:1", "One", alt_ids=("HP:9",)), Entity("HP:2", "Two")])
    nlp = spacy.blank("en")
    gold = nlp("one two")
    gold.ents = [Span(gold, 0, 1, label="P", kb_id="HP:9")]
    predicted = nlp("one two")
    predicted.ents = [Span(predicted, 0, 1, label="P", kb_id="HP:1")]
    example = Example(predicted, gold)
    scores = score_entity_linking([example], kb_ids=kb)
    assert scores["nel_inkb_acc"] == 1.0 and scores["nel_acc"] == 1.0
    assert scores["nel_micro_f"] == 1.0  # spaCy's own score_links, on the resolved gold
    e2e = score_end_to_end([example], kb_ids=kb)
    assert e2e["e2e_tp"] == 1 and e2e["e2e_inkb_f"] == 1.0
    assert [e.kb_id_ for e in example.reference.ents] == ["HP:9"]  # scoring changes nothing


def test_aliases_and_types_of_an_alternate_id_join_its_entity():
    nlp = spacy.blank("en")
    doc = nlp("old cough name")
    doc.ents = [Span(doc, 0, 2, label="Disease", kb_id=OLD_COUGH)]
    harvested = harvest_aliases([doc])
    base = KnowledgeBase([Entity("D003371", "Cough", alt_ids=(OLD_COUGH,), types=("X",))])
    kb = base.with_aliases(harvested, counts=harvested)
    assert kb["D003371"].aliases == ("old cough",)
    assert kb.mention_prior("old cough") == {"D003371": 0.5}  # one link: smoothed


def test_build_kb_resolves_corpus_ids_and_reports_them(alt_kb_path, tmp_path):
    nlp = spacy.blank("en")
    doc = nlp("old cough name")
    doc.ents = [Span(doc, 0, 2, label="Symptom", kb_id=OLD_COUGH)]
    harvested = harvest_aliases([doc])
    kb, report = build_kb([KBSource("jsonl", alt_kb_path)], aliases=harvested,
                          mention_counts=harvested, types=types_from_docs([doc]))
    cough = kb["D003371"]
    assert "old cough" in cough.aliases and "Symptom" in cough.types
    assert report.resolved == {OLD_COUGH} and not report.absent
    assert ("corpus alternate ids resolved", 1) in report.counts()


def test_training_and_evaluate_read_an_old_release_as_the_new(
        tiny_encoder, alt_kb_path, toy_examples, tmp_path, cli):
    """The same linker scores the same on the corpus with old ids as with the KB's own ids:
    no mention is out of the KB, none is skipped in training, and the command reports how
    many ids it resolved."""
    old = _old_release(toy_examples)
    nlp = spacy.blank("xx")
    linker = nlp.add_pipe("arbo_entity_linker", config={
        "kb_path": str(alt_kb_path), "model": {"encoder_name": tiny_encoder}})
    nlp.initialize(lambda: old)
    assert linker.trainer.n_missing_gold_ids == 0  # the old code skipped the 2 coughs
    assert "D003371" in linker.seen_ids and OLD_COUGH not in linker.seen_ids
    runs, printed = _scored(cli, nlp, {"old": old, "new": toy_examples}, tmp_path, "evaluate",
                            "--no-encoder-rate")
    assert "2 gold ids" in printed["old"]
    assert runs["old"]["gold_ids_resolved"] == 2 and runs["new"]["gold_ids_resolved"] == 0
    assert runs["old"]["out_of_kb"]["n"] == 0
    for group in ("all", "in_kb"):
        assert runs["old"][group] == runs["new"][group]
    scores = nlp.evaluate(old)  # spaCy's own evaluation: the component's scorer
    assert scores["nel_inkb_acc"] == nlp.evaluate(toy_examples)["nel_inkb_acc"]


def test_evaluate_e2e_resolves_gold_ids(tiny_encoder, alt_kb_path, toy_examples, tmp_path, cli):
    old = _old_release(toy_examples)
    nlp = spacy.blank("xx")
    nlp.add_pipe("arbo_linker", config={
        "kb_path": str(alt_kb_path), "model": {"encoder_name": tiny_encoder},
        "passage_length": 48, "passage_stride": 40})
    nlp.initialize(lambda: old)
    runs, _ = _scored(cli, nlp, {"old": old, "new": toy_examples}, tmp_path, "evaluate-e2e")
    assert runs["old"]["gold_ids_resolved"] == 2
    assert runs["old"]["in_kb"] == runs["new"]["in_kb"]
    assert runs["old"]["in_kb"]["n_gold"] == 11
