"""In-batch negatives across ranks (issue 64): a 2-rank gloo run, spawned on loopback,
gives the loss and the gradients one process gives on the whole batch, for equal and
unequal shares; a rank that dies ends the other's exchange with E266, not a hang."""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from spacy_arboel.objectives.gathered import (
    agreed,
    average_gradients,
    broadcast_parameters,
    gather_rows,
    in_batch_loss,
    share,
    shared_rows,
    world,
)
from tests.spawned_ranks import free_port, join_ranks, spawn_ranks

DIM, N = 6, 8
# the gold ids of the N mentions: mentions 2 and 5 share one entity (not each other's
# negative)
GOLD = torch.tensor([0, 1, 2, 3, 4, 2, 5, 6])


def _data():
    torch.manual_seed(0)
    mentions = torch.randn(N, DIM)
    entities = torch.randn(N, DIM)
    encoders = (torch.nn.Linear(DIM, DIM), torch.nn.Linear(DIM, DIM))
    return mentions, entities, encoders


def _grads(encoders):
    return torch.cat([p.grad.flatten() for e in encoders for p in e.parameters()])


def _rank_step(rank: int, size: int, port: int, shares: list[int], similarity: str,
               results) -> None:
    join_ranks(rank, size, port)
    try:
        torch.set_num_threads(1)
        mentions, entities, encoders = _data()
        start = sum(shares[:rank])
        part = slice(start, start + shares[rank])
        loss, whole = in_batch_loss(encoders[0](mentions[part]), encoders[1](entities[part]),
                                    GOLD[part], similarity, 2.0)
        loss.backward()
        average_gradients([p for e in encoders for p in e.parameters()])  # DDP's averaging
        results[rank] = (whole, _grads(encoders).tolist(), world())
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("shares", [[4, 4], [3, 5]])
@pytest.mark.parametrize("similarity", ["dot", "cosine"])
def test_two_ranks_give_the_whole_batchs_loss_and_gradients(shares, similarity):
    mentions, entities, encoders = _data()
    torch.set_num_threads(1)
    loss, whole = in_batch_loss(encoders[0](mentions), encoders[1](entities), GOLD,
                                similarity, 2.0)
    loss.backward()
    assert world() == (0, 1) and abs(float(loss.detach()) - whole) < 1e-6
    expected = _grads(encoders)
    results = spawn_ranks(_rank_step, shares, similarity)
    for rank in (0, 1):
        got_whole, grads, (got_rank, got_size) = results[rank]
        assert (got_rank, got_size) == (rank, 2)
        assert abs(got_whole - whole) < 1e-5
        assert torch.allclose(torch.tensor(grads), expected, atol=1e-5), rank


def _rank_gather(rank: int, size: int, port: int, results) -> None:
    join_ranks(rank, size, port)
    try:
        rows = torch.full((rank + 1, 2), float(rank), requires_grad=True)
        whole, offset = gather_rows(rows)
        (whole * torch.arange(1.0, whole.shape[0] + 1)[:, None]).sum().backward()
        results[rank] = (whole.tolist(), offset, rows.grad.tolist())
    finally:
        dist.destroy_process_group()


def test_rows_are_gathered_in_rank_order_and_send_back_their_gradient():
    results = spawn_ranks(_rank_gather)
    assert results[0][0] == results[1][0] == [[0.0, 0.0], [1.0, 1.0], [1.0, 1.0]]
    assert (results[0][1], results[1][1]) == (0, 1)
    # each rank's rows get the gradient every rank's loss sent them (weights 1; 2 and 3)
    assert results[0][2] == [[2.0, 2.0]]
    assert results[1][2] == [[4.0, 4.0], [6.0, 6.0]]


def _rank_shares(rank: int, size: int, port: int, results) -> None:
    join_ranks(rank, size, port)
    try:
        seen: list[tuple[int, int]] = []

        def compute(part: slice):  # row i is [i, 10 i]; each rank says what it computed
            seen.append((part.start, part.stop))
            return np.array([[i, 10 * i] for i in range(part.start, part.stop)],
                            dtype="float32").reshape(-1, 2)

        found = {
            "rows": [shared_rows(n, compute, "test rows").tolist() for n in (5, 1)],
            "seen": seen,
            "agreed": [agreed(rank == 0, "a flag"), agreed(rank == 1, "a flag")],
            "shares": [share(n, r) for n in (5, 1) for r in (0, 1)],
        }
        weights = torch.nn.Parameter(torch.full((2, 3), float(rank + 1)))
        broadcast_parameters([weights])
        results[rank] = {**found, "weights": weights.detach().tolist()}
    finally:
        dist.destroy_process_group()


def test_rows_computed_once_over_the_ranks_reach_every_rank():
    results = spawn_ranks(_rank_shares)
    five = [[float(i), 10.0 * i] for i in range(5)]
    for rank in (0, 1):  # rank 0 computed rows 0-2 and row 0 of one, rank 1 rows 3-4
        assert results[rank]["rows"] == [five, five[:1]]
        assert results[rank]["agreed"] == [True, False]  # rank 0's flag, on both
        assert results[rank]["weights"] == [[1.0] * 3] * 2  # rank 0's weights
    assert results[0]["seen"] == [(0, 3), (0, 1)]
    assert results[1]["seen"] == [(3, 5), (1, 1)]
    assert results[0]["shares"] == [slice(0, 3), slice(3, 5), slice(0, 1), slice(1, 1)]
    assert share(5) == slice(0, 5)  # one process: all of them


def _rank_dies(rank: int, size: int, port: int, results) -> None:
    join_ranks(rank, size, port, timeout_s=5.0)
    if rank == 1:
        os._exit(0)  # a rank that dies without a word
    try:
        gather_rows(torch.ones(2, 2, requires_grad=True))
        results[rank] = "no error"
    except RuntimeError as err:
        results[rank] = str(err)


def test_a_dead_rank_ends_the_exchange_with_a_coded_error():
    ctx = mp.get_context("spawn")
    port = free_port()
    with mp.Manager() as manager:
        results = manager.dict()
        procs = [ctx.Process(target=_rank_dies, args=(rank, 2, port, results))
                 for rank in (0, 1)]
        for proc in procs:
            proc.start()
        for proc in procs:
            proc.join(60)
        alive = [proc.is_alive() for proc in procs]
        for proc in procs:
            proc.kill()
        results = dict(results)
    assert not any(alive), "a rank hung past the timeout"
    assert "[E266] Rank 0 of 2 could not exchange the batch sizes" in results[0]


def test_one_process_is_the_in_batch_objectives_plan():
    """Without a process group the loss is ``InBatch``'s over the same batch: each index row
    once among the negatives, none of the mention's own entity."""
    import numpy as np

    from spacy_arboel.objectives import InBatch, PlanContext
    from spacy_arboel.objectives.losses import candidate_scores, softmax_loss

    mentions, entities, _ = _data()
    entities[5] = entities[2]  # one row, one vector: mentions 2 and 5 share their entity's
    rows = GOLD * 10  # each entity one index row
    plan = InBatch().plan(PlanContext(
        gold_rows=[[int(r)] for r in rows], gold_entities=GOLD.tolist(),
        store_positions=[-1] * N, queries=mentions.numpy()))
    by_row = {int(r): entities[i] for i, r in enumerate(rows)}
    nodes = torch.stack([by_row[r] for r in plan.entity_rows])
    scores, valid = candidate_scores(mentions, nodes, torch.as_tensor(plan.candidates))
    expected = softmax_loss(scores, valid)
    loss, whole = in_batch_loss(mentions, entities, GOLD, rows=rows)
    assert np.isclose(float(loss), float(expected), atol=1e-6)
    assert np.isclose(whole, float(expected), atol=1e-6)


def test_a_step_without_any_mention_has_no_loss():
    """Every rank's share empty (the idle path of every rank at once): loss 0, no error."""
    empty = torch.zeros((0, DIM), requires_grad=True)
    loss, whole = in_batch_loss(empty, empty, torch.zeros(0, dtype=torch.long),
                                rows=torch.zeros(0, dtype=torch.long))
    loss.backward()
    assert float(loss.detach()) == 0.0 and whole == 0.0
