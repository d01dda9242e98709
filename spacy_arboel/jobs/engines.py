"""Where the tasks of a job run: one interface, ``engine.map(make_worker, tasks)``, that
builds the worker once per process (``make_worker()``, a picklable factory: loading a
pipeline or an encoder is the costly part), calls it on each task and yields the results
in the order they finish. ``link-corpus`` (``corpus.link_corpus``) and ``build-index``
(``jobs.build_index``) both run on it. No spaCy here.

``Engine`` is that interface, declared (a ``typing.Protocol``): a job takes any object with
``num_workers`` and ``map``.

- ``LocalEngine``: in this process (one worker), or in ``num_workers`` spawned processes,
  each building its worker once and using its share of the CPU threads.
- ``RayEngine``: ``num_workers`` Ray actors, each building its worker once; an actor that
  dies (an OOM kill, a lost node) is restarted and its task retried, ``RAY_RETRIES``
  times (a task that kills every actor fails the run, whose rerun resumes).

Both keep at most two tasks per worker in flight, so the tasks (documents read from a
shard, KB rows) are read as the workers take them, not all up front; the driver writes
each result as it comes and counts a unit done when all its tasks are in, so a unit is
written exactly once even when a task is retried.

Why this design and not Ray Data (``map_batches`` over an actor pool, which link-corpus
used): both jobs hand a worker a task and get one result, which an actor pool with
restarts does directly; Ray Data re-chunks rows into its own batches, delivers a retried
batch's rows again (the driver had to drop them) and needs the inputs on storage every
node sees. Here the driver reads the inputs and ships the tasks, and the same worker class
runs in this process, in a process pool and on Ray, so local and Ray results are the same
computation.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from multiprocessing import get_context
from typing import Any, Protocol, TypeVar, runtime_checkable

from ..errors import Errors

T = TypeVar("T")
R = TypeVar("R")
# a picklable factory of the callable that does one task
WorkerFactory = Callable[[], Callable[[Any], Any]]

RAY_RETRIES = 3  # restarts of a dead actor, retries of its task
IN_FLIGHT = 2  # tasks per worker submitted ahead: one running, one waiting
# one thread per Ray worker: Ray places one worker per CPU it counts
WORKER_ENV = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}


@runtime_checkable
class Engine(Protocol):
    """Where a job's tasks run: ``map`` builds the worker once per process
    (``make_worker()``), calls it on each task and yields the results in the order they
    finish, keeping at most ``IN_FLIGHT`` tasks per worker ahead of the results."""

    num_workers: int

    def map(self, make_worker: Callable[[], Callable[[T], R]], tasks: Iterable[T]
            ) -> Iterator[R]: ...


def _check_workers(num_workers: int) -> None:
    if num_workers < 1:
        raise ValueError(Errors.E011.format(name="num_workers", condition=">= 1",
                                            value=num_workers))


class LocalEngine:
    """Tasks done in this process (``num_workers`` 1) or in ``num_workers`` spawned
    processes, each building its worker once and using its share of the CPU threads."""

    def __init__(self, num_workers: int = 1) -> None:
        _check_workers(num_workers)
        self.num_workers = num_workers

    def map(self, make_worker: Callable[[], Callable[[T], R]], tasks: Iterable[T]
            ) -> Iterator[R]:
        if self.num_workers == 1:
            worker = make_worker()
            for task in tasks:
                yield worker(task)
            return
        threads = max(1, (os.cpu_count() or 1) // self.num_workers)
        with ProcessPoolExecutor(self.num_workers, mp_context=get_context("spawn"),
                                 initializer=_start_worker,
                                 initargs=(make_worker, threads)) as pool:
            tasks = iter(tasks)
            running: set = set()
            while True:
                for task in _take(tasks, IN_FLIGHT * self.num_workers - len(running)):
                    running.add(pool.submit(_run_in_worker, task))
                if not running:
                    return
                finished, running = wait(running, return_when=FIRST_COMPLETED)
                for future in finished:
                    yield future.result()


def _take(tasks: Iterator[T], n: int) -> Iterator[T]:
    """Up to ``n`` more tasks (read only as they are taken)."""
    for _ in range(n):
        task = next(tasks, _END)
        if task is _END:
            return
        yield task


_END = object()
_WORKER: Callable[[Any], Any] | None = None


def _start_worker(make_worker: WorkerFactory, threads: int) -> None:
    global _WORKER
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[name] = str(threads)
    _WORKER = make_worker()
    torch = sys.modules.get("torch")  # imported by unpickling the factory, if it uses it
    if torch is not None:
        torch.set_num_threads(threads)


def _run_in_worker(task: Any) -> Any:
    return _WORKER(task)


class RayEngine:
    """Tasks done by ``num_workers`` Ray actors (``num_gpus`` each), each building its
    worker once; an actor that dies is restarted (its worker built again) and its task
    retried, ``RAY_RETRIES`` times (Ray's ``max_restarts`` and ``max_task_retries``).
    ``address``: an existing cluster to join (``ray.init(address=...)``; every node must
    then see the files the workers load); else a local one is started with ``num_cpus``."""

    def __init__(self, num_workers: int = 1, *, address: str | None = None,
                 num_cpus: int | None = None, num_gpus: float = 0.0) -> None:
        _check_workers(num_workers)
        self.num_workers = num_workers
        self.address, self.num_cpus, self.num_gpus = address, num_cpus, num_gpus

    def map(self, make_worker: Callable[[], Callable[[T], R]], tasks: Iterable[T]
            ) -> Iterator[R]:
        ray = start_ray(self.address, self.num_cpus)
        from ray.util import ActorPool

        actor = ray.remote(num_cpus=1, num_gpus=self.num_gpus, max_restarts=RAY_RETRIES,
                           max_task_retries=RAY_RETRIES)(_RayWorker)
        pool = ActorPool([actor.remote(make_worker) for _ in range(self.num_workers)])
        tasks = iter(tasks)
        in_flight = 0
        while True:
            for task in _take(tasks, IN_FLIGHT * self.num_workers - in_flight):
                pool.submit(lambda a, t: a.run.remote(t), task)
                in_flight += 1
            if not in_flight:
                return
            result = pool.get_next_unordered()
            in_flight -= 1
            yield result


class _RayWorker:
    """A Ray actor: builds the worker once, does tasks."""

    def __init__(self, make_worker: WorkerFactory) -> None:
        self.worker = make_worker()

    def run(self, task: Any) -> Any:
        return self.worker(task)


ENGINES = ("local", "ray")


def make_engine(kind: str, num_workers: int | None = None, *, address: str | None = None,
                num_gpus: float = 0.0) -> Engine:
    """The engine a command's ``--engine``/``--num-workers``/``--address``/``--num-gpus``
    name, checked before any work (E007 for another kind, E011 for fewer than one worker,
    E128 for ``ray`` where Ray is not installed): ``num_workers`` None is 1 process, or 2
    Ray actors."""
    if kind not in ENGINES:
        raise ValueError(Errors.E007.format(what="--engine", value=kind,
                                            options=", ".join(ENGINES)))
    if kind == "local":
        return LocalEngine(1 if num_workers is None else num_workers)
    engine = RayEngine(2 if num_workers is None else num_workers, address=address,
                       num_gpus=num_gpus)
    import_ray()
    return engine


def import_ray() -> Any:
    """Ray (an optional dependency: ``pip install ray``), or E128 saying
    how to install it."""
    try:
        import ray
    except ImportError:
        raise ImportError(Errors.E128) from None
    return ray


def start_ray(address: str | None = None, num_cpus: int | None = None) -> Any:
    """Ray, initialised unless it already is: joining the cluster at ``address`` (e.g.
    ``auto``), else starting a local one with ``num_cpus``."""
    ray = import_ray()
    if not ray.is_initialized():
        ray.init(address=address, num_cpus=None if address else num_cpus,
                 include_dashboard=False, log_to_driver=False,
                 runtime_env={"env_vars": WORKER_ENV})
    return ray
