"""Zero-shot linking with arbo_entity_linker: ``names`` inputs (the default, untrained and
trained), BLINK's inputs when the config says so, BioSyn's lexical score, and
``pretrain-kb``'s encoder and linker."""

from __future__ import annotations

import json

import numpy as np
import pytest
import spacy
import torch
from confection import ConfigValidationError
from spacy.tokens import Doc

from spacy_arboel.encoders.inputs import InputBuilder, MentionSpan
from spacy_arboel.encoders.loading import load_tokenizer
from spacy_arboel.kb.index import read_index_meta
from spacy_arboel.kb.knowledge_base import KnowledgeBase
from spacy_arboel.linking import DenseRetriever, RetrieverSettings

NAMES = RetrieverSettings(inputs="names", pooling="mention")


def _linker(nlp, tiny_encoder, kb_path, **config):
    return nlp.add_pipe("arbo_entity_linker", config={
        "kb_path": str(kb_path), "model": {"encoder_name": tiny_encoder}, **config})


def _with_ents(nlp, text: str, spans: list[tuple[int, int]]) -> Doc:
    doc = nlp.make_doc(text)
    doc.ents = [doc.char_span(s, e, label="X") for s, e in spans]
    return doc


def _links(nlp, text, spans):
    doc = nlp(_with_ents(nlp, text, spans))
    return [(e.text, e.kb_id_, [c for c, _ in e._.kb_candidates[:3]]) for e in doc.ents]


def test_names_inputs_are_the_mention_text_and_one_row_per_name(tiny_encoder):
    tokenizer = load_tokenizer(tiny_encoder)
    builder = InputBuilder(tokenizer, inputs="names")
    blink = InputBuilder(tokenizer)
    text = "Fever was caused by aspirin."
    [names_ids] = builder.mention_ids([text], [MentionSpan(0, 20, 27)])
    [blink_ids] = blink.mention_ids([text], [MentionSpan(0, 20, 27)])
    alone = tokenizer("aspirin")["input_ids"]  # [CLS] aspirin [SEP]
    assert names_ids == alone
    assert blink.start_id in blink_ids and len(blink_ids) > len(names_ids)
    [row] = builder.entity_ids(["Aspirin"], ["a description that names leave out"])
    assert row == alone
    with pytest.raises(ValueError, match="E007"):
        InputBuilder(tokenizer, inputs="context")


def test_names_retriever_links_an_exact_alias_with_cosine_one(tiny_encoder, toy_kb_path):
    kb = KnowledgeBase.from_jsonl(toy_kb_path)
    retriever = DenseRetriever.from_pretrained(kb, tiny_encoder, NAMES)
    retriever.entities.refresh()
    # a row per name and alias, whatever entity_granularity says
    assert len(retriever.index.owners) == sum(1 + len(e.aliases) for e in kb)
    assert retriever.index.meta.inputs == "names"
    text = "Coughing and pyrexia and cardiac failure."
    spans = [MentionSpan(0, 0, 8), MentionSpan(0, 13, 20), MentionSpan(0, 25, 40)]
    scores, positions, _ = retriever.link([text], spans, k=3)
    assert [kb.entity_at(int(p)).id for p in positions[:, 0]] == [
        "D003371", "D005334", "D006333"]
    # unit vectors, same input: cosine 1 within the index's float16 rounding
    np.testing.assert_allclose(scores[:, 0], 1.0, atol=1e-3)


def test_the_component_reads_names_trained_or_not_unless_told_blink(
        tiny_encoder, toy_kb_path, toy_examples):
    """One ``inputs`` setting: ``names`` (the core's default), untrained and trained alike
    (issue 42: the component's ``auto`` switched to BLINK's inputs for corpus training);
    ``blink`` when the config says so."""
    nlp = spacy.blank("xx")
    linker = _linker(nlp, tiny_encoder, toy_kb_path)
    nlp.initialize()
    assert linker.retriever.settings.inputs == RetrieverSettings().inputs == "names"
    assert linker.retriever.settings.scoring == "cosine"
    assert [kb for _, kb, _ in _links(nlp, "Pyrexia and tussis.", [(0, 7), (12, 18)])] == [
        "D005334", "D003371"]
    # gold mentions at initialize, then an update: still names, no switch
    trained = spacy.blank("xx")
    trained_linker = _linker(trained, tiny_encoder, toy_kb_path)
    trained.initialize(lambda: toy_examples)
    trained_linker.update(toy_examples[:2], sgd=None, losses={})
    trained_linker.ensure_ready()
    assert trained_linker.retriever.settings.inputs == "names"
    assert trained_linker.retriever.index.meta.inputs == "names"
    blink = spacy.blank("xx")
    blink_linker = _linker(blink, tiny_encoder, toy_kb_path, inputs="blink")
    blink.initialize(lambda: toy_examples)
    assert blink_linker.retriever.settings.inputs == "blink"
    assert blink_linker.retriever.index.meta.inputs == "blink"
    with pytest.raises(ConfigValidationError, match=r"inputs.*'blink', 'names'"):
        _linker(spacy.blank("xx"), tiny_encoder, toy_kb_path, inputs="auto")


def test_saved_linkers_keep_their_inputs(tiny_encoder, toy_kb_path, toy_examples, tmp_path):
    text, spans = "Aspirin induced coughing and fever.", [(0, 7), (16, 24), (29, 34)]
    for name, examples, inputs in (("untrained", None, "names"),
                                   ("trained", toy_examples, "names"),
                                   ("blink", toy_examples, "blink")):
        nlp = spacy.blank("xx")
        linker = _linker(nlp, tiny_encoder, toy_kb_path, inputs=inputs)
        nlp.initialize((lambda ex=examples: ex) if examples else None)
        expected = _links(nlp, text, spans)
        nlp.to_disk(tmp_path / name)
        loaded = spacy.load(tmp_path / name)
        assert read_index_meta(tmp_path / name / "arbo_entity_linker" / "index").inputs == inputs
        assert loaded.get_pipe("arbo_entity_linker").retriever.settings.inputs == inputs
        assert _links(loaded, text, spans) == expected
        assert linker.retriever.settings.inputs == inputs


def test_lexical_weight_ranks_a_misspelt_mention_by_its_character_ngrams(
        tiny_encoder, toy_kb_path):
    kb = KnowledgeBase.from_jsonl(toy_kb_path)
    text = "aspirinn and pyrexya"
    spans = [MentionSpan(0, 0, 8), MentionSpan(0, 13, 20)]
    lexical = DenseRetriever.from_pretrained(
        kb, tiny_encoder, RetrieverSettings(inputs="names", pooling="mention"))
    lexical.entities.refresh()
    scores, positions, _ = lexical.link([text], spans, k=3, lexical_weight=100.0)
    assert [kb.entity_at(int(p)).id for p in positions[:, 0]] == ["D001241", "D005334"]
    assert (np.diff(scores, axis=1) <= 1e-6).all()  # best first
    # the combined score is the dense score plus weight x the lexical one
    dense = lexical.dense_scores(lexical.encode_mentions([text], spans), positions[:, 0])
    sparse = lexical.lexical.score(["aspirinn", "pyrexya"], positions[:, :1])[:, 0]
    np.testing.assert_allclose(scores[:, 0], dense + 100.0 * sparse, rtol=1e-5)


def test_tune_lexical_weight_picks_a_weight_of_the_grid(tiny_encoder, toy_kb_path):
    kb = KnowledgeBase.from_jsonl(toy_kb_path)
    retriever = DenseRetriever.from_pretrained(kb, tiny_encoder, NAMES)
    texts = ["aspirinn and pyrexya and coughng"]
    spans = [MentionSpan(0, 0, 8), MentionSpan(0, 13, 20), MentionSpan(0, 25, 32)]
    gold = [["D001241"], ["D005334"], ["D003371"]]
    weight, by_weight = retriever.tune_lexical_weight(texts, spans, gold, k=5)
    assert weight in by_weight and by_weight[weight] == max(by_weight.values())
    assert by_weight[weight] == 1.0  # the misspellings share most character n-grams
    with pytest.raises(ValueError, match="E009"):
        retriever.tune_lexical_weight(texts, spans[:1], [["D999"]])


def test_tune_lexical_command_saves_the_weight(saved_linker, tmp_path, cli):
    result = cli(
        "tune-lexical", saved_linker / "pipeline", saved_linker / "gold.spacy",
        "--output-model", tmp_path / "tuned", "--output", tmp_path / "lex.json", "--top-k", "5")
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "lex.json").read_text())
    tuned = spacy.load(tmp_path / "tuned")
    assert tuned.get_pipe("arbo_entity_linker").get_candidates.lexical_weight == (
        report["lexical_weight"])


def test_pretrain_kb_writes_an_encoder_and_a_linker_that_links(
        tiny_encoder, toy_kb_path, tmp_path, cli):
    out = tmp_path / "pretrained"
    result = cli(
        "pretrain-kb", toy_kb_path, out, "--encoder", tiny_encoder,
        "--max-steps", "3", "--epochs", "5", "--batch-size", "4", "--learning-rate", "1e-3")
    assert result.exit_code == 0, result.output
    report = json.loads((out / "encoder" / "self_alignment.json").read_text())
    assert report["steps"] == 3
    nlp = spacy.load(out / "linker")
    linker = nlp.get_pipe("arbo_entity_linker")
    assert linker.retriever.settings.inputs == "names"
    assert nlp.config["components"]["arbo_entity_linker"]["kb_path"] is None
    assert [kb for _, kb, _ in _links(nlp, "Pyrexia and tussis.", [(0, 7), (12, 18)])] == [
        "D005334", "D003371"]
    # the encoder starts a corpus-trained linker
    trained = spacy.blank("xx")
    trained.add_pipe("arbo_entity_linker", config={
        "kb_path": str(toy_kb_path), "model": {"encoder_name": str(out / "encoder")}})
    trained.initialize()
    assert trained.get_pipe("arbo_entity_linker").retriever.vector_width == 32
    # the output folder is not overwritten by another command's input check
    again = cli("pretrain-kb", toy_kb_path, toy_kb_path.parent)
    assert again.exit_code != 0


def test_names_training_takes_its_loss_on_the_cosine_the_index_searches_with(
        tiny_encoder, toy_kb_path, toy_examples):
    from spacy_arboel.linking.bi_encoder_trainer import training_similarity
    from spacy_arboel.linking.dense_retriever import COSINE_SCALE

    # a dot-product objective under names inputs learns the scaled cosine that links
    assert training_similarity("dot", "cosine") == ("cosine", COSINE_SCALE)
    assert training_similarity("dot", "dot") == ("dot", 1.0)  # BLINK's inputs
    assert training_similarity("cosine", "cosine") == ("cosine", 1.0)  # the proxy loss's own
    nlp = spacy.blank("xx")
    linker = _linker(nlp, tiny_encoder, toy_kb_path, inputs="names")
    nlp.initialize(lambda: toy_examples)
    texts = [eg.reference.text for eg in toy_examples[:2]]
    spans = [MentionSpan(i, e.start_char, e.end_char)
             for i, eg in enumerate(toy_examples[:2]) for e in eg.reference.ents]
    gold = [[e.kb_id_] for eg in toy_examples[:2] for e in eg.reference.ents]
    objective, seen = linker.trainer.objective, []
    compute_loss = objective.compute_loss
    objective.compute_loss = lambda scores, valid, step=None: (
        seen.append((scores.detach(), step)) or compute_loss(scores, valid, step))
    assert linker.trainer.step(texts, spans, gold) > 0.0
    [(scores, step)] = seen
    queries = torch.nn.functional.normalize(step.leaves[1].detach(), dim=-1)
    nodes = torch.nn.functional.normalize(torch.cat(step.leaves).detach(), dim=-1)
    expected = COSINE_SCALE * torch.einsum(
        "bd,bcd->bc", queries, nodes[step.candidates.clamp(min=0)])
    valid = step.candidates >= 0
    torch.testing.assert_close(scores[valid], expected[valid], atol=1e-4, rtol=1e-4)
    assert linker.retriever.settings.inputs == "names"
