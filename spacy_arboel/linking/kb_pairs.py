"""The KB's positive name pairs: what SapBERT's self-alignment trains on.

SapBERT (Liu et al., NAACL 2021, "Self-Alignment Pretraining for Biomedical Entity
Representations", §2; code: github.com/cambridgeltl/sapbert) needs nothing but the KB: each
training batch holds ``(name, synonym)`` pairs of entities. Here those pairs are drawn as
SapBERT's data script draws them: all ``C(k, 2)`` pairs of an entity's k names, a random 50
when there are more (``max_pairs_per_entity``). SapBERT's script lower-cases and
de-duplicates names; we de-duplicate them case-insensitively (:func:`distinct_names`) and
leave the casing to the tokenizer, which lower-cases for an uncased vocabulary.

Deviations, and why:

* **Single-name entities** give no pair (as in SapBERT's data script, which drops them); they
  are counted (``entities_without_pair``) rather than yielded as (name, name) "self pairs",
  which would add a positive with S = 1 (no gradient) and a second copy of the same negative.
* **Streaming**: pairs are drawn entity by entity in a seeded random entity order and mixed in
  a bounded shuffle buffer, so memory is one entity's names plus the buffer, not all pairs
  of the KB (SapBERT writes all pairs to a file and shuffles them globally).
* **Opposites** (not in SapBERT): :func:`opposite_pairs` and :func:`with_opposite_pairs` put
  a pair of an entity's opposite (*Tall stature* for *Short stature*,
  ``opposites.opposite_entities``) right after each of its pairs, so that both are in one
  batch as hard negatives.

:func:`check_pairs` and :func:`count_positive_pairs` count the pairs (and refuse a KB that
gives none) in one pass that stores no pair. The trainer is ``linking.self_alignment``, the
loss ``objectives.multi_similarity``. No spaCy here.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from ..errors import Errors
from ..kb.knowledge_base import KnowledgeBase
from .opposites import opposite_entities

SHUFFLE_BUFFER = 10_000  # pairs held for shuffling (bounded memory)


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


def entity_order(n_entities: int, seed: int) -> np.ndarray:
    """The KB positions ``0 .. n_entities - 1`` in the seeded random order the pairs are
    drawn in (one integer per entity)."""
    return np.random.default_rng(seed).permutation(n_entities)


def _raw_pairs(kb: KnowledgeBase, max_pairs_per_entity: int, seed: int,
               stats: PairStats) -> Iterator[tuple[int, str, str]]:
    rng = random.Random(seed)
    for position in entity_order(len(kb), seed):
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
