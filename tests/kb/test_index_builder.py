"""FAISS indexes for large KBs (issue 19): the kind chosen by size, built from a memory map,
saved and loaded memory-mapped, and their recall against exact search."""

import numpy as np
import pytest

from spacy_arboel.kb.index_builder import (
    build_index,
    choose_factory,
    exact_top,
    ivf_cells,
    load_index,
    recall_against_exact,
    save_index,
)


def _clustered(n: int, dim: int = 32, centres: int = 50, seed: int = 0) -> np.ndarray:
    """Unit vectors around random centres, as entity embeddings are."""
    rng = np.random.default_rng(seed)
    means = rng.standard_normal((centres, dim))
    x = means[rng.integers(0, centres, n)] + 0.3 * rng.standard_normal((n, dim))
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype("float32")


def test_the_kind_follows_the_number_of_rows():
    assert choose_factory(62_000, 384) == "Flat"
    assert choose_factory(500_000, 384) == "HNSW32,Flat"
    assert choose_factory(5_000_000, 384) == "IVF8192_HNSW32,PQ48x8,Refine(SQ8)"
    assert choose_factory(200_000, 384, "ivfpq", pq_bytes=96,
                          refine=False) == "IVF2048,PQ96x8"
    assert ivf_cells(1_000) == 25  # never more cells than 39 training points each allow
    with pytest.raises(ValueError, match="E007"):
        choose_factory(10, 8, "lsh")
    with pytest.raises(ValueError, match="E011"):
        choose_factory(10_000, 384, "ivfpq", pq_bytes=7)
    with pytest.raises(ValueError, match="E011.*ivfpq.*use flat"):
        choose_factory(200, 384, "ivfpq")


def test_exact_top_scans_in_batches_like_one_search():
    vectors, queries = _clustered(3_000), _clustered(20, seed=1)
    whole = exact_top(vectors, queries, 5, batch_size=10_000)
    assert np.array_equal(exact_top(vectors, queries, 5, batch_size=700), whole)
    assert np.array_equal(whole[:, 0], np.argmax(queries @ vectors.T, axis=1))


@pytest.mark.parametrize("kind,refine", [
    ("flat", False), ("hnsw", False),
    pytest.param("ivfpq", False, marks=pytest.mark.slow),  # PQ codebooks: k-means, seconds
    pytest.param("ivfpq", True, marks=pytest.mark.slow)])
def test_an_index_built_from_a_memory_map_saves_loads_mapped_and_searches_alike(
        kind, refine, tmp_path):
    vectors = _clustered(8_000)
    np.save(tmp_path / "vectors.npy", vectors)
    mapped = np.load(tmp_path / "vectors.npy", mmap_mode="r")
    factory = choose_factory(len(mapped), mapped.shape[1], kind, pq_bytes=8, refine=refine)
    index = build_index(mapped, factory, batch_size=1_000)
    assert index.ntotal == len(vectors)
    queries = _clustered(100, seed=2)
    before = index.search(queries, 10)[1]
    save_index(index, tmp_path / "index.faiss")
    loaded = load_index(tmp_path / "index.faiss")
    assert np.array_equal(loaded.search(queries, 10)[1], before)
    recall = recall_against_exact(loaded, mapped, queries)
    if kind == "flat":
        assert recall == {"recall@1": 1.0, "recall@64": 1.0}
    else:  # approximate: most exact neighbours found, more of them at 64
        assert 0.5 < recall["recall@1"] <= recall["recall@64"] <= 1.0


@pytest.mark.slow
def test_the_refine_stage_re_ranks_pq_candidates_by_finer_codes(tmp_path):
    import faiss

    vectors, queries = _clustered(8_000), _clustered(200, seed=3)
    exact = exact_top(vectors, queries, 1)[:, 0]
    found = {}
    for refine in (False, True):
        factory = choose_factory(len(vectors), vectors.shape[1], "ivfpq", pq_bytes=4,
                                 refine=refine)
        save_index(build_index(vectors, factory), tmp_path / f"{refine}.faiss")
        index = load_index(tmp_path / f"{refine}.faiss", nprobe=7)
        assert faiss.extract_index_ivf(index).nprobe == 7  # reached through the Refine
        found[refine] = recall_against_exact(index, vectors, queries, exact=exact)
        scores, rows = index.search(queries, 5)
    # 4-byte PQ codes blur the neighbours; the SQ8 re-ranking of the same candidates
    # restores the order, and its scores are the dot products within SQ8's precision
    assert found[True]["recall@1"] > found[False]["recall@1"] + 0.1
    assert found[True]["recall@64"] == found[False]["recall@64"]
    np.testing.assert_allclose(scores, np.einsum("qd,qkd->qk", queries, vectors[rows]),
                               rtol=0.02, atol=0.05)
