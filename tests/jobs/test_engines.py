"""The engines of jobs/engines.py: a worker built once per process, results for every task,
tasks read as the workers take them, and on Ray a killed actor restarted and its task
retried (each result delivered once)."""

import os
import sys
from pathlib import Path

import pytest

from spacy_arboel.jobs.engines import IN_FLIGHT, LocalEngine, RayEngine, make_engine


class Squarer:
    """A worker that squares numbers and says which process built it; ``die_at``: the
    task whose first attempt kills the process (once per ``marker`` file)."""

    def __init__(self, die_at: int | None = None, marker: str | None = None) -> None:
        self.pid, self.die_at, self.marker = os.getpid(), die_at, marker

    def __call__(self, task: int) -> tuple[int, int, int]:
        if task == self.die_at and not Path(self.marker).exists():
            Path(self.marker).touch()
            os._exit(1)
        return task, task * task, self.pid


class Counted:
    """Tasks ``0 .. n-1``, counting how many were read."""

    def __init__(self, n: int) -> None:
        self.n, self.taken = n, 0

    def __iter__(self):
        for i in range(self.n):
            self.taken += 1
            yield i


def _check(results, n):
    assert sorted(r[0] for r in results) == list(range(n))  # each task once
    assert all(square == task * task for task, square, _ in results)


def test_the_local_engine_builds_its_worker_once_and_reads_tasks_as_it_goes():
    tasks = Counted(20)
    results = LocalEngine().map(Squarer, tasks)
    first = next(results)
    assert first == (0, 0, os.getpid()) and tasks.taken == 1
    rest = list(results)
    _check([first, *rest], 20)
    assert {pid for *_, pid in rest} == {os.getpid()}


def test_an_engine_needs_a_worker():
    for engine in (LocalEngine, RayEngine):
        with pytest.raises(ValueError, match="E011.*num_workers"):
            engine(0)


@pytest.mark.slow
def test_spawned_processes_each_build_their_worker_and_take_tasks_a_few_at_a_time():
    tasks = Counted(40)
    results = LocalEngine(2).map(Squarer, tasks)
    first = next(results)
    assert tasks.taken <= IN_FLIGHT * 2  # not all read up front
    results = [first, *results]
    _check(results, 40)
    pids = {pid for *_, pid in results}
    assert len(pids) <= 2 and os.getpid() not in pids


# --- Ray actors on a local cluster of 2 CPUs ------------------------------------------------

@pytest.fixture(scope="module")
def ray_cluster(ray_cluster_of):
    return ray_cluster_of(sys.modules[__name__])


@pytest.mark.slow
def test_ray_actors_give_the_local_results_and_survive_a_killed_actor(ray_cluster, tmp_path):
    from functools import partial

    tasks = Counted(30)
    results = RayEngine(2).map(Squarer, tasks)
    first = next(results)
    assert tasks.taken <= IN_FLIGHT * 2
    remote = [first, *results]
    _check(remote, 30)
    assert sorted(r[:2] for r in remote) == sorted(r[:2] for r in LocalEngine().map(
        Squarer, range(30)))
    marker = tmp_path / "killed"
    killed = list(RayEngine(1).map(partial(Squarer, 7, str(marker)), range(12)))
    assert marker.exists()  # the actor did die, at task 7
    _check(killed, 12)
    assert len({pid for *_, pid in killed}) == 2  # and was restarted


def test_a_commands_engine_is_made_in_one_place():
    """``link-corpus`` and ``build-index`` make their engine with ``make_engine``: one
    process by default, two Ray actors with ``ray``, and a clear error for anything else."""
    local = make_engine("local")
    assert isinstance(local, LocalEngine) and local.num_workers == 1
    ray = make_engine("ray", address="auto", num_gpus=0.5)
    assert isinstance(ray, RayEngine) and ray.num_workers == 2
    assert (ray.address, ray.num_gpus) == ("auto", 0.5)  # nothing started yet
    with pytest.raises(ValueError, match=r"E007.*--engine 'mpi'.*local, ray"):
        make_engine("mpi")
    with pytest.raises(ValueError, match=r"E011.*num_workers"):
        make_engine("local", 0)


def test_both_engines_are_the_declared_engine():
    """``Engine`` is the interface a job takes: both engines have it, a plain callable has
    not (a job given one fails at the type, not deep inside a run)."""
    from spacy_arboel.jobs.engines import Engine

    assert isinstance(LocalEngine(), Engine)
    assert isinstance(RayEngine(2), Engine)
    assert isinstance(make_engine("local", 2), Engine)
    assert not isinstance(lambda task: task, Engine)
