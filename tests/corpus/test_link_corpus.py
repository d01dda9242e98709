"""link-corpus (issue 19): shards in, one output shard each, resumable, a document that
raises costs only itself; the local engine and Ray actors on a local 2-CPU cluster."""

import json
import os
import re
import sys
from pathlib import Path

import pytest
import spacy
from spacy.tokens import DocBin

from spacy_arboel.corpus.link_corpus import link_corpus
from spacy_arboel.corpus.outcomes import doc_record
from spacy_arboel.corpus.worker import LinkSettings
from spacy_arboel.jobs.engines import LocalEngine, RayEngine

TEXTS = ["Aspirin induced cough.", "Fever in patients with heart failure.",
         "Naloxone reverses the effect of clonidine.", "", "Delirium after famotidine."]


@pytest.fixture
def corpus(tmp_path):
    """Four shards, one of each input kind: 7 documents."""
    folder = tmp_path / "corpus"
    folder.mkdir()
    (folder / "a.jsonl").write_text("".join(
        json.dumps({"id": f"a{i}", "text": t}) + "\n" for i, t in enumerate(TEXTS[:3])))
    (folder / "b.txt").write_text(TEXTS[4])
    (folder / "c.pubtator").write_text(
        "11|t|Fever and cough.\n11|a|Heart failure.\n\n12|t|Aspirin.\n12|a|\n\n")
    nlp = spacy.blank("xx")
    DocBin(docs=[nlp(TEXTS[3]), nlp(TEXTS[1])]).to_disk(folder / "d.spacy")
    return folder


def _comparable(record: dict) -> dict:
    """A JSONL record with its scores to 3 decimals: a batch of other documents around a
    text moves its scores by float noise (~1e-7)."""
    return {**record, "entities": [
        {**e, "score": round(e["score"], 3),
         "candidates": [[kb_id, round(score, 3)] for kb_id, score in e["candidates"]]}
        for e in record["entities"]]}


def _outputs(folder: Path) -> dict[str, list[dict]]:
    return {p.name: [_comparable(json.loads(line)) for line in p.read_text().splitlines()]
            for p in sorted(folder.glob("*.jsonl")) if not p.name.endswith(".errors.jsonl")}


def _expected(model: Path, corpus: Path) -> dict[str, list[dict]]:
    """What linking each document with nlp() directly gives."""
    from spacy_arboel.corpus.shards import shard_documents

    nlp = spacy.load(model)
    return {f"{p.stem}.jsonl": [_comparable(doc_record(nlp(d.text), d.id, 5))
                                for d in shard_documents(p)]
            for p in sorted(corpus.iterdir())}


def _exits(result, code=0):
    assert result.exit_code == code, result.output
    return result


def test_local_engine_writes_one_shard_per_input_as_nlp_links(linker_pipeline, corpus,
                                                              tmp_path, cli):
    out = tmp_path / "out"
    result = _exits(cli("link-corpus", linker_pipeline, corpus, out, "--batch-size", 2))
    outputs = _outputs(out)
    assert outputs == _expected(linker_pipeline, corpus)
    assert [r["id"] for r in outputs["a.jsonl"]] == ["a0", "a1", "a2"]
    assert [r["id"] for r in outputs["c.jsonl"]] == ["11", "12"]
    assert sum(len(r["entities"]) for rows in outputs.values() for r in rows) > 0
    entity = next(e for rows in outputs.values() for r in rows for e in r["entities"])
    assert set(entity) >= {"start", "end", "text", "label", "kb_id", "score", "candidates"}
    manifest = json.loads((out / "manifest.json").read_text())
    assert set(manifest["shards"]) == {"a.jsonl", "b.jsonl", "c.jsonl", "d.jsonl"}
    assert sum(s["docs"] for s in manifest["shards"].values()) == 8
    assert "docs/s" in result.output and not list(out.glob("*.errors.jsonl"))


def test_a_rerun_skips_finished_shards_and_redoes_changed_or_missing_ones(
        linker_pipeline, corpus, tmp_path, cli):
    out = tmp_path / "out"
    _exits(cli("link-corpus", linker_pipeline, corpus, out))
    before = {p.name: p.stat().st_mtime_ns for p in out.glob("*.jsonl")}
    again = _exits(cli("link-corpus", linker_pipeline, corpus, out))
    assert {p.name: p.stat().st_mtime_ns for p in out.glob("*.jsonl")} == before
    assert "shards already done" in again.output
    (corpus / "b.txt").write_text("Cough and fever.")  # changed source
    (out / "c.jsonl").unlink()  # lost output
    settings = LinkSettings(str(linker_pipeline))
    summary = link_corpus(corpus, out, settings, LocalEngine())
    assert sorted(summary.linked) == ["b.jsonl", "c.jsonl"]
    assert sorted(summary.skipped) == ["a.jsonl", "d.jsonl"]
    assert _outputs(out) == _expected(linker_pipeline, corpus)


def test_a_document_that_raises_goes_to_the_errors_file_and_its_shard_completes(
        linker_pipeline, tmp_path, cli):
    folder = tmp_path / "corpus"
    folder.mkdir()
    too_long = "x" * 1_000_001  # over spaCy's nlp.max_length: E088
    (folder / "s.jsonl").write_text("".join(json.dumps({"id": i, "text": t}) + "\n"
                                            for i, t in [("ok1", TEXTS[0]), ("bad", too_long),
                                                         ("ok2", TEXTS[1])]))
    out = tmp_path / "out"
    result = _exits(cli("link-corpus", linker_pipeline, folder, out))
    assert [r["id"] for r in _outputs(out)["s.jsonl"]] == ["ok1", "ok2"]
    errors = [json.loads(line) for line in (out / "s.errors.jsonl").read_text().splitlines()]
    assert [(e["id"], e["position"]) for e in errors] == [("bad", 1)]
    assert "E088" in errors[0]["error"]
    assert "1 docs raised" in result.output


def test_an_unreadable_shard_is_reported_and_the_others_are_written(linker_pipeline, corpus,
                                                                    tmp_path, cli):
    (corpus / "e.jsonl").write_text('{"text": "fine"}\nnot json\n')
    out = tmp_path / "out"
    result = _exits(cli("link-corpus", linker_pipeline, corpus, out), code=1)
    assert "E129" in result.output and "e.jsonl" in result.output and "E115" in result.output
    assert set(_outputs(out)) == {"a.jsonl", "b.jsonl", "c.jsonl", "d.jsonl"}
    (corpus / "e.jsonl").write_text('{"text": "fine"}\n')
    settings = LinkSettings(str(linker_pipeline))
    assert link_corpus(corpus, out, settings, LocalEngine()).linked == ["e.jsonl"]


def test_a_shard_with_a_deeply_nested_line_is_reported_and_the_others_are_written(
        linker_pipeline, corpus, tmp_path, cli):
    """Issue 29, item 4: json.loads' RecursionError on one line stopped the whole run."""
    (corpus / "e.jsonl").write_text('{"text": "fine"}\n' + "[" * 100_000 + "]" * 100_000)
    (corpus / "f.jsonl").write_bytes(b'{"text": "fine"}\n{"text": "caf\xe9"}\n')
    settings = LinkSettings(str(linker_pipeline))
    summary = link_corpus(corpus, tmp_path / "out", settings, LocalEngine())
    assert sorted(summary.linked) == ["a.jsonl", "b.jsonl", "c.jsonl", "d.jsonl"]
    assert set(_outputs(tmp_path / "out")) == set(summary.linked)
    assert sorted(summary.unreadable) == ["e.jsonl", "f.jsonl"]
    assert re.search(r"E115.*e\.jsonl, line 2: .*nested too deeply",
                     summary.unreadable["e.jsonl"])
    assert re.search(r"E115.*f\.jsonl, line 2: not UTF-8", summary.unreadable["f.jsonl"])
    result = _exits(cli("link-corpus", linker_pipeline, corpus, tmp_path / "out"), code=1)
    assert "E129" in result.output and "nested too deeply" in result.output


def test_bad_outputs_and_settings_are_refused(linker_pipeline, corpus, tmp_path, cli):
    assert "E040" in _exits(cli("link-corpus", linker_pipeline, corpus, corpus), code=1).output
    assert "E041" in _exits(cli("link-corpus", linker_pipeline, corpus,
                                corpus / "out"), code=1).output
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "a.jsonl").write_text("mine\n")
    assert "E130" in _exits(cli("link-corpus", linker_pipeline, corpus, foreign), code=1).output
    assert (foreign / "a.jsonl").read_text() == "mine\n"
    out = tmp_path / "out"
    _exits(cli("link-corpus", linker_pipeline, corpus, out))
    assert "E127" in _exits(cli("link-corpus", linker_pipeline, corpus, out,
                                "--format", "spacy"), code=1).output
    (out / "manifest.json").write_text("{")
    assert "E126" in _exits(cli("link-corpus", linker_pipeline, corpus, out), code=1).output
    (corpus / "a.txt").write_text("A clash with a.jsonl")
    assert "E125" in _exits(cli("link-corpus", linker_pipeline, corpus,
                                tmp_path / "new"), code=1).output


def _mtimes(folder: Path) -> dict[str, int]:
    return {p.name: p.stat().st_mtime_ns for p in folder.iterdir()}


def test_a_resume_continues_only_the_same_job(linker_pipeline, corpus, tmp_path,
                                              monkeypatch, cli):
    """Issue 29, item 1: other overrides, --top-k, --vectors or a retrained pipeline at the
    same path are refused (E127) with nothing written; another spelling of the same
    pipeline's path resumes."""
    out = tmp_path / "out"
    _exits(cli("link-corpus", linker_pipeline, corpus, out))
    (out / "c.jsonl").unlink()  # one shard left to link
    before = _mtimes(out)
    for extra in (["--top-k", "1"], ["--components.arbo_linker.threshold", "1000"],
                  ["--vectors"]):
        result = _exits(cli("link-corpus", linker_pipeline, corpus, out, *extra), code=1)
        assert "E127" in result.output and "delete" in result.output
        assert _mtimes(out) == before
    retrained = tmp_path / "retrained"
    spacy.load(linker_pipeline, config={"components.arbo_linker.threshold": 0.5}
               ).to_disk(retrained)
    moved = tmp_path / "moved"
    linker_pipeline.rename(moved)
    retrained.rename(linker_pipeline)  # the same path, another pipeline
    result = _exits(cli("link-corpus", linker_pipeline, corpus, out), code=1)
    assert "E127" in result.output and "pipeline" in result.output
    assert _mtimes(out) == before
    linker_pipeline.rename(retrained)
    (tmp_path / "link").symlink_to(moved)
    monkeypatch.chdir(tmp_path)
    # the first pipeline, spelt otherwise
    result = _exits(cli("link-corpus", Path("link/"), corpus, out))
    assert "shards already done" in result.output and (out / "c.jsonl").exists()


def test_a_retrained_component_changes_the_pipeline_fingerprint(linker_pipeline, tmp_path):
    import shutil

    from spacy_arboel.artefacts import pipeline_fingerprint, write_manifest

    copy = tmp_path / "copy"
    shutil.copytree(linker_pipeline, copy)
    assert pipeline_fingerprint(copy) == pipeline_fingerprint(linker_pipeline)
    meta = json.loads((copy / "meta.json").read_text())
    (copy / "meta.json").write_text(json.dumps({**meta, "performance": {"f": 1.0}}))
    assert pipeline_fingerprint(copy) == pipeline_fingerprint(linker_pipeline)
    component = copy / "arbo_linker"
    weights = next(p for p in sorted(component.rglob("*.safetensors")))
    data = bytearray(weights.read_bytes())
    data[-1] ^= 1  # new weights, saved with their manifest as a training would
    weights.write_bytes(bytes(data))
    saved = json.loads((component / "manifest.json").read_text())["files"]
    write_manifest(component, {name.split("/")[0] for name in saved})
    assert pipeline_fingerprint(copy) != pipeline_fingerprint(linker_pipeline)


def test_no_file_of_one_shard_is_another_shards(linker_pipeline, corpus, tmp_path, cli):
    """Issue 29, item 5: the output of a.errors.jsonl would be a.jsonl's errors file."""
    (corpus / "a.errors.jsonl").write_text(json.dumps({"id": "x", "text": "Fever."}) + "\n")
    result = _exits(cli("link-corpus", linker_pipeline, corpus, tmp_path / "out"), code=1)
    assert "E125" in result.output and "a.errors.jsonl" in result.output
    assert not (tmp_path / "out").exists()


def test_repeated_document_ids_are_warned_about(linker_pipeline, corpus, tmp_path, cli):
    """Issue 29, item 2: PubMed update files repeat PMIDs; link-corpus says so."""
    folder = tmp_path / "updates"
    folder.mkdir()
    for name in ("u1", "u2"):
        (folder / f"{name}.jsonl").write_text("".join(
            json.dumps({"id": i, "text": t}) + "\n"
            for i, t in [("1", TEXTS[0]), (name, TEXTS[1])]))
    result = _exits(cli("link-corpus", linker_pipeline, folder, tmp_path / "out"))
    assert "W007" in result.output and "u1.jsonl, u2.jsonl" in result.output
    assert "1 document ids occur more than once" in " ".join(result.output.split())
    assert [len(rows) for rows in _outputs(tmp_path / "out").values()] == [2, 2]
    unique = _exits(cli("link-corpus", linker_pipeline, corpus, tmp_path / "out2"))
    assert "W007" not in unique.output


def test_a_shard_is_spilled_to_disk_and_written_in_input_order(tmp_path):
    """Issue 29, item 9: outcomes arriving in any order go to disk at once, not to memory;
    the shard is written in input order with its vectors and errors, spills removed."""
    import numpy as np

    from spacy_arboel.corpus.outcomes import Outcome
    from spacy_arboel.corpus.shard_writer import ShardWriter
    from spacy_arboel.corpus.shards import plan_shards

    (tmp_path / "in.jsonl").write_text("")
    shard = plan_shards(tmp_path / "in.jsonl", tmp_path / "out", "jsonl")[0]

    def vectors(rows, width, value):
        import io

        out = io.BytesIO()
        np.save(out, np.full((rows, width), value, dtype="float16"))
        return out.getvalue()

    writer = ShardWriter(shard, "jsonl", vectors=True)
    arriving = [Outcome(2, "c", '{"id": "c"}', 1, vectors=vectors(1, 4, 2.0)),
                Outcome(0, "a", '{"id": "a"}', 2, vectors=vectors(2, 4, 0.5)),
                Outcome(3, "d", error="E088: too long"),
                Outcome(1, "b", '{"id": "b"}', 0, vectors=vectors(0, 0, 0.0))]
    spilled = []
    for outcome in arriving:
        writer.add([outcome])
        spilled.append(sum(p.stat().st_size for p in shard.output.parent.glob(".*spill-*")))
    assert spilled[0] > 0 and spilled[1] > spilled[0]  # on disk as they come
    assert writer.finish() == {"docs": 3, "mentions": 3, "errors": 1}
    assert [json.loads(line)["id"] for line in shard.output.read_text().splitlines()] == \
        ["a", "b", "c"]
    np.testing.assert_array_equal(np.load(shard.vectors),
                                  np.array([[0.5] * 4, [0.5] * 4, [2.0] * 4], "float16"))
    assert json.loads(shard.errors.read_text())["position"] == 3
    assert not list(shard.output.parent.glob(".*spill-*"))


def test_spacy_format_keeps_ids_entities_and_candidates(linker_pipeline, corpus, tmp_path, cli):
    out = tmp_path / "out"
    _exits(cli("link-corpus", linker_pipeline, corpus, out, "--format", "spacy"))
    nlp = spacy.load(linker_pipeline)
    docs = list(DocBin().from_disk(out / "a.spacy").get_docs(nlp.vocab))
    assert [d.user_data["id"] for d in docs] == ["a0", "a1", "a2"]
    expected = [_comparable(doc_record(nlp(t), f"a{i}", 5)) for i, t in enumerate(TEXTS[:3])]
    assert [_comparable(doc_record(d, d.user_data["id"], 5)) for d in docs] == expected


def test_ray_engine_without_ray_says_how_to_install_it(linker_pipeline, corpus, tmp_path,
                                                       monkeypatch, cli):
    monkeypatch.setitem(sys.modules, "ray", None)
    result = _exits(cli("link-corpus", linker_pipeline, corpus, tmp_path / "out",
                        "--engine", "ray"), code=1)
    assert "E128" in result.output and "pip install ray" in " ".join(result.output.split())


# --- Ray actors on a local cluster of 2 CPUs ----------------------------------------------------

@pytest.fixture(scope="module")
def ray_cluster(ray_cluster_of):
    # the killing loader below is shipped to the actors by value
    return ray_cluster_of(sys.modules[__name__])


@pytest.mark.slow
def test_ray_engine_writes_what_the_local_engine_writes(ray_cluster, linker_pipeline, corpus,
                                                        tmp_path):
    local, remote = tmp_path / "local", tmp_path / "ray"
    settings = LinkSettings(str(linker_pipeline), batch_size=2)
    link_corpus(corpus, local, settings, LocalEngine())
    summary = link_corpus(corpus, remote, settings, RayEngine(num_workers=2))
    assert summary.docs == 8 and sorted(summary.linked) == sorted(_outputs(local))
    assert _outputs(remote) == _outputs(local)
    again = link_corpus(corpus, remote, settings, RayEngine(num_workers=2))
    assert again.linked == [] and len(again.skipped) == 4
    # DocBin shards travel through Ray as bytes
    as_docs = LinkSettings(str(linker_pipeline), fmt="spacy", batch_size=3)
    link_corpus(corpus, tmp_path / "ray-spacy", as_docs, RayEngine(num_workers=1))
    nlp = spacy.load(linker_pipeline)
    docs = list(DocBin().from_disk(tmp_path / "ray-spacy" / "a.spacy").get_docs(nlp.vocab))
    assert [_comparable(doc_record(d, d.user_data["id"], 5)) for d in docs] == \
        _outputs(local)["a.jsonl"]


@pytest.mark.slow
def test_ray_engine_records_a_bad_document(ray_cluster, linker_pipeline, tmp_path):
    folder = tmp_path / "corpus"
    folder.mkdir()
    (folder / "s.jsonl").write_text("".join(json.dumps({"id": i, "text": t}) + "\n"
                                            for i, t in [("ok1", TEXTS[0]),
                                                         ("bad", "x" * 1_000_001),
                                                         ("ok2", TEXTS[1])]))
    settings = LinkSettings(str(linker_pipeline), batch_size=3)
    summary = link_corpus(folder, tmp_path / "out", settings, RayEngine(1))
    assert (summary.docs, summary.errors) == (2, 1)
    errors = (tmp_path / "out" / "s.errors.jsonl").read_text()
    assert '"bad"' in errors and "E088" in errors


def _load_then_die_once(settings):
    """A pipeline loader for the actors whose pipeline kills its process (as an OOM kill
    or a lost node would) the first time it meets the text "KILL", once per marker file."""
    nlp = spacy.load(settings.model)
    marker = Path(settings.overrides.pop("marker"))

    def die_once(texts):
        texts = list(texts)
        if "KILL" in texts and not marker.exists():
            marker.touch()
            os._exit(1)
        return nlp.pipe(texts)

    nlp.pipe = die_once
    return nlp


@pytest.mark.slow
def test_a_worker_killed_mid_shard_is_retried_and_its_shard_written_once(
        ray_cluster, linker_pipeline, corpus, tmp_path):
    (corpus / "a.jsonl").write_text("".join(
        json.dumps({"id": f"a{i}", "text": t}) + "\n"
        for i, t in enumerate([*TEXTS[:3], "KILL", TEXTS[4]])))
    marker = tmp_path / "killed"
    settings = LinkSettings(str(linker_pipeline), batch_size=2,
                            overrides={"marker": str(marker)})
    summary = link_corpus(corpus, tmp_path / "out", settings,
                          RayEngine(num_workers=2), load=_load_then_die_once)
    assert marker.exists()  # a worker did die
    outputs = _outputs(tmp_path / "out")
    assert [r["id"] for r in outputs["a.jsonl"]] == ["a0", "a1", "a2", "a3", "a4"]
    assert summary.errors == 0 and summary.docs == 10
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["shards"]["a.jsonl"]["docs"] == 5


def test_cross_document_components_are_named_for_disabling():
    """arbo_coref would cluster each batch apart: link-corpus disables it."""
    from spacy_arboel.corpus.worker import cross_document_pipes

    config = {"nlp": {"pipeline": ["ner", "arbo_entity_linker", "coref"]},
              "components": {"ner": {"factory": "ner"},
                             "arbo_entity_linker": {"factory": "arbo_entity_linker"},
                             "coref": {"factory": "arbo_coref"}}}
    assert cross_document_pipes(config) == ["coref"]


def test_a_resume_in_another_folder_never_links_against_another_kb(linker_pipeline, corpus,
                                                                     tmp_path, monkeypatch, cli):
    """Issue 40, item 1: a kb_path override names a file relative to the working folder; a
    run resumed where that name holds another KB (or after the file changed) is another
    job (E127), not one corpus linked against two KBs."""
    from tests.conftest import TOY_ENTITIES

    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir(), second.mkdir()
    (first / "kb.jsonl").write_text("".join(json.dumps(e) + "\n" for e in TOY_ENTITIES))
    (second / "kb.jsonl").write_text("".join(json.dumps(e) + "\n" for e in TOY_ENTITIES[:2]))
    out = tmp_path / "out"
    monkeypatch.chdir(first)
    _exits(cli("link-corpus", linker_pipeline, corpus, out,
               "--components.arbo_linker.kb_path", "kb.jsonl"))
    (out / "c.jsonl").unlink()  # one shard left to link
    before = _mtimes(out)
    monkeypatch.chdir(second)
    result = _exits(cli("link-corpus", linker_pipeline, corpus, out,
                        "--components.arbo_linker.kb_path", "kb.jsonl"), code=1)
    assert "E127" in result.output and "override_files" in result.output
    assert _mtimes(out) == before
    monkeypatch.chdir(first)
    result = _exits(cli("link-corpus", linker_pipeline, corpus, out,
                        "--components.arbo_linker.kb_path", "kb.jsonl"))
    assert "shards already done" in result.output and (out / "c.jsonl").exists()
