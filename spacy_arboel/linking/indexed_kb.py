"""A knowledge base with what searches it: the tokenizer, the entity encoder, the layout of
the KB's rows, their FAISS index and the fingerprints of what built it (no spaCy).

The one owner of these for every core class: the bi-encoder (``DenseRetriever``, BLINK §3.1)
and the end-to-end readers (``SpanReader``, ``RetrieverReader``) each hold an ``IndexedKB``
and add their own mention-side modules. Its ``version`` counts the entity encoder's weight
updates: the index is current while it was built by the current version for the current KB.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import torch
from tqdm import tqdm

from ..encoders.inputs import InputBuilder, RowLayout, entity_rows
from ..encoders.transformer import bf16_copy
from ..encoders.weights import (
    ModuleCopies,
    forward_without_grad,
    inference_batch_size,
    runs_bf16,
    weights_fingerprint,
)
from ..errors import Errors
from ..kb.index import (
    DenseIndex,
    IndexMeta,
    half_grid,
    near_duplicate_rows,
    read_index_meta,
    text_duplicate_rows,
)
from ..kb.knowledge_base import KnowledgeBase
from ..objectives.gathered import shared_rows
from .saved_core import SavedCore

T = TypeVar("T")


@dataclass(frozen=True)
class RowSettings:
    """What the KB's rows and their index are built with.

    ``granularity``: a row per entity (``name [TITLE] description``) or per name and alias;
    ``inputs``: ``blink`` or ``names`` (``encoders.inputs``; under ``names`` an alias that is
    another entity's preferred name is left to that entity); ``cosine``: rows are unit
    vectors; ``dedupe_threshold``: an alias row is left out when another row of its entity has
    the same words (``text_duplicate_rows``, before embedding) or cosine similarity at least
    this high (``near_duplicate_rows``); None keeps every row;
    ``batch_size``: rows per forward pass and ``cpu_bf16``: embed with a bfloat16 copy of
    the encoder on a CPU with native bfloat16 (``encoders.weights.runs_bf16``); neither is
    part of what the index depends on.
    """

    entity_max_length: int = 32
    pooling: str = "cls"
    granularity: str = "entity"
    inputs: str = "blink"
    cosine: bool = False
    dedupe_threshold: float | None = None
    index_kind: str = "flat"
    mixed_precision: bool = False
    batch_size: int = 64
    cpu_bf16: bool = False

    def builds_same_index(self, other: RowSettings) -> bool:
        """Whether an index built with ``other`` is one built with these settings."""
        return replace(self, batch_size=0, cpu_bf16=False) == replace(other, batch_size=0,
                                                                      cpu_bf16=False)


def normalized(vectors: np.ndarray, cosine: bool) -> np.ndarray:
    """Unit vectors under cosine similarity, else the vectors as they are."""
    if not cosine:
        return vectors
    return vectors / np.maximum(np.linalg.norm(vectors, axis=-1, keepdims=True), 1e-12)


def embed_sequences(builder: InputBuilder, sequences: Sequence[Sequence[int]], batch_size: int,
                    forward: Callable[[np.ndarray, np.ndarray], np.ndarray],
                    desc: str | None = None) -> np.ndarray:
    """``forward(ids, mask)`` over wordpiece id sequences in length-sorted padded batches,
    the vectors returned in the input's order."""
    order, batches = builder.sorted_batches(sequences, batch_size)
    if desc:
        batches = tqdm(batches, desc=desc, unit="batch", leave=False, disable=None)
    outputs = [forward(ids, mask) for ids, mask in batches]
    if not outputs:
        return np.zeros((0, 1), dtype="float32")
    vectors = np.concatenate(outputs).astype("float32")
    result = np.empty_like(vectors)
    result[order] = vectors
    return result


def rows_by_entity(owners: np.ndarray) -> list[list[int]]:
    """The index rows of each entity position, in increasing order."""
    rows: list[list[int]] = [[] for _ in range(int(owners.max()) + 1)]
    for row, owner in enumerate(owners):
        rows[int(owner)].append(row)
    return rows


@dataclass(frozen=True)
class PreviousRows:
    """The index ``IndexedKB.set_kb`` replaced, with the KB and row layout it was built for:
    what the next ``refresh`` reuses while the weights (``version``) and the settings are
    the same. A row's vector depends on its text and description alone, and which of an
    entity's rows the index keeps on that entity's rows alone (``text_duplicate_rows``,
    ``near_duplicate_rows``), so an entity whose rows are unchanged keeps its rows as they
    were, and a row of new text is the only one embedded: five aliases added to HPO's
    19,034 entities re-index in about a second, not 55 s (BENCHMARKS.md, issue 62)."""

    version: int
    settings: RowSettings
    kb: KnowledgeBase
    layout: RowLayout
    index: DenseIndex

    def holds(self, entities: IndexedKB) -> bool:
        """Whether ``entities`` embeds as this index was embedded."""
        return (entities.version == self.version
                and entities.settings.builds_same_index(self.settings))

    def carried(self, entities: IndexedKB
                ) -> tuple[dict[int, bool], dict[tuple[str, str], np.ndarray]]:
        """For ``entities``'s new row layout: whether each row of an entity whose rows
        (id, texts and descriptions, in order) are unchanged is kept in the index (True)
        or left out (False), and the old index's vector of each (text, description)."""
        titles, descriptions, owners = self.layout
        index_rows = {int(row): i for i, row in enumerate(self.index.rows)}
        vectors = self.index.embeddings
        known: dict[tuple[str, str], np.ndarray] = {}
        before: dict[str, tuple[tuple, list[bool]]] = {}
        for position, rows in enumerate(rows_by_entity(owners)):
            keys = tuple((titles[r], descriptions[r]) for r in rows)
            for key, row in zip(keys, rows, strict=True):
                if row in index_rows:
                    known.setdefault(key, vectors[index_rows[row]])
            before[self.kb.entity_at(position).id] = (keys, [r in index_rows for r in rows])
        new_titles, new_descriptions, new_owners = entities.row_layout()
        settled: dict[int, bool] = {}
        for position, rows in enumerate(rows_by_entity(new_owners)):
            keys = tuple((new_titles[r], new_descriptions[r]) for r in rows)
            old = before.get(entities.kb.entity_at(position).id)
            if old is not None and old[0] == keys:
                settled.update(zip(rows, old[1], strict=True))
        return settled, known


class IndexedKB:
    """A KB, its tokenizer and entity encoder, and the index of its rows.

    ``encoder``: the pooled entity encoder (``encoder(ids, mask)`` gives one vector a row);
    it may be trained elsewhere: call ``changed()`` after each weight update and
    ``ensure_index()`` before searching again. ``check_layout``: whether a loaded index must
    have this KB's row layout (a reader's may have a bi-encoder's: ``reuse_index``).
    """

    def __init__(self, kb: KnowledgeBase, tokenizer, encoder: torch.nn.Module,
                 settings: RowSettings = RowSettings(), check_layout: bool = True) -> None:
        self.tokenizer = tokenizer
        self.encoder = encoder
        self.settings = settings
        self.check_layout = check_layout
        self.builder = InputBuilder(tokenizer, entity_max_length=settings.entity_max_length,
                                    inputs=settings.inputs)
        self.version = 0
        self._fingerprints: dict[tuple[str, int], str] = {}
        self._bf16 = ModuleCopies(bf16_copy)
        self.set_kb(kb)

    # --- the KB, the settings and the weights ------------------------------------------------

    def set_kb(self, kb: KnowledgeBase) -> None:
        """Use another knowledge base (E003 when empty); its index is built by the next
        ``refresh()``, which embeds only the rows whose text the current index lacks
        (``PreviousRows``)."""
        if len(kb) == 0:
            raise ValueError(Errors.E003)
        # the rows of the index dropped here, reused by the next ``refresh`` while the
        # weights and settings stay the same (``PreviousRows``)
        self._previous = (self._previous_rows() if getattr(self, "index", None) is not None
                          else None)
        self.kb = kb
        self.index: DenseIndex | None = None
        self.rows_of: list[list[int]] = []
        self._index_version = -1
        self._layout: RowLayout | None = None
        self._row_inputs: list[list[int] | None] | None = None
        self._derived: dict[str, Any] = {}
        self._index_row_texts: tuple[object, list[str]] | None = None

    def derived(self, name: str, make: Callable[[], T]) -> T:
        """What a core derives from the KB (a lexical index, entity inputs), made by
        ``make()`` when first asked for and dropped with the KB (``set_kb``)."""
        if name not in self._derived:
            self._derived[name] = make()
        return self._derived[name]

    def use_settings(self, settings: RowSettings) -> None:
        """Build rows with these settings from now on; the index is stale until the next
        refresh unless they build the same index."""
        old, self.settings = self.settings, settings
        self.builder = InputBuilder(self.tokenizer, entity_max_length=settings.entity_max_length,
                                    inputs=settings.inputs)
        if not old.builds_same_index(settings):
            self._layout = self._row_inputs = None
            self._fingerprints = {}
            self.changed()

    def use_encoder(self, encoder: torch.nn.Module) -> None:
        """Embed rows with another entity encoder from now on (the index is stale unless it
        is the same module)."""
        if encoder is not self.encoder:
            self.changed()
        self.encoder = encoder
        self._fingerprints = {}
        self._bf16.clear()

    def changed(self) -> None:
        """Note that the encoders' weights changed: the index is stale until refreshed."""
        self.version += 1

    @property
    def is_current(self) -> bool:
        """Whether the index was built by the current weights for the current KB."""
        return self.index is not None and self._index_version == self.version

    def fingerprint(self, name: str = "entity", module: torch.nn.Module | None = None,
                    max_length: int | None = None) -> str:
        """A hash of an encoder's weights and input settings (default: the entity encoder),
        cached per weights version: hashing the weights takes a while."""
        key = (name, self.version)
        if key not in self._fingerprints:
            self._fingerprints = {k: v for k, v in self._fingerprints.items()
                                  if k[1] == self.version}
            settings = self.settings
            # ``names`` inputs are named so that no index of the other inputs passes for one
            inputs = [settings.inputs] if settings.inputs != "blink" else []
            length = settings.entity_max_length if max_length is None else max_length
            self._fingerprints[key] = weights_fingerprint(
                [length, settings.pooling, *inputs],
                self.encoder if module is None else module)
        return self._fingerprints[key]

    @property
    def vector_width(self) -> int:
        """The width of the entity vectors."""
        return self.encoder.transformer.config.hidden_size

    # --- rows ----------------------------------------------------------------------------------

    def set_row_layout(self, layout: RowLayout | None = None) -> np.ndarray:
        """Lay the KB out in rows (or use ``layout``: a shard of the rows laid out over a
        whole KB, which a shard's entities alone cannot give where aliases are shadowed by
        names of entities in other shards); returns the entity position behind each row.
        The rows are tokenised when first needed (``row_inputs``, ``inputs_of``: building
        the index, training), not at load: a pipeline that only links never tokenises its
        KB."""
        self._row_inputs = None
        self._layout = layout
        return self._entity_rows()[2]

    def row_layout(self) -> RowLayout:
        """The text, description and entity position of each row (``entity_rows``)."""
        return self._entity_rows()

    def row_texts(self) -> list[str]:
        """The name or alias of each row, in the layout of ``set_row_layout``."""
        return self._entity_rows()[0]

    def _entity_rows(self) -> RowLayout:
        if self._layout is None:
            self._layout = entity_rows(list(self.kb), self.settings.granularity,
                                       drop_shadowed=self.settings.inputs == "names")
        return self._layout

    @property
    def row_inputs(self) -> list[list[int]]:
        """The wordpiece ids of each KB row, in the layout of ``set_row_layout``."""
        return self.inputs_of(range(len(self._entity_rows()[2])))

    def inputs_of(self, rows: Sequence[int]) -> list[list[int]]:
        """The wordpiece ids of ``rows`` of the layout, tokenising only those not yet
        tokenised (the rows ``refresh`` leaves out by their words never are)."""
        titles, descriptions, owners = self._entity_rows()
        if self._row_inputs is None:
            self._row_inputs = [None] * len(owners)
        todo = [r for r in rows if self._row_inputs[r] is None]
        if todo:
            found = self.builder.entity_ids([titles[r] for r in todo],
                                            [descriptions[r] for r in todo])
            for row, ids in zip(todo, found, strict=True):
                self._row_inputs[row] = ids
        return [self._row_inputs[r] for r in rows]

    def rows_to_embed(self) -> np.ndarray:
        """The rows of the layout that are embedded: all, or under ``dedupe_threshold`` all
        but the alias rows of an entity's words again (``text_duplicate_rows``), sorted."""
        owners = self._entity_rows()[2]
        if self.settings.dedupe_threshold is None or len(owners) == len(self.kb):
            return np.arange(len(owners))
        return text_duplicate_rows(self.row_texts(), owners)

    def inference_module(self, name: str, module: torch.nn.Module,
                         modules: dict[str, torch.nn.Module] | None = None) -> torch.nn.Module:
        """``module`` as passes without gradient run it: its bfloat16 copy for the current
        weights under ``cpu_bf16`` where the CPU has native bfloat16 (``runs_bf16``), else
        itself. ``name`` and ``modules`` (a core's other named modules) as in
        ``ModuleCopies.get``: the copy of the entity encoder is shared with its other names."""
        if not runs_bf16(module, self.settings.cpu_bf16):
            return module
        return self._bf16.get(name, module, self.version, {"entity": self.encoder,
                                                           **(modules or {})})

    def forward(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """Embed one padded batch of rows with the entity encoder (``inference_module``),
        without gradient."""
        return normalized(forward_without_grad(
            self.inference_module("entity", self.encoder), (ids, mask),
            mixed_precision=self.settings.mixed_precision), self.settings.cosine)

    def embed_rows(self, sequences: Sequence[Sequence[int]] | None = None,
                   desc: str | None = None) -> np.ndarray:
        """The vectors of ``sequences`` of row inputs (default: every row), rounded to
        float16 as an index holds them (``kb.index.half_grid``)."""
        sequences = self.row_inputs if sequences is None else sequences
        return half_grid(embed_sequences(self.builder, sequences, inference_batch_size(
            self.settings.batch_size, self.encoder), self.forward, desc))

    # --- the index -----------------------------------------------------------------------------

    def index_meta(self, dim: int, n_rows: int) -> IndexMeta:
        """What an index built now would be built from."""
        return IndexMeta(self.kb.fingerprint(), self.fingerprint(), dim, n_rows,
                         self.settings.index_kind, self.settings.granularity,
                         self.settings.inputs)

    def set_index(self, index: DenseIndex) -> None:
        """Use ``index`` as built by the current weights; training addresses rows by their
        position in it (``index.rows`` maps them back to ``row_inputs`` where near-duplicate
        rows were dropped)."""
        self.index = index
        self.rows_of = rows_by_entity(index.owners)
        self._index_version = self.version

    def refresh(self, desc: str | None = "Embedding KB", across_ranks: bool = False) -> None:
        """Embed the KB's rows with the current entity encoder (``embed_rows``) and rebuild
        the index (the rows ``dedupe_threshold`` leaves out by their words are not
        embedded). After ``set_kb`` with the same weights and settings, the rows of the
        index it replaced are reused (``PreviousRows.carried``): only the rows of new text
        are embedded and only the changed entities' rows checked for near duplicates, which
        gives the index a full rebuild gives. ``across_ranks``: every rank of a data-parallel
        run calls it at the same step, and each embeds its share of the rows
        (``objectives.gathered.shared_rows``): all get the same index."""
        owners = self.set_row_layout()
        threshold = self.settings.dedupe_threshold
        previous, self._previous = self._previous, None
        rows = self.rows_to_embed()
        settled, known = (previous.carried(self) if previous is not None
                          and previous.holds(self) else ({}, {}))
        # rows of unchanged entities keep their place (kept or left out); the others are
        # embedded unless their text is in the old index, then checked for duplicates
        needed = np.asarray([r for r in rows if settled.get(int(r), True)], dtype="int64")
        vectors = self._vectors_of(needed, known, desc, across_ranks)
        keep = np.arange(len(needed))
        open_rows = np.asarray([i for i, r in enumerate(needed) if int(r) not in settled],
                               dtype="int64")
        if threshold is not None and len(rows) > len(self.kb) and len(open_rows):
            checked = open_rows[near_duplicate_rows(vectors[open_rows],
                                                    owners[needed[open_rows]], threshold)]
            kept = [i for i, r in enumerate(needed) if settled.get(int(r))]
            keep = np.sort(np.concatenate([kept, checked]).astype("int64"))
        meta = replace(self.index_meta(vectors.shape[1], len(keep)),
                       dedupe_threshold=threshold)
        self.set_index(DenseIndex(vectors[keep], owners[needed][keep], meta,
                                  rows=needed[keep]))

    def _vectors_of(self, rows: np.ndarray, known: dict[tuple[str, str], np.ndarray],
                    desc: str | None, across_ranks: bool = False) -> np.ndarray:
        """The vectors of layout ``rows``: ``known``'s of their (text, description), the
        others embedded (``embed_rows``; each rank its share, ``across_ranks``)."""
        titles, descriptions = self.row_texts(), self._entity_rows()[1]
        keys = [(titles[r], descriptions[r]) for r in rows]
        at = [i for i, key in enumerate(keys) if key not in known]
        missing, embedded = rows[at], None

        def embed(part: slice) -> np.ndarray:
            return self.embed_rows(self.inputs_of(missing[part]), desc=desc)

        if len(missing):
            embedded = (shared_rows(len(missing), embed, "the KB's vectors") if across_ranks
                        else embed(slice(None)))
        width = embedded.shape[1] if embedded is not None else len(known[keys[0]])
        vectors = np.empty((len(rows), width), dtype="float32")
        if embedded is not None:
            vectors[at] = embedded
        for i, key in enumerate(keys):
            if key in known:
                vectors[i] = known[key]
        return vectors

    def _previous_rows(self) -> PreviousRows | None:
        """What the next ``refresh`` may reuse of the current index: its rows, while it is
        current and holds its vectors (not one built apart)."""
        if not self.is_current or self.index.meta.built_apart:
            return None
        return PreviousRows(self.version, self.settings, self.kb, self._entity_rows(),
                            self.index)

    def ensure_index(self) -> None:
        """Refresh the index unless it is current."""
        if not self.is_current:
            self.refresh()

    def ready_index(self) -> DenseIndex:
        """The current index (E050 before ``ensure_index``/``load_index``)."""
        if not self.is_current:
            raise RuntimeError(Errors.E050)
        return self.index

    def index_row_texts(self) -> list[str]:
        """The name of each row of the current index, by index position (kept until the
        index is built again): what ``rows_of`` and a search's rows point at."""
        if self._index_row_texts is None or self._index_row_texts[0] is not self.rows_of:
            texts = self.row_texts()
            self._index_row_texts = (self.rows_of, [texts[int(r)] for r in self.index.rows])
        return self._index_row_texts[1]

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Top-``k`` (scores, entity positions) per query vector, -1 where fewer exist."""
        return self.ready_index().search(queries, k)

    def row_vectors(self, rows: np.ndarray) -> np.ndarray:
        """The vectors of index rows (reconstructed from FAISS for an index built apart)."""
        try:
            return self.index.embeddings[rows]
        except ValueError:  # an index built apart: its rows as FAISS stores them
            return np.stack([self.index.index.reconstruct(int(r)) for r in rows])

    def reuse_index(self, kb: KnowledgeBase, index: DenseIndex) -> bool:
        """Take ``index`` of ``kb`` when ``kb`` is this KB and the index was embedded by the
        entity encoder that ours copies; returns whether it did."""
        if kb.fingerprint() != self.kb.fingerprint():
            return False
        meta = self.index_meta(index.embeddings.shape[1], len(index.embeddings))
        self.set_index(DenseIndex(index.embeddings, index.owners, meta, rows=index.rows))
        return True

    def load_index(self, path: Path) -> None:
        """Load a saved index, checked against this KB (E012), the entity encoder and, with
        ``check_layout``, the row layout (E004, ``IndexFileError``)."""
        saved = read_index_meta(path)
        # checked before the (possibly HNSW/IVF) index is built
        if saved.kb_fingerprint != self.kb.fingerprint():
            raise ValueError(Errors.E012.format(saved=saved.kb_fingerprint,
                                                found=self.kb.fingerprint()))
        n_layout_rows = len(self.set_row_layout()) if self.check_layout else None
        self.set_index(DenseIndex.from_disk(
            path, expected=self.index_meta(self.vector_width, saved.n_rows),
            kind=self.settings.index_kind, dedupe_threshold=self.settings.dedupe_threshold,
            n_entities=len(self.kb), n_layout_rows=n_layout_rows))

    # --- saving ----------------------------------------------------------------------------------

    def writers(self) -> dict[str, Callable[[Path], Any]]:
        """What a saved core holds of it, by entry name: the KB, the tokenizer and the index
        (build it first: ``ensure_index``)."""
        return {"kb.jsonl": self.kb.to_jsonl,
                "tokenizer": lambda p: self.tokenizer.save_pretrained(str(p)),
                "index": lambda p: self.ready_index().to_disk(p)}


class OverIndexedKB(SavedCore):
    """A core over an ``IndexedKB`` (``entities``): its KB, tokenizer and index, saved with
    the modules of ``module_writers`` (``SavedCore``)."""

    entities: IndexedKB

    @property
    def kb(self) -> KnowledgeBase:
        return self.entities.kb

    @property
    def tokenizer(self):
        return self.entities.tokenizer

    @property
    def index(self) -> DenseIndex | None:
        return self.entities.index

    def module_writers(self) -> dict[str, Callable[[Path], Any]]:
        """Writers of the PyTorch modules, by saved name."""
        raise NotImplementedError

    def writers(self) -> dict[str, Callable[[Path], Any]]:
        """What ``save`` writes, by entry name: the KB, tokenizer, ``module_writers()`` and
        index (build it first: ``entities.ensure_index``)."""
        writers = self.entities.writers()
        index = writers.pop("index")
        return {**writers, **self.module_writers(), "index": index}

    def save(self, path: str | Path) -> list[str]:
        """``SavedCore.save`` after building the index unless it is current."""
        self.entities.ensure_index()
        return super().save(path)

    def restore(self, saved: dict[str, Any], path: Path) -> None:
        """Load the saved index, checked against the KB and the entity encoder
        (``IndexedKB.load_index``)."""
        self.entities.load_index(path / "index")
