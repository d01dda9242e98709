"""The bi-encoder trainer over 2 ranks (issue 64): each rank steps on its share of the batch,
the gradients averaged as DDP averages them, and after N steps both ranks hold the
parameters one process holds after N steps on the whole batch: for BLINK's in-batch
negatives (gathered across ranks with their gradient) and for k-NN negatives (each
mention's own candidates)."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist

from spacy_arboel.encoders.inputs import MentionSpan
from spacy_arboel.kb import KnowledgeBase
from spacy_arboel.kb.entity import Entity
from spacy_arboel.linking import DenseRetriever, RetrieverSettings
from spacy_arboel.linking.bi_encoder_trainer import BiEncoderTrainer
from spacy_arboel.objectives import InBatch, KnnNegatives
from spacy_arboel.objectives.gathered import average_gradients
from tests.conftest import TOY_ENTITIES, TOY_SENTENCES
from tests.spawned_ranks import join_ranks, spawn_ranks

STEPS, LEARN_RATE = 3, 0.5
OBJECTIVES = {"in_batch": InBatch, "knn_negatives": lambda: KnnNegatives(2)}


def _mentions():
    texts = [text for text, _ in TOY_SENTENCES]
    spans, golds = [], []
    for i, (_, ents) in enumerate(TOY_SENTENCES):
        for start, end, _, kb_id in ents:
            spans.append(MentionSpan(i, start, end))
            golds.append([kb_id])
    return texts, spans, golds


def _train(encoder: str, objective: str, share: slice | None) -> list[float]:
    """STEPS steps of plain SGD on the mentions of ``share`` (all of them: None), the
    gradients averaged over the ranks; the encoders' parameters after them."""
    torch.manual_seed(0)
    torch.set_num_threads(1)
    kb = KnowledgeBase(Entity.from_dict(e) for e in TOY_ENTITIES)
    retriever = DenseRetriever.from_pretrained(kb, encoder, RetrieverSettings(
        cpu_bf16=False, batch_size=8))
    trainer = BiEncoderTrainer(retriever, OBJECTIVES[objective]())
    texts, spans, golds = _mentions()
    trainer.collect(texts, spans, golds)
    params = [p for e in dict.fromkeys(retriever.encoders.values()) for p in e.parameters()]
    for _ in range(STEPS):
        part = slice(None) if share is None else share
        trainer.step(texts, spans[part], golds[part])
        average_gradients(params)  # as DDP does
        with torch.no_grad():
            for param in params:
                if param.grad is not None:
                    param -= LEARN_RATE * param.grad
                    param.grad = None
        retriever.entities.changed()
    return torch.cat([p.detach().flatten() for p in params]).tolist()


def _rank(rank: int, size: int, port: int, encoder: str, objective: str, first: int,
          results) -> None:
    join_ranks(rank, size, port)
    try:
        n = len(_mentions()[1])
        results[rank] = _train(encoder, objective,
                               slice(0, first) if rank == 0 else slice(first, n))
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("objective", sorted(OBJECTIVES))
@pytest.mark.parametrize("share", ["half", "all"])
def test_two_ranks_train_as_one_process_on_the_whole_batch(tiny_encoder, objective, share):
    """Half the mentions each, or all on rank 0 and none on rank 1 (which takes part in
    every exchange all the same)."""
    n = len(_mentions()[1])
    alone = torch.tensor(_train(tiny_encoder, objective, None))
    start = torch.tensor(_train(tiny_encoder, objective, slice(0, 0)))
    assert not torch.allclose(alone, start)  # the steps moved the parameters
    results = spawn_ranks(_rank, tiny_encoder, objective, n // 2 if share == "half" else n)
    for rank in (0, 1):
        assert torch.allclose(torch.tensor(results[rank]), alone, atol=1e-5), rank
