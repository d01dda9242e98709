"""Self-alignment (SapBERT) on 2 ranks (issue 64): each rank encodes its share of every batch
of name pairs, the rows are gathered with their gradient, and after a few steps the weights
are those one process reaches on the whole batches (gloo, spawned on loopback)."""

from __future__ import annotations

import torch

from spacy_arboel.linking.loop_settings import SelfAlignmentSettings
from spacy_arboel.linking.self_alignment import SelfAlignmentTrainer
from spacy_arboel.objectives.gathered import joined_ranks
from tests.linking.test_self_alignment import TOY_NAMES, _kb
from tests.spawned_ranks import set_rank_env, spawn_ranks

SETTINGS = SelfAlignmentSettings(batch_size=5, learning_rate=1e-3, max_steps=3, seed=0)


def _train(encoder: str) -> tuple[list[float], dict]:
    torch.set_num_threads(1)
    trainer = SelfAlignmentTrainer(encoder, SETTINGS)
    # plain SGD: unlike AdamW's, its step shows a gradient off by a factor (the ranks' sum)
    trainer.optimizer = torch.optim.SGD(trainer.encoder.parameters(), lr=1.0)
    report = trainer.fit(_kb(TOY_NAMES), progress=False)
    weights = torch.cat([p.detach().flatten() for p in trainer.encoder.parameters()])
    return weights.tolist(), report


def _rank(rank: int, size: int, port: int, encoder: str, results) -> None:
    set_rank_env(rank, size, port)
    with joined_ranks(30.0):
        results[rank] = _train(encoder)


def test_two_ranks_self_align_as_one_process_on_the_whole_batch(tiny_encoder):
    results = spawn_ranks(_rank, tiny_encoder)
    alone, report = _train(tiny_encoder)
    start = torch.cat([p.detach().flatten() for p in SelfAlignmentTrainer(
        tiny_encoder, SETTINGS).encoder.parameters()])
    for rank in (0, 1):
        weights, rank_report = results[rank]
        assert torch.allclose(torch.tensor(weights), torch.tensor(alone), atol=1e-5)
        assert rank_report["ranks"] == 2 and rank_report["steps"] == report["steps"] == 3
        assert abs(rank_report["loss_first"] - report["loss_first"]) < 1e-5
    assert report["ranks"] == 1
    assert not torch.allclose(start, torch.tensor(alone), atol=1e-4)  # the steps moved them
