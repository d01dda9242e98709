"""Training ``arbo_entity_linker`` on several ranks: data-parallel, on torch's own process
groups (issue 64), launched by ``torchrun`` (``train-ranks``).

Each rank builds the pipeline from the training config (``spacy train``'s config, its
overrides included), takes its part of every global batch, and steps the linker's trainer
on it: BLINK's in-batch negatives are gathered from every rank with their gradient
(``objectives.gathered``), the gradients are averaged over the ranks as DDP averages them,
and every rank applies the same update, so that W ranks with batches of b docs take the
steps one process takes with batches of W·b docs. Rank 0 evaluates on the dev corpus and
writes ``model-last``, ``model-best`` and ``ranks.json`` (the step reached, for a resumed
run); the others wait for it. A rank that fails, or does not answer within the process
group's timeout, ends the run on every rank (E266) instead of leaving it hanging.

Deviations: the global batch is a contiguous slice of the epoch's permutation, rank r its
r-th part (``rank_batches``; ``DistributedSampler`` deals indices round-robin, which would
not give one process's batches); the gradients are averaged in one flat exchange after the
backward pass (DDP overlaps buckets with it: the thinc wrapper owns the encoders' forward);
a resumed run starts a fresh optimizer (its learning-rate schedule fast-forwarded to the
step), not the saved moments. At a refresh of the index each rank embeds its share of the
KB's rows and all build the same index from them (``IndexedKB.refresh(across_ranks=True)``).
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from ..atomic import atomic_file
from ..components.common import gold_mentions
from ..factories import ENTITY_LINKER
from ..objectives.gathered import (
    average_gradients,
    broadcast_parameters,
    exchange,
    joined_ranks,
    world,
)
from ..settings import PositiveFloat, PositiveInt, check_fields
from .loading import load_pipeline, save_pipeline

STATE_FILE = "ranks.json"


@dataclass(frozen=True)
class RankSettings:
    """``batch_size``: docs per rank and step (the global batch is W times that);
    ``timeout_s``: how long a rank waits for the others in one exchange (rank 0's
    evaluation included) before E266; ``seed``: the epochs' permutations; ``gpu``: each
    rank trains on its own GPU (``nccl``), else on the CPU (``gloo``)."""

    batch_size: PositiveInt = 2
    timeout_s: PositiveFloat = 600.0
    seed: int = 0
    gpu: bool = False

    __post_init__ = check_fields


def rank_batches(n: int, size: int, rank: int, batch_size: int, epoch: int, seed: int
                 ) -> list[list[int]]:
    """This rank's part of each global batch of an epoch: the ``n`` examples permuted by
    ``seed`` and ``epoch`` (the same on every rank), padded with the first ones to whole
    global batches of ``size * batch_size`` (every rank takes as many steps), rank ``rank``
    the ``rank``-th ``batch_size`` of each."""
    order = list(range(n))
    random.Random(seed * 100_003 + epoch).shuffle(order)
    step = size * batch_size
    total = steps_per_epoch(n, size, batch_size) * step
    order += [order[i % n] for i in range(total - n)]
    return [order[start + rank * batch_size : start + (rank + 1) * batch_size]
            for start in range(0, total, step)]


def steps_per_epoch(n: int, size: int, batch_size: int) -> int:
    """The global batches of ``size * batch_size`` examples an epoch of ``n`` takes."""
    return -(-n // (size * batch_size))


def train_across_ranks(config_path: str | Path, output: str | Path,
                       overrides: Mapping[str, Any] | None = None,
                       settings: RankSettings = RankSettings(), *, resume: bool = False,
                       component: str = ENTITY_LINKER,
                       on_step: Callable[[int, float], None] | None = None) -> dict[str, Any]:
    """Train ``component`` of the config at ``config_path`` on this process's rank (see the
    module), writing into ``output`` on rank 0; ``resume``: start from ``output``'s
    ``model-last`` and the step its ``ranks.json`` records. Returns what rank 0 wrote in
    ``ranks.json`` (every rank)."""
    with joined_ranks(settings.timeout_s, settings.gpu) as (rank, size):
        if settings.gpu:  # the rank's GPU (torchrun's LOCAL_RANK, or the one Ray gave it)
            from thinc.api import require_gpu

            require_gpu(torch.cuda.current_device())
        return _train(config_path, Path(output), overrides, settings, resume, component,
                      on_step, rank, size)


def _train(config_path: str | Path, output: Path, overrides: Mapping[str, Any] | None,
           settings: RankSettings, resume: bool, component: str,
           on_step: Callable[[int, float], None] | None, rank: int, size: int
           ) -> dict[str, Any]:
    """``train_across_ranks`` on this process's rank of the ``size`` joined."""
    from spacy.training.initialize import init_nlp
    from spacy.util import load_config, registry, resolve_dot_names

    config = load_config(config_path, overrides=dict(overrides or {}), interpolate=False)
    state = {"step": 0, "epoch": 0, "best_score": None}
    if resume:
        state = json.loads((output / STATE_FILE).read_text())
        nlp = load_pipeline(output / "model-last")
    else:
        nlp = init_nlp(config)
    resolved = config.interpolate()
    training = registry.resolve(resolved["training"])
    train_corpus, dev_corpus = resolve_dot_names(
        resolved, [training["train_corpus"], training["dev_corpus"]])
    examples, dev = list(train_corpus(nlp)), list(dev_corpus(nlp))
    optimizer = training["optimizer"]
    for _ in range(state["step"]):
        optimizer.step_schedules()
    pipe = nlp.get_pipe(component)
    if resume:  # what initialize gives a new run: the gold mentions the trainer mines
        pipe.ensure_ready()
        pipe.trainer.collect(*gold_mentions((eg.reference for eg in examples),
                                            pipe.span_getter, pipe.kb))
    params = [p for module in dict.fromkeys(pipe.retriever.encoders.values())
              for p in module.parameters()]
    broadcast_parameters(params)  # rank 0's weights on every rank, as DDP starts
    weights = {k: w for k, w in training["score_weights"].items() if w}
    per_epoch = steps_per_epoch(len(examples), size, settings.batch_size)
    max_steps = training["max_steps"] or training["max_epochs"] * per_epoch
    every = training["eval_frequency"]
    started, first = time.perf_counter(), state["step"]
    while state["step"] < max_steps:
        batches = rank_batches(len(examples), size, rank, settings.batch_size,
                               state["epoch"], settings.seed)
        skip = state["step"] - state["epoch"] * per_epoch
        for indices in batches[max(skip, 0):]:
            losses: dict[str, float] = {}
            pipe.update([examples[i] for i in indices], sgd=None, losses=losses)
            average_gradients(params)
            pipe.finish_update(optimizer)
            optimizer.step_schedules()
            state["step"] += 1
            if on_step is not None:
                on_step(state["step"], losses.get(component, 0.0))
            if state["step"] % every == 0 or state["step"] == max_steps:
                # the steps' time so far, rank 0's evaluations and saves left out
                state["train_seconds"] = round(state.get("train_seconds", 0.0)
                                               + time.perf_counter() - started, 3)
                state["steps_timed"] = state.get("steps_timed", 0) + state["step"] - first
                # every rank's index as rank 0's evaluation needs it, the KB embedded
                # once over the ranks
                pipe.retriever.entities.refresh(across_ranks=True)
                pipe.ensure_ready()
                state = _checkpoint(nlp, dev, weights, output, state, rank)
                started, first = time.perf_counter(), state["step"]
            if state["step"] >= max_steps:
                break
        else:
            state["epoch"] += 1
    return state


def _checkpoint(nlp, dev: list, weights: Mapping[str, float], output: Path,
                state: dict[str, Any], rank: int) -> dict[str, Any]:
    """Rank 0 evaluates on ``dev`` and writes ``model-last``, ``model-best`` (a better
    weighted score) and ``ranks.json``; every rank then has rank 0's state."""
    if rank == 0:
        scores = nlp.evaluate(dev) if dev else {}
        score = sum(float(scores.get(k) or 0.0) * w for k, w in weights.items())
        save_pipeline(nlp, output / "model-last")
        if state["best_score"] is None or score > state["best_score"]:
            save_pipeline(nlp, output / "model-best")
            state = {**state, "best_score": score, "best_step": state["step"]}
        state = {**state, "score": score}
        with atomic_file(output / STATE_FILE) as temp:
            temp.write_text(json.dumps(state))
    shared = [state]
    if world()[1] > 1:
        exchange("rank 0's checkpoint", dist.broadcast_object_list, shared, 0)
    return shared[0]
