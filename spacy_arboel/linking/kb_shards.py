"""The KB's row vectors embedded shard by shard into a work folder that survives a crash
(issue 19): ``plan.json`` says what is embedded (KB, entity encoder, row layout, shard
bounds), ``vectors.npy`` holds every row's vector (a memory map, filled shard by shard) and
``done.json`` lists the finished shards; a rerun with the same plan embeds only the others.
No spaCy here.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from ..atomic import atomic_file, write_text_atomic
from ..errors import Errors
from ..parsing import parse_json

PLAN, DONE, VECTORS = "plan.json", "done.json", "vectors.npy"


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

    def describe(self) -> str:
        return (f"KB {self.kb_fingerprint}, entity encoder {self.encoder_fingerprint}, "
                f"{self.granularity} rows: {self.n_rows}, {len(self.shards)} shards, "
                f"similarity {self.similarity}, mixed_precision {self.mixed_precision}")


class ShardStore:
    """A work folder for one ``EmbeddingPlan``: created for it, or reopened when it was made
    for the same plan (E132 when it was made for another)."""

    def __init__(self, folder: str | Path, plan: EmbeddingPlan) -> None:
        self.folder, self.plan = Path(folder), plan
        self.folder.mkdir(parents=True, exist_ok=True)
        saved = self._saved_plan()
        if saved is None:
            with atomic_file(self.folder / VECTORS) as temp:
                np.lib.format.open_memmap(temp, mode="w+", dtype="float32",
                                          shape=(plan.n_rows, plan.dim)).flush()
            self._write_done([])
            write_text_atomic(self.folder / PLAN, json.dumps(asdict(plan), indent=1))
        elif saved != plan:
            raise ValueError(Errors.E132.format(path=self.folder, saved=saved.describe(),
                                                given=plan.describe()))
        self.vectors = np.load(self.folder / VECTORS, mmap_mode="r+")
        self.done = self._saved_done()

    def _saved_plan(self) -> EmbeddingPlan | None:
        path = self.folder / PLAN
        if not path.exists():
            ours = (DONE, VECTORS)  # a run that stopped before writing its plan
            if any(p.name not in ours and not p.name.startswith(".")
                   for p in self.folder.iterdir()):
                raise ValueError(Errors.E132.format(
                    path=self.folder, saved="other files and no plan.json",
                    given=self.plan.describe()))
            return None
        try:
            data = parse_json(path.read_bytes())
            data["shards"] = tuple(tuple(bounds) for bounds in data["shards"])
            return EmbeddingPlan(**data)
        except (ValueError, TypeError, KeyError) as err:
            raise ValueError(Errors.E132.format(path=self.folder, saved=f"a plan.json that "
                                                f"cannot be read ({err})",
                                                given=self.plan.describe())) from None

    def _saved_done(self) -> set[int]:
        """The shards ``done.json`` lists as embedded (E132 when it cannot be read)."""
        try:
            done = parse_json((self.folder / DONE).read_bytes())
            if not isinstance(done, list) or not all(type(i) is int for i in done):
                raise ValueError("not a list of shard numbers")
        except (OSError, ValueError) as err:
            raise ValueError(Errors.E132.format(path=self.folder, saved=f"a {DONE} that "
                                                f"cannot be read ({err})",
                                                given=self.plan.describe())) from None
        return set(done)

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
        self._write_done(sorted(self.done))

    def _write_done(self, shards: Sequence[int]) -> None:
        write_text_atomic(self.folder / DONE, json.dumps(list(shards)))
