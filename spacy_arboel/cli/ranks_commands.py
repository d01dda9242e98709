"""``train-ranks``: train ``arbo_entity_linker`` data-parallel over several processes (one
machine: ``--nproc-per-node``; several: ``torchrun`` on each; a Ray cluster: ``--engine
ray``, docs/scale.md), and what the commands that run on several ranks share
(``pretrain-kb --nproc-per-node``): starting their ranks under torchrun."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Annotated

import typer

from ..pipeline.ranks import RankSettings
from .app import OVERRIDES, app
from .options import RANKS, EngineName, NprocPerNode, RankTimeout
from .overrides import command_overrides

# set by the command for the ranks it starts: it checked the outputs and holds their lock
LAUNCHED = "SPACY_ARBOEL_RANKS_LAUNCHED"


def check_count(name: str, value: int) -> None:
    """E011 unless the count option ``name`` (``--nproc-per-node``) is at least 1."""
    from wasabi import msg

    from ..errors import Errors

    if value < 1:
        msg.fail(Errors.E011.format(name=name, condition=">= 1", value=value), exits=1)


def gpu_problem(ranks: int) -> str | None:
    """Why ``ranks`` ranks of this machine cannot each train on a GPU, or None."""
    import torch

    if not torch.cuda.is_available():
        return "no CUDA GPU is visible to PyTorch"
    if torch.cuda.device_count() < ranks:
        return f"{torch.cuda.device_count()} GPU(s) for {ranks} ranks"
    try:
        import cupy  # noqa: F401
    except ImportError:
        return "CuPy is not installed"
    return None


def launched() -> bool:
    """Whether this process is a rank a command started (its outputs checked by it)."""
    return LAUNCHED in os.environ


def rank_arguments(ctx: typer.Context) -> list[str]:
    """The command line of ``ctx``'s command as it was parsed: its arguments and options
    (``--x/--no-x`` flags as set, options left unset left out) and its config overrides."""
    args: list[str] = [ctx.info_name or ""]
    for param in ctx.command.params:
        value = ctx.params.get(param.name)
        if param.param_type_name == "argument":
            args.append(str(value))
        elif param.param_type_name == "option" and value is not None:
            if param.is_flag:
                flags = param.opts if value else param.secondary_opts
                args.extend(flags[:1])
            else:  # a repeated option once per value
                values = value if isinstance(value, list | tuple) else [value]
                args.extend(f"{param.opts[0]}={v}" for v in values)
    return [*args, *ctx.args]


def launch_ranks(ctx: typer.Context, nproc_per_node: int) -> bool:
    """Where more than one rank is asked and this process is none of them, start
    ``nproc_per_node`` ranks of ``ctx``'s command on this machine with torchrun
    (``torch.distributed.run --standalone``: a rendezvous on loopback), the same command
    line in each, and return True once they are done; E268 when one fails (torchrun then
    stops the others). False where this process is to train itself."""
    from wasabi import msg

    from ..errors import Errors

    if nproc_per_node == 1 or "RANK" in os.environ:
        return False
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone",
               f"--nproc-per-node={nproc_per_node}", "-m", "spacy_arboel",
               *rank_arguments(ctx)]
    msg.info(f"Starting {nproc_per_node} ranks: {' '.join(command[1:])}")
    env = {**os.environ, LAUNCHED: "1",
           "GLOO_SOCKET_IFNAME": os.environ.get("GLOO_SOCKET_IFNAME", "lo")}
    if subprocess.run(command, env=env).returncode:
        msg.fail(Errors.E268.format(n=nproc_per_node), exits=1)
    return True


@app.command("train-ranks", context_settings=OVERRIDES)
def train_ranks_command(
    ctx: typer.Context,
    config: Annotated[Path, typer.Argument(help="The training config (spacy train's), e.g. "
                                                "spacy_arboel/configs/arbo_entity_linker.cfg")],
    output: Annotated[Path, typer.Argument(help="Folder for model-last, model-best and "
                                                "ranks.json")],
    nproc_per_node: NprocPerNode = 1,
    batch_size: Annotated[int, typer.Option(
        help="Docs per rank and step (the global batch is the ranks times it)")] = RANKS.batch_size,
    timeout: RankTimeout = RANKS.timeout_s,
    seed: Annotated[int, typer.Option(help="Seed of the epochs' permutations")] = RANKS.seed,
    gpu: Annotated[bool, typer.Option(
        help="Each rank trains on its own GPU (torchrun's LOCAL_RANK; nccl), else on the "
             "CPU (gloo)")] = RANKS.gpu,
    resume: Annotated[bool, typer.Option(
        help="Continue from OUTPUT's model-last at the step its ranks.json records")] = False,
    objective: Annotated[str | None, typer.Option(
        help="The linker's objective by name (in_batch, knn_negatives, arborescence, proxy; "
             "default: the config's)")] = None,
    engine: Annotated[EngineName, typer.Option(
        help="local (torchrun's ranks on this machine) or ray (Ray Train's workers on a "
             "Ray cluster)")] = "local",
    num_workers: Annotated[int, typer.Option(
        help="--engine ray: ranks (Ray Train workers)")] = 2,
    address: Annotated[str | None, typer.Option(
        help="--engine ray: the cluster to join (e.g. auto); default a local one")] = None,
    num_gpus: Annotated[float, typer.Option(
        help="--engine ray: GPUs per worker (0: CPU, gloo; else nccl)")] = 0.0,
) -> None:
    """Train the config's arbo_entity_linker on several ranks: each takes its part of every
    batch, in-batch negatives are gathered from all of them with their gradient, gradients
    are averaged (DDP's), rank 0 evaluates and saves. `--section.key value` overrides apply
    to the config, as for spacy train."""
    from wasabi import msg

    from ..errors import Errors
    from ..factories import ENTITY_LINKER
    from ..ml.objectives import switched_objective
    from ..outputs import check_outputs
    from ..pipeline.ranks import STATE_FILE, train_across_ranks

    settings = RankSettings(batch_size=batch_size, timeout_s=timeout, seed=seed,
                            gpu=gpu)  # E011
    check_count("--nproc-per-node", nproc_per_node)
    if gpu and not launched() and (problem := gpu_problem(nproc_per_node)):
        msg.fail(Errors.E273.format(reason=problem), exits=1)
    rank = int(os.environ.get("RANK", "0"))
    if rank == 0 and not launched():
        check_outputs({"CONFIG": config}, {"OUTPUT": output}, folders=["OUTPUT"])
        if resume and not (output / STATE_FILE).is_file():
            msg.fail(Errors.E267.format(path=output / STATE_FILE), exits=1)
    if engine == "ray" and nproc_per_node != 1:
        msg.fail(Errors.E011.format(name="--nproc-per-node", condition="1 with --engine ray "
                                    "(its ranks are --num-workers)", value=nproc_per_node),
                 exits=1)
    if launch_ranks(ctx, nproc_per_node):
        msg.good(f"Trained on {nproc_per_node} ranks into {output}")
        return
    overrides = command_overrides(ctx)
    if objective:
        overrides[f"components.{ENTITY_LINKER}.objective"] = switched_objective(
            objective, config, overrides)
    if engine == "ray":
        from ..pipeline.ray_ranks import import_ray_train, train_with_ray

        check_count("--num-workers", num_workers)
        try:
            import_ray_train()  # E269, before Ray starts
            state = train_with_ray(config, output, overrides, settings,
                                   num_workers=num_workers, address=address,
                                   num_gpus=num_gpus, resume=resume)
        except (ImportError, RuntimeError) as err:
            msg.fail(str(err), exits=1)
        msg.good(f"Step {state['step']} on {num_workers} Ray Train workers: model-last and "
                 f"model-best (step {state.get('best_step')}) in {output}")
        return
    try:
        state = train_across_ranks(
            config, output, overrides, settings, resume=resume,
            on_step=lambda step, loss: msg.text(f"step {step}: loss {loss:.4f}")
            if rank == 0 else None)
    except RuntimeError as err:  # E266: another rank failed
        msg.fail(str(err), exits=1)
    if rank == 0:
        msg.good(f"Step {state['step']}: model-last and model-best (step "
                 f"{state.get('best_step')}) in {output}")
