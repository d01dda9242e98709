"""The spaCy-free cross-encoder re-ranker (BLINK §4.2): pair inputs, scores, training steps,
saving and loading, driven from texts and character spans only."""

import dataclasses
import json

import numpy as np
import pytest
import torch

from spacy_arboel.encoders.inputs import MentionSpan
from spacy_arboel.kb import KnowledgeBase
from spacy_arboel.linking import (
    CrossEncoderReranker,
    RerankerSettings,
    candidate_softmax_loss,
    ranked,
)

TEXTS = ["Aspirin induced cough in patients.", "Fever was caused by aspirin."]
SPANS = [MentionSpan(0, 0, 7), MentionSpan(0, 16, 21), MentionSpan(1, 0, 5)]
CANDIDATES = [["D001241", "D003371", "D005334"], ["D003371", "D010146"],
              ["D006333", "D005334", "D001241", "D010146"]]
GOLD = ["D001241", "D003371", "D005334"]


@pytest.fixture
def reranker(tiny_encoder, toy_kb_path) -> CrossEncoderReranker:
    torch.manual_seed(0)  # the head W starts from PyTorch's initialisation
    return CrossEncoderReranker.from_pretrained(KnowledgeBase.from_jsonl(toy_kb_path),
                                                tiny_encoder, RerankerSettings(batch_size=2))


def test_pair_inputs_join_each_mention_with_each_candidate(reranker):
    ids, mask, types = reranker.pair_inputs(TEXTS, SPANS, CANDIDATES)
    assert ids.shape == mask.shape == types.shape
    assert ids.shape[0] == sum(len(c) for c in CANDIDATES)
    cls_id = reranker.tokenizer.cls_token_id
    assert (ids[:, 0] == cls_id).all()  # one [CLS], the mention's: the entity side has none
    mention = reranker.builder.mention_ids(TEXTS, SPANS[:1])[0]
    for row, kb_id in enumerate(CANDIDATES[0]):
        entity = reranker.entity_ids(kb_id)
        n = len(mention) + len(entity)
        assert ids[row, :n].tolist() == mention + entity
        assert mask[row].sum() == n
        # BERT: the entity side has token type 1
        assert types[row, :n].tolist() == [0] * len(mention) + [1] * len(entity)
        assert cls_id not in entity
    with pytest.raises(ValueError, match=r"E070.*'Q42'"):
        reranker.pair_inputs(TEXTS, SPANS[:1], [["D001241", "Q42"]])


def test_scores_are_per_mention_and_do_not_depend_on_batching(reranker):
    scores = reranker.score(TEXTS, SPANS, CANDIDATES)
    assert [len(s) for s in scores] == [len(c) for c in CANDIDATES]
    assert all(s.dtype == np.float32 for s in scores)
    # the same pairs as one batch, straight through the scorer
    reranker.scorer.eval()
    with torch.no_grad():
        direct = reranker.scorer(*(torch.as_tensor(a) for a in reranker.pair_inputs(
            TEXTS, SPANS, CANDIDATES))).numpy()
    np.testing.assert_allclose(np.concatenate(scores), direct, rtol=1e-4, atol=1e-5)
    # a candidate scores the same whatever its neighbours
    alone = reranker.score(TEXTS, SPANS[2:], [["D001241"]])[0]
    np.testing.assert_allclose(alone, scores[2][2:3], rtol=1e-4, atol=1e-5)
    assert reranker.score(TEXTS, SPANS[:1], [[]])[0].shape == (0,)


def test_quantized_scores_stay_close_and_follow_the_weights(reranker):
    quantized = CrossEncoderReranker(reranker.kb, reranker.tokenizer, reranker.scorer,
                                     dataclasses.replace(reranker.settings, quantize=True))
    exact = reranker.score(TEXTS, SPANS, CANDIDATES)
    before = quantized.score(TEXTS, SPANS, CANDIDATES)
    for a, b in zip(before, exact, strict=True):
        np.testing.assert_allclose(a, b, atol=0.1)
    with torch.no_grad():
        reranker.scorer.score.bias += 5.0
    assert np.allclose(quantized.score(TEXTS, SPANS, CANDIDATES)[0], before[0])  # cached copy
    quantized.changed()
    np.testing.assert_allclose(quantized.score(TEXTS, SPANS, CANDIDATES)[0], before[0] + 5.0,
                               atol=0.1)


def test_ranked_orders_by_score_with_softmax_probabilities():
    found = ranked(["a", "b", "c"], np.array([0.0, 2.0, 0.0], dtype="float32"))
    assert [c for c, _ in found] == ["b", "a", "c"]  # ties keep their order
    assert sum(p for _, p in found) == pytest.approx(1.0)
    assert found[0][1] == pytest.approx(np.exp(2) / (np.exp(2) + 2))
    assert found[1][1] == found[2][1]


def test_candidate_softmax_loss_is_cross_entropy_per_mention():
    scores = torch.tensor([1.0, 2.0, 0.5, -1.0, 3.0])
    loss = candidate_softmax_loss(scores, [3, 2], [0, 1])
    expected = (torch.nn.functional.cross_entropy(scores[None, :3], torch.tensor([0]))
                + torch.nn.functional.cross_entropy(scores[None, 3:], torch.tensor([1]))) / 2
    assert loss.item() == pytest.approx(expected.item())


def _gold_log_probability(reranker) -> float:
    scores = reranker.score(TEXTS, SPANS, CANDIDATES)
    return float(np.mean([torch.tensor(s).log_softmax(-1)[ids.index(g)].item()
                          for s, ids, g in zip(scores, CANDIDATES, GOLD, strict=True)]))


def test_a_training_step_lowers_the_loss(reranker):
    before = _gold_log_probability(reranker)
    optimizer = torch.optim.Adam(reranker.scorer.parameters(), lr=0.003)
    losses = []
    for _ in range(8):
        optimizer.zero_grad()
        losses.append(reranker.step(TEXTS, SPANS, CANDIDATES, GOLD))
        assert all(p.grad is not None for p in reranker.scorer.score.parameters())
        optimizer.step()
        reranker.changed()
    assert losses[-1] < losses[0] * 0.8, losses
    # the loss is BLINK's softmax loss over the scores that score() gives
    assert -before == pytest.approx(losses[0], rel=1e-4)
    assert _gold_log_probability(reranker) > before + 0.2
    assert reranker.step(TEXTS, [], [], []) is None
    with pytest.raises(ValueError, match=r"E072.*'D010146'"):
        reranker.step(TEXTS, SPANS[:1], CANDIDATES[:1], ["D010146"])


def test_training_candidates_inject_the_gold_entity(reranker):
    pick = reranker.training_candidates
    assert pick(["D003371", "D001241", "D005334"], ["D001241"], 2) == (
        ["D003371", "D001241"], "D001241")
    # missed by retrieval: the gold entity takes the last place, or the mention is skipped
    assert pick(["D003371", "D005334", "D006333"], ["D001241"], 2) == (
        ["D003371", "D001241"], "D001241")
    assert pick(["D003371", "D005334"], ["D001241"], 2, inject_gold=False) is None
    assert pick(["D003371"], ["NOT-IN-KB"], 2) is None
    assert pick([], ["D001241"], 2) is None
    # the first in-KB gold id among several
    assert pick(["D005334", "D001241"], ["NOT-IN-KB", "D001241", "D005334"], 4) == (
        ["D005334", "D001241"], "D005334")
    spans, candidates, gold = reranker.training_batch(
        SPANS, [["D003371"], [], ["D005334"]], [["D001241"], ["D003371"], ["D005334"]], 1)
    assert (spans, candidates, gold) == ([SPANS[0], SPANS[2]], [["D001241"], ["D005334"]],
                                         ["D001241", "D005334"])


def test_save_load_round_trip_gives_identical_scores(reranker, tmp_path):
    optimizer = torch.optim.Adam(reranker.scorer.parameters(), lr=0.003)
    reranker.step(TEXTS, SPANS, CANDIDATES, GOLD)
    optimizer.step()
    reranker.changed()
    written = reranker.save(tmp_path / "r")
    assert sorted(written) == ["encoder", "head.safetensors", "kb.jsonl", "reranker.json",
                               "tokenizer"]
    assert not list((tmp_path / "r").rglob("*.bin")) and not list((tmp_path / "r").rglob("*.pt"))
    loaded = CrossEncoderReranker.load(tmp_path / "r")
    assert loaded.settings == reranker.settings
    assert loaded.kb.fingerprint() == reranker.kb.fingerprint()
    for a, b in zip(loaded.score(TEXTS, SPANS, CANDIDATES),
                    reranker.score(TEXTS, SPANS, CANDIDATES), strict=True):
        np.testing.assert_array_equal(a, b)
    assert CrossEncoderReranker.load(tmp_path / "r", batch_size=1).settings.batch_size == 1
    with pytest.raises(ValueError, match=r"E071.*mention_max_length = 32.*= 16"):
        CrossEncoderReranker.load(tmp_path / "r", mention_max_length=16)
    saved = json.loads((tmp_path / "r" / "reranker.json").read_text())
    assert saved["mention_max_length"] == 32 and saved["batch_size"] == 2
