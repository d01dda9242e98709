"""A corpus's mention vectors for the k-NN graph (``graph.knn_graph``) when they are too many
for one exact search (issue 19): they stay in memory-mapped ``.npy`` shards, read block by
block (``ShardedVectors``).

Up to ``EXACT_MAX`` mentions the search is exact (``IndexFlatIP``). Above, an inverted-file
index with 8-bit scalar-quantised codes (FAISS ``IVF{K},SQ8``: K = 4·√N cells as the
guidelines advise, ``nprobe`` of them searched; a quarter of the float vectors' memory)
proposes ``2k`` neighbours per mention, which ``knn_graph`` re-scores exactly from the
shards: edge weights stay the dot products of arboEL's graph (eq. 2-4), only which
neighbours are found is approximate, and ``edge_recall`` measures that against exact k-NN
on a sample. No spaCy here.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..errors import Errors
from ..kb.index_builder import NPROBE, build_index, exact_top, ivf_cells

EXACT_MAX = 100_000


def _open_vectors(path: Path) -> np.ndarray:
    """One ``.npy`` vector file memory-mapped (E139 naming it when it is truncated, not a
    ``.npy`` file, or holds objects)."""
    try:
        return np.load(path, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError, EOFError) as err:
        raise ValueError(Errors.E139.format(path=path, problem=f"{type(err).__name__}: "
                                            f"{err}")) from None


class ShardedVectors:
    """Row vectors spread over ``.npy`` files, memory-mapped and addressed as one float32
    matrix: ``len``, ``shape``, slices of consecutive rows, ``take`` (or indexing by an array)
    of any rows. A file of width 0 (its documents had no vectors) reads as rows of zeros."""

    def __init__(self, paths: Sequence[str | Path]) -> None:
        self.parts = [_open_vectors(Path(path)) for path in paths]
        widths = {p.shape[1] for p in self.parts if p.ndim == 2 and p.shape[1] and len(p)}
        if len(widths) > 1 or any(p.ndim != 2 for p in self.parts):
            raise ValueError(Errors.E137.format(paths=", ".join(str(p) for p in paths[:3]),
                                                widths=sorted(widths)))
        self.dim = widths.pop() if widths else 0
        self.offsets = np.cumsum([0] + [len(p) for p in self.parts])

    def __len__(self) -> int:
        return int(self.offsets[-1])

    @property
    def shape(self) -> tuple[int, int]:
        return len(self), self.dim

    def _rows(self, part: int, rows) -> np.ndarray:
        array = self.parts[part]
        if array.shape[1] == 0:
            count = (len(range(*rows.indices(len(array)))) if isinstance(rows, slice)
                     else len(rows))
            return np.zeros((count, self.dim), dtype="float32")
        return np.asarray(array[rows], dtype="float32")

    def __getitem__(self, rows: slice | np.ndarray) -> np.ndarray:
        if not isinstance(rows, slice):
            return self.take(rows)
        start, stop, step = rows.indices(len(self))
        if step != 1:
            raise ValueError("ShardedVectors reads consecutive rows")
        blocks = []
        for part in range(len(self.parts)):
            low, high = max(start, self.offsets[part]), min(stop, self.offsets[part + 1])
            if low < high:
                base = self.offsets[part]
                blocks.append(self._rows(part, slice(low - base, high - base)))
        return np.concatenate(blocks) if blocks else np.zeros((0, self.dim), "float32")

    def take(self, rows: np.ndarray) -> np.ndarray:
        """The vectors of ``rows`` (any order, repeats allowed)."""
        rows = np.asarray(rows, dtype="int64")
        out = np.empty((len(rows), self.dim), dtype="float32")
        parts = np.searchsorted(self.offsets, rows, side="right") - 1
        for part in np.unique(parts):
            where = np.flatnonzero(parts == part)
            local = rows[where] - self.offsets[part]
            order = np.argsort(local, kind="stable")  # memory maps read best in order
            out[where[order]] = self._rows(int(part), local[order])
        return out


def mention_index(vectors: ShardedVectors, *, exact_max: int = EXACT_MAX, nprobe: int = NPROBE,
                  seed: int = 0):
    """A FAISS inner-product index over all rows (``build_index``): exact up to
    ``exact_max`` rows, else ``IVF{4·√N},SQ8`` trained on a sample of 64 rows per cell."""
    n = len(vectors)
    factory = "Flat" if n <= exact_max else f"IVF{ivf_cells(n)},SQ8"
    return build_index(vectors, factory, nprobe=nprobe, seed=seed)


def edge_recall(vectors: ShardedVectors, neighbours: np.ndarray, *, sample: int = 1_000,
                seed: int = 0) -> float:
    """The share of exact k-NN edges (k = ``neighbours``' width, the mention itself left
    out) that the graph holds, over ``sample`` random mentions with a vector."""
    k = neighbours.shape[1]
    rows = np.sort(np.random.default_rng(seed).choice(len(vectors), min(sample, len(vectors)),
                                                      replace=False))
    queries = vectors.take(rows)
    rows, queries = rows[np.abs(queries).sum(1) > 0], queries[np.abs(queries).sum(1) > 0]
    exact = exact_top(vectors, queries, k + 1)
    found = total = 0
    for row, truth in zip(rows, exact, strict=True):
        truth = [t for t in truth if t != row and t >= 0][:k]
        found += len(set(truth) & set(neighbours[row].tolist()))
        total += len(truth)
    return found / total if total else 1.0
