"""The ledger of jobs/ledger.py and its three users: a run resumes from what it recorded,
another job's ledger is refused, a changed input is done again (or refused), and the
files the version before wrote still verify or resume."""

import hashlib
import json
from dataclasses import asdict

import numpy as np
import pytest

from spacy_arboel.artefacts import check_folder, write_manifest
from spacy_arboel.jobs.kb_vectors import EmbeddingPlan, ShardStore
from spacy_arboel.jobs.ledger import Ledger, LedgerError, changed, digest, stamp


def test_digest_of_files_bytes_arrays_and_ends(tmp_path):
    path = tmp_path / "f.bin"
    data = bytes(range(256)) * 40
    path.write_bytes(data)
    assert digest(path) == digest(data) == hashlib.sha256(data).hexdigest()
    array = np.arange(12, dtype="float32").reshape(3, 4)
    assert digest(array) == hashlib.sha256(array.tobytes()).hexdigest()
    ends = digest(path, 100)
    assert ends == hashlib.sha256(data[:100] + data[-100:]).hexdigest()
    middle = bytearray(data)
    middle[5000] ^= 1
    path.write_bytes(bytes(middle))
    assert digest(path, 100) == ends and digest(path) != digest(data)


def _run(ledger: Ledger, units: dict, stop_after: int | None = None) -> list[str]:
    """A job over input files: each unit not current in the ledger is done and marked; the
    run is interrupted (KeyboardInterrupt) after ``stop_after`` units."""
    done = []
    for name, path in units.items():
        entry = ledger.entries.get(name)
        if entry is not None and changed(entry, path, name) is None:
            continue
        if stop_after is not None and len(done) == stop_after:
            raise KeyboardInterrupt
        ledger.mark(name, {**stamp(path), "result": path.read_text().upper()})
        done.append(name)
    return done


def test_an_interrupted_run_resumes_and_a_changed_input_is_done_again(tmp_path):
    units = {}
    for name in "abcd":
        units[name] = tmp_path / f"{name}.txt"
        units[name].write_text(name * 3)
    path = tmp_path / "out" / "manifest.json"
    settings = {"model": "/some/path", "top_k": 5, "pair": (1, 2)}
    with pytest.raises(KeyboardInterrupt):
        _run(Ledger.open(path, "units", settings), units, stop_after=2)
    saved = json.loads(path.read_text())
    assert saved["settings"]["pair"] == [1, 2] and sorted(saved["units"]) == ["a", "b"]
    assert not [p for p in path.parent.iterdir() if p != path]  # written atomically
    assert _run(Ledger.open(path, "units", settings), units) == ["c", "d"]
    assert _run(Ledger.open(path, "units", settings), units) == []
    units["b"].write_text("bbbb")  # another size
    units["c"].write_text("CCC")  # the same size, another digest
    assert _run(Ledger.open(path, "units", settings), units) == ["b", "c"]
    assert Ledger.read(path, "units").entries["c"]["result"] == "CCC"


def test_another_jobs_ledger_is_refused_and_a_malformed_one_named(tmp_path):
    path = tmp_path / "manifest.json"
    Ledger(path, "units", {"model": "m", "top_k": 5}).save()
    with pytest.raises(LedgerError) as err:
        Ledger.open(path, "units", {"model": "m", "top_k": 1, "vectors": True})
    assert err.value.keys == ["top_k", "vectors"] and err.value.saved["top_k"] == 5
    moved = Ledger.open(path, "units", {"model": "elsewhere", "top_k": 5}, ("model",))
    assert moved.settings["model"] == "elsewhere"  # informational: not compared
    for text in ("{", "[]", '{"settings": {}}', '{"settings": [], "units": {}}'):
        path.write_text(text)
        with pytest.raises(LedgerError) as err:
            Ledger.open(path, "units", {})
        assert err.value.problem and not err.value.keys


def test_changed_says_why(tmp_path):
    path = tmp_path / "w.bin"
    path.write_bytes(b"x" * 300)
    entry = {**stamp(path), "ends_sha256": digest(path, 100)}
    assert changed(entry, path, "w.bin") is None
    path.write_bytes(b"x" * 150 + b"y" + b"x" * 149)
    assert "checksum differs" in changed(entry, path, "w.bin")
    assert changed(entry, path, "w.bin", quick=(200, 100)) is None  # its ends are the same
    assert changed(entry, path, "w.bin", quick=(400, 100)) is not None  # small: whole
    path.write_bytes(b"y" + b"x" * 299)
    assert "of its ends differs" in changed(entry, path, "w.bin", quick=(200, 100))
    path.write_bytes(b"x")
    assert "has 1 bytes, 300 were saved" in changed(entry, path, "w.bin")
    path.unlink()
    assert changed(entry, path, "w.bin") == "w.bin is missing"


def test_a_component_manifest_of_the_version_before_verifies_and_is_written_the_same(
        tmp_path):
    (tmp_path / "index").mkdir()
    (tmp_path / "cfg.json").write_text('{"a": 1}')
    (tmp_path / "index" / "rows.npy").write_bytes(b"\x00" * 64)
    files = {name: {"size": (tmp_path / name).stat().st_size,
                    "sha256": hashlib.sha256((tmp_path / name).read_bytes()).hexdigest()}
             for name in ("cfg.json", "index/rows.npy")}
    before = json.dumps({"files": files}, indent=1) + "\n"  # as the version before wrote it
    (tmp_path / "manifest.json").write_text(before)
    check_folder(tmp_path, "thing", ["cfg.json", "index"])
    write_manifest(tmp_path, ["cfg.json", "index"])
    assert (tmp_path / "manifest.json").read_text() == before
    (tmp_path / "cfg.json").write_text('{"a": 2}')
    with pytest.raises(ValueError, match="E030.*cfg.json is not the file that was saved"):
        check_folder(tmp_path, "thing", ["cfg.json", "index"])


PLAN = {"kb_fingerprint": "k", "encoder_fingerprint": "e", "granularity": "entity",
        "similarity": "dot", "mixed_precision": False, "dim": 4}


def test_a_folder_without_a_ledger_is_refused_unless_a_run_left_it(tmp_path):
    """Without manifest.json a work folder is this job's only as a run that stopped before
    writing its ledger leaves it (vectors.npy); any other file, a plan.json included, is
    someone else's: refused, nothing removed."""
    plan = EmbeddingPlan.cut(np.arange(8), 2, **PLAN)
    (tmp_path / "stopped").mkdir()
    np.lib.format.open_memmap(tmp_path / "stopped" / "vectors.npy", mode="w+", dtype="float32",
                              shape=(plan.n_rows, plan.dim)).flush()
    assert ShardStore(tmp_path / "stopped", plan).pending == [0, 1, 2, 3]
    for name in ("plan.json", "done.json"):
        folder = tmp_path / name.split(".")[0]
        folder.mkdir()
        (folder / name).write_text(json.dumps(asdict(plan) if name == "plan.json" else [0]))
        with pytest.raises(ValueError, match=r"E132.*other files and no manifest\.json"):
            ShardStore(folder, plan)
        assert sorted(p.name for p in folder.iterdir()) == [name]


def test_a_shard_whose_vectors_changed_is_embedded_again(tmp_path):
    plan = EmbeddingPlan.cut(np.arange(6), 2, **PLAN)
    store = ShardStore(tmp_path / "work", plan)
    for i in range(3):
        store.write(i, np.full((2, 4), i, "float32"))
    del store
    vectors = np.load(tmp_path / "work" / "vectors.npy", mmap_mode="r+")
    vectors[3, 0] = 7.0  # damage in shard 1
    vectors.flush()
    again = ShardStore(tmp_path / "work", plan)
    assert again.pending == [1]
    assert sorted(json.loads((tmp_path / "work" / "manifest.json").read_text())["shards"]) \
        == ["0", "2"]
