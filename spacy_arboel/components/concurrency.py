"""Components shared by threads: one lock per component around what must not interleave.

The cores put a torch module in eval mode for a forward pass (``forward_without_grad``) and
in training mode for a training step, so a second thread inside the same component could run
its forward pass with dropout on; Hugging Face fast tokenizers also refuse concurrent use, and
``arbo_coref`` updates its memory. Each component's ``predict`` (``cluster`` for
``arbo_coref``) therefore runs one thread at a time: threads may share an ``nlp`` and get
exactly the results of a sequential run, while PyTorch's own threads do the parallel work.

Processes: a worker that ``nlp.pipe(n_process > 1)`` forks from a process whose PyTorch
already ran OpenMP threads would hang in its first forward pass (OpenMP's thread pool does not
survive a fork), so such a worker runs PyTorch on one thread.
"""

from __future__ import annotations

import functools
import multiprocessing
import os
import threading
import weakref
from collections.abc import Callable
from typing import Any, TypeVar

_LOCKS: weakref.WeakKeyDictionary[Any, threading.RLock] = weakref.WeakKeyDictionary()
_GUARD = threading.Lock()
_IMPORT_PID = os.getpid()
_CHECKED_PID: int | None = None

F = TypeVar("F", bound=Callable[..., Any])


def component_lock(component: Any) -> threading.RLock:
    """The lock of ``component`` (kept outside the object, so pickling is unaffected)."""
    with _GUARD:
        lock = _LOCKS.get(component)
        if lock is None:
            lock = _LOCKS[component] = threading.RLock()
        return lock


def in_worker_process(parent_pid: int) -> bool:
    """Whether this is a multiprocessing child (a worker of ``nlp.pipe(n_process > 1)``)
    rather than the process ``parent_pid``."""
    return os.getpid() != parent_pid and multiprocessing.parent_process() is not None


def _fork_safe_torch() -> None:
    """In a worker forked from the process that imported us, use one PyTorch thread."""
    global _CHECKED_PID
    pid = os.getpid()
    if pid != _CHECKED_PID:
        _CHECKED_PID = pid
        if in_worker_process(_IMPORT_PID):
            import torch

            torch.set_num_threads(1)


def one_thread_at_a_time(method: F) -> F:
    """Run a component method under the component's lock (fork-safe PyTorch first)."""

    @functools.wraps(method)
    def locked(self, *args, **kwargs):
        _fork_safe_torch()
        with component_lock(self):
            return method(self, *args, **kwargs)

    return locked  # type: ignore[return-value]
