"""``build-index``'s library call (issue 19): embed a KB's rows shard by shard with the
entity encoder of a saved linker, on an engine (``jobs.engines``: local processes or Ray
actors), into a work folder that a rerun resumes (``jobs.kb_vectors``); drop near-duplicate
alias rows as the retriever does; build the FAISS index the guidelines choose by size
(``kb.index_builder``). The result is a ``DenseIndex`` built apart, which the linker saves
as ``index.faiss`` and loads memory-mapped. No spaCy here::

    retriever = DenseRetriever.load(folder)          # or a loaded linker's retriever
    retriever.entities.set_kb(big_kb)
    index = build_kb_index(retriever, EmbedderSource.of(folder, retriever), LocalEngine(),
                           "work/")
    retriever.entities.set_index(index)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..encoders.inputs import InputBuilder, RowLayout
from ..encoders.loading import load_tokenizer
from ..encoders.transformer import load_pooled_encoders
from ..errors import Errors
from ..kb.entity import Entity
from ..kb.index import DenseIndex, near_duplicate_rows
from ..kb.index_builder import EF_SEARCH, NPROBE, build_index, choose_factory, resolve_kind
from ..kb.knowledge_base import KnowledgeBase
from ..linking.dense_retriever import DenseRetriever, RetrieverSettings, row_settings
from ..linking.indexed_kb import IndexedKB
from .engines import Engine
from .kb_vectors import SHARD_ROWS, EmbeddingPlan, ShardStore

# a task: a shard number, the entities whose rows it holds and those rows as the driver laid
# them out over the whole KB; a result: the shard number, its row vectors and the
# fingerprint of the encoder that embedded them
Task = tuple[int, Sequence[Entity], RowLayout]
Result = tuple[int, np.ndarray, str]


@dataclass(frozen=True)
class EmbedderSource:
    """Where a worker finds the entity encoder: a saved linker folder (``tokenizer``,
    ``entity_encoder`` or the shared ``mention_encoder``) and the retriever's settings."""

    folder: str
    settings: dict[str, Any]

    @classmethod
    def of(cls, folder: str | Path, retriever: DenseRetriever) -> EmbedderSource:
        return cls(str(folder), asdict(retriever.settings))


class ShardEmbedder:
    """The entity side of a saved linker, loaded once per worker (the engines' worker):
    embeds the rows of a list of entities with the code that embeds a whole KB
    (``IndexedKB.embed_rows``; fp32 weights, on the GPU when one is visible)."""

    def __init__(self, source: EmbedderSource) -> None:
        self.settings = RetrieverSettings(**source.settings)
        folder = Path(source.folder)
        self.tokenizer = load_tokenizer(str(folder / "tokenizer"))
        self.encoders = load_pooled_encoders(
            DenseRetriever.saved_sources(folder, self.settings), self.settings.pooling,
            self.settings.share_weights, len(self.tokenizer),
            InputBuilder(self.tokenizer).marker_ids)
        if torch.cuda.is_available():
            for encoder in {id(e): e for e in self.encoders.values()}.values():
                encoder.to("cuda")
        self.fingerprint: str | None = None

    def __call__(self, task: Task) -> Result:
        return self.embed(*task)

    def embed(self, shard: int, entities: Sequence[Entity], layout: RowLayout) -> Result:
        rows = IndexedKB(KnowledgeBase(entities), self.tokenizer, self.encoders["entity"],
                         row_settings(self.settings))
        if self.fingerprint is None:
            self.fingerprint = rows.fingerprint()
        # the driver's rows, not the shard's own layout: an alias shadowed by the name of an
        # entity in another shard has no row (``entity_rows``'s ``drop_shadowed``); the rows
        # left out by their words are not embedded (zeros, never read: ``kept_rows``)
        owners, embedded = rows.set_row_layout(layout), rows.rows_to_embed()
        vectors = np.zeros((len(owners), rows.vector_width), dtype="float32")
        vectors[embedded] = rows.embed_rows(rows.inputs_of(embedded))
        return shard, vectors, self.fingerprint


def embed_kb(retriever: DenseRetriever, source: EmbedderSource, engine: Engine,
             work_dir: str | Path, *, shard_rows: int = SHARD_ROWS,
             on_total: Callable[[int], object] | None = None,
             on_rows: Callable[[int], object] | None = None,
             embedder: Callable[[EmbedderSource], ShardEmbedder] = ShardEmbedder
             ) -> tuple[ShardStore, np.ndarray]:
    """Embed the rows of ``retriever``'s KB into the work folder on ``engine``, each of its
    workers loading the encoder of ``source`` once (``embedder``: the worker class; tests
    pass one that dies), skipping the shards the folder already holds; returns the store
    and the entity position behind each row. ``on_total`` gets the number of rows,
    ``on_rows`` the rows of the shards done already, then of each shard embedded."""
    owners = retriever.entities.set_row_layout()
    titles, descriptions, _ = retriever.entities.row_layout()
    if on_total is not None:
        on_total(len(owners))
    plan = EmbeddingPlan.cut(owners, shard_rows, kb_fingerprint=retriever.kb.fingerprint(),
                             encoder_fingerprint=retriever.entities.fingerprint(),
                             granularity=retriever.settings.granularity,
                             similarity=retriever.settings.scoring,
                             mixed_precision=retriever.settings.mixed_precision,
                             dim=retriever.vector_width)
    store = ShardStore(work_dir, plan)
    entities = list(retriever.kb)
    if on_rows is not None:
        on_rows(sum(stop - start for i, (start, stop) in enumerate(plan.shards)
                    if i in store.done))

    def task(shard: int) -> Task:
        start, stop = plan.shards[shard]
        first = owners[start]
        return (shard, entities[first:owners[stop - 1] + 1],
                (titles[start:stop], descriptions[start:stop], owners[start:stop] - first))

    tasks = (task(i) for i in store.pending)
    for shard, vectors, fingerprint in engine.map(partial(embedder, source), tasks):
        if fingerprint != plan.encoder_fingerprint:
            raise ValueError(Errors.E134.format(shard=shard, found=fingerprint,
                                                expected=plan.encoder_fingerprint))
        store.write(shard, vectors)
        if on_rows is not None:
            on_rows(len(vectors))
    return store, owners


def kept_rows(store: ShardStore, owners: np.ndarray, threshold: float | None,
              embedded: np.ndarray) -> np.ndarray:
    """The rows the index holds: all, or those ``IndexedKB.refresh`` keeps: of the
    ``embedded`` rows (``IndexedKB.rows_to_embed``: without the alias rows of an entity's
    words again, which the shards hold as zeros), those that are not near duplicates
    (``near_duplicate_rows``, shard by shard: shards never split an entity's rows)."""
    if threshold is None or len(owners) == int(owners.max()) + 1:
        return np.arange(len(owners))
    keep = []
    for start, stop in store.plan.shards:
        rows = embedded[(embedded >= start) & (embedded < stop)]
        keep.append(rows[near_duplicate_rows(np.asarray(store.vectors[rows]), owners[rows],
                                             threshold)])
    return np.concatenate(keep)


def build_kb_index(retriever: DenseRetriever, source: EmbedderSource,
                   engine: Engine, work_dir: str | Path, *, kind: str = "auto",
                   pq_bytes: int | None = None, refine: bool = True, shard_rows: int = SHARD_ROWS,
                   nprobe: int = NPROBE, ef_search: int = EF_SEARCH,
                   on_total: Callable[[int], object] | None = None,
                   on_rows: Callable[[int], object] | None = None,
                   on_stage: Callable[[str], object] | None = None) -> DenseIndex:
    """Embed ``retriever``'s KB with the encoder of ``source`` on ``engine``
    (``embed_kb``, with its ``on_total`` and ``on_rows``), keep the rows the retriever's
    dedupe threshold keeps, and build the FAISS index of ``kind`` (``auto``: by size;
    ``pq_bytes`` and ``refine``: see ``choose_factory``); returns it as a ``DenseIndex``
    built apart, with the metadata that ties it to this KB and encoder."""
    store, owners = embed_kb(retriever, source, engine, work_dir, shard_rows=shard_rows,
                             on_total=on_total, on_rows=on_rows)
    threshold = retriever.settings.row_dedupe_threshold
    keep = kept_rows(store, owners, threshold, retriever.entities.rows_to_embed())
    dim = store.plan.dim
    factory = choose_factory(len(keep), dim, kind, pq_bytes, refine)
    if on_stage is not None:
        on_stage(f"building {factory} over {len(keep)} rows")
    index = build_index(store.vectors, factory, rows=keep, nprobe=nprobe,
                        ef_search=ef_search)
    meta = replace(retriever.entities.index_meta(dim, len(keep)),
                   kind=resolve_kind(len(keep), kind), factory=factory,
                   dedupe_threshold=threshold)
    return DenseIndex.from_faiss(index, owners[keep], meta, rows=keep)
