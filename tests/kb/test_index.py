"""The FAISS index: exact and HNSW search, several rows per entity, staleness checks."""

import numpy as np
import pytest

from spacy_arboel.kb.index import (
    DenseIndex,
    IndexMeta,
    blas_search,
    compact,
    half_grid,
    near_duplicate_rows,
    text_duplicate_rows,
)


def _meta(n, kind="flat", granularity="entity"):
    return IndexMeta("kb1", "enc1", 8, n, kind, granularity, "names")


@pytest.mark.parametrize("kind", ["flat", "hnsw", "ivf"])
def test_search_finds_exact_neighbours(kind):
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(50, 8)).astype("float32")
    # nprobe covers every cell of this small index, so IVF is exact here too
    index = DenseIndex(vectors, np.arange(50), _meta(50, kind), nprobe=64)
    scores, ids = index.search(vectors[:5], 3)
    expected = np.argsort(-(vectors[:5] @ vectors.T), axis=1)[:, :3]
    assert (ids == expected).all()
    assert np.allclose(scores[:, 0], (vectors[:5] * vectors[expected[:, 0]]).sum(1), atol=1e-4)


def test_alias_rows_are_merged_per_entity():
    vectors = np.eye(4, 8, dtype="float32")
    owners = np.array([0, 0, 1, 2])  # entity 0 has two rows
    index = DenseIndex(vectors, owners, _meta(4, granularity="alias"))
    query = (vectors[0] + 0.9 * vectors[1] + 0.5 * vectors[2])[None, :]
    scores, ids = index.search(query, 3)
    assert ids[0].tolist() == [0, 1, 2]
    assert scores[0][0] == pytest.approx(1.0)
    assert len(index) == 3


def test_k_larger_than_kb_is_clipped():
    index = DenseIndex(np.eye(2, 8, dtype="float32"), np.arange(2), _meta(2))
    _, ids = index.search(np.ones((1, 8), "float32"), 64)
    assert ids.shape == (1, 2)


def test_empty_kb_is_an_error():
    with pytest.raises(ValueError, match="empty"):
        DenseIndex(np.zeros((0, 8), "float32"), np.zeros(0, "int64"), _meta(0))


def test_round_trip_and_mismatch(tmp_path):
    vectors = np.random.default_rng(1).normal(size=(10, 8)).astype("float32")
    index = DenseIndex(vectors, np.arange(10), _meta(10))
    index.to_disk(tmp_path / "index")
    loaded = DenseIndex.from_disk(tmp_path / "index", expected=_meta(10))
    assert np.array_equal(loaded.search(vectors, 4)[1], index.search(vectors, 4)[1])
    other = IndexMeta("kb2", "enc1", 8, 10, "flat", "entity", "names")
    with pytest.raises(ValueError, match="does not match the pipeline"):
        DenseIndex.from_disk(tmp_path / "index", expected=other)


def test_alias_merge_agrees_with_a_plain_loop():
    rng = np.random.default_rng(3)
    vectors = rng.normal(size=(200, 8)).astype("float32")
    owners = rng.integers(0, 40, size=200)
    owners[:40] = np.arange(40)  # every entity owns at least one row
    index = DenseIndex(vectors, owners, _meta(200, granularity="alias"))
    queries = rng.normal(size=(6, 8)).astype("float32")
    scores, ids = index.search(queries, 5)
    for q in range(6):
        best: dict[int, float] = {}
        for row, score in enumerate(vectors @ queries[q]):
            best[owners[row]] = max(best.get(owners[row], -np.inf), score)
        expected = sorted(best, key=best.get, reverse=True)[:5]
        assert ids[q].tolist() == expected
        assert np.allclose(scores[q], [best[e] for e in expected], atol=1e-4)


def test_ivf_index_is_approximate_but_close():
    rng = np.random.default_rng(2)
    vectors = rng.normal(size=(4000, 16)).astype("float32")
    exact = DenseIndex(vectors, np.arange(4000), _meta(4000))
    ivf = DenseIndex(vectors, np.arange(4000), _meta(4000, "ivf"), nprobe=8)
    queries = vectors[:200] + rng.normal(0, 0.1, size=(200, 16)).astype("float32")
    assert ivf.index.nlist < 4000 and ivf.index.nprobe == 8
    agree = (exact.search(queries, 1)[1] == ivf.search(queries, 1)[1]).mean()
    assert agree > 0.8


def test_saved_index_can_be_loaded_as_another_kind(tmp_path):
    vectors = np.random.default_rng(1).normal(size=(100, 8)).astype("float32")
    DenseIndex(vectors, np.arange(100), _meta(100)).to_disk(tmp_path / "index")
    loaded = DenseIndex.from_disk(tmp_path / "index", kind="hnsw")
    assert loaded.meta.kind == "hnsw"


def test_vectors_on_float16s_grid_are_saved_in_half_the_bytes_and_load_alike(tmp_path):
    """Issue 62 item 4: an index's own vectors (``half_grid``) save as float16 and load as
    the same float32 values; vectors off the grid (an index saved before) are never rounded
    on saving, and a value beyond float16's range keeps its float32."""
    vectors = np.random.default_rng(2).normal(size=(50, 8)).astype("float32")
    vectors[0, 0] = 1e6
    rounded = half_grid(vectors)
    assert rounded[0, 0] == 1e6 and np.abs(rounded[1:] - vectors[1:]).max() < 5e-3
    for given, dtype in ((rounded[1:], np.float16), (vectors[1:], np.float32),
                         (rounded, np.float32)):
        assert compact(given).dtype == dtype
        DenseIndex(given, np.arange(len(given)), _meta(len(given))).to_disk(tmp_path / "i")
        assert np.load(tmp_path / "i" / "embeddings.npy").dtype == dtype
        loaded = DenseIndex.from_disk(tmp_path / "i")
        assert loaded.embeddings.dtype == np.float32
        np.testing.assert_array_equal(loaded.embeddings, given)


def test_near_duplicate_rows_of_one_entity_are_dropped():
    base = np.eye(4, 8, dtype="float32")
    vectors = np.vstack([base[0], base[0] * 2.0, base[1], base[0], base[0] + 0.01 * base[2]])
    owners = np.array([0, 0, 0, 1, 1])
    # row 1 duplicates row 0 (same direction), row 4 nearly duplicates row 3;
    # row 3 equals row 0 but belongs to another entity
    keep = near_duplicate_rows(vectors, owners, 0.97)
    assert keep.tolist() == [0, 2, 3]
    assert near_duplicate_rows(vectors[keep], owners[keep], 0.97).tolist() == [0, 1, 2]
    assert near_duplicate_rows(vectors, owners, 1.01).tolist() == [0, 1, 2, 3, 4]


def test_rows_of_an_entitys_words_again_are_not_embedded():
    texts = ["Carcinoma, Hepatocellular", "hepatocellular carcinoma", "Liver Cell Carcinoma",
             "Carcinoma, Liver Cell", "carcinoma of the liver",  # entity 0
             "Acid, Ascorbic", "Ascorbic Acid", "ascorbic acid", "Vitamin C",  # entity 1
             "Hepatocellular carcinoma"]  # entity 2: another entity's words are its own
    owners = np.array([0, 0, 0, 0, 0, 1, 1, 1, 1, 2])
    # the name row always; one natural-order row of a name's words besides an inverted one
    assert text_duplicate_rows(texts, owners).tolist() == [0, 1, 2, 4, 5, 6, 8, 9]
    assert text_duplicate_rows(texts[:1], owners[:1]).tolist() == [0]
    # a plural "s" aside, not that of "-ss", "-us", "-is" words or of 3-letter ones
    plural = ["Anemia, Hemolytic", "Anemias, Hemolytic", "hemolytic anemias", "virus",
              "viru", "ADS", "ad", "AIDS", "aid"]
    assert text_duplicate_rows(plural, np.array([0, 0, 0, 1, 1, 2, 2, 3, 3])).tolist() == [
        0, 2, 3, 4, 5, 6, 7]


def test_saved_index_is_deduplicated_on_load(tmp_path):
    vectors = np.vstack([np.eye(3, 8, dtype="float32"), np.eye(3, 8, dtype="float32")])
    owners = np.array([0, 1, 2, 0, 1, 2])
    DenseIndex(vectors, owners, _meta(6, granularity="alias")).to_disk(tmp_path / "index")
    loaded = DenseIndex.from_disk(tmp_path / "index", dedupe_threshold=0.97)
    assert loaded.meta.n_rows == 3 and loaded.rows.tolist() == [0, 1, 2]
    assert loaded.search(vectors[:3], 1)[1].ravel().tolist() == [0, 1, 2]
    assert loaded.meta.dedupe_threshold == 0.97


def test_rows_deduplicated_at_save_are_not_scanned_again(tmp_path, monkeypatch):
    """Rows that passed threshold t pass any t' >= t: loading skips the pass; a stricter
    threshold still runs it."""
    from dataclasses import replace

    import spacy_arboel.kb.index as index_module

    base = np.eye(4, 8, dtype="float32")
    vectors = np.vstack([base[0], base[0] + 0.3 * base[1], base[2], base[3]])
    owners = np.array([0, 0, 1, 2])  # rows 0 and 1 have cosine 0.958
    meta = replace(_meta(4, granularity="alias"), dedupe_threshold=0.97)
    DenseIndex(vectors, owners, meta).to_disk(tmp_path / "index")
    calls = []
    real = index_module.near_duplicate_rows
    monkeypatch.setattr(index_module, "near_duplicate_rows",
                        lambda *a: calls.append(a[2]) or real(*a))
    same = DenseIndex.from_disk(tmp_path / "index", dedupe_threshold=0.99)
    assert calls == [] and same.meta.n_rows == 4
    stricter = DenseIndex.from_disk(tmp_path / "index", dedupe_threshold=0.95)
    assert calls == [0.95] and stricter.meta.n_rows == 3
    assert stricter.meta.dedupe_threshold == 0.95


def test_small_batches_search_with_blas_and_restore_the_setting():
    import faiss

    before = faiss.cvar.distance_compute_blas_threshold
    with blas_search():
        assert faiss.cvar.distance_compute_blas_threshold == 20
    assert faiss.cvar.distance_compute_blas_threshold == before
    vectors = np.random.default_rng(4).normal(size=(300, 8)).astype("float32")
    index = DenseIndex(vectors, np.arange(300), _meta(300))
    rows = index.search_rows(vectors[:3], 2)
    assert rows[:, 0].tolist() == np.argmax(vectors[:3] @ vectors.T, axis=1).tolist()
