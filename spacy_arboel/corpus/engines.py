"""Where the documents of the pending shards are linked: ``LocalEngine`` (this process) or
``RayEngine`` (Ray Data: ``map_batches`` over an actor pool, each actor loading the
pipeline once). Both yield outcomes batch by batch as ``(shard, outcomes, finished)``,
``finished`` once all of a shard's documents are in; the driver (``link_corpus``) spills
them to disk and writes the shard then, so a shard is written exactly once even when Ray
retries the work of a worker that died, and no shard is held in memory."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import islice
from typing import Any

from ..data.texts import TextRecord, read_texts
from ..ray_cluster import start_ray
from .outcomes import Outcome, link_records
from .shard_writer import docbin_bytes
from .shards import Shard


@dataclass(frozen=True)
class LinkSettings:
    """``model``: the pipeline to load; ``fmt``: ``jsonl`` or ``spacy``; ``batch_size``:
    documents per ``nlp.pipe`` call (and per Ray batch); ``top_k``: candidates kept per
    entity in JSONL; ``overrides``: config overrides for ``spacy.load``; ``vectors``: write
    each shard's mention vectors (``<stem>.vectors.npy``, for ``cluster``)."""

    model: str
    fmt: str = "jsonl"
    batch_size: int = 32
    top_k: int = 5
    overrides: dict[str, Any] = field(default_factory=dict)
    vectors: bool = False


class PipelineLinker:
    """A loaded pipeline that links batches of one shard: the work of one process or one
    Ray actor."""

    def __init__(self, settings: LinkSettings,
                 load: Callable[[LinkSettings], Any] | None = None) -> None:
        self.settings = settings
        self.nlp = (load or load_pipeline)(settings)

    def link(self, records: Sequence[TextRecord], start: int) -> list[Outcome]:
        return link_records(self.nlp, records, start, self.settings.fmt, self.settings.top_k,
                            docbin_bytes, self.settings.vectors)


CROSS_DOCUMENT_FACTORIES = ("arbo_coref",)


def load_pipeline(settings: LinkSettings) -> Any:
    """``spacy.load`` with the overrides, cross-document components disabled: linked batch
    by batch on several workers, their clusters would be those of each batch (cluster the
    linked corpus with the ``cluster`` command instead)."""
    import spacy

    nlp = spacy.load(settings.model, config=settings.overrides)
    for name in cross_document_pipes(nlp.config):
        nlp.disable_pipe(name)
    return nlp


def cross_document_pipes(config: dict) -> list[str]:
    """The components of a pipeline config that cluster across documents."""
    return [name for name in config["nlp"]["pipeline"]
            if config["components"].get(name, {}).get("factory") in CROSS_DOCUMENT_FACTORIES]


def batches(records: Iterable[TextRecord], size: int) -> Iterator[tuple[int, list]]:
    iterator = iter(records)
    start = 0
    while chunk := list(islice(iterator, size)):
        yield start, chunk
        start += len(chunk)


class LocalEngine:
    """Links shard after shard in this process with one loaded pipeline."""

    def __init__(self, settings: LinkSettings,
                 load: Callable[[LinkSettings], Any] | None = None) -> None:
        self.settings, self.load = settings, load
        self._linker: PipelineLinker | None = None

    def run(self, shards: Sequence[tuple[Shard, int]], on_docs: Callable[[int], None]
            ) -> Iterator[tuple[Shard, list[Outcome], bool]]:
        """``shards``: each pending shard with its number of documents."""
        if self._linker is None:
            self._linker = PipelineLinker(self.settings, self.load)
        for shard, _ in shards:
            for start, chunk in batches(read_texts(shard.source), self.settings.batch_size):
                yield shard, self._linker.link(chunk, start), False
                on_docs(len(chunk))
            yield shard, [], True


class RayEngine:
    """Ray Data over the pending shards: one row per shard is expanded by Ray tasks into its
    documents (read where the shard lies: inputs and outputs must be on storage that every
    node sees), which ``map_batches`` links on an actor pool of ``num_workers`` actors (GPU
    actors when ``num_gpus``); an actor that dies is restarted and its batch retried (Ray
    Data's defaults for actor pools: restarts and retries without limit). The driver gathers
    each shard's rows and yields the shard when all its documents are in.

    ``address``: an existing cluster to join (``ray.init(address=...)``); else a local one
    is started with ``num_cpus``. ``load``: how an actor loads the pipeline (default
    ``spacy.load``; tests pass their own)."""

    def __init__(self, settings: LinkSettings, num_workers: int = 1, *,
                 address: str | None = None, num_cpus: int | None = None,
                 num_gpus: float = 0.0,
                 load: Callable[[LinkSettings], Any] | None = None) -> None:
        self.settings, self.num_workers = settings, num_workers
        self.address, self.num_cpus, self.num_gpus = address, num_cpus, num_gpus
        self.load = load

    def run(self, shards: Sequence[tuple[Shard, int]], on_docs: Callable[[int], None]
            ) -> Iterator[tuple[Shard, list[Outcome], bool]]:
        """``shards``: each pending shard with its number of documents."""
        ray = start_ray(self.address, self.num_cpus)
        context = ray.data.DataContext.get_current()  # our own progress bar instead
        context.enable_progress_bars = context.print_on_execution_start = False
        left = {i: n for i, (_, n) in enumerate(shards)}
        pending = {i: shard for i, (shard, _) in enumerate(shards)}
        for i in [i for i, n in left.items() if n == 0]:
            yield pending.pop(i), [], True
        if not pending:
            return
        dataset = (ray.data.from_items([{"shard": i, "path": str(shard.source)}
                                        for i, shard in pending.items()])
                   # reading needs no CPU of its own: the actors hold them all
                   .flat_map(_shard_documents, num_cpus=0)
                   .map_batches(_RayLinker, fn_constructor_args=(self.settings, self.load),
                                batch_size=self.settings.batch_size, batch_format="pandas",
                                compute=ray.data.ActorPoolStrategy(size=self.num_workers),
                                num_cpus=1, num_gpus=self.num_gpus))
        seen: dict[int, set[int]] = {i: set() for i in pending}
        for row in dataset.iter_rows():
            i, position = int(row["shard"]), int(row["position"])
            if i not in pending or position in seen[i]:
                continue  # a row Ray delivered twice (a retried batch)
            seen[i].add(position)
            error = row["error"] if isinstance(row["error"], str) else None
            vectors = row["vectors"] if isinstance(row["vectors"], bytes) else None
            outcome = Outcome(position, str(row["id"]), row["payload"],
                              int(row["mentions"]), error, vectors)
            left[i] -= 1
            on_docs(1)
            yield pending[i], [outcome], left[i] == 0
            if left[i] == 0:
                del pending[i], seen[i]


def _shard_documents(row: dict[str, Any]) -> list[dict[str, Any]]:
    """A shard's documents as rows (shard index, position, id, text)."""
    return [{"shard": row["shard"], "position": position, "id": record.id,
             "text": record.text}
            for position, record in enumerate(read_texts(row["path"]))]


class _RayLinker:
    """A Ray actor: loads the pipeline once, links batches of document rows."""

    def __init__(self, settings: LinkSettings,
                 load: Callable[[LinkSettings], Any] | None = None) -> None:
        self.linker = PipelineLinker(settings, load)

    def __call__(self, batch):  # a pandas DataFrame of document rows
        import pandas

        rows = []
        for shard, group in batch.groupby("shard", sort=False):
            positions = group["position"].tolist()
            records = [TextRecord(str(i), str(t)) for i, t in zip(group["id"], group["text"],
                                                                 strict=True)]
            for position, outcome in zip(positions, self.linker.link(records, 0),
                                         strict=True):
                rows.append({"shard": shard, **outcome.as_row(), "position": position})
        return pandas.DataFrame(rows, columns=["shard", "position", "id", "payload",
                                               "mentions", "error", "vectors"])
