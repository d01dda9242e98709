"""A process group of spawned ranks on loopback, for the data-parallel tests (issue 64)."""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from typing import Any

import torch.multiprocessing as mp

from spacy_arboel.objectives.gathered import start_ranks


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def set_rank_env(rank: int, size: int, port: int) -> None:
    """The environment torchrun gives rank ``rank`` of ``size``, every socket on loopback."""
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), GLOO_SOCKET_IFNAME="lo",
                      RANK=str(rank), WORLD_SIZE=str(size))


def join_ranks(rank: int, size: int, port: int, timeout_s: float = 60.0) -> None:
    """Join a gloo group of ``size`` ranks as torchrun's ranks join theirs
    (``start_ranks``, from the environment torchrun sets)."""
    set_rank_env(rank, size, port)
    assert start_ranks(timeout_s) == (rank, size)


def spawn_ranks(target: Callable[..., None], *args: Any, size: int = 2) -> dict:
    """Run ``target(rank, size, port, *args, results)`` in ``size`` spawned processes on a
    free port and return what they put in ``results`` (a shared dict), by key."""
    with mp.Manager() as manager:
        results = manager.dict()
        mp.spawn(target, args=(size, free_port(), *args, results), nprocs=size)
        return dict(results)
