"""``link_corpus``: the driver of ``link-corpus``. It plans the shards, skips the finished
ones (the manifest), checks that the others can be read, lets an engine link them, writes
each shard atomically as it completes and records it in the manifest. An interrupted run
loses at most the shards in flight; run it again to finish."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..artefacts import pipeline_fingerprint
from ..data.texts import read_texts
from ..errors import Errors
from .engines import LinkSettings
from .shard_writer import ShardWriter
from .shards import Manifest, Shard, plan_shards


@dataclass
class CorpusSummary:
    """What one run did: shards linked now and skipped as done, unreadable shards (name →
    error), docs linked, mentions, documents that raised, seconds, and the document ids
    that occur more than once among the shards read (how many, and in which shards)."""

    linked: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    unreadable: dict[str, str] = field(default_factory=dict)
    docs: int = 0
    mentions: int = 0
    errors: int = 0
    seconds: float = 0.0
    duplicate_ids: int = 0
    duplicate_shards: list[str] = field(default_factory=list)

    @property
    def docs_per_s(self) -> float:
        return self.docs / self.seconds if self.seconds else 0.0

    def unreadable_error(self, total: int) -> str | None:
        """E129 when some shards could not be read, else None."""
        if not self.unreadable:
            return None
        return Errors.E129.format(n=len(self.unreadable), total=total,
                                  names=", ".join(self.unreadable),
                                  first=next(iter(self.unreadable.values())))


def _id_hash(doc_id: str) -> int:
    return int.from_bytes(hashlib.blake2b(doc_id.encode("utf8"), digest_size=8).digest(),
                          "little")


def count_documents(shard: Shard, ids: dict[str, np.ndarray] | None = None) -> int:
    """The number of documents of ``shard`` (reading it through: a malformed file raises
    its coded ValueError here, before any linking); ``ids`` gets the 64-bit hashes of their
    ids under the shard's name (8 bytes a document, for :func:`repeated_ids`)."""
    hashes = [_id_hash(record.id) for record in read_texts(shard.source)]
    if ids is not None:
        ids[shard.name] = np.asarray(hashes, dtype="uint64")
    return len(hashes)


def repeated_ids(ids: dict[str, np.ndarray]) -> tuple[int, list[str]]:
    """How many document ids occur more than once in ``ids`` (per shard, from
    :func:`count_documents`) and the shards that hold them. ``cluster`` keeps such
    documents apart; other readers of the output may not (a 64-bit hash of each id: two
    different ids share one with a chance of about n²/2⁶⁵)."""
    if not ids:
        return 0, []
    values, counts = np.unique(np.concatenate(list(ids.values())), return_counts=True)
    repeated = values[counts > 1]
    return len(repeated), [name for name, hashes in ids.items()
                           if np.isin(hashes, repeated).any()]


def job_settings(settings: LinkSettings) -> dict:
    """What determines a linked corpus, recorded in its manifest and compared on resume:
    the pipeline's content (``artefacts.pipeline_fingerprint``, so that the same pipeline
    under another path is the same job and a retrained one is not), the config overrides,
    ``top_k``, the format and the vectors flag; ``model`` is the resolved path, for the
    reader only."""
    return {"model": str(Path(settings.model).resolve()),
            "pipeline": pipeline_fingerprint(settings.model),
            "overrides": settings.overrides, "top_k": settings.top_k,
            "format": settings.fmt, "vectors": settings.vectors}


def link_corpus(input_path: str | Path, output_dir: str | Path, settings: LinkSettings,
                engine, on_docs: Callable[[int], None] = lambda n: None,
                on_total: Callable[[int], None] = lambda n: None) -> CorpusSummary:
    """Link the shards of ``input_path`` into ``output_dir`` with ``engine`` (a
    ``LocalEngine`` or ``RayEngine``). ``on_total`` gets the number of documents to link,
    ``on_docs`` each increment (a progress bar)."""
    output_dir = Path(output_dir)
    shards = plan_shards(input_path, output_dir, settings.fmt)
    manifest = Manifest.open(output_dir, job_settings(settings), shards)
    summary = CorpusSummary()
    pending: list[tuple[Shard, int]] = []
    ids: dict[str, np.ndarray] = {}
    for shard in shards:
        if manifest.is_done(shard) and (not settings.vectors or shard.vectors.exists()):
            summary.skipped.append(shard.name)
            continue
        try:
            pending.append((shard, count_documents(shard, ids)))
        except (ValueError, UnicodeDecodeError) as err:
            summary.unreadable[shard.source.name] = str(err)
    summary.duplicate_ids, summary.duplicate_shards = repeated_ids(ids)
    del ids
    on_total(sum(n for _, n in pending))
    output_dir.mkdir(parents=True, exist_ok=True)
    for stale in output_dir.glob(".*spill-*"):  # left by a run that was killed
        stale.unlink()
    start = time.perf_counter()
    writers: dict[Path, ShardWriter] = {}
    try:
        for shard, outcomes, finished in engine.run(pending, on_docs):
            writer = writers.get(shard.output)
            if writer is None:
                writer = writers[shard.output] = ShardWriter(shard, settings.fmt,
                                                             settings.vectors)
            writer.add(outcomes)
            if not finished:
                continue
            counts = writers.pop(shard.output).finish()
            manifest.mark_done(shard, counts)
            summary.linked.append(shard.name)
            summary.docs += counts["docs"]
            summary.mentions += counts["mentions"]
            summary.errors += counts["errors"]
    finally:
        for writer in writers.values():
            writer.discard()
    summary.seconds = time.perf_counter() - start
    return summary
