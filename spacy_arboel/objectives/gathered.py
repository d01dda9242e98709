"""In-batch negatives across the ranks of a data-parallel run (issue 64).

BLINK (§3.2, eq. 4) and SapBERT train on the other mentions of a batch as negatives; split
over ranks, each rank would see only its own share. Here each rank's encoder outputs are
gathered from every rank *with their gradient* (torch's functional ``all_gather_single``:
the backward pass sends each rank the gradient of the rows it encoded), so a
run of W ranks with local batches of B scores each mention against the W·B entities a
single process would see on the whole batch. Without a process group (one process) every
function here is the plain single-batch computation.

A rank's loss is weighted (``rank_weight``) so that the gradients DDP averages over the ranks
are those of the mean loss over the whole batch, whatever each rank's share (a last, shorter
batch included); ``in_batch_loss`` reports that whole-batch mean.
"""

from __future__ import annotations

import datetime
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from ..errors import Errors
from .losses import candidate_scores, softmax_loss


def world() -> tuple[int, int]:
    """This process's rank and the number of ranks (0 and 1 without a process group)."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def start_ranks(timeout_s: float, gpu: bool = False) -> tuple[int, int]:
    """Join the process group ``torchrun`` describes (``RANK``, ``WORLD_SIZE``,
    ``MASTER_ADDR``, ``MASTER_PORT``): ``nccl`` for ranks on GPUs (``gpu``: each takes
    ``LOCAL_RANK``'s), ``gloo`` on CPUs, a rank that does not answer within ``timeout_s``
    an error. Without them (or with one rank) nothing is joined: rank 0 of 1. A group
    already joined (Ray Train's) is kept."""
    size = int(os.environ.get("WORLD_SIZE", "1"))
    if dist.is_initialized() or size == 1 or "RANK" not in os.environ:
        return world()
    if gpu:
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dist.init_process_group("nccl" if gpu else "gloo",
                            timeout=datetime.timedelta(seconds=timeout_s))
    return world()


@contextmanager
def joined_ranks(timeout_s: float, gpu: bool = False) -> Iterator[tuple[int, int]]:
    """``start_ranks`` for the ``with`` block (this rank and the number of ranks); at its
    end every rank meets the others before the group it joined is torn down (gloo aborts a
    rank still exchanging else). A group joined before (Ray Train's) is left to its
    owner."""
    owned = not dist.is_initialized()
    rank, size = start_ranks(timeout_s, gpu)
    try:
        yield rank, size
        if size > 1:
            exchange("the end of the run", dist.barrier)
    finally:
        if owned and size > 1:
            dist.destroy_process_group()


def rank_device() -> torch.device:
    """Where this rank computes: its GPU (``LOCAL_RANK``'s) under ``nccl``, else the CPU."""
    if world()[1] > 1 and dist.get_backend() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def exchange(what: str, call: Any, *args: Any) -> Any:
    """``call(*args)``, a collective (``what``: what it exchanges, for the error); a rank
    that failed or did not answer within the process group's timeout is E266 (not a
    hang)."""
    try:
        return call(*args)
    except (RuntimeError, dist.DistBackendError) as err:
        rank, size = world()
        raise RuntimeError(Errors.E266.format(what=what, rank=rank, size=size,
                                              error=str(err).splitlines()[0][:300])) from err


def share(n: int, rank: int | None = None) -> slice:
    """Rank ``rank``'s (default: this rank's) contiguous part of ``n`` items, in rank order
    (the first ``n % W`` ranks one more): what a rank computes of work every rank holds."""
    size = world()[1]
    rank = world()[0] if rank is None else rank
    base, extra = divmod(n, size)
    start = rank * base + min(rank, extra)
    return slice(start, start + base + (rank < extra))


def share_counts(n: int) -> list[int]:
    """How many of ``n`` items each rank's ``share`` holds, in rank order."""
    return [len(range(n)[share(n, r)]) for r in range(world()[1])]


def shared_rows(n: int, compute: Callable[[slice], np.ndarray], what: str) -> np.ndarray:
    """The (n, d) rows of ``compute`` over ``range(n)``, each rank computing its ``share``
    and every rank receiving all of them (no gradient): the KB embedded once over the ranks
    at an index refresh, not once on each. One process computes them all."""
    size = world()[1]
    if size == 1:
        return compute(slice(0, n))
    mine = torch.as_tensor(np.ascontiguousarray(compute(share(n))), device=rank_device())
    if n < size:  # a rank without a row learns the width from the others
        width = max(gather_counts(mine.shape[1] if mine.ndim == 2 and mine.shape[0] else 0))
        mine = mine if mine.shape[0] else mine.new_zeros((0, width))
    return _gathered(mine, share_counts(n), what, False).cpu().numpy()


def agreed(flag: bool, what: str) -> bool:
    """Rank 0's ``flag`` on every rank (one process: ``flag``): a decision one rank takes,
    such as stopping at a time limit, that every rank must take at the same step."""
    if world()[1] == 1:
        return flag
    shared = torch.tensor([int(flag)], device=rank_device())
    exchange(what, dist.broadcast, shared, 0)
    return bool(shared.item())


def gather_counts(n: int) -> list[int]:
    """Each rank's ``n``, in rank order."""
    rank, size = world()
    if size == 1:
        return [n]
    counts = torch.zeros(size, dtype=torch.long, device=rank_device())
    counts[rank] = n
    exchange("the batch sizes", dist.all_reduce, counts)
    return counts.tolist()


def rank_weight(n_local: int, counts: list[int] | None = None) -> float:
    """The factor of a rank's mean loss over its ``n_local`` mentions that makes DDP's
    average of the ranks' gradients the gradient of the whole batch's mean loss: W·n_local/N
    (1 without a process group; 0 where no rank has a mention). ``counts``: every rank's
    count, where it is gathered already."""
    size = world()[1]
    if size == 1:
        return 1.0
    total = sum(gather_counts(n_local) if counts is None else counts)
    return size * n_local / total if total else 0.0


def _gathered(tensor: torch.Tensor, counts: list[int], what: str,
              with_grad: bool) -> torch.Tensor:
    """Every rank's ``tensor`` (its ``counts[r]`` rows) concatenated in rank order: padded to
    the largest, exchanged, then cut; ``with_grad``: each rank's rows keep the graph of the
    rank that made them (``torch.distributed.nn.functional.all_gather``)."""
    pad = tensor.new_zeros((max(counts) - tensor.shape[0], *tensor.shape[1:]))
    padded = torch.cat([tensor, pad])
    if with_grad:
        parts = exchange(what, _gather_with_grad, padded).tensor_split(len(counts))
    else:
        parts = [torch.empty_like(padded) for _ in counts]
        exchange(what, dist.all_gather, parts, padded)
    return torch.cat([part[:count] for part, count in zip(parts, counts, strict=True)])


def _gather_with_grad(tensor: torch.Tensor) -> torch.Tensor:
    """Every rank's ``tensor`` stacked along the first axis, the backward pass sending each
    rank the sum over the ranks of its rows' gradients (torch's functional collective)."""
    from torch.distributed import _functional_collectives as funcol

    return funcol.wait_tensor(funcol.all_gather_single_autograd(tensor, 0, dist.group.WORLD))


def gather_rows(rows: torch.Tensor, counts: list[int] | None = None
                ) -> tuple[torch.Tensor, int]:
    """Every rank's ``rows`` (N_r, d) concatenated in rank order, with gradient (each rank's
    rows keep the graph of the rank that encoded them), and where this rank's rows start.
    Ranks may hold different numbers of rows. ``counts``: every rank's N_r, where gathered
    already."""
    rank, size = world()
    if size == 1:
        return rows, 0
    counts = gather_counts(rows.shape[0]) if counts is None else counts
    return _gathered(rows, counts, "the encoder outputs", True), sum(counts[:rank])


def gather_ids(ids: torch.Tensor, counts: list[int] | None = None) -> torch.Tensor:
    """Every rank's integer ``ids`` (N_r, ...) concatenated in rank order (no gradient).
    ``counts``: every rank's N_r, where gathered already."""
    if world()[1] == 1:
        return ids
    counts = gather_counts(ids.shape[0]) if counts is None else counts
    return _gathered(ids, counts, "the gold ids", False)


def in_batch_loss(queries: torch.Tensor, entities: torch.Tensor, gold: torch.Tensor,
                  similarity: str = "dot", scale: float = 1.0,
                  rows: torch.Tensor | None = None) -> tuple[torch.Tensor, float]:
    """BLINK eq. (4) over the whole batch of every rank: mention ``i`` of this rank
    (``queries`` (B, d)) against the gold entity of every mention of every rank
    (``entities`` (B, d), row ``i`` mention ``i``'s; ``gold`` (B,) their ids), its own the
    positive and the entities of other ids the negatives, each index row once (``rows``
    (B,): the index row each entity output encodes; as ``InBatch`` plans one batch).
    Returns the loss to call ``backward`` on (weighted by ``rank_weight`` for DDP's
    averaging) and the whole batch's mean loss (the same on every rank). Four exchanges a
    step: the counts, the entity outputs, the ids, the loss."""
    size = world()[1]
    n_local = queries.shape[0]
    counts = gather_counts(n_local)
    nodes, offset = gather_rows(entities, counts)
    labels = gather_ids(torch.stack([gold, gold if rows is None else rows], dim=1), counts)
    ids, keys = labels[:, 0], labels[:, 1]
    n_all = nodes.shape[0]
    # column 0 the positive, then every node of another gold id, the first of each row
    # (padding, -1, elsewhere)
    own = torch.arange(n_local, device=queries.device) + offset
    order = torch.arange(n_all, device=queries.device)
    seen: set[int] = set()
    first = torch.tensor([key not in seen and not seen.add(key) for key in keys.tolist()],
                         dtype=torch.bool, device=queries.device)
    others = torch.where((ids[None, :] != gold[:, None]) & first[None, :],
                         order.expand(n_local, n_all), -1)
    candidates = torch.cat([own[:, None], others], dim=1)
    scores, valid = candidate_scores(queries, nodes, candidates, similarity, scale)
    # a rank with no mention still sends its gradient back through the gathered rows
    local = softmax_loss(scores, valid) if n_local else scores.sum()
    total = local.detach() * n_local
    if size > 1:
        exchange("the loss", dist.all_reduce, total)
    return local * rank_weight(n_local, counts), float(total) / max(n_all, 1)


def broadcast_parameters(params: list[torch.nn.Parameter]) -> None:
    """Rank 0's values of ``params`` on every rank (in one flat exchange), as DDP starts:
    every rank then steps the same weights, whatever it loaded or drew."""
    if world()[1] == 1 or not params:
        return
    flat = torch.cat([p.detach().reshape(-1) for p in params])
    exchange("rank 0's weights", dist.broadcast, flat, 0)
    offset = 0
    with torch.no_grad():
        for param in params:
            param.copy_(flat[offset : offset + param.numel()].view_as(param))
            offset += param.numel()


def average_gradients(params: list[torch.nn.Parameter]) -> None:
    """Each parameter's gradient averaged over the ranks, as DDP averages them (in one flat
    exchange after the backward pass, where DDP overlaps buckets with it); a parameter
    without a gradient on a rank (no mention there) counts as zeros, so that every rank
    exchanges the same tensors."""
    rank, size = world()
    if size == 1 or not params:
        return
    grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
    flat = torch.cat([g.reshape(-1) for g in grads])
    exchange("the gradients", dist.all_reduce, flat)
    flat /= size
    offset = 0
    for param in params:
        n = param.numel()
        param.grad = flat[offset : offset + n].view_as(param).clone()
        offset += n
