"""What each writing command checks before it writes, what it refuses to replace, and what
a second run on the same output gets (issue 40, items 3, 5 and 6)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from spacy_arboel.atomic import lock_path, output_lock

PUBTATOR = ("1|t|Aspirin induced cough.\n1|a|Fever was caused by aspirin.\n"
            "1\t0\t7\tAspirin\tChemical\tD001241\n1\t16\t21\tcough\tDisease\tD003371\n\n")


def _refused(result, code: str) -> None:
    assert result.exit_code == 1, result.output
    assert f"[{code}]" in result.output, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file()}


@pytest.fixture
def converted(tmp_path, cli):
    """A PubTator file and the good corpus converted from it."""
    (tmp_path / "gold.txt").write_text(PUBTATOR)
    assert cli("convert", tmp_path / "gold.txt", tmp_path / "gold.spacy").exit_code == 0
    return tmp_path


@pytest.mark.parametrize("case", ["empty folder", "brat given a jsonl file", "blank file",
                                  "jsonl of no documents"])
def test_convert_reading_no_documents_keeps_the_old_corpus(converted, case, cli):
    """A convert that reads nothing used to write a corpus of 0 documents over a good one,
    exit 0 (a folder without document files is the readers' E114)."""
    tmp_path = converted
    (tmp_path / "empty").mkdir()
    (tmp_path / "docs.jsonl").write_text(json.dumps({"text": "Aspirin.", "spans": []}) + "\n")
    (tmp_path / "blank.txt").write_text("\n\n")
    (tmp_path / "none.jsonl").write_text("")
    args = {"empty folder": [tmp_path / "empty"],
            "brat given a jsonl file": [tmp_path / "docs.jsonl", "--format", "brat"],
            "blank file": [tmp_path / "blank.txt"],
            "jsonl of no documents": [tmp_path / "none.jsonl"]}[case]
    before = (tmp_path / "gold.spacy").read_bytes()
    result = cli("convert", args[0], tmp_path / "gold.spacy", *args[1:])
    _refused(result, "E114" if case == "empty folder" else "E243")
    assert str(args[0]) in result.output.replace("\n", " ")
    assert (tmp_path / "gold.spacy").read_bytes() == before


def test_convert_given_a_folder_as_output_is_a_coded_error(converted, cli):
    (converted / "out").mkdir()
    _refused(cli("convert", converted / "gold.txt", converted / "out"), "E241")
    assert not any((converted / "out").iterdir())


HOLD_LOCK = ("import fcntl, os, sys, time\n"
             "fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)\n"
             "fcntl.flock(fd, fcntl.LOCK_EX)\n"
             "os.write(fd, b'pid %d: another run' % os.getpid())\n"
             "print('locked', flush=True)\n"
             "time.sleep(600)\n")


@pytest.fixture
def another_run():
    """Start a process that holds the lock of an output, as a running command does; yield
    a function that starts it and returns the process (killed at the end)."""
    started = []

    def hold(output: Path) -> subprocess.Popen:
        output.parent.mkdir(parents=True, exist_ok=True)
        process = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(lock_path(output))],
                                   stdout=subprocess.PIPE, text=True)
        started.append(process)
        assert process.stdout.readline().strip() == "locked"
        return process

    yield hold
    for process in started:
        process.kill()
        process.wait()


@pytest.fixture
def texts(tmp_path):
    folder = tmp_path / "texts"
    folder.mkdir()
    (folder / "a.jsonl").write_text("".join(
        json.dumps({"id": f"a{i}", "text": t}) + "\n"
        for i, t in enumerate(["Aspirin induced cough.", "Fever and pain."])))
    return folder


def test_a_second_link_corpus_on_one_output_is_refused_until_the_first_ends(
        linker_pipeline, texts, tmp_path, another_run, cli):
    """Two link-corpus runs on one OUTPUT both exited 0 and one run's results were lost:
    the second now gets E240 naming the lock; a lock of a killed run is taken over."""
    out = tmp_path / "linked"
    process = another_run(out)
    result = cli("link-corpus", linker_pipeline, texts, out)
    _refused(result, "E240")
    said = " ".join(result.output.split())
    assert str(lock_path(out)) in said and f"pid {process.pid}" in said
    assert not out.exists()
    process.kill()  # as a killed run: the OS releases its lock, its file stays
    process.wait()
    assert lock_path(out).exists()
    result = cli("link-corpus", linker_pipeline, texts, out)
    assert result.exit_code == 0, result.output
    assert (out / "a.jsonl").exists() and not lock_path(out).exists()
    assert sorted(p.name for p in out.iterdir()) == ["a.jsonl", "manifest.json"]


def test_the_lock_is_released_when_the_command_ends_or_fails(tmp_path, cli):
    out = tmp_path / "x.cfg"
    with output_lock(out):
        _refused(cli("init-config", out), "E240")
    assert cli("init-config", out).exit_code == 0
    _refused(cli("init-config", out), "E242")
    assert cli("init-config", out, "--force").exit_code == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.cfg"]


def test_link_corpus_local_engine_takes_num_workers(linker_pipeline, texts, tmp_path,
                                                    monkeypatch, cli):
    """--num-workers was ignored by the local engine (build-index honoured it)."""
    from spacy_arboel.jobs import engines

    asked = []

    class Recorded(engines.LocalEngine):
        def __init__(self, num_workers: int = 1) -> None:
            asked.append(num_workers)
            super().__init__(num_workers)
            self.num_workers = 1  # link in this process: the test checks the wiring

    monkeypatch.setattr(engines, "LocalEngine", Recorded)
    result = cli("link-corpus", linker_pipeline, texts, tmp_path / "two", "--num-workers", "2")
    assert result.exit_code == 0, result.output
    assert cli("link-corpus", linker_pipeline, texts, tmp_path / "one").exit_code == 0
    assert asked == [2, 1]
    _refused(cli("link-corpus", linker_pipeline, texts, tmp_path / "zero",
                 "--num-workers", "0"), "E011")
    assert not (tmp_path / "zero").exists()


@pytest.mark.parametrize("lines,code", [
    (['{"id": "D1", "name": "Cough"}'], "E166"),
    (['{"id": "D1", "name": "Cough"}', '{"id": "D2", "name": "Fever"}'], "E165"),
    (['{"id": "D1", "name": "Cough"}', '{"id": "D2"'], "E001"),
])
def test_pretrain_kb_gives_coded_errors_before_loading_an_encoder(tmp_path, lines, code, cli):
    """pretrain-kb's E165/E166/E001 were printed inside a full traceback, after the
    encoder was loaded."""
    (tmp_path / "kb.jsonl").write_text("\n".join(lines) + "\n")
    _refused(cli("pretrain-kb", tmp_path / "kb.jsonl", tmp_path / "out",
                 "--encoder", tmp_path / "no-such-encoder"), code)
    assert not (tmp_path / "out").exists()


def test_pretrain_kb_checks_what_it_would_replace_first(tmp_path, toy_kb_path, cli):
    (tmp_path / "out" / "linker").mkdir(parents=True)
    (tmp_path / "out" / "linker" / "notes.txt").write_text("mine")
    _refused(cli("pretrain-kb", toy_kb_path, tmp_path / "out",
                 "--encoder", tmp_path / "no-such-encoder"), "E046")
    (tmp_path / "out" / "encoder").mkdir()
    (tmp_path / "out" / "encoder" / "notes.txt").write_text("mine")
    _refused(cli("pretrain-kb", toy_kb_path, tmp_path / "out",
                 "--encoder", tmp_path / "no-such-encoder", "--no-linker"), "E168")
    assert _files(tmp_path / "out") == {"linker/notes.txt": b"mine",
                                        "encoder/notes.txt": b"mine"}


@pytest.mark.parametrize("command,args,output", [
    ("convert", ["{d}/gold.txt"], "notes.spacy"),
    ("build-kb", ["--jsonl", "{d}/kb.jsonl"], "notes.jsonl"),
    ("evaluate", ["{d}/model", "{d}/gold.spacy", "--output"], "notes.json"),
    ("tune-nil", ["{d}/model", "{d}/gold.spacy", "--plot"], "notes.png"),
    ("render", ["{d}/model", "{d}/gold.txt", "--output"], "notes.html"),
    ("cluster", ["{d}/gold.spacy", "--model", "{d}/model"], "notes.spacy"),
])
def test_a_file_the_command_did_not_write_is_not_replaced(converted, command, args, output, cli):
    """An output file that is not of the kind the command writes (here: a text file)
    is refused before anything is read or written (E245)."""
    (converted / "kb.jsonl").write_text('{"id": "D1", "name": "Cough"}\n')
    (converted / "model").mkdir()
    (converted / "model" / "config.cfg").write_text("[nlp]\n")  # refused before loading
    (converted / output).write_text("my notes\n")
    values = [a.format(d=converted) for a in args]
    if command in ("convert", "build-kb"):
        values = [converted / output, *values] if command == "build-kb" else [
            *values, converted / output]
    elif command == "cluster":
        values = [values[0], converted / output, *values[1:]]
    else:
        values = [*values, converted / output]
    _refused(cli(command, *values), "E245")
    assert (converted / output).read_text() == "my notes\n"


def test_a_file_the_command_wrote_is_replaced(converted, cli):
    (converted / "gold2.txt").write_text(PUBTATOR.replace("Aspirin induced", "Aspirin gave"))
    before = (converted / "gold.spacy").read_bytes()
    assert cli("convert", converted / "gold2.txt", converted / "gold.spacy").exit_code == 0
    assert (converted / "gold.spacy").read_bytes() != before
