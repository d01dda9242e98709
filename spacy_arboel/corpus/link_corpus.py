"""``link_corpus``: the driver of ``link-corpus``. It plans the shards, skips the finished
ones (the manifest), checks that the others can be read, lets an engine link them, writes
each shard atomically as it completes and records it in the manifest. An interrupted run
loses at most the shards in flight; run it again to finish."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..data.texts import read_texts
from ..errors import Errors
from .engines import LinkSettings
from .shard_writer import write_shard
from .shards import Manifest, Shard, plan_shards


@dataclass
class CorpusSummary:
    """What one run did: shards linked now and skipped as done, unreadable shards (name →
    error), docs linked, mentions, documents that raised, seconds."""

    linked: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    unreadable: dict[str, str] = field(default_factory=dict)
    docs: int = 0
    mentions: int = 0
    errors: int = 0
    seconds: float = 0.0

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


def count_documents(shard: Shard) -> int:
    """The number of documents of ``shard`` (reading it through: a malformed file raises
    its coded ValueError here, before any linking)."""
    return sum(1 for _ in read_texts(shard.source))


def link_corpus(input_path: str | Path, output_dir: str | Path, settings: LinkSettings,
                engine, on_docs: Callable[[int], None] = lambda n: None,
                on_total: Callable[[int], None] = lambda n: None) -> CorpusSummary:
    """Link the shards of ``input_path`` into ``output_dir`` with ``engine`` (a
    ``LocalEngine`` or ``RayEngine``). ``on_total`` gets the number of documents to link,
    ``on_docs`` each increment (a progress bar)."""
    output_dir = Path(output_dir)
    shards = plan_shards(input_path, output_dir, settings.fmt)
    manifest = Manifest.open(output_dir, {"model": settings.model, "format": settings.fmt,
                                          **({"vectors": True} if settings.vectors else {})},
                             shards)
    summary = CorpusSummary()
    pending: list[tuple[Shard, int]] = []
    for shard in shards:
        if manifest.is_done(shard) and (not settings.vectors or shard.vectors.exists()):
            summary.skipped.append(shard.name)
            continue
        try:
            pending.append((shard, count_documents(shard)))
        except (ValueError, UnicodeDecodeError) as err:
            summary.unreadable[shard.source.name] = str(err)
    on_total(sum(n for _, n in pending))
    output_dir.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    for shard, outcomes in engine.run(pending, on_docs):
        counts = write_shard(shard, outcomes, settings.fmt, settings.vectors)
        manifest.mark_done(shard, counts)
        summary.linked.append(shard.name)
        summary.docs += counts["docs"]
        summary.mentions += counts["mentions"]
        summary.errors += counts["errors"]
    summary.seconds = time.perf_counter() - start
    return summary
