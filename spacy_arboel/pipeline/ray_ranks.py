"""``train-ranks --engine ray``: the data-parallel training of ``pipeline.ranks`` on a Ray
cluster, through Ray Train's ``TorchTrainer`` (issue 64).

Ray Train starts one worker per rank (``num_workers``, on any node of the cluster), joins
them in a torch process group (``gloo`` on CPUs, ``nccl`` with GPUs, its timeout the run's)
and runs ``train_across_ranks`` in each: the same training function ``torchrun`` runs, which
keeps the group Ray joined. Rank 0 writes ``model-last``, ``model-best`` and ``ranks.json``
into ``output``, on its own node: on a cluster of several machines ``output`` must be a
folder every node sees (a shared file system), as the config's corpora and KB must be.
Ray Train's own run folder (its logs) is ``output/ray``. A worker that fails ends the run
(no restart: ``--resume`` continues from the last checkpoint).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..errors import Errors
from ..factories import ENTITY_LINKER
from ..jobs.engines import start_ray
from .ranks import STATE_FILE, RankSettings, train_across_ranks

RAY_FOLDER = "ray"


def import_ray_train() -> Any:
    """Ray Train's torch module (``pip install "ray[train]"``), or E269 saying how to
    install it."""
    try:
        from ray.train import torch as ray_torch
    except ImportError:
        raise ImportError(Errors.E269) from None
    return ray_torch


def train_with_ray(config_path: str | Path, output: str | Path,
                   overrides: Mapping[str, Any] | None = None,
                   settings: RankSettings = RankSettings(), *, num_workers: int = 2,
                   address: str | None = None, num_gpus: float = 0.0, resume: bool = False,
                   component: str = ENTITY_LINKER) -> dict[str, Any]:
    """Train ``component`` of the config at ``config_path`` on ``num_workers`` Ray Train
    workers (``num_gpus`` each; ``address``: the cluster to join, else a local one), each a
    rank of ``train_across_ranks``; returns what rank 0 wrote in ``ranks.json``. E268 when
    a worker fails."""
    ray_torch = import_ray_train()
    import ray
    from ray.train import FailureConfig, RunConfig, ScalingConfig

    started = not ray.is_initialized()  # a Ray this call starts, it shuts down
    start_ray(address)
    # Ray Train runs the function in another folder: every path absolute
    config_path, output = Path(config_path).resolve(), Path(output).resolve()
    overrides = dict(overrides or {})

    settings = replace(settings, gpu=num_gpus > 0)

    def train_rank(_: dict) -> None:
        train_across_ranks(config_path, output, overrides, settings, resume=resume,
                           component=component)

    resources = {"CPU": 1.0, **({"GPU": num_gpus} if num_gpus else {})}
    trainer = ray_torch.TorchTrainer(
        train_rank,
        scaling_config=ScalingConfig(num_workers=num_workers, use_gpu=num_gpus > 0,
                                     resources_per_worker=resources),
        torch_config=ray_torch.TorchConfig(backend="nccl" if num_gpus else "gloo",
                                           timeout_s=int(settings.timeout_s)),
        run_config=RunConfig(name="train-ranks", storage_path=str(output / RAY_FOLDER),
                             failure_config=FailureConfig(max_failures=0)))
    try:
        trainer.fit()
    except Exception as err:  # Ray Train's TrainingFailedError, the worker's error inside
        raise RuntimeError(Errors.E268.format(n=num_workers) + f" ({err})") from err
    finally:
        if started:
            ray.shutdown()
    return json.loads((output / STATE_FILE).read_text())
