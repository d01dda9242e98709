"""The KB's row vectors embedded shard by shard into a work folder that survives a crash
(issue 19): ``vectors.npy`` holds every row's vector (a memory map, filled shard by shard)
and ``manifest.json`` (a ``jobs.ledger.Ledger``) says what is embedded (KB, entity encoder,
row layout, shard bounds) and which shards are done; a rerun with the same plan embeds only
the others. No spaCy here.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..atomic import atomic_file
from ..errors import Errors
from .ledger import MANIFEST, Ledger, LedgerError, digest

SHARD_ROWS = 50_000  # KB rows per shard of the build-index job (the one default)

VECTORS = "vectors.npy"
LEDGER_KEY = "shards"


@dataclass(frozen=True)
class EmbeddingPlan:
    """What a work folder embeds: the rows of a KB (by fingerprint) in a layout of
    ``n_rows`` rows of ``dim`` floats, by one entity encoder, in shards ``[start, stop)``
    of rows that never split an entity's rows."""

    kb_fingerprint: str
    encoder_fingerprint: str  # its weights, window (entity_max_length) and pooling
    granularity: str
    similarity: str  # cosine stores unit vectors
    mixed_precision: bool  # half-precision matmuls give other vectors
    dim: int
    n_rows: int
    shards: tuple[tuple[int, int], ...]

    @classmethod
    def cut(cls, owners: np.ndarray, shard_rows: int, **what: str | int) -> EmbeddingPlan:
        """Shards of about ``shard_rows`` rows, cut where one entity's rows end
        (``owners``: the entity position behind each row, in increasing order)."""
        if shard_rows < 1:
            raise ValueError(Errors.E011.format(name="shard_rows", condition=">= 1",
                                                value=shard_rows))
        owners = np.asarray(owners)
        bounds, start = [], 0
        while start < len(owners):
            stop = min(start + shard_rows, len(owners))
            if stop < len(owners):  # move the cut to the end of the last entity's rows
                stop = int(np.searchsorted(owners, owners[stop - 1], side="right"))
            bounds.append((start, stop))
            start = stop
        return cls(shards=tuple(bounds), n_rows=len(owners), **what)

    @classmethod
    def of(cls, settings: dict[str, Any]) -> EmbeddingPlan:
        """The plan saved as ``settings`` (its fields, as JSON)."""
        return cls(**{**settings, "shards": tuple(tuple(b) for b in settings["shards"])})

    def describe(self) -> str:
        return (f"KB {self.kb_fingerprint}, entity encoder {self.encoder_fingerprint}, "
                f"{self.granularity} rows: {self.n_rows}, {len(self.shards)} shards, "
                f"similarity {self.similarity}, mixed_precision {self.mixed_precision}")


class ShardStore:
    """A work folder for one ``EmbeddingPlan``: created for it, or reopened when it was made
    for the same plan (E132 when it was made for another). Its ledger (``manifest.json``)
    holds the plan as its settings and, per embedded shard, its rows and the digest of
    their vectors; a shard whose vectors no longer have that digest is embedded again. A
    folder without a ledger is refused (E132) unless it holds only what a run that stopped
    before writing one leaves (``vectors.npy``)."""

    def __init__(self, folder: str | Path, plan: EmbeddingPlan) -> None:
        self.folder, self.plan = Path(folder), plan
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.folder / MANIFEST
        if path.exists():
            self.ledger = self._open(path)
        else:
            self._check_empty()
            with atomic_file(self.folder / VECTORS) as temp:
                np.lib.format.open_memmap(temp, mode="w+", dtype="float32",
                                          shape=(plan.n_rows, plan.dim)).flush()
            self.ledger = Ledger(path, LEDGER_KEY, asdict(plan))
            self.ledger.save()  # last: a folder with a ledger is complete
        self.vectors = np.load(self.folder / VECTORS, mmap_mode="r+")
        stale = [name for name, entry in self.ledger.entries.items()
                 if not self._current(name, entry)]
        if stale:
            self.ledger.drop(stale)
        self.done = {int(name) for name in self.ledger.entries}

    def _refuse(self, saved: str) -> ValueError:
        return ValueError(Errors.E132.format(path=self.folder, saved=saved,
                                             given=self.plan.describe()))

    def _open(self, path: Path) -> Ledger:
        try:
            return Ledger.open(path, LEDGER_KEY, asdict(self.plan))
        except LedgerError as err:
            if not err.keys:
                raise self._refuse(f"a {MANIFEST} that cannot be read ({err.problem})"
                                   ) from None
            try:
                saved = EmbeddingPlan.of(err.saved).describe()
            except (TypeError, ValueError):
                saved = f"a plan with other {', '.join(err.keys)}"
            raise self._refuse(saved) from None

    def _check_empty(self) -> None:
        """E132 when the folder holds files that are not those of a run that stopped
        before writing its ledger."""
        if any(p.name != VECTORS and not p.name.startswith(".")
               for p in self.folder.iterdir()):
            raise self._refuse(f"other files and no {MANIFEST}")

    def _entry(self, vectors: np.ndarray, shard: int) -> dict[str, Any]:
        start, stop = self.plan.shards[shard]
        return {"rows": [start, stop], "sha256": digest(np.ascontiguousarray(
            vectors[start:stop]))}

    def _current(self, name: str, entry: dict[str, Any]) -> bool:
        """Whether the ledger entry ``name`` is a shard of the plan whose vectors still
        have the digest it records."""
        if not name.isdigit() or int(name) >= len(self.plan.shards):
            return False
        return entry == self._entry(self.vectors, int(name))

    @property
    def pending(self) -> list[int]:
        return [i for i in range(len(self.plan.shards)) if i not in self.done]

    def write(self, shard: int, vectors: np.ndarray) -> None:
        """Store one shard's vectors, flushed to disk before the shard is listed as done."""
        start, stop = self.plan.shards[shard]
        if vectors.shape != (stop - start, self.plan.dim):
            raise ValueError(Errors.E133.format(shard=shard, shape=vectors.shape,
                                                expected=(stop - start, self.plan.dim)))
        self.vectors[start:stop] = vectors
        self.vectors.flush()
        self.done.add(shard)
        self.ledger.mark(str(shard), self._entry(self.vectors, shard))
