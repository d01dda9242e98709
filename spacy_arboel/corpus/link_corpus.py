"""``link_corpus``: the driver of ``link-corpus``. It plans the shards, skips the finished
ones (the manifest), checks that the others can be read, lets an engine
(``jobs.engines``) link their documents batch by batch, spills the outcomes to disk as they
come (in any order), writes each shard atomically once all its documents are in and
records it in the manifest. An interrupted run loses at most the shards in flight; run it
again to finish."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from itertools import islice
from pathlib import Path
from typing import Any

import numpy as np

from ..artefacts import pipeline_fingerprint
from ..errors import Errors
from ..jobs.engines import Engine
from ..jobs.ledger import digest
from .shard_writer import ShardWriter
from .shards import Shard, is_done, mark_done, open_manifest, plan_shards, shard_documents
from .worker import LinkSettings, LinkTask, PipelineLinker


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
    hashes = [_id_hash(document.id) for document in shard_documents(shard.source)]
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
    reader only. An override that names a file (a ``kb_path`` given at load) is recorded
    with the checksum of that file's content, so that a run resumed in another folder, or
    after the file changed, cannot link one corpus against two KBs."""
    return {"model": str(Path(settings.model).resolve()),
            "pipeline": pipeline_fingerprint(settings.model),
            "overrides": settings.overrides, "override_files": override_files(settings),
            "top_k": settings.top_k, "format": settings.fmt, "vectors": settings.vectors}


def override_files(settings: LinkSettings) -> dict[str, str]:
    """The SHA-256 of each file an override names (by override key)."""
    return {key: digest(Path(value)) for key, value in sorted(settings.overrides.items())
            if isinstance(value, str) and value and Path(value).is_file()}


def link_corpus(input_path: str | Path, output_dir: str | Path, settings: LinkSettings,
                engine: Engine,
                on_docs: Callable[[int], None] = lambda n: None,
                on_total: Callable[[int], None] = lambda n: None,
                load: Callable[[LinkSettings], Any] | None = None) -> CorpusSummary:
    """Link the shards of ``input_path`` into ``output_dir`` with ``engine``, each of its
    workers loading the pipeline once (``load``: how, default ``worker.load_pipeline``).
    ``on_total`` gets the number of documents to link, ``on_docs`` each increment (a
    progress bar)."""
    output_dir = Path(output_dir)
    shards = plan_shards(input_path, output_dir, settings.fmt)
    manifest = open_manifest(output_dir, job_settings(settings), shards)
    summary = CorpusSummary()
    pending: list[tuple[Shard, int]] = []
    ids: dict[str, np.ndarray] = {}
    for shard in shards:
        if is_done(manifest, shard) and (not settings.vectors or shard.vectors.exists()):
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
    left = {i: n for i, (_, n) in enumerate(pending)}
    writers: dict[int, ShardWriter] = {}  # opened at a shard's first outcome

    def writer(i: int) -> ShardWriter:
        if i not in writers:
            writers[i] = ShardWriter(pending[i][0], settings.fmt, settings.vectors)
        return writers[i]

    def finish(i: int) -> None:
        shard = pending[i][0]
        counts = writer(i).finish()
        del writers[i]
        mark_done(manifest, shard, counts)
        summary.linked.append(shard.name)
        summary.docs += counts["docs"]
        summary.mentions += counts["mentions"]
        summary.errors += counts["errors"]

    try:
        for i in [i for i, n in left.items() if n == 0]:
            finish(i)
        make_worker = partial(PipelineLinker, settings, load)
        for i, outcomes in engine.map(make_worker, link_tasks(pending, settings.batch_size)):
            writer(i).add(outcomes)
            on_docs(len(outcomes))
            left[i] -= len(outcomes)
            if left[i] == 0:
                finish(i)
    finally:
        for writer in writers.values():
            writer.discard()
    summary.seconds = time.perf_counter() - start
    return summary


def link_tasks(pending: list[tuple[Shard, int]], batch_size: int) -> Iterator[LinkTask]:
    """The documents of the ``pending`` shards in batches of ``batch_size``, read as the
    engine takes them."""
    for i, (shard, _) in enumerate(pending):
        documents = iter(shard_documents(shard.source))
        start = 0
        while batch := list(islice(documents, batch_size)):
            yield i, start, batch
            start += len(batch)
