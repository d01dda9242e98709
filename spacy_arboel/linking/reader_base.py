"""What both end-to-end readers share: the KB and its fixed entity index (an ``IndexedKB``),
entity labels, the modules' forward passes, saving and loading (numpy/torch/faiss; no spaCy).

``RetrieverReader`` (EntQA / BEER², a reader pass per passage and candidate) and
``SpanReader`` (ELQ-style, one pass per passage) subclass ``ReaderBase``.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..encoders.inputs import InputBuilder
from ..encoders.loading import load_tokenizer
from ..encoders.passages import PassageBuilder
from ..encoders.reader_heads import ENTITY_POOLINGS
from ..encoders.weights import (
    ModuleCopies,
    autocast,
    forward_without_grad,
    module_device,
)
from ..errors import Errors
from ..kb.index_builder import INDEX_KINDS
from ..kb.knowledge_base import KnowledgeBase
from ..kb.type_rule import TypeRule
from ..settings import PositiveInt, Probability, choices
from .dense_retriever import GRANULARITIES, RetrieverSettings
from .indexed_kb import IndexedKB, OverIndexedKB, RowSettings

ENTITY_BATCH = 64


@dataclass(frozen=True)
class PassageReaderSettings:
    """The settings both readers have: passages of ``passage_length`` wordpieces every
    ``passage_stride``; entities as ``entity_max_length`` wordpieces, a row per entity or
    per alias (``entity_granularity``), pooled by ``entity_pooling``, in an index of
    ``index_kind``; ``top_k`` candidates at inference and ``train_top_k`` in training (the
    gold entities are added); links kept above ``threshold``; spans of at most
    ``max_span_length`` words; ``batch_size`` passages per forward pass; int8 copies
    (``quantize``, CPU) and mixed precision (GPU). The defaults are ``arbo_linker``'s."""

    passage_length: int = 128
    passage_stride: int = 96
    entity_max_length: int = 32
    entity_granularity: choices(GRANULARITIES) = RetrieverSettings.entity_granularity
    top_k: PositiveInt = 16
    train_top_k: PositiveInt = 8
    threshold: Probability = 0.3
    max_span_length: PositiveInt = 24
    # auto: flat up to 100k rows, HNSW above (the BC5CDR span reader over 199,829 alias rows:
    # InKB F1 81.9 at 11.1 abstracts/s with HNSW, 82.0 at 6.5 flat; BENCHMARKS.md, issue 41)
    index_kind: choices(INDEX_KINDS) = "auto"
    batch_size: PositiveInt = 8
    quantize: bool = False
    entity_pooling: choices(ENTITY_POOLINGS) = "mean"
    mixed_precision: bool = False


class ReaderBase(OverIndexedKB):
    """The KB and its fixed entity index (``entities``, an ``IndexedKB`` over
    ``modules["entity"]``, the pooled, frozen entity encoder), the passages and the PyTorch
    modules of a reader. The index may be a bi-encoder's, of its row layout
    (``entities.reuse_index`` after ``modules_from``, a span reader's after
    ``modules_from_reader``): a loaded index is not checked against this reader's layout.

    ``settings`` (of the subclass's ``SETTINGS``) needs ``passage_length``,
    ``passage_stride``, ``entity_max_length``, ``entity_pooling``, ``entity_granularity``,
    ``index_kind``, ``quantize`` and ``mixed_precision``. ``OP_MODULES`` maps each forward op
    to the module that runs it; ``PLAIN_OPS`` are called without the op name.
    """

    OP_MODULES: dict[str, str] = {"entity": "entity"}
    PLAIN_OPS: tuple[str, ...] = ("entity",)
    STATE_FILE = "retriever_reader.json"

    def __init__(self, kb: KnowledgeBase, tokenizer, modules: dict[str, torch.nn.Module],
                 settings: Any) -> None:
        self.settings = settings
        self.passages = PassageBuilder(tokenizer, settings.passage_length,
                                       settings.passage_stride, settings.entity_max_length)
        self.modules = modules
        self.entities = IndexedKB(kb, tokenizer, modules["entity"], RowSettings(
            settings.entity_max_length, settings.entity_pooling, settings.entity_granularity,
            index_kind=settings.index_kind, mixed_precision=settings.mixed_precision,
            batch_size=ENTITY_BATCH), check_layout=False)
        self.updates = 0
        self.entity_labels: dict[str, str] = {}
        self._int8 = ModuleCopies()

    # --- labels --------------------------------------------------------------------------------

    def learn_labels(self, mentions: Iterable[tuple[Sequence[str], str]]) -> None:
        """For each entity without a KB type, the label it has most often among the
        ``(gold ids, label)`` of the training mentions."""
        counts: dict[str, Counter] = defaultdict(Counter)
        for ids, label in mentions:
            for i in ids:
                if i in self.kb and not self.kb[i].types:
                    counts[i][label] += 1
        self.entity_labels = {i: c.most_common(1)[0][0] for i, c in sorted(counts.items())}

    def label_of(self, kb_id: str, default: str, rule: TypeRule | None = None) -> str:
        """The ent label of a span linked to ``kb_id``: the first label of the type
        ``rule`` whose types meet the entity's, else the entity's first KB type, else its
        learnt label, else ``default``."""
        types = self.kb[kb_id].types
        label = rule.label_for(types) if rule is not None else None
        return label or (types[0] if types else self.entity_labels.get(kb_id, default))

    # --- the KB's entities (held by ``entities``) ---------------------------------------------

    def entity_text(self, position: int) -> list[int]:
        """The reader's entity side, ``name [TITLE] description`` (cached with the KB)."""
        cache: dict[int, list[int]] = self.entities.derived("entity_text", dict)
        if position not in cache:
            entity = self.kb.entity_at(position)
            cache[position] = self.passages.entity_text_ids(
                [entity.name], [InputBuilder.entity_description(entity)])[0]
        return cache[position]

    def entity_scores(self, queries: torch.Tensor, candidates: np.ndarray) -> torch.Tensor:
        """Q of each query (P, d) with its candidate entities (P, C): the best of the
        entity's rows (one row per entity, or one per alias); -inf at padding (-1)."""
        n_queries, n_candidates = candidates.shape
        rows_of = self.entities.rows_of
        pair_index, row_index = [], []
        for flat, position in enumerate(candidates.ravel()):
            if position >= 0:
                rows = rows_of[int(position)]
                pair_index.extend([flat] * len(rows))
                row_index.extend(rows)
        device = queries.device
        rows = torch.as_tensor(self.entities.row_vectors(np.asarray(row_index, "int64")),
                               device=device)
        pair_t = torch.as_tensor(pair_index, dtype=torch.long, device=device)
        values = (queries[pair_t // n_candidates] * rows).sum(-1)
        out = torch.full((n_queries * n_candidates,), float("-inf"), device=device,
                         dtype=queries.dtype)
        out = out.scatter_reduce(0, pair_t, values, reduce="amax", include_self=True)
        return out.reshape(n_queries, n_candidates)

    def search(self, queries: np.ndarray, k: int) -> np.ndarray:
        """Top-k entity positions per query. Where a KB with many rows per entity yields
        fewer than k distinct entities, the lowest positions not yet present fill the row
        (extra negatives), so every passage has exactly k candidates."""
        index = self.entities.ready_index()
        found = index.search(queries, k)[1]
        for i in np.flatnonzero((found < 0).any(axis=1)):
            present = set(found[i][found[i] >= 0].tolist())
            fill = (e for e in range(index.n_entities) if e not in present)
            found[i] = [c if c >= 0 else next(fill) for c in found[i]]
        return found

    # --- forward passes ---------------------------------------------------------------------

    def _forward(self, module: torch.nn.Module, inputs: tuple, train: bool):
        """A forward pass of ``(op, *arrays)`` with gradient (training)."""
        op, *arrays = inputs
        device = module_device(module)
        module.train(train)
        tensors = [torch.as_tensor(a, dtype=torch.long, device=device) for a in arrays]
        args = tensors if op in self.PLAIN_OPS else [op, *tensors]
        with autocast(device, self.settings.mixed_precision):
            return module(*args)

    def run(self, inputs: tuple):
        """A forward pass without gradient of ``(op, *arrays)`` (``OP_MODULES`` says which
        module runs an op), as numpy; int8 copies of the trained modules when ``quantize``
        is set (the entity encoder is fixed and only builds the index)."""
        op, *arrays = inputs
        name = self.OP_MODULES[op]
        module = self.modules[name]
        if self.settings.quantize and name != "entity":
            module = self._int8.get(name, module, self.updates)
        return forward_without_grad(module, arrays, mixed_precision=self.settings.mixed_precision,
                                    prefix=() if op in self.PLAIN_OPS else (op,))

    @classmethod
    def from_pretrained(cls, kb: KnowledgeBase, encoder_name: str, settings: Any = None):
        """Every transformer from one base encoder (a name or path, offline first)."""
        settings = cls.SETTINGS() if settings is None else settings
        tokenizer = load_tokenizer(encoder_name)
        return cls(kb, tokenizer, cls.base_modules(encoder_name, len(tokenizer), settings),
                   settings)

    @staticmethod
    def base_modules(name: str, vocab_size: int, settings: Any) -> dict[str, torch.nn.Module]:
        """A subclass's modules, every transformer from the base encoder ``name``."""
        raise NotImplementedError

    # --- saving and loading (``SavedCore``: safetensors, JSON, numpy; no pickle) -------------

    def saved_state(self) -> dict[str, Any]:
        """The settings, update count and learnt labels."""
        return {"settings": asdict(self.settings), **self.learnt_state()}

    def learnt_state(self) -> dict[str, Any]:
        """The update count and learnt labels (an ``arbo_linker``'s ``cfg.json`` holds them)."""
        return {"updates": self.updates, "labels": self.entity_labels}

    def restore_learnt(self, saved: dict[str, Any]) -> None:
        """The update count and learnt labels of ``learnt_state``."""
        self.updates = int(saved["updates"])
        self.entity_labels = dict(saved["labels"])

    @classmethod
    def loaded_settings(cls, saved: dict[str, Any], overrides: dict[str, Any],
                        path: Path) -> Any:
        """The saved settings (``settings`` of the state file) with ``overrides``."""
        return cls.SETTINGS(**{**saved["settings"], **overrides})

    def restore(self, saved: dict[str, Any], path: Path) -> None:
        """The update count, the learnt labels and the index."""
        self.restore_learnt(saved)
        super().restore(saved, path)


STRUCTURAL = ("entity_granularity", "share_weights", "cross_reread")
ARCHITECTURES = {"span": "spacy_arboel.SpanReader.v1", "passage": "spacy_arboel.RetrieverReader.v1"}


def structural_settings(settings: Any) -> dict[str, Any]:
    """The settings of a reader that its saved weights and index depend on."""
    return {k: getattr(settings, k) for k in STRUCTURAL if hasattr(settings, k)}


def check_saved_settings(saved: dict[str, Any], configured: dict[str, Any], name: str,
                         path: Path) -> None:
    """A saved reader's architecture (``reader``) and structural settings must be the
    configured ones: the config is the source of truth, never silently overridden (E056,
    E080). A setting ``saved`` lacks (its cfg.json left out) is not checked."""
    for setting, value in configured.items():
        if saved.get(setting, value) == value:
            continue
        if setting == "entity_granularity":
            raise ValueError(Errors.E056.format(name=name, path=path, found=saved[setting],
                                                configured=value))
        shown = (("model.@architectures", ARCHITECTURES[saved[setting]], ARCHITECTURES[value])
                 if setting == "reader" else (f"model.{setting}", saved[setting], value))
        raise ValueError(Errors.E080.format(name=name, path=path, setting=shown[0],
                                            found=shown[1], configured=shown[2]))


def check_linker_source(settings: Any, retriever_settings: Any, pooling: str, name: str,
                        path: Path) -> None:
    """Whether a reader of ``settings`` can start from an ``arbo_entity_linker`` (BEER²
    starts from BLINK's bi-encoder) whose retriever has ``retriever_settings`` and pools with
    ``pooling``: its index needs the same entity pooling (E022) and granularity (E056)."""
    wanted = "cls" if pooling == "cls" else "mean"
    if settings.entity_pooling != wanted:
        raise ValueError(Errors.E022.format(pooling=pooling, wanted=wanted,
                                            found=settings.entity_pooling))
    if settings.entity_granularity != retriever_settings.entity_granularity:
        raise ValueError(Errors.E056.format(
            name=name, path=path, found=retriever_settings.entity_granularity,
            configured=settings.entity_granularity))
