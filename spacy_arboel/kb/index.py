"""A FAISS inner-product index over entity rows, with the metadata to detect staleness.

Exact search (``IndexFlatIP``) by default, as BLINK's exact setting; HNSW (BLINK §5.2.3),
IVF (inverted lists over k-means cells, ``nprobe`` cells searched) and IVF-PQ as approximate
options for large KBs on a CPU, all built by ``index_builder`` through
``faiss.index_factory``. Several rows may belong to one entity (alias granularity):
searching returns entities, each scored by its best row. GPU FAISS is used when it is
installed and a GPU is visible.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import warnings
import weakref
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np

from ..errors import Errors, Warnings
from .index_builder import (
    EF_SEARCH,
    HNSW_MAX_ROWS,
    NPROBE,
    build_index,
    choose_factory,
    load_index,
    save_index,
)

FAISS_FILE = "index.faiss"


@dataclass(frozen=True)
class IndexMeta:
    """What an index was built from (each setting as the linker that built it had it: no
    default here); a mismatch with the pipeline is an error (E004)."""

    kb_fingerprint: str
    encoder_fingerprint: str
    dim: int
    n_rows: int
    kind: str
    granularity: str
    # the encoders' inputs the rows were embedded for (``encoders.inputs``)
    inputs: str
    # the near-duplicate threshold the saved rows already passed (None: not de-duplicated)
    dedupe_threshold: float | None = None
    # the FAISS factory string of an index built apart and saved as index.faiss (None: built
    # from embeddings.npy when loaded)
    factory: str | None = None

    @property
    def built_apart(self) -> bool:
        return self.factory is not None


def _faiss():
    import faiss

    return faiss


@contextmanager
def blas_search() -> Iterator[None]:
    """Let exhaustive search use BLAS for small query batches too.

    FAISS (1.15) only switches to its matrix-multiply path above a work threshold; below it,
    a batch of a few hundred queries over 100k rows runs ~15x slower per query (measured:
    5.1 vs 0.36 ms), which is what a single ``nlp(text)`` call hits. FAISS's own default for
    this knob was 20 queries before; we restore whatever was set when we are done.
    """
    cvar = _faiss().cvar
    saved = cvar.distance_compute_blas_threshold
    cvar.distance_compute_blas_threshold = 20
    try:
        yield
    finally:
        cvar.distance_compute_blas_threshold = saved


def singular(word: str) -> str:
    """A word without an English plural's final "s" (not of "-ss", "-us", "-is" words, nor of
    words of 3 letters or fewer): "anemias" and "anemia", "adjuvants" and "adjuvant"."""
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def word_key(text: str) -> tuple[str, ...]:
    """A row's words, case, punctuation, order and plural "s" aside (``text_duplicate_rows``;
    compared within one entity's rows only)."""
    return tuple(sorted(singular(w) for w in re.findall(r"\w+", text.casefold())))


def text_duplicate_rows(texts: Sequence[str], owners: np.ndarray) -> np.ndarray:
    """Rows to embed, before any is: a row is left out when a kept row of the same entity has
    the same words (``word_key``: MeSH's "Carcinoma, Hepatocellular" and "Hepatocellular
    Carcinoma", "Drug-Induced" and "drug induced", "Anemias, Hemolytic" and "hemolytic
    anemia"), except that the first row in natural order (no comma) is kept where its group's
    kept rows all have one. The first row of each entity (its name row) is always kept, and
    the result is sorted, as ``near_duplicate_rows``'s. Such rows are half of the MeSH +
    synonyms KB's alias rows (137,346 of its 244,226 rows are embedded; BENCHMARKS.md, issue
    43): left out, the KB embeds in less time and links with fewer rows, in-KB R@1
    unchanged."""
    kept: list[int] = []
    has_natural: dict[tuple[int, tuple[str, ...]], bool] = {}  # per (entity, words)
    for row, (text, owner) in enumerate(zip(texts, owners, strict=True)):
        key, natural = (int(owner), word_key(text)), "," not in text
        if key not in has_natural or (natural and not has_natural[key]):
            has_natural[key] = natural or has_natural.get(key, False)
            kept.append(row)
    return np.asarray(kept, dtype="int64")


def near_duplicate_rows(embeddings: np.ndarray, owners: np.ndarray, threshold: float) -> np.ndarray:
    """Rows to keep: a row is dropped when an earlier kept row of the same entity has cosine
    similarity >= ``threshold`` with it (spelling variants of one alias embed alike).

    The first row of each entity (its name row) is always kept, and the result is sorted,
    so ``DenseIndex.entity_vectors`` still sees the name rows.
    """
    owners = np.asarray(owners)
    unit = embeddings / np.maximum(np.linalg.norm(embeddings, axis=1, keepdims=True), 1e-12)
    order = np.argsort(owners, kind="stable")
    groups = np.split(order, np.flatnonzero(np.diff(owners[order])) + 1)
    keep: list[np.ndarray] = []
    for rows in groups:
        if len(rows) == 1:
            keep.append(rows)
            continue
        similar = unit[rows] @ unit[rows].T >= threshold
        kept = [0]
        for j in range(1, len(rows)):
            if not similar[j, kept].any():
                kept.append(j)
        keep.append(rows[kept])
    return np.sort(np.concatenate(keep))


def gpu_available() -> bool:
    faiss = _faiss()
    return hasattr(faiss, "StandardGpuResources") and faiss.get_num_gpus() > 0


def torch_cuda() -> bool:
    """Whether PyTorch sees a CUDA GPU (where faiss-gpu is missing, torch searches there)."""
    import torch

    return torch.cuda.is_available()


_GPU_RESOURCES: list = []


def gpu_resources():
    """faiss-gpu's resources, one object per process: each ``StandardGpuResources`` sets
    aside its own scratch memory on the GPU (up to 1.5 GB), and a linker builds an index at
    every refresh of its training, beside PyTorch's own cache."""
    if not _GPU_RESOURCES:
        _GPU_RESOURCES.append(_faiss().StandardGpuResources())
    return _GPU_RESOURCES[0]


def to_gpu(index):
    """``index`` copied to GPU 0 with the process's resources (``gpu_resources``)."""
    return _faiss().index_cpu_to_gpu(gpu_resources(), 0, index)


def in_process_factory(n_rows: int, dim: int, kind: str, on_gpu: bool) -> str:
    """The factory of an index built in the process: ``choose_factory``'s, except that
    ``auto`` stays exact (``Flat``) below a million rows where faiss-gpu can search it on the
    GPU (an exact scan there is faster than HNSW on the CPU, and HNSW has no GPU form)."""
    if on_gpu and kind == "auto" and n_rows < HNSW_MAX_ROWS:
        return "Flat"
    return choose_factory(n_rows, dim, kind)


class DenseIndex:
    """Maximum inner-product search from query vectors to KB entities."""

    def __init__(
        self,
        embeddings: np.ndarray,
        owners: np.ndarray,
        meta: IndexMeta,
        *,
        ef_search: int = EF_SEARCH,
        nprobe: int = NPROBE,
        use_gpu: bool | None = None,
        rows: np.ndarray | None = None,
    ) -> None:
        """``rows``: the position of each embedding in the full row layout it was taken from
        (``near_duplicate_rows`` keeps a subset); by default the embeddings are the layout."""
        if len(embeddings) == 0:
            raise ValueError(Errors.E003)
        from .torch_search import TorchFlatIndex, search_engine

        embeddings = np.ascontiguousarray(embeddings, dtype="float32")
        faiss_gpu = gpu_available()
        factory = in_process_factory(len(embeddings), embeddings.shape[1], meta.kind,
                                     bool(use_gpu or (use_gpu is None and (
                                         faiss_gpu or torch_cuda()))))
        engine = search_engine(use_gpu, faiss_gpu, factory == "Flat")
        if engine == "torch-cuda":
            index = TorchFlatIndex(embeddings, "cuda")
        else:
            index = build_index(embeddings, factory, nprobe=nprobe, ef_search=ef_search)
            if engine == "faiss-gpu":
                index = to_gpu(index)
        self._set_up(index, embeddings, owners, meta, rows, engine=engine)

    def _set_up(self, index, embeddings: np.ndarray | None, owners: np.ndarray,
                meta: IndexMeta, rows: np.ndarray | None, source: Path | None = None,
                engine: str = "faiss-cpu") -> None:
        self.index = index
        # where it searches (``torch_search.SEARCH_ENGINES``): faiss-gpu, torch-cuda (exact
        # search in torch where faiss-gpu is missing or not built for this CUDA) or faiss-cpu
        self.engine = engine
        self._embeddings = embeddings
        self.owners = np.asarray(owners, dtype="int64")
        self.rows = np.arange(len(self.owners)) if rows is None else np.asarray(rows, "int64")
        self.meta = meta
        self.n_entities = int(self.owners.max()) + 1
        # the index.faiss this index is memory-mapped from, kept open (see ``to_disk``)
        self._source = open(source, "rb") if source is not None else None  # noqa: SIM115
        if self._source is not None:
            weakref.finalize(self, self._source.close)

    @classmethod
    def from_faiss(cls, index, owners: np.ndarray, meta: IndexMeta,
                   rows: np.ndarray | None = None, source: Path | None = None,
                   engine: str = "faiss-cpu") -> DenseIndex:
        """Wrap a FAISS index built from the KB's row vectors elsewhere (``build-index``):
        it searches like any other, but holds no float vectors (``embeddings`` raises)."""
        if not meta.built_apart or index.ntotal != meta.n_rows or index.d != meta.dim:
            raise IndexFileError.at(source or "(in memory)", (
                f"the FAISS index holds {index.ntotal} rows of {index.d} dimensions, its "
                f"metadata says {meta.n_rows} of {meta.dim} built by {meta.factory!r}"))
        self = cls.__new__(cls)
        self._set_up(index, None, owners, meta, rows, source, engine)
        return self

    @property
    def embeddings(self) -> np.ndarray:
        """The float vector of every row (E131 for an index built apart: training, mining
        and distillation re-embed the KB instead)."""
        if self._embeddings is None:
            raise ValueError(Errors.E131.format(factory=self.meta.factory))
        return self._embeddings

    def __len__(self) -> int:
        return self.n_entities

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Top-``k`` entities per query: (scores, entity positions), -1 where fewer exist."""
        queries = np.ascontiguousarray(queries, dtype="float32")
        k = max(1, min(k, self.n_entities))
        if len(self.owners) == self.n_entities:  # one row per entity: rows are entities
            with blas_search():
                scores, rows = self.index.search(queries, k)
            return scores, np.where(rows >= 0, self.owners[np.maximum(rows, 0)], -1)
        # Several rows per entity: over-fetch rows, keep each entity's best (first) row.
        fetch = min(len(self.owners), k * 4)
        with blas_search():
            scores, rows = self.index.search(queries, fetch)
        owners = np.where(rows >= 0, self.owners[np.maximum(rows, 0)], -1)
        n_queries = len(queries)
        keys = np.arange(n_queries)[:, None] * (self.n_entities + 1) + (owners + 1)
        _, first = np.unique(keys.ravel(), return_index=True)  # row-major: best row first
        keep = np.zeros(keys.size, dtype=bool)
        keep[first] = True
        keep &= owners.ravel() >= 0
        keep = keep.reshape(owners.shape)
        rank = np.cumsum(keep, axis=1) - 1
        take = keep & (rank < k)
        out_scores = np.full((n_queries, k), -np.inf, dtype="float32")
        out_ids = np.full((n_queries, k), -1, dtype="int64")
        q_idx, col = np.nonzero(take)
        out_scores[q_idx, rank[q_idx, col]] = scores[q_idx, col]
        out_ids[q_idx, rank[q_idx, col]] = owners[q_idx, col]
        return out_scores, out_ids

    def search_rows(self, queries: np.ndarray, k: int) -> np.ndarray:
        """The ``k`` best rows per query (row positions; -1 where fewer exist)."""
        with blas_search():
            return self.index.search(np.ascontiguousarray(queries, dtype="float32"), k)[1]

    def entity_vectors(self) -> np.ndarray:
        """One vector per entity (its first row: the name row), for mining and graphs."""
        first = np.full(self.n_entities, -1, dtype="int64")
        for row in range(len(self.owners) - 1, -1, -1):
            first[self.owners[row]] = row
        return self.embeddings[first]

    # --- serialisation (FAISS's own format and numpy arrays; no pickle) ----------------------

    def to_disk(self, path: str | Path) -> None:
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        if not self.meta.built_apart:
            np.save(path / "embeddings.npy", compact(self.embeddings), allow_pickle=False)
        elif self._source is not None:
            # a memory-mapped index is written as a reference to its file (FAISS's on-disk
            # lists): copy the file instead, through the handle kept open since loading, to
            # a new file put in place at the end, so that saving over the folder or the very
            # file it was loaded from loses nothing
            self._source.seek(0)
            partial = path / f"{FAISS_FILE}.partial"
            with open(partial, "wb") as out:
                shutil.copyfileobj(self._source, out, 2**24)
            os.replace(partial, path / FAISS_FILE)
        else:
            save_index(self.index, path / FAISS_FILE)
        np.save(path / "owners.npy", self.owners, allow_pickle=False)
        np.save(path / "rows.npy", self.rows, allow_pickle=False)
        (path / "meta.json").write_text(json.dumps(asdict(self.meta), indent=2))

    @classmethod
    def from_disk(
        cls, path: str | Path, expected: IndexMeta | None = None, kind: str | None = None,
        dedupe_threshold: float | None = None, n_entities: int | None = None,
        n_layout_rows: int | None = None, **kwargs,
    ) -> DenseIndex:
        """Load the vectors and rebuild the index (``kind`` overrides the saved kind;
        ``dedupe_threshold`` drops near-duplicate rows, see ``near_duplicate_rows``); an
        index built apart (``index.faiss``) is loaded memory-mapped as it was built, and
        ``kind`` and ``dedupe_threshold`` do not apply to it (its rows were chosen then).

        The arrays are checked against the metadata and each other (``arrays_problem``;
        E030 when they do not fit); ``n_entities``: the KB's size; ``n_layout_rows``: the size
        of the row layout that ``rows.npy`` points into.
        """
        path = Path(path)
        meta = read_index_meta(path)
        if meta.built_apart:
            return cls._load_built(path, meta, expected, n_entities, n_layout_rows, **kwargs)
        if kind is not None and kind != meta.kind:
            meta = replace(meta, kind=kind)
        if expected is not None:
            check_meta(meta, expected)
        arrays = {}
        for name in ("embeddings", "owners", "rows"):
            try:
                arrays[name] = np.load(path / f"{name}.npy", allow_pickle=False)
            except (OSError, ValueError, EOFError) as err:
                raise IndexFileError.at(path, f"{name}.npy cannot be read ({err})") from None
        embeddings, owners, rows = arrays["embeddings"], arrays["owners"], arrays["rows"]
        problem = arrays_problem(meta, embeddings, owners, rows, n_entities, n_layout_rows)
        if problem:
            raise IndexFileError.at(path, problem)
        embeddings = embeddings.astype("float32", copy=False)  # saved as float16: exact
        if needs_dedupe(meta, dedupe_threshold) and len(owners) > int(owners.max()) + 1:
            keep = near_duplicate_rows(embeddings, owners, dedupe_threshold)
            embeddings, owners, rows = embeddings[keep], owners[keep], rows[keep]
            meta = replace(meta, n_rows=len(keep), dedupe_threshold=dedupe_threshold)
        return cls(embeddings, owners, meta, rows=rows, **kwargs)

    @classmethod
    def _load_built(cls, path: Path, meta: IndexMeta, expected: IndexMeta | None,
                    n_entities: int | None, n_layout_rows: int | None, *,
                    nprobe: int = NPROBE, ef_search: int = EF_SEARCH, use_gpu: bool | None = None,
                    **_: object) -> DenseIndex:
        """An ``index.faiss`` saved by ``build-index``, memory-mapped, with its row arrays."""
        if expected is not None:
            check_meta(meta, expected)
        arrays = {}
        for name in ("owners", "rows"):
            try:
                arrays[name] = np.load(path / f"{name}.npy", allow_pickle=False)
            except (OSError, ValueError, EOFError) as err:
                raise IndexFileError.at(path, f"{name}.npy cannot be read ({err})") from None
        problem = arrays_problem(meta, None, arrays["owners"], arrays["rows"], n_entities,
                                 n_layout_rows)
        if problem:
            raise IndexFileError.at(path, problem)
        try:
            index = load_index(path / FAISS_FILE, nprobe=nprobe, ef_search=ef_search)
        except (OSError, RuntimeError) as err:
            raise IndexFileError.at(path, f"{FAISS_FILE} cannot be read ({err})") from None
        # faiss-gpu clones a Refine stage by copying its codes into host memory: kept on CPU
        on_gpu = meta.kind in ("flat", "ivfpq") and "Refine" not in meta.factory
        engine = "faiss-cpu"
        if on_gpu and (use_gpu or (use_gpu is None and gpu_available())):
            try:
                index, engine = to_gpu(index), "faiss-gpu"
            except RuntimeError as err:  # e.g. an HNSW coarse quantizer
                warnings.warn(Warnings.W006.format(factory=meta.factory, error=err),
                              stacklevel=2)
        return cls.from_faiss(index, arrays["owners"], meta, arrays["rows"],
                               source=path / FAISS_FILE, engine=engine)


def half_grid(vectors: np.ndarray) -> np.ndarray:
    """``vectors`` rounded to the nearest float16, as float32: what an index embeds, so that
    it saves in half the bytes (``compact``) and links alike before and after saving. The
    rounding moves a unit vector's dot product by at most about 1e-3 (float16 keeps 11
    significant bits); it changed no link of the untrained HPO and MeSH rows (BENCHMARKS.md,
    issue 62). A value beyond float16's range (65,504) is kept as it is."""
    vectors = np.asarray(vectors, dtype="float32")
    with np.errstate(over="ignore"):
        half = vectors.astype("float16").astype("float32")
    return np.where(np.isfinite(half), half, vectors)


def compact(vectors: np.ndarray) -> np.ndarray:
    """``vectors`` as saved: float16 when that holds them exactly (``half_grid``'s), else as
    they are (an index saved before, or vectors from elsewhere: never rounded on saving)."""
    half = vectors.astype("float16")
    return half if np.array_equal(half.astype(vectors.dtype), vectors) else vectors


def needs_dedupe(meta: IndexMeta, threshold: float | None) -> bool:
    """Whether rows saved as ``meta`` says may still hold near-duplicates at ``threshold``:
    ``near_duplicate_rows`` keeps no pair at or above its threshold, so rows that passed a
    threshold pass any higher one (loading skips the pass, ~0.6 s on the MeSH KB)."""
    if threshold is None:
        return False
    return meta.dedupe_threshold is None or threshold < meta.dedupe_threshold


class IndexFileError(ValueError):
    """A saved index whose files are unreadable or disagree with each other (E030)."""

    @classmethod
    def at(cls, path: str | Path, problem: str) -> IndexFileError:
        return cls(Errors.E030.format(component="dense index", path=path, problem=problem))


def read_index_meta(path: str | Path) -> IndexMeta:
    """What a saved index was built from."""
    try:
        meta = IndexMeta(**json.loads((Path(path) / "meta.json").read_text()))
    except (OSError, ValueError, TypeError) as err:
        raise IndexFileError.at(path, f"meta.json cannot be read ({err})") from None
    for key in ("dim", "n_rows"):
        if not isinstance(getattr(meta, key), int) or getattr(meta, key) < 1:
            raise IndexFileError.at(path, f"meta.json has {key} = {getattr(meta, key)!r}")
    return meta


def arrays_problem(meta: IndexMeta, embeddings: np.ndarray | None, owners: np.ndarray,
                   rows: np.ndarray, n_entities: int | None = None,
                   n_layout_rows: int | None = None) -> str | None:
    """Why the saved arrays do not fit the metadata and each other (None when they do): one
    float32 or float16 (``compact``) row of ``meta.dim`` per saved row, owners that give
    every entity (of ``n_entities``) at least one row, and increasing layout rows (below
    ``n_layout_rows``). A truncated or foreign array fails here; a shuffled one only the
    manifest's checksums catch (``artefacts.check_folder``). ``embeddings`` None: an index
    built apart."""
    if embeddings is not None:
        if embeddings.dtype not in (np.float32, np.float16) \
                or embeddings.shape != (meta.n_rows, meta.dim):
            return (f"embeddings.npy is {embeddings.dtype} {embeddings.shape}, meta.json says "
                    f"float32 or float16 ({meta.n_rows}, {meta.dim})")
        if not np.isfinite(embeddings).all():
            return "embeddings.npy holds NaN or infinite values"
    for name, array in (("owners", owners), ("rows", rows)):
        if array.dtype.kind not in "iu" or array.shape != (meta.n_rows,):
            return (f"{name}.npy is {array.dtype} {array.shape}, expected integers "
                    f"({meta.n_rows},)")
    covered = np.unique(owners)
    if covered[0] != 0 or len(covered) != int(covered[-1]) + 1:
        return "owners.npy leaves some entities without a row"
    if n_entities is not None and len(covered) != n_entities:
        return f"owners.npy covers {len(covered)} entities, the KB has {n_entities}"
    if rows[0] < 0 or (np.diff(rows) <= 0).any():
        return "rows.npy is not an increasing list of row positions"
    if n_layout_rows is not None and rows[-1] >= n_layout_rows:
        return f"rows.npy points at row {int(rows[-1])} of {n_layout_rows}"
    return None


def check_meta(found: IndexMeta, expected: IndexMeta) -> None:
    """Raise E004 when an index was built for another KB, encoder, row layout or width."""
    keys = ("kb_fingerprint", "encoder_fingerprint", "granularity", "inputs", "dim")
    if any(getattr(found, k) != getattr(expected, k) for k in keys):
        describe = lambda m: ", ".join(f"{k}={getattr(m, k)}" for k in keys)  # noqa: E731
        raise ValueError(Errors.E004.format(found=describe(found), expected=describe(expected)))
