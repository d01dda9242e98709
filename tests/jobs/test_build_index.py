"""build-index (issue 19): a KB embedded in shards (resumable, local processes or Ray
actors) gives the vectors the retriever embeds itself, and the FAISS index built apart is
saved as index.faiss, loaded memory-mapped and links like the in-process index."""

import json
import os
import re
import sys
from dataclasses import replace

import numpy as np
import pytest
import spacy

from spacy_arboel.jobs.build_index import (
    EmbedderSource,
    ShardEmbedder,
    build_kb_index,
    embed_kb,
)
from spacy_arboel.jobs.engines import LocalEngine, RayEngine
from spacy_arboel.jobs.kb_vectors import EmbeddingPlan, ShardStore
from spacy_arboel.kb.entity import Entity
from spacy_arboel.kb.index import FAISS_FILE
from spacy_arboel.kb.knowledge_base import KnowledgeBase
from spacy_arboel.linking.dense_retriever import DenseRetriever

WORDS = ["acute", "chronic", "renal", "hepatic", "cardiac", "pulmonary", "toxicity",
         "failure", "injury", "disease", "syndrome", "pain", "fever", "cough", "aspirin"]

# the vector settings of the plans below (issue 29: a resume checks them too)
SAME = {"similarity": "dot", "mixed_precision": False}


def _big_kb(n: int) -> KnowledgeBase:
    """``n`` generated entities, a third with two aliases (three rows), a sixth with a third
    alias of another alias's words (not embedded: ``text_duplicate_rows``)."""
    rng = np.random.default_rng(0)
    entities = []
    for i in range(n):
        name = " ".join(rng.choice(WORDS, 3))
        aliases = (f"{name} {i}", f"type {i} {name}") if i % 3 == 0 else ()
        aliases += (f"{i}, {name}",) if i % 6 == 0 else ()
        entities.append(Entity(f"G{i:05d}", name, aliases=aliases))
    return KnowledgeBase(entities)


@pytest.fixture
def retriever(saved_linker):
    folder = saved_linker / "pipeline" / "arbo_entity_linker"
    nlp = spacy.load(saved_linker / "pipeline")
    linker = nlp.get_pipe("arbo_entity_linker")
    linker.ensure_ready()
    return folder, linker.retriever


def _settings(retriever: DenseRetriever, granularity: str = "alias") -> DenseRetriever:
    from dataclasses import replace

    retriever.use_settings(replace(retriever.settings, entity_granularity=granularity))
    return retriever


def test_shards_never_split_an_entity():
    owners = np.array([0, 0, 0, 1, 2, 2, 3, 4, 4, 4, 4])
    plan = EmbeddingPlan.cut(owners, 3, kb_fingerprint="k", encoder_fingerprint="e", **SAME,
                             granularity="alias", dim=8)
    assert plan.shards == ((0, 3), (3, 6), (6, 11))  # the last takes all of entity 4
    for start, _ in plan.shards[1:]:
        assert owners[start] != owners[start - 1]
    assert EmbeddingPlan.cut(owners, 100, kb_fingerprint="k", encoder_fingerprint="e", **SAME,
                             granularity="alias", dim=8).shards == ((0, 11),)
    with pytest.raises(ValueError, match="E011"):
        EmbeddingPlan.cut(owners, 0, kb_fingerprint="k", encoder_fingerprint="e", **SAME,
                          granularity="alias", dim=8)


def test_a_work_folder_is_reopened_only_for_its_own_plan(tmp_path):
    plan = EmbeddingPlan.cut(np.arange(6), 2, kb_fingerprint="k", encoder_fingerprint="e", **SAME,
                             granularity="entity", dim=4)
    store = ShardStore(tmp_path / "work", plan)
    store.write(1, np.ones((2, 4), "float32"))
    again = ShardStore(tmp_path / "work", plan)
    assert again.pending == [0, 2] and (again.vectors[2:4] == 1).all()
    with pytest.raises(ValueError, match="E133"):
        again.write(0, np.ones((3, 4), "float32"))
    other = EmbeddingPlan.cut(np.arange(6), 2, kb_fingerprint="k2", encoder_fingerprint="e", **SAME,
                              granularity="entity", dim=4)
    with pytest.raises(ValueError, match="E132.*KB k2"):
        ShardStore(tmp_path / "work", other)
    for setting in ({"similarity": "cosine"}, {"mixed_precision": True}):
        with pytest.raises(ValueError, match="E132.*" + "".join(setting)):
            ShardStore(tmp_path / "work", replace(plan, **setting))
    (tmp_path / "foreign").mkdir()
    (tmp_path / "foreign" / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match="E132"):
        ShardStore(tmp_path / "foreign", plan)
    assert (tmp_path / "foreign" / "notes.txt").read_text() == "mine"


class _Failing(LocalEngine):
    """Embeds the first ``n`` shards it is given, then fails as a killed run would."""

    def __init__(self, n):
        super().__init__()
        self.n, self.seen = n, []

    def map(self, make_worker, tasks):
        for i, result in enumerate(super().map(make_worker, tasks)):
            self.seen.append(result[0])
            if i == self.n:
                raise KeyboardInterrupt
            yield result


def test_embedding_in_shards_gives_the_retrievers_vectors_and_resumes(retriever, tmp_path):
    folder, retriever = retriever
    retriever = _settings(retriever)
    retriever.entities.set_kb(_big_kb(60))
    source = EmbedderSource.of(folder, retriever)
    with pytest.raises(KeyboardInterrupt):
        embed_kb(retriever, source, _Failing(2), tmp_path / "work", shard_rows=16)
    resumed = _Failing(10**6)
    store, owners = embed_kb(retriever, source, resumed, tmp_path / "work", shard_rows=16)
    assert resumed.seen == list(range(2, len(store.plan.shards)))  # shards 0, 1 were kept
    retriever.entities.refresh(desc=None)
    embedded = retriever.entities.rows_to_embed()
    whole = retriever.encode("entity", retriever.entities.inputs_of(embedded), quantized=False)
    # on float16's grid, as the retriever's own index holds them (kb.index.half_grid)
    np.testing.assert_allclose(store.vectors[embedded], whole, atol=1e-3)
    left_out = np.setdiff1d(np.arange(len(owners)), embedded)
    assert len(left_out) == 10 and not np.asarray(store.vectors[left_out]).any()
    assert (owners == retriever.entities.set_row_layout()).all()


def test_the_index_built_apart_finds_what_the_retriever_finds(retriever, tmp_path):
    folder, retriever = retriever
    retriever = _settings(retriever)
    retriever.entities.set_kb(_big_kb(120))
    retriever.entities.refresh(desc=None)
    exact = retriever.index
    built = build_kb_index(retriever, EmbedderSource.of(folder, retriever), LocalEngine(),
                           tmp_path / "work", kind="flat", shard_rows=50)
    assert built.meta.factory == "Flat" and (built.rows == exact.rows).all()  # same dedupe
    assert (built.owners == exact.owners).all() and built.meta.kb_fingerprint == \
        exact.meta.kb_fingerprint and built.meta.encoder_fingerprint == \
        exact.meta.encoder_fingerprint
    # the same row vectors (a random tiny BERT embeds every text alike, so rankings of
    # its scores would show float noise, not the index)
    np.testing.assert_allclose(built.index.reconstruct_n(0, built.index.ntotal),
                               exact.embeddings, atol=1e-5)
    queries = exact.embeddings[:10]
    np.testing.assert_allclose(built.search(queries, 5)[0], exact.search(queries, 5)[0],
                               rtol=1e-5)
    with pytest.raises(ValueError, match="E131"):
        built.embeddings  # noqa: B018
    hnsw = build_kb_index(retriever, EmbedderSource.of(folder, retriever), LocalEngine(),
                          tmp_path / "work", kind="hnsw", shard_rows=50)
    assert hnsw.meta.kind == "hnsw" and hnsw.meta.factory == "HNSW32,Flat"
    np.testing.assert_allclose(hnsw.index.reconstruct_n(0, hnsw.index.ntotal),
                               exact.embeddings, atol=1e-5)


def test_shards_embed_the_rows_laid_out_over_the_whole_kb(retriever, tmp_path):
    """An alias that is the preferred name of an entity in another shard has no row
    (``entity_rows``'s ``drop_shadowed``): the workers embed the driver's rows, not a layout
    of their shard's entities alone (found on the GPU check: E133 on BC5CDR's MeSH KB)."""
    folder, retriever = retriever
    retriever = _settings(retriever)
    assert retriever.settings.inputs == "names"
    entities = list(_big_kb(60))
    # the last entities take the first ones' names as aliases: shadowed in the whole KB only
    entities[50:] = [replace(e, aliases=(*e.aliases, entities[i].name))
                     for i, e in enumerate(entities[50:])]
    retriever.entities.set_kb(KnowledgeBase(entities))
    retriever.entities.refresh(desc=None)
    exact = retriever.index
    built = build_kb_index(retriever, EmbedderSource.of(folder, retriever), LocalEngine(),
                           tmp_path / "work", kind="flat", shard_rows=16)
    assert (built.owners == exact.owners).all()
    assert (built.rows == exact.rows).all()
    np.testing.assert_allclose(built.index.reconstruct_n(0, built.index.ntotal),
                               exact.embeddings, atol=1e-5)


@pytest.mark.slow
def test_two_local_processes_embed_like_one(retriever, tmp_path):
    folder, retriever = retriever
    retriever.entities.set_kb(_big_kb(40))
    source = EmbedderSource.of(folder, retriever)
    one, _ = embed_kb(retriever, source, LocalEngine(), tmp_path / "one", shard_rows=10)
    two, _ = embed_kb(retriever, source, LocalEngine(num_workers=2), tmp_path / "two",
                      shard_rows=10)
    np.testing.assert_allclose(one.vectors, two.vectors, atol=1e-5)


def _exits(result, code=0):
    assert result.exit_code == code, result.output
    return result


def _write_kb(kb: KnowledgeBase, path):
    kb.to_jsonl(path)
    return path


@pytest.mark.slow
def test_build_index_saves_a_pipeline_that_loads_the_index_memory_mapped(saved_linker,
                                                                         tmp_path, cli):
    pipeline = saved_linker / "pipeline"
    kb_path = _write_kb(_big_kb(400), tmp_path / "big.jsonl")
    out = tmp_path / "big-pipeline"
    result = _exits(cli("build-index", pipeline, out, "--kb", kb_path, "--kind", "ivfpq",
                        "--pq-bytes", "8", "--shard-rows", "150"))
    assert "IVF" in result.output and (out / "arbo_entity_linker/index" / FAISS_FILE).exists()
    said = " ".join(result.output.split())  # wasabi wraps long lines
    embedded = int(re.search(r"Embedded (\d+) rows in", said)[1])
    assert embedded >= 400 and "0 rows were embedded before" in said
    assert not (out / "arbo_entity_linker/index/embeddings.npy").exists()
    assert (tmp_path / "big-pipeline.shards" / "manifest.json").exists()
    nlp = spacy.load(out)
    linker = nlp.get_pipe("arbo_entity_linker")
    assert len(linker.kb) == 400 and linker.retriever.index.meta.factory.startswith("IVF")
    doc = nlp.make_doc("renal failure and acute pain")
    doc.ents = [doc.char_span(0, 13, label="Disease")]
    linked = nlp(doc)
    assert linked.ents[0].kb_id_.startswith("G")
    # saved again, over itself and elsewhere: the memory-mapped file is copied, not lost
    index_dir = out / "arbo_entity_linker" / "index"
    linker.retriever.index.to_disk(index_dir)  # over the very file it maps
    assert not list(index_dir.glob("*.partial"))
    reloaded = spacy.load(out)
    fresh = reloaded.make_doc("renal failure and acute pain")
    fresh.ents = [fresh.char_span(0, 13, label="Disease")]
    assert reloaded(fresh).ents[0].kb_id_ == linked.ents[0].kb_id_
    nlp.to_disk(out)
    nlp.to_disk(tmp_path / "copy")
    for folder in (out, tmp_path / "copy"):
        again = spacy.load(folder)
        doc = again.make_doc("renal failure and acute pain")
        doc.ents = [doc.char_span(0, 13, label="Disease")]
        assert again(doc).ents[0].kb_id_ == linked.ents[0].kb_id_
    # a second run finds every shard done
    rerun = _exits(cli("build-index", pipeline, tmp_path / "rerun", "--kb", kb_path,
                       "--kind", "ivfpq", "--pq-bytes", "8", "--shard-rows", "150",
                       "--work-dir", tmp_path / "big-pipeline.shards"))
    assert "Saved" in rerun.output
    said = " ".join(rerun.output.split())
    assert "Embedded 0 rows in" in said and f"{embedded} rows were embedded before" in said
    # the quick check chosen at load; a folder without its manifest is incomplete (E030)
    quick = spacy.load(out, config={"components.arbo_entity_linker.verify_files": "quick"})
    doc = quick.make_doc("renal failure and acute pain")
    doc.ents = [doc.char_span(0, 13, label="Disease")]
    assert quick(doc).ents[0].kb_id_ == linked.ents[0].kb_id_
    (out / "arbo_entity_linker" / "manifest.json").unlink()
    with pytest.raises(ValueError, match=r"E030.*manifest.json is missing"):
        spacy.load(out)


def test_build_index_refuses_bad_arguments(saved_linker, tmp_path, cli):
    pipeline = saved_linker / "pipeline"
    assert "E040" in _exits(cli("build-index", pipeline, pipeline), code=1).output
    # typed options: typer refuses another value and lists the choices
    for option, value, choices in (("--kind", "lsh", "'auto', 'flat'"),
                                   ("--engine", "mpi", "'local', 'ray'")):
        output = _exits(cli("build-index", pipeline, tmp_path / "o", option, value), code=2).output
        assert f"'{value}' is not one of {choices}" in " ".join(output.replace("│", " ").split())
    assert "component" in _exits(cli("build-index", pipeline, tmp_path / "o",
                                     "--component", "x"), code=1).output
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "mine.txt").write_text("keep")
    assert "E132" in _exits(cli("build-index", pipeline, tmp_path / "o",
                                "--work-dir", tmp_path / "work"), code=1).output
    assert (tmp_path / "work" / "mine.txt").read_text() == "keep"


def test_without_ray_the_ray_engine_says_how_to_install_it(saved_linker, tmp_path,
                                                          monkeypatch, cli):
    monkeypatch.setitem(sys.modules, "ray", None)
    result = _exits(cli("build-index", saved_linker / "pipeline", tmp_path / "o",
                        "--engine", "ray"), code=1)
    assert "E128" in result.output and "pip install ray" in " ".join(result.output.split())


# --- Ray actors on a local cluster of 2 CPUs ------------------------------------------------

@pytest.fixture(scope="module")
def ray_cluster(ray_cluster_of):
    return ray_cluster_of(sys.modules[__name__])


def _dying_once(marker: str) -> type:
    """An embedder whose process dies (as an OOM kill would) at its first shard, once."""

    class DyingOnce(ShardEmbedder):
        def embed(self, shard, entities, layout):
            if not os.path.exists(marker):
                open(marker, "w").close()  # noqa: SIM115
                os._exit(1)
            return super().embed(shard, entities, layout)

    return DyingOnce


@pytest.mark.slow
def test_ray_actors_embed_like_one_process_and_survive_a_killed_actor(ray_cluster, retriever,
                                                                      tmp_path):
    folder, retriever = retriever
    retriever.entities.set_kb(_big_kb(40))
    source = EmbedderSource.of(folder, retriever)
    local, _ = embed_kb(retriever, source, LocalEngine(), tmp_path / "local", shard_rows=10)
    remote, _ = embed_kb(retriever, source, RayEngine(2), tmp_path / "ray", shard_rows=10)
    np.testing.assert_allclose(local.vectors, remote.vectors, atol=1e-5)
    marker = tmp_path / "killed"
    killed, _ = embed_kb(retriever, source, RayEngine(1), tmp_path / "killed-run",
                         shard_rows=10, embedder=_dying_once(str(marker)))
    assert marker.exists() and killed.pending == []
    ledger = json.loads((tmp_path / "killed-run" / "manifest.json").read_text())
    shards = len(local.plan.shards)  # every shard of about 10 rows, the killed one too
    assert sorted(ledger["shards"], key=int) == [str(i) for i in range(shards)] and shards > 2
    np.testing.assert_allclose(local.vectors, killed.vectors, atol=1e-5)
