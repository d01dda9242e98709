"""`train-ranks` and `pretrain-kb --nproc-per-node` (issue 64): 2 ranks started by torchrun
on loopback train the toy linker as one process does with their global batch, rank 0 writes
model-last, model-best and ranks.json, a run resumes from them, a killed rank ends the run
with a coded error, and a bad start is a coded error."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from spacy.tokens import DocBin

from spacy_arboel.cli.ranks_commands import LAUNCHED
from spacy_arboel.configs import packaged_config
from spacy_arboel.pipeline.ranks import rank_batches


def test_every_rank_takes_its_part_of_each_global_batch():
    for n, size, batch in ((7, 2, 2), (8, 2, 2), (5, 3, 1), (3, 2, 4)):
        parts = [rank_batches(n, size, rank, batch, epoch=1, seed=3) for rank in range(size)]
        alone = rank_batches(n, 1, 0, size * batch, epoch=1, seed=3)
        assert len({len(p) for p in parts}) == 1  # as many steps on every rank
        for step, whole in enumerate(alone):  # one process's batch, split in rank order
            assert [i for part in parts for i in part[step]] == whole
        assert set(i for b in alone for i in b) == set(range(n))
    assert rank_batches(6, 2, 0, 1, 0, 0) != rank_batches(6, 2, 0, 1, 1, 0)  # per epoch


def _args(tmp_path, tiny_encoder, toy_kb_path, toy_examples, steps: int) -> list:
    DocBin(docs=[eg.reference for eg in toy_examples]).to_disk(tmp_path / "train.spacy")
    return [packaged_config("arbo_entity_linker"), "--paths.train", tmp_path / "train.spacy",
            "--paths.dev", tmp_path / "train.spacy", "--paths.kb", toy_kb_path,
            "--paths.encoder", tiny_encoder, "--training.max_steps", str(steps),
            "--training.eval_frequency", "1",
            "--components.arbo_entity_linker.cpu_bf16", "false", "--objective", "in_batch"]


def _parameters(path) -> torch.Tensor:
    import spacy

    from spacy_arboel.ml.bi_encoder import torch_encoders

    pipe = spacy.load(path).get_pipe("arbo_entity_linker")
    modules = dict.fromkeys(torch_encoders(pipe.model).values())
    return torch.cat([p.detach().flatten() for m in modules for p in m.parameters()])


@pytest.mark.slow
def test_two_ranks_train_as_one_process_and_resume(tmp_path, tiny_encoder, toy_kb_path,
                                                   toy_examples, cli):
    args = _args(tmp_path, tiny_encoder, toy_kb_path, toy_examples, steps=2)
    two, one = tmp_path / "two", tmp_path / "one"
    result = cli("train-ranks", args[0], two, "--nproc-per-node", "2", "--batch-size", "2",
                 *args[1:])
    assert result.exit_code == 0, result.output
    assert json.loads((two / "ranks.json").read_text())["step"] == 2
    assert (two / "model-best").is_dir()
    result = cli("train-ranks", args[0], one, "--batch-size", "4", *args[1:])
    assert result.exit_code == 0, result.output
    start = _parameters(two / "model-best") if json.loads(
        (two / "ranks.json").read_text())["best_step"] == 1 else None
    trained = _parameters(two / "model-last")
    assert torch.allclose(trained, _parameters(one / "model-last"), atol=1e-5)
    if start is not None:
        assert not torch.allclose(start, trained)  # the second step moved them
    more = _args(tmp_path, tiny_encoder, toy_kb_path, toy_examples, steps=3)
    result = cli("train-ranks", more[0], two, "--nproc-per-node", "2", "--batch-size", "2",
                 "--resume", *more[1:])
    assert result.exit_code == 0, result.output
    assert json.loads((two / "ranks.json").read_text())["step"] == 3
    assert not torch.allclose(_parameters(two / "model-last"), trained)


def test_resuming_a_folder_without_a_run_is_a_coded_error(tmp_path, cli):
    result = cli("train-ranks", packaged_config("arbo_entity_linker"), tmp_path / "out",
                 "--resume")
    assert result.exit_code == 1 and "[E267]" in result.output
    assert "ranks.json" in result.output


def _rank_pids(marker: str, rank: int) -> list[int]:
    """The processes of rank ``rank`` that a command started, with ``marker`` (its output
    folder) on their command line (Linux's /proc)."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            cmdline = (proc / "cmdline").read_bytes().decode(errors="replace")
            environ = (proc / "environ").read_bytes().split(b"\0")
        except (OSError, ValueError):
            continue
        if marker in cmdline and f"RANK={rank}".encode() in environ \
                and f"{LAUNCHED}=1".encode() in environ:
            found.append(int(proc.name))
    return found


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs Linux's /proc")
def test_a_killed_rank_ends_the_run_with_a_coded_error(tmp_path, tiny_encoder, toy_kb_path,
                                                       toy_examples):
    args = _args(tmp_path, tiny_encoder, toy_kb_path, toy_examples, steps=100_000)
    out = tmp_path / "killed"
    command = [sys.executable, "-m", "spacy_arboel", "train-ranks", args[0], out,
               "--nproc-per-node", "2", "--timeout", "20", *args[1:]]
    started = time.monotonic()
    run = subprocess.Popen([str(a) for a in command], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
    try:
        while not (out / "ranks.json").is_file():  # rank 0 saved its first checkpoint
            assert run.poll() is None and time.monotonic() - started < 300, "no checkpoint"
            time.sleep(0.2)
        pids = _rank_pids(str(out), 1)
        assert len(pids) == 1
        os.kill(pids[0], signal.SIGKILL)
        output, _ = run.communicate(timeout=120)
    finally:
        run.kill()
    assert run.returncode == 1
    assert "[E268] One of the 2 ranks failed" in output
    assert (out / "model-last").is_dir()  # what rank 0 saved is kept


@pytest.mark.slow
def test_pretrain_kb_on_two_ranks(tmp_path, tiny_encoder, toy_kb_path, cli):
    out = tmp_path / "sap"
    result = cli("pretrain-kb", toy_kb_path, out, "--encoder", tiny_encoder,
                 "--batch-size", "4", "--max-steps", "2", "--nproc-per-node", "2")
    assert result.exit_code == 0, result.output
    report = json.loads((out / "encoder" / "self_alignment.json").read_text())
    assert report["ranks"] == 2 and report["steps"] == 2
    assert (out / "linker" / "config.cfg").is_file()


@pytest.mark.slow
def test_ray_trains_the_ranks_as_torchrun_does(tmp_path, tiny_encoder, toy_kb_path,
                                               toy_examples, cli):
    pytest.importorskip("ray.train")
    args = _args(tmp_path, tiny_encoder, toy_kb_path, toy_examples, steps=2)
    ray_out, one = tmp_path / "ray", tmp_path / "one"
    result = cli("train-ranks", args[0], ray_out, "--engine", "ray", "--num-workers", "2",
                 "--batch-size", "2", *args[1:])
    assert result.exit_code == 0, result.output
    assert "on 2 Ray Train workers" in result.output
    assert json.loads((ray_out / "ranks.json").read_text())["step"] == 2
    result = cli("train-ranks", args[0], one, "--batch-size", "4", *args[1:])
    assert result.exit_code == 0, result.output
    assert torch.allclose(_parameters(ray_out / "model-last"), _parameters(one / "model-last"),
                          atol=1e-5)


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is visible here")
def test_gpu_ranks_without_a_gpu_are_a_coded_error(tmp_path, cli):
    result = cli("train-ranks", packaged_config("arbo_entity_linker"), tmp_path / "out",
                 "--nproc-per-node", "2", "--gpu")
    assert result.exit_code == 1 and "[E273]" in result.output
    assert "no CUDA GPU is" in result.output and not (tmp_path / "out").exists()


def test_ray_without_ray_train_is_a_coded_error(tmp_path, cli, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray.train", None)  # as where Ray Train is missing
    result = cli("train-ranks", packaged_config("arbo_entity_linker"), tmp_path / "out",
                 "--engine", "ray")
    assert result.exit_code == 1 and "[E269]" in result.output
    assert not (tmp_path / "out").exists()
    result = cli("train-ranks", packaged_config("arbo_entity_linker"), tmp_path / "out",
                 "--engine", "ray", "--nproc-per-node", "2")
    assert result.exit_code == 1 and "[E011]" in result.output
