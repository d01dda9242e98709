"""FAISS indexes for KBs of millions of rows (issue 19): the index kind chosen by size as the
FAISS guidelines advise, built from vectors that may be memory-mapped (trained on a sample,
added in batches), saved in FAISS's own format and loaded memory-mapped, and the recall of an
approximate index against exact search on the same vectors. No spaCy here.

FAISS guidelines ("Guidelines to choose an index", faiss wiki): exact search while it is
affordable; HNSW when memory allows the vectors plus the graph; inverted lists with
product-quantised codes when it does not, with K between 4·√N and 16·√N cells below 1M
vectors and 65,536 cells from 1M to 10M, each cell trained on at least 39 points.

Deviation (BENCHMARKS.md): we keep K = 4·√N cells above 1M too (8,192 at 5M) and train
k-means on 64 points per cell. The guidelines' 65,536 cells need k-means over at least 2.5M
points against 65,536 centroids, days of work on a 2-core CPU (they assume a GPU); 4·√N
cells train in minutes, and searching 32 of them keeps recall@64 near 1 on our rows. From
1M rows the coarse quantizer is an HNSW graph over the centroids (``IVF…_HNSW32``), as the
guidelines advise, which makes adding millions of rows cheap. By default the PQ index gets a
refinement stage (``…,Refine(SQ8)``, the guidelines' re-ranking of PQ results with finer
codes): the rows its PQ codes propose are re-scored from 8-bit scalar-quantised vectors, which
lifts recall@1 against exact search from 0.77 to 0.94 at 1M MeSH-like rows (BENCHMARKS.md)
for 384 more bytes per row, memory-mapped.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import numpy as np

from ..errors import Errors

# the one vocabulary of index kinds (a component's ``index_kind``, ``build-index --kind``)
INDEX_KINDS = ("auto", "flat", "hnsw", "ivf", "ivfpq")
HNSW_M = 32  # graph neighbours per node (BLINK §5.2.3's HNSW setting)
HNSW_EF_CONSTRUCTION = 2 * HNSW_M
EXACT_MAX_ROWS = 100_000  # the MeSH index (62k rows) is searched exactly (BENCHMARKS.md)
HNSW_MAX_ROWS = 1_000_000  # from here IVF-PQ: the fp32 vectors alone pass 1.5 GB at 384-d
MIN_POINTS_PER_CELL = 39  # FAISS warns below this many training points per cell
TRAIN_POINTS_PER_CELL = 64  # k-means sample per cell (the guidelines: 30 to 256)
NPROBE = 32  # IVF cells visited per query (the one default of every search and build)
EF_SEARCH = 128  # HNSW candidate list at search time
PQ_CENTROIDS = 256  # an 8-bit PQ codebook's centroids
PQ_TRAIN_POINTS = 39 * PQ_CENTROIDS  # 39 training points per centroid


def ivf_cells(n_rows: int) -> int:
    """Inverted-list cells for ``n_rows`` vectors: 4·√N as a power of two (see the module
    docstring for why above 1M too), never more than the training points allow."""
    cells = 2 ** round(math.log2(max(1.0, 4 * math.sqrt(n_rows))))
    return max(1, min(cells, n_rows // MIN_POINTS_PER_CELL))


def check_kind(kind: str) -> str:
    """``kind`` if it is one of ``INDEX_KINDS`` (E007 otherwise)."""
    if kind not in INDEX_KINDS:
        raise ValueError(Errors.E007.format(what="index kind", value=kind,
                                            options=", ".join(INDEX_KINDS)))
    return kind


def resolve_kind(n_rows: int, kind: str = "auto") -> str:
    """``kind``, or for ``auto`` the kind for ``n_rows``: flat up to 100k rows, HNSW up to
    1M, IVF-PQ above."""
    check_kind(kind)
    if kind != "auto":
        return kind
    return "flat" if n_rows <= EXACT_MAX_ROWS else "hnsw" if n_rows < HNSW_MAX_ROWS else "ivfpq"


def choose_factory(n_rows: int, dim: int, kind: str = "auto", pq_bytes: int | None = None,
                   refine: bool = True) -> str:
    """The FAISS ``index_factory`` string for ``n_rows`` vectors of ``dim`` dimensions:
    ``flat`` (exact), ``hnsw`` (HNSW32 over the full vectors), ``ivf`` (IVF cells over the full
    vectors, ``ivf_cells``) or ``ivfpq`` (IVF cells, codes of
    ``pq_bytes`` bytes, default dim / 8, i.e. 32× smaller than fp32, and with ``refine`` the
    fetched rows re-scored from SQ8 codes); ``auto`` picks flat up to 100k rows, HNSW up to
    1M, IVF-PQ above."""
    kind = resolve_kind(n_rows, kind)
    if kind == "flat":
        return "Flat"
    if kind == "hnsw":
        return f"HNSW{HNSW_M},Flat"
    if kind == "ivf":
        return f"IVF{ivf_cells(n_rows)},Flat"
    if n_rows < PQ_CENTROIDS:
        raise ValueError(Errors.E011.format(
            name="the number of rows for --kind ivfpq",
            condition=f"at least {PQ_CENTROIDS} (the PQ codebooks' centroids; use flat)",
            value=n_rows))
    pq_bytes = pq_bytes or max(1, dim // 8)
    if dim % pq_bytes:
        raise ValueError(Errors.E011.format(name="pq_bytes", condition=f"a divisor of {dim}",
                                            value=pq_bytes))
    cells = ivf_cells(n_rows)
    quantizer = "_HNSW32" if n_rows >= HNSW_MAX_ROWS else ""
    return f"IVF{cells}{quantizer},PQ{pq_bytes}x8" + (",Refine(SQ8)" if refine else "")


def build_index(vectors: np.ndarray, factory: str, *, rows: np.ndarray | None = None,
                train_size: int | None = None, batch_size: int = 65_536, seed: int = 0,
                nprobe: int = NPROBE, ef_search: int = EF_SEARCH,
                on_rows: Callable[[int], object] | None = None):
    """An inner-product FAISS index over ``vectors`` (an array or a read-only memory map),
    or over its ``rows`` (increasing positions) when given: trained on a random sample of
    ``train_size`` rows (default: 64 per IVF cell and at least what the PQ codebooks need,
    at most all), then filled ``batch_size`` rows at a time so that a memory-mapped matrix is
    never read whole; ``on_rows(n)`` after each batch added."""
    import faiss

    n_rows, dim = (len(rows), vectors.shape[1]) if rows is not None else vectors.shape
    def take(part):  # a slice or sorted positions of the rows indexed
        return vectors[part] if rows is None else vectors[rows[part]]

    index = faiss.index_factory(dim, factory, faiss.METRIC_INNER_PRODUCT)
    hnsw = getattr(faiss.downcast_index(index), "hnsw", None)
    if hnsw is not None:
        hnsw.efConstruction = HNSW_EF_CONSTRUCTION
    if not index.is_trained:
        ivf = faiss.extract_index_ivf(index)
        wanted = train_size or max(TRAIN_POINTS_PER_CELL * ivf.nlist, PQ_TRAIN_POINTS)
        sample = np.sort(np.random.default_rng(seed).choice(n_rows, min(wanted, n_rows),
                                                            replace=False))
        index.train(np.ascontiguousarray(take(sample), dtype="float32"))
    for start in range(0, n_rows, batch_size):
        stop = min(start + batch_size, n_rows)
        index.add(np.ascontiguousarray(take(slice(start, stop)), dtype="float32"))
        if on_rows is not None:
            on_rows(stop - start)
    set_search_params(index, nprobe=nprobe, ef_search=ef_search)
    return index


def set_search_params(index, *, nprobe: int = NPROBE, ef_search: int = EF_SEARCH) -> None:
    """Cells searched (IVF) and the candidate list of the graph search (HNSW)."""
    import faiss

    try:
        ivf = faiss.extract_index_ivf(index)
    except RuntimeError:
        ivf = None
    if ivf is not None:
        ivf.nprobe = min(nprobe, ivf.nlist)
    hnsw = getattr(faiss.downcast_index(index), "hnsw", None)
    if hnsw is not None:
        hnsw.efSearch = ef_search


def save_index(index, path: str | Path) -> None:
    """FAISS's own file format (no pickle); an index on a GPU is written from a CPU copy
    (FAISS writes no GPU index)."""
    import faiss

    if "Gpu" in type(faiss.downcast_index(index)).__name__:
        index = faiss.index_gpu_to_cpu(index)
    faiss.write_index(index, str(path))


def load_index(path: str | Path, *, mmap: bool = True, nprobe: int = NPROBE,
               ef_search: int = EF_SEARCH):
    """A saved index, memory-mapped where FAISS allows it (flat codes, HNSW storage, IVF
    lists), so that loading costs no copy of the vectors; read-only."""
    import faiss

    flags = 0
    if mmap:  # IVF files (fourcc "Iw…") map their lists; flat and HNSW storage their codes
        with open(path, "rb") as file_:
            ivf = file_.read(2) == b"Iw"
        flags = faiss.IO_FLAG_MMAP | faiss.IO_FLAG_READ_ONLY if ivf else faiss.IO_FLAG_MMAP_IFC
    index = faiss.read_index(str(path), flags)
    set_search_params(index, nprobe=nprobe, ef_search=ef_search)
    return index


def exact_top(vectors: np.ndarray, queries: np.ndarray, k: int,
              batch_size: int = 262_144) -> np.ndarray:
    """The exact top-``k`` rows of each query by inner product, scanning ``vectors`` (which
    may be memory-mapped) ``batch_size`` rows at a time."""
    import faiss

    queries = np.ascontiguousarray(queries, dtype="float32")
    best_scores = np.full((len(queries), k), -np.inf, dtype="float32")
    best_rows = np.full((len(queries), k), -1, dtype="int64")
    for start in range(0, len(vectors), batch_size):
        block = np.ascontiguousarray(vectors[start:start + batch_size], dtype="float32")
        scores, rows = faiss.knn(queries, block, min(k, len(block)),
                                 metric=faiss.METRIC_INNER_PRODUCT)
        merged_scores = np.concatenate([best_scores, scores], axis=1)
        merged_rows = np.concatenate([best_rows, np.where(rows >= 0, rows + start, -1)], axis=1)
        order = np.argsort(-merged_scores, axis=1, kind="stable")[:, :k]
        best_scores = np.take_along_axis(merged_scores, order, axis=1)
        best_rows = np.take_along_axis(merged_rows, order, axis=1)
    return best_rows


def recall_against_exact(index, vectors: np.ndarray, queries: np.ndarray,
                         ks: tuple[int, ...] = (1, 64), exact: np.ndarray | None = None
                         ) -> dict[str, float]:
    """Recall@k of ``index`` against exact search on the same ``vectors``: the share of
    queries whose exact nearest row (``exact``, else found here) is among the index's top
    k."""
    if exact is None:
        exact = exact_top(vectors, queries, 1)[:, 0]
    _, found = index.search(np.ascontiguousarray(queries, dtype="float32"), max(ks))
    return {f"recall@{k}": float(np.mean([exact[i] in found[i, :k]
                                          for i in range(len(queries))]))
            for k in ks}
