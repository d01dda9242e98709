"""Saved artefacts (artefacts.py): untrusted bytes, manifests, damaged or stale files."""

import json
import shutil
import tempfile
import warnings

import numpy as np
import pytest
import spacy
import srsly
from confection import ConfigValidationError

from spacy_arboel import artefacts
from spacy_arboel.artefacts import check_folder, clear_saved, unsafe_entry, write_manifest
from tests.conftest import passage_linker_config, restamp

COMPONENTS = ["arbo_entity_linker", "arbo_linker", "arbo_reranker"]


def _config(factory: str, kb_path, encoder: str) -> dict:
    """A component over the toy KB and the tiny encoder (whose window of 128 positions
    takes arbo_linker passages of 48 wordpieces)."""
    window = {"passage_length": 48, "passage_stride": 40} if factory == "arbo_linker" else {}
    return {"kb_path": str(kb_path), "model": {"encoder_name": encoder}, **window}


@pytest.mark.parametrize("name", ["/abs/x", "../../x", "a/../../x", "tokenizer/../../x",
                                  "evil.py", "", "tokenizer\\..\\x", "C:/x", "./cfg.json",
                                  "index//x"])
def test_unsafe_names_are_refused(name):
    assert unsafe_entry(name, b"x", {"index", "tokenizer", "cfg.json"})


def test_safe_names_and_contents():
    allowed = {"index", "cfg.json"}
    assert unsafe_entry("index/meta.json", b"{}", allowed) is None
    assert unsafe_entry("cfg.json", b"{}", allowed) is None
    assert unsafe_entry("cfg.json", "text", allowed)  # not bytes
    assert unsafe_entry(5, b"", allowed)


@pytest.mark.parametrize("factory", COMPONENTS)
def test_from_bytes_writes_nothing_outside_its_folder(factory, tiny_encoder, toy_kb_path,
                                                      tmp_path, monkeypatch):
    # the component's temporary folder is three levels down, so "../../x" lands in tmp_path
    deep = tmp_path / "a" / "b" / "c"
    deep.mkdir(parents=True)
    monkeypatch.setattr(tempfile, "tempdir", str(deep))
    outside = tmp_path / "outside"
    nlp = spacy.blank("xx")
    pipe = nlp.add_pipe(factory, config=_config(factory, toy_kb_path, tiny_encoder))
    payloads = [{str(outside / "x"): b"x"}, {"../../x": b"x"}, {"cfg.json": b"{}",
                                                                "../escape": b"x"},
                {"evil.py": b"import os"}, {"cfg.json": "not bytes"}, [b"a list"]]
    for payload in payloads:
        with pytest.raises(ValueError, match="E03[12]"):
            pipe.from_bytes(srsly.msgpack_dumps(payload))
    with pytest.raises(ValueError, match="E032"):
        pipe.from_bytes(b"\xc1 not msgpack")
    written = [p for p in tmp_path.rglob("*") if p.is_file() and p != toy_kb_path]
    assert written == []


def test_coref_from_bytes_refuses_damaged_state(tiny_encoder, toy_kb_path):
    nlp = spacy.blank("xx")
    nlp.add_pipe("arbo_entity_linker", config={"kb_path": str(toy_kb_path),
                                               "model": {"encoder_name": tiny_encoder}})
    coref = nlp.add_pipe("arbo_coref", config={"keep_state": True})
    for data in (b"\xc1", srsly.msgpack_dumps({"meta": {}}), srsly.msgpack_dumps([1])):
        with pytest.raises(ValueError, match="E030"):
            coref.from_bytes(data)
    # lists that are strings or maps, with arrays that agree with their length
    from spacy_arboel.components.arbo_coref import linker_fingerprints

    fingerprints = linker_fingerprints(nlp.get_pipe("arbo_entity_linker"))  # sets it up
    width = nlp.get_pipe("arbo_entity_linker").retriever.vector_width
    arrays = {"vectors": np.zeros((3, width), "float32"),
              "entity_positions": np.zeros(3, "int64"), "entity_scores": np.zeros(3, "float32")}
    for keys in ("abc", {"a": 1, "b": 2, "c": 3}):
        meta = {"keys": keys, "doc_keys": keys, "cluster_ids": keys, "labels": keys,
                "fingerprints": fingerprints}
        with pytest.raises(ValueError, match="E030.*must be lists"):
            coref.from_bytes(srsly.msgpack_dumps(
                {"state": srsly.msgpack_dumps({"meta": meta, **arrays})}))


def test_manifest_catches_changed_missing_and_truncated_files(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "a.txt").write_text("alpha")
    (tmp_path / "sub" / "b.bin").write_bytes(b"\x00" * 10)
    write_manifest(tmp_path, ["a.txt", "sub", "optional"])
    check_folder(tmp_path, "thing", ["a.txt", "sub"])
    with pytest.raises(ValueError, match=r"E030.*c.txt missing"):
        check_folder(tmp_path, "thing", ["c.txt"])
    (tmp_path / "a.txt").write_text("alphb")
    with pytest.raises(ValueError, match="a.txt is not the file that was saved"):
        check_folder(tmp_path, "thing", [])
    (tmp_path / "a.txt").write_text("alpha")
    (tmp_path / "sub" / "b.bin").write_bytes(b"\x00" * 9)
    with pytest.raises(ValueError, match="sub/b.bin has 9 bytes, 10 were saved"):
        check_folder(tmp_path, "thing", [])
    (tmp_path / "sub" / "b.bin").unlink()
    with pytest.raises(ValueError, match="sub/b.bin is missing"):
        check_folder(tmp_path, "thing", [])
    with pytest.raises(ValueError, match="does not exist"):
        check_folder(tmp_path / "nope", "thing", [])


def test_manifest_names_are_checked_before_any_file_is_read(tmp_path):
    folder = tmp_path / "a" / "b"
    folder.mkdir(parents=True)
    (tmp_path / "secret").write_text("secret")
    (folder / "cfg.json").write_text("{}")
    (folder / "link").symlink_to(tmp_path / "secret")
    entry = {"size": 6, "sha256": "0" * 64}
    for name in ("../../secret", str(tmp_path / "secret"), "link"):
        (folder / "manifest.json").write_text(json.dumps({"files": {name: entry}}))
        with pytest.raises(ValueError, match="E030") as err:
            check_folder(folder, "thing", [])
        assert "6 were saved" not in str(err.value) and "checksum" not in str(err.value)


@pytest.mark.parametrize("manifest", [[], {"files": []}, {"files": {"cfg.json": 5}},
                                      {"files": {"cfg.json": {"size": "2"}}}, {"files": {}},
                                      {"files": {7: {}}}, "not json"])
def test_a_malformed_manifest_is_refused(tmp_path, manifest):
    (tmp_path / "cfg.json").write_text("{}")
    text = manifest if isinstance(manifest, str) else json.dumps(manifest)
    (tmp_path / "manifest.json").write_text(text)
    with pytest.raises(ValueError, match="E030.*manifest.json is malformed"):
        check_folder(tmp_path, "thing", ["cfg.json"])


def test_a_manifest_must_list_the_required_entries(tmp_path):
    (tmp_path / "cfg.json").write_text("{}")
    (tmp_path / "index").mkdir()
    (tmp_path / "index" / "rows.npy").write_text("x")
    write_manifest(tmp_path, ["cfg.json"])
    with pytest.raises(ValueError, match="E030.*does not list index"):
        check_folder(tmp_path, "thing", ["cfg.json", "index"])
    write_manifest(tmp_path, ["cfg.json", "index"])
    check_folder(tmp_path, "thing", ["cfg.json", "index"])


def _flip(path, offset: int) -> None:
    """Change one byte of ``path`` at ``offset`` (negative: from the end), keeping its size."""
    data = bytearray(path.read_bytes())
    data[offset] ^= 0xFF
    path.write_bytes(bytes(data))


def test_the_quick_check_sizes_every_file_and_hashes_large_ones_at_their_ends(tmp_path):
    big = tmp_path / "index" / "index.faiss"
    big.parent.mkdir()
    big.write_bytes(np.random.default_rng(0).bytes(artefacts.QUICK_WHOLE + 3 * 2**20))
    (tmp_path / "cfg.json").write_text('{"a": 1}')
    write_manifest(tmp_path, ["cfg.json", "index"])
    for verify in ("sha256", "quick"):
        check_folder(tmp_path, "thing", ["cfg.json", "index"], verify)
    _flip(big, len(big.read_bytes()) // 2)  # same size, changed inside: only sha256 sees it
    with pytest.raises(ValueError, match="E030.*index.faiss is not the file.*checksum differs"):
        check_folder(tmp_path, "thing", [])
    check_folder(tmp_path, "thing", [], "quick")
    for offset in (10, -10):  # a header, a last row
        _flip(big, offset)
        with pytest.raises(ValueError, match="index.faiss is not the file.*of its ends differs"):
            check_folder(tmp_path, "thing", [], "quick")
        _flip(big, offset)
    with big.open("r+b") as file_:
        file_.truncate(big.stat().st_size - 1)
    with pytest.raises(ValueError, match=r"index/index.faiss has \d+ bytes"):
        check_folder(tmp_path, "thing", [], "quick")
    (tmp_path / "cfg.json").write_text('{"a": 2}')  # a small file is hashed whole
    with pytest.raises(ValueError, match="cfg.json is not the file"):
        check_folder(tmp_path, "thing", ["cfg.json"], "quick")
    with pytest.raises(ValueError, match="E007.*verify_files"):
        check_folder(tmp_path, "thing", [], "size")


def test_a_folder_without_a_manifest_is_refused(tmp_path):
    """Every save writes manifest.json: a folder without one is incomplete, with or without
    an index.faiss, and is refused, not loaded with the shape checks only."""
    (tmp_path / "index").mkdir()
    (tmp_path / "index" / "index.faiss").write_bytes(b"faiss")
    (tmp_path / "cfg.json").write_text("{}")
    for _ in range(2):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            with pytest.raises(ValueError, match=r"E030.*manifest.json is missing, and every "
                                                 r"save writes one"):
                check_folder(tmp_path, "thing", ["cfg.json", "index"])
        (tmp_path / "index" / "index.faiss").unlink(missing_ok=True)


def test_write_manifest_lists_only_what_was_saved_and_clear_saved_removes_it(tmp_path):
    for name in ("cfg.json", "stale.txt", "index/rows.npy", "reader_encoder/model.bin"):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(name)
    write_manifest(tmp_path, ["cfg.json", "index", "passage_encoder"])
    listed = json.loads((tmp_path / "manifest.json").read_text())["files"]
    assert sorted(listed) == ["cfg.json", "index/rows.npy"]
    clear_saved(tmp_path, ["cfg.json", "index", "reader_encoder", "passage_encoder"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["stale.txt"]


def _packed(pipe) -> dict:
    return srsly.msgpack_loads(pipe.to_bytes())


@pytest.mark.parametrize("factory", COMPONENTS)
def test_from_bytes_needs_the_manifest_and_refuses_unlisted_files(factory, tiny_encoder,
                                                                 toy_kb_path):
    nlp = spacy.blank("xx")
    pipe = nlp.add_pipe(factory, config=_config(factory, toy_kb_path, tiny_encoder))
    files = _packed(pipe)
    without = {k: v for k, v in files.items() if k != "manifest.json"}
    with pytest.raises(ValueError, match=r"E031.*'manifest.json': it is missing"):
        pipe.from_bytes(srsly.msgpack_dumps(without))
    extra = {**files, "tokenizer/extra.txt": b"x"}
    with pytest.raises(ValueError, match=r"E031.*'tokenizer/extra.txt': manifest.json does not"):
        pipe.from_bytes(srsly.msgpack_dumps(extra))
    bad = {**files, "manifest.json": b'{"files": {"../x": {"size": 1, "sha256": ""}}}'}
    with pytest.raises(ValueError, match=r"E031.*'manifest.json': it is malformed"):
        pipe.from_bytes(srsly.msgpack_dumps(bad))
    pipe.from_bytes(srsly.msgpack_dumps(files))


@pytest.mark.parametrize("data", [b"\xc1 not msgpack", srsly.msgpack_dumps([b"a list"]),
                                  srsly.msgpack_dumps(5)])
def test_bytes_that_are_no_map_get_their_own_message(tiny_encoder, toy_kb_path, data):
    nlp = spacy.blank("xx")
    pipe = nlp.add_pipe("arbo_entity_linker", config={
        "kb_path": str(toy_kb_path), "model": {"encoder_name": tiny_encoder}})
    with pytest.raises(ValueError, match=r"E032\] arbo_entity_linker.from_bytes refused the "
                                         r"data: they (are not msgpack|hold a \w+, not a map)"):
        pipe.from_bytes(data)


def test_a_save_over_an_older_one_leaves_none_of_its_files(tiny_encoder, toy_kb_path,
                                                           toy_examples, tmp_path):
    """A pipeline-mode arbo_linker (with reader_encoder/) saved, then a joint-mode one over
    it: the stale reader encoder is neither kept nor listed."""
    models = []
    for mode in ("pipeline", "joint"):
        nlp = spacy.blank("xx")
        nlp.add_pipe("arbo_linker", config=passage_linker_config(
            {"kb_path": str(toy_kb_path), "mode": mode},
            {"encoder_name": tiny_encoder, "share_weights": mode == "joint"}))
        nlp.initialize(lambda: toy_examples)
        models.append(nlp)
    folder = tmp_path / "pipeline" / "arbo_linker"
    models[0].to_disk(tmp_path / "pipeline")
    assert (folder / "reader_encoder").is_dir()
    (folder / "index" / "stale.npy").write_bytes(b"x")
    models[1].to_disk(tmp_path / "pipeline")
    listed = json.loads((folder / "manifest.json").read_text())["files"]
    assert not (folder / "reader_encoder").exists()
    assert not [name for name in listed if name.startswith("reader_encoder/")]
    assert not (folder / "index" / "stale.npy").exists()
    spacy.load(tmp_path / "pipeline")


# --- a saved pipeline, damaged in each way a user might meet ------------------------------


@pytest.fixture(scope="module")
def saved(tiny_encoder, tmp_path_factory):
    """Two saved linker pipelines over one KB: the second one trained a little."""
    from conftest import TOY_ENTITIES, TOY_SENTENCES
    from thinc.api import Adam

    root = tmp_path_factory.mktemp("saved")
    kb_path = root / "kb.jsonl"
    kb_path.write_text("\n".join(json.dumps(e) for e in TOY_ENTITIES) + "\n")
    paths = []
    for steps in (0, 2):
        nlp = spacy.blank("xx")
        nlp.add_pipe("arbo_entity_linker", config={"kb_path": str(kb_path),
                                                   "model": {"encoder_name": tiny_encoder}})
        nlp.add_pipe("arbo_coref", config={"keep_state": True})
        examples = _examples(nlp, TOY_SENTENCES)
        nlp.initialize(lambda examples=examples: examples)
        optimizer = Adam(0.01)
        for _ in range(steps):
            nlp.update(examples, sgd=optimizer)
        list(nlp.pipe([eg.predicted.copy() for eg in examples]))  # coref remembers them
        nlp.to_disk(root / f"pipeline{steps}")
        paths.append(root / f"pipeline{steps}")
    return paths


def _examples(nlp, sentences):
    from spacy.training import Example

    examples = []
    for text, ents in sentences:
        gold, pred = nlp.make_doc(text), nlp.make_doc(text)
        gold.ents = [gold.char_span(s, e, label=label, kb_id=kb) for s, e, label, kb in ents]
        pred.ents = [pred.char_span(s, e, label=label) for s, e, label, _ in ents]
        examples.append(Example(pred, gold))
    return examples


def _copy(saved, tmp_path):
    target = tmp_path / "pipeline"
    shutil.copytree(saved[0], target)
    return target, target / "arbo_entity_linker"


def _load_fails(path, match="E030"):
    with pytest.raises(ValueError, match=match):
        spacy.load(path)


def test_a_saved_pipeline_loads(saved):
    nlp = spacy.load(saved[0])
    assert len(nlp.get_pipe("arbo_coref").state) == 11  # the ents of TOY_SENTENCES


@pytest.mark.parametrize("component", ["arbo_entity_linker", "arbo_coref"])
def test_a_saved_component_without_its_manifest_is_refused(saved, tmp_path, component):
    path, _ = _copy(saved, tmp_path)
    (path / component / "manifest.json").unlink()
    _load_fails(path, rf"E030.*{component}.*manifest.json is missing")


def test_shuffled_owners_are_refused(saved, tmp_path):
    path, linker = _copy(saved, tmp_path)
    owners = np.load(linker / "index" / "owners.npy")
    np.save(linker / "index" / "owners.npy", owners[::-1].copy())
    _load_fails(path, r"E030.*owners.npy is not the file that was saved")


@pytest.mark.parametrize("restamped", [False, True], ids=["manifest", "restamped"])
def test_truncated_or_inconsistent_index_files_are_refused(saved, tmp_path, restamped):
    for damage in ("truncate", "n_rows", "width", "owners"):
        path, linker = _copy(saved, tmp_path / damage)
        index = linker / "index"
        if damage == "truncate":
            data = (index / "embeddings.npy").read_bytes()
            (index / "embeddings.npy").write_bytes(data[: len(data) // 2])
        elif damage == "n_rows":
            meta = json.loads((index / "meta.json").read_text())
            (index / "meta.json").write_text(json.dumps({**meta, "n_rows": meta["n_rows"] + 1}))
        elif damage == "width":  # consistent arrays of another width
            meta = json.loads((index / "meta.json").read_text())
            np.save(index / "embeddings.npy", np.zeros((meta["n_rows"], 16), "float32"))
            (index / "meta.json").write_text(json.dumps({**meta, "dim": 16}))
        else:  # an entity without a row
            owners = np.load(index / "owners.npy")
            np.save(index / "owners.npy", np.minimum(owners, owners.max() - 1))
        if restamped:  # the checksums pass: the index's own checks must catch it
            restamp(linker)
            _load_fails(path, "E004" if damage == "width" else "E030")
        else:
            _load_fails(path)


@pytest.mark.parametrize("missing", ["cfg.json", "index", "tokenizer", "mention_encoder",
                                     "index/rows.npy"])
def test_missing_files_are_refused(saved, tmp_path, missing):
    path, linker = _copy(saved, tmp_path)
    target = linker / missing
    shutil.rmtree(target) if target.is_dir() else target.unlink()
    _load_fails(path, rf"E030.*{missing}")


def test_a_mention_encoder_from_another_model_is_refused(saved, tmp_path):
    path, linker = _copy(saved, tmp_path)
    shutil.rmtree(linker / "mention_encoder")
    shutil.copytree(saved[1] / "arbo_entity_linker" / "mention_encoder",
                    linker / "mention_encoder")
    _load_fails(path, r"E030.*mention_encoder/model.safetensors is not the file")


def test_truncated_weights_that_pass_the_checksums_give_a_coded_error(saved, tmp_path):
    path, linker = _copy(saved, tmp_path)
    weights = linker / "mention_encoder" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])
    restamp(linker)
    _load_fails(path, r"E030.*arbo_entity_linker")


def test_damaged_coref_state_is_refused(saved, tmp_path):
    path, _ = _copy(saved, tmp_path)
    state = path / "arbo_coref" / "state"
    vectors = np.load(state / "vectors.npy")
    np.save(state / "vectors.npy", vectors[:-1])
    _load_fails(path, r"E030.*vectors.npy")
    restamp(path / "arbo_coref")  # the checksums pass: the state's own checks catch it
    _load_fails(path, r"E030.*vectors are float32 \(10, 32\), expected float32 \(11, 32\)")


@pytest.mark.parametrize("factory", COMPONENTS)
def test_verify_files_is_a_setting_of_each_component(factory, tiny_encoder, toy_kb_path):
    nlp = spacy.blank("xx")
    config = _config(factory, toy_kb_path, tiny_encoder)
    assert nlp.add_pipe(factory, config=config).settings.verify_files == "sha256"
    with pytest.raises(ConfigValidationError, match=r"verify_files.*'sha256', 'quick'"):
        nlp.add_pipe(factory, name="other", config={**config, "verify_files": "none"})


def test_verify_files_quick_is_chosen_in_the_config(saved, tmp_path, monkeypatch):
    """With ``quick``, spacy.load sizes every file and hashes a large one only at its ends
    (thresholds lowered here so that the tiny encoder's weights and index count as large)."""
    monkeypatch.setattr(artefacts, "QUICK_WHOLE", 512)
    monkeypatch.setattr(artefacts, "QUICK_ENDS", 256)
    path, linker = _copy(saved, tmp_path)
    listed = json.loads((linker / "manifest.json").read_text())["files"]
    write_manifest(linker, {name.split("/")[0] for name in listed})  # with ends_sha256
    quick = {"components.arbo_entity_linker.verify_files": "quick"}
    vectors = linker / "index" / "embeddings.npy"
    assert vectors.stat().st_size > 512
    _flip(vectors, vectors.stat().st_size // 2)
    _load_fails(path, r"E030.*index/embeddings.npy is not the file")
    # quick does not hash the middle of a large file: it loads
    nlp = spacy.load(path, config=quick)
    assert nlp.get_pipe("arbo_entity_linker").settings.verify_files == "quick"
    _flip(vectors, vectors.stat().st_size // 2)  # as it was
    weights = linker / "mention_encoder" / "model.safetensors"
    _flip(weights, weights.stat().st_size // 2)
    _load_fails(path, r"E030.*mention_encoder/model.safetensors is not the file")
    # the untrained linker's encoder is saved once for both sides: a change in its middle,
    # unseen by quick, changes the entity side too, and the index's fingerprint sees it
    with pytest.raises(ValueError, match=r"E004"):
        spacy.load(path, config=quick, exclude=["arbo_coref"])
    _flip(weights, 20)
    with pytest.raises(ValueError, match=r"E030.*model.safetensors is not the file.*ends"):
        spacy.load(path, config=quick)
    weights.write_bytes(weights.read_bytes()[:-1])
    with pytest.raises(ValueError, match=r"E030.*model.safetensors has \d+ bytes"):
        spacy.load(path, config=quick)
