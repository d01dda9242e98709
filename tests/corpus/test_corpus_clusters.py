"""cluster over a linked corpus (issue 19): memory-mapped vector shards, an IVF k-NN graph
whose edges are re-scored exactly, and the partition of arbo_coref over all mentions."""

import json

import numpy as np
import pytest
import spacy

from spacy_arboel.coref import Mention, MentionMemory, cluster_mentions, knn_graph
from spacy_arboel.coref.corpus_knn import ShardedVectors, edge_recall, mention_index
from spacy_arboel.corpus.linked_clusters import cluster_linked


def _clustered(n: int, dim: int = 16, centres: int = 40, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    means = 3 * rng.standard_normal((centres, dim))
    return (means[rng.integers(0, centres, n)]
            + rng.standard_normal((n, dim))).astype("float32")


def _shards(vectors: np.ndarray, folder, sizes) -> list:
    folder.mkdir(exist_ok=True)
    paths, start = [], 0
    for i, size in enumerate(sizes):
        paths.append(folder / f"s{i}.npy")
        np.save(paths[-1], vectors[start:start + size].astype("float16"))
        start += size
    return paths


def test_sharded_vectors_read_like_one_matrix(tmp_path):
    vectors = _clustered(50)
    paths = _shards(vectors, tmp_path, [20, 0, 30])
    np.save(tmp_path / "empty.npy", np.zeros((4, 0), "float16"))  # docs without vectors
    sharded = ShardedVectors([*paths, tmp_path / "empty.npy"])
    whole = np.concatenate([vectors.astype("float16").astype("float32"), np.zeros((4, 16))])
    assert sharded.shape == (54, 16)
    np.testing.assert_array_equal(sharded[15:52], whole[15:52])
    rows = np.array([53, 3, 25, 3, 49])
    np.testing.assert_array_equal(sharded.take(rows), whole[rows])
    np.save(tmp_path / "other.npy", np.zeros((2, 8), "float16"))
    with pytest.raises(ValueError, match="E137.*widths"):
        ShardedVectors([paths[0], tmp_path / "other.npy"])


def test_the_exact_graph_over_shards_is_brute_force_knn(tmp_path):
    vectors = _clustered(300)
    sharded = ShardedVectors(_shards(vectors, tmp_path, [100, 200]))
    neighbours, scores = knn_graph(sharded, 5, batch_size=64)
    vectors = sharded[0:300]  # as stored
    dots = vectors @ vectors.T
    np.fill_diagonal(dots, -np.inf)
    expected = np.argsort(-dots, axis=1, kind="stable")[:, :5]
    np.testing.assert_allclose(scores, np.take_along_axis(dots, expected, axis=1), rtol=1e-4)
    assert np.mean(neighbours == expected) > 0.99  # float ties aside
    in_memory, in_memory_scores = knn_graph(vectors, 5)
    assert (in_memory == neighbours).all()
    np.testing.assert_allclose(in_memory_scores, scores, rtol=1e-5)
    assert edge_recall(sharded, neighbours, sample=100) > 0.99


def test_the_ivf_graph_finds_most_edges_and_scores_them_exactly(tmp_path):
    vectors = _clustered(6_000)
    sharded = ShardedVectors(_shards(vectors, tmp_path, [2_500, 3_500]))
    index = mention_index(sharded, exact_max=1_000, nprobe=8)
    assert hasattr(index, "nprobe")  # the IVF path
    neighbours, scores = knn_graph(sharded, 8, index=index)
    assert edge_recall(sharded, neighbours, sample=300) > 0.9
    whole = sharded[0:6_000]
    rows = np.arange(0, 6_000, 97)
    np.testing.assert_allclose(
        scores[rows], np.einsum("qd,qkd->qk", whole[rows], whole[neighbours[rows]]),
        rtol=1e-5)
    assert (neighbours != np.arange(6_000)[:, None]).all()
    assert (np.diff(scores, axis=1) <= 1e-6).all()  # best first


def _linked_output(folder, docs, vectors) -> None:
    """A link-corpus --vectors output: docs (id, entities with candidates) in two shards."""
    folder.mkdir()
    half = len(docs) // 2
    row = 0
    shards = {}
    for name, part in (("a.jsonl", docs[:half]), ("b.jsonl", docs[half:])):
        n = sum(len(d["entities"]) for d in part)
        (folder / name).write_text("".join(json.dumps(d) + "\n" for d in part))
        np.save(folder / name.replace(".jsonl", ".vectors.npy"),
                vectors[row:row + n].astype("float16"))
        row += n
        shards[name] = {"docs": len(part)}
    (folder / "manifest.json").write_text(json.dumps({
        "settings": {"model": "m", "format": "jsonl", "vectors": True}, "shards": shards}))


def _toy_corpus(n_docs: int = 40, seed: int = 0):
    """Mentions around 6 entities, 2 of them missing from the KB (no candidate scores
    them best), with the linker's best candidate per mention."""
    rng = np.random.default_rng(seed)
    entity_vectors = 4 * rng.standard_normal((6, 16)).astype("float32")
    docs, vectors = [], []
    for d in range(n_docs):
        entities = []
        for m in range(3):
            truth = int(rng.integers(0, 6))
            vector = entity_vectors[truth] + 0.8 * rng.standard_normal(16)
            vectors.append(vector)
            scores = entity_vectors[:4] @ vector.astype("float16").astype("float32")
            best = int(np.argmax(scores))
            entities.append({"start": 10 * m, "end": 10 * m + 5, "text": "x", "label": "D",
                             "kb_id": f"E{best}", "score": float(scores[best]),
                             "candidates": [[f"E{best}", float(scores[best])]]})
        docs.append({"id": f"doc{d}", "entities": entities})
    return docs, np.asarray(vectors, "float32")


def test_clustering_a_linked_corpus_partitions_as_arbo_coref(tmp_path):
    docs, vectors = _toy_corpus()
    _linked_output(tmp_path / "linked", docs, vectors)
    summary = cluster_linked(tmp_path / "linked", tmp_path / "sampled", k=4, threshold=None,
                             recall_sample=50)
    assert summary.mentions == 120 and summary.edge_recall == 1.0
    # arbo_coref's clustering of the same mentions (vectors as stored, in float16)
    stored = vectors.astype("float16").astype("float32")
    half = len(docs) // 2  # a mention's key: its shard, its document's line, its offsets
    where = [f"a_{n + 1}" if n < half else f"b_{n - half + 1}" for n in range(len(docs))]
    mentions = [Mention(where[n], e["start"], e["end"], stored[i], int(e["kb_id"][1:]),
                        e["candidates"][0][1])
                for i, (n, e) in enumerate((n, e) for n, d in enumerate(docs)
                                           for e in d["entities"])]
    for threshold, out in ((None, "out"), (-120.0, "out2")):
        # λ = -120 keeps the edges between mentions of one entity (dot products ~250) and
        # drops the best-candidate edges of the 2 entities missing from the KB (< 120)
        summary = cluster_linked(tmp_path / "linked", tmp_path / out, k=4, threshold=threshold)
        found = [e["cluster"] for p in ("a.jsonl", "b.jsonl")
                 for line in (tmp_path / out / p).read_text().splitlines()
                 for e in json.loads(line)["entities"]]
        clustered, _ = cluster_mentions(
            MentionMemory(), MentionMemory.from_mentions(mentions),
            lambda position: f"E{position}", k=4, threshold=threshold,
            directed=True, same_doc_only=False, nil_prefix="NIL_")
        assert found == clustered.cluster_ids
        assert summary.discovered == len({c for c in found if c.startswith("NIL_")})
    assert summary.discovered > 0


def test_cluster_refuses_outputs_it_cannot_read(tmp_path):
    docs, vectors = _toy_corpus(4)
    _linked_output(tmp_path / "linked", docs, vectors)
    np.save(tmp_path / "linked" / "b.vectors.npy", vectors[:2].astype("float16"))
    with pytest.raises(ValueError, match="E136"):
        cluster_linked(tmp_path / "linked", tmp_path / "out")
    manifest = json.loads((tmp_path / "linked" / "manifest.json").read_text())
    manifest["settings"].pop("vectors")
    (tmp_path / "linked" / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ValueError, match="E135.*--vectors"):
        cluster_linked(tmp_path / "linked", tmp_path / "out")
    (tmp_path / "plain").mkdir()
    with pytest.raises(ValueError, match="E135"):
        cluster_linked(tmp_path / "plain", tmp_path / "out")


def test_new_entities_in_documents_with_the_same_id_stay_apart(tmp_path):
    """Issue 29, item 2: PubMed update files repeat PMIDs; two unrelated mentions without a
    KB entity, at the same offsets of two documents "1" in two shards, are two clusters."""
    entity = {"start": 0, "end": 4, "text": "x", "label": "D", "kb_id": "",
              "score": None, "candidates": []}
    docs = [{"id": "1", "entities": [entity]}, {"id": "1", "entities": [entity]}]
    vectors = np.zeros((2, 16), "float32")
    vectors[0, 0], vectors[1, 1] = 1.0, 1.0  # orthogonal: nothing joins them
    _linked_output(tmp_path / "linked", docs, vectors)
    summary = cluster_linked(tmp_path / "linked", tmp_path / "out", k=1, threshold=-0.5)
    found = [e["cluster"] for p in ("a.jsonl", "b.jsonl")
             for e in json.loads((tmp_path / "out" / p).read_text())["entities"]]
    assert len(set(found)) == 2 and summary.clusters == summary.discovered == 2
    assert all(c.startswith("NIL_") for c in found)


def test_cluster_reads_only_the_files_of_its_folder(tmp_path):
    """Issue 29, item 6: a manifest naming a file outside the folder is refused before
    anything is read or written; a truncated or foreign vector file is E139 naming it."""
    docs, vectors = _toy_corpus(4)
    (tmp_path / "elsewhere").mkdir()
    _linked_output(tmp_path / "linked", docs, vectors)
    (tmp_path / "linked" / "a.jsonl").rename(tmp_path / "elsewhere" / "x.jsonl")
    (tmp_path / "linked" / "a.vectors.npy").rename(tmp_path / "elsewhere" / "x.vectors.npy")
    manifest = json.loads((tmp_path / "linked" / "manifest.json").read_text())
    for name in ("../elsewhere/x.jsonl", "/etc/passwd", "sub/a.jsonl", "a.vectors.npy"):
        manifest["shards"] = {name: {"docs": 2}, "b.jsonl": {"docs": 2}}
        (tmp_path / "linked" / "manifest.json").write_text(json.dumps(manifest))
        with pytest.raises(ValueError, match="E135.*not a .jsonl file of the folder"):
            cluster_linked(tmp_path / "linked", tmp_path / "out")
    (tmp_path / "linked" / "link.jsonl").symlink_to(tmp_path / "elsewhere" / "x.jsonl")
    manifest["shards"] = {"link.jsonl": {"docs": 2}, "b.jsonl": {"docs": 2}}
    (tmp_path / "linked" / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ValueError, match="E135"):
        cluster_linked(tmp_path / "linked", tmp_path / "out")
    assert not (tmp_path / "out").exists()
    manifest["shards"] = {"b.jsonl": {"docs": 2}}
    (tmp_path / "linked" / "manifest.json").write_text(json.dumps(manifest))
    vector_file = tmp_path / "linked" / "b.vectors.npy"
    vector_file.write_bytes(vector_file.read_bytes()[:-40])  # truncated
    with pytest.raises(ValueError, match="E139.*b.vectors.npy"):
        cluster_linked(tmp_path / "linked", tmp_path / "out")
    vector_file.write_text("not numpy")
    with pytest.raises(ValueError, match="E139.*b.vectors.npy"):
        cluster_linked(tmp_path / "linked", tmp_path / "out")


@pytest.mark.parametrize("line, problem", [
    ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
    ('{"id": "x", "entities": [{"start": 0}]}', "KeyError"),
    ('{"id": "x"}', '"entities" list')])
def test_cluster_names_the_shard_line_it_cannot_read(tmp_path, line, problem):
    """Issue 29, item 4: a hostile line of a linked shard is E135 naming its line."""
    docs, vectors = _toy_corpus(4)
    _linked_output(tmp_path / "linked", docs, vectors)
    shard = tmp_path / "linked" / "b.jsonl"
    shard.write_text(shard.read_text() + line + "\n")
    with pytest.raises(ValueError, match=f"E135.*b.jsonl .*line 3: .*{problem}"):
        cluster_linked(tmp_path / "linked", tmp_path / "out")


@pytest.fixture
def ruler_linker(saved_linker, tmp_path):
    """The toy linker behind an entity ruler that finds the toy KB's names in raw text."""
    nlp = spacy.load(saved_linker / "pipeline")
    ruler = nlp.add_pipe("entity_ruler", first=True)
    ruler.add_patterns([{"label": "Disease", "pattern": [{"LOWER": word}]}
                        for word in ("cough", "fever", "pain", "pyrexia")])
    nlp.to_disk(tmp_path / "ruler-linker")
    return tmp_path / "ruler-linker"


def test_link_corpus_vectors_then_cluster_from_the_command_line(ruler_linker, tmp_path, cli):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    texts = ["Fever and cough.", "Pain, then fever.", "No finding.", "Pyrexia and pain."]
    (corpus / "s.jsonl").write_text("".join(json.dumps({"id": f"d{i}", "text": t}) + "\n"
                                            for i, t in enumerate(texts)))
    linked = cli("link-corpus", ruler_linker, corpus, tmp_path / "linked", "--vectors")
    assert linked.exit_code == 0, linked.output
    stored = np.load(tmp_path / "linked" / "s.vectors.npy")
    assert stored.shape == (6, 32) and stored.dtype == np.float16 and np.abs(stored).sum() > 0
    result = cli("cluster", tmp_path / "linked", tmp_path / "clustered", "--model", ruler_linker,
                 "--recall-sample", "6")
    assert result.exit_code == 0, result.output
    assert "mentions" in result.output and "edge recall" in result.output
    records = [json.loads(line) for line in
               (tmp_path / "clustered" / "s.jsonl").read_text().splitlines()]
    assert [len(r["entities"]) for r in records] == [2, 2, 0, 2]
    assert all(e["cluster"] for r in records for e in r["entities"])
    refused = cli("cluster", tmp_path / "linked", tmp_path / "linked" / "inside")
    assert refused.exit_code == 1 and "E041" in refused.output
    no_vectors = cli("link-corpus", ruler_linker, corpus, tmp_path / "docbin", "--vectors",
                     "--format", "spacy")
    assert no_vectors.exit_code == 1 and "--format jsonl" in no_vectors.output


def _names(folder) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def test_cluster_does_not_write_into_another_link_corpus_output(tmp_path, cli):
    """Issue 40, item 3: `cluster LINKED OUTPUT` wrote into a folder holding another
    link-corpus run's shards, replacing them under that run's manifest, exit 0."""
    docs, vectors = _toy_corpus(6)
    _linked_output(tmp_path / "linked", docs, vectors)
    _linked_output(tmp_path / "other", docs, vectors)
    before = {p.name: p.read_bytes() for p in (tmp_path / "other").iterdir()}
    with pytest.raises(ValueError, match=r"E244.*manifest\.json"):
        cluster_linked(tmp_path / "linked", tmp_path / "other", k=2)
    result = cli("cluster", tmp_path / "linked", tmp_path / "other", "--model", tmp_path / "m")
    assert result.exit_code == 1 and "[E244]" in result.output, result.output
    assert {p.name: p.read_bytes() for p in (tmp_path / "other").iterdir()} == before
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.jsonl").write_text("{}\n")  # no clusters.json: not ours
    with pytest.raises(ValueError, match="E244"):
        cluster_linked(tmp_path / "linked", tmp_path / "mine", k=2)
    assert _names(tmp_path / "mine") == ["notes.jsonl"]


def test_cluster_replaces_an_earlier_cluster_output_whole(tmp_path):
    docs, vectors = _toy_corpus(6)
    _linked_output(tmp_path / "linked", docs, vectors)
    (tmp_path / "out").mkdir()  # an empty folder is taken
    cluster_linked(tmp_path / "linked", tmp_path / "out", k=2)
    assert _names(tmp_path / "out") == ["a.jsonl", "b.jsonl", "clusters.json"]
    (tmp_path / "out" / "stale.jsonl").write_text("{}\n")
    cluster_linked(tmp_path / "linked", tmp_path / "out", k=3)
    assert _names(tmp_path / "out") == ["a.jsonl", "b.jsonl", "clusters.json"]
    about = json.loads((tmp_path / "out" / "clusters.json").read_text())
    assert about["settings"]["k"] == 3 and about["mentions"] == 18
    assert _names(tmp_path) == ["linked", "out"]  # no temporary folder left
