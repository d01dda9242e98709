"""KB names as pseudo-mentions mixed into corpus training (issue 41, item 2).

Corpus training shows the encoders only the entities its mentions name, and pulls them
away from what the untrained encoder (or ``pretrain-kb``'s, SapBERT §2) knew of the KB's
other names. SapBERT learns from (name, synonym) pairs of one concept; here a few such
pairs join every training batch: one of an entity's names is a mention, and its positive
rows are the entity's *other* names (a row that spells the mention's own text, case and
spaces aside, is no positive: it would teach nothing). Its negatives are the objective's,
as for a corpus mention. A draw picks a KB type as often as the corpus's gold mentions
carry it, then an entity of that type, so that a disease corpus keeps its disease names
(NCBI-disease's gold entities are Disease 3,856 times, also a tree category 70 times).
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..kb.entity import name_key
from ..kb.knowledge_base import KnowledgeBase
from .kb_pairs import normalise_name


def other_name_rows(rows: Sequence[int], row_texts: Sequence[str], text: str) -> list[int]:
    """The ``rows`` whose name (``row_texts[row]``) is not ``text``, case and spaces aside:
    the positives a mention spelt ``text`` learns from (its own name would teach nothing)."""
    key = name_key(text)
    return [r for r in rows if name_key(row_texts[r]) != key]


@dataclass(frozen=True)
class PseudoMention:
    """One KB name as a mention: its ``text``, its entity's KB position and the index rows
    that are its positives (the entity's rows with another name)."""

    text: str
    entity: int
    positive_rows: list[int]


class NamePairSampler:
    """Draws ``PseudoMention``s from the index rows of a KB (``rows_of``: per entity
    position, its index rows; ``row_texts``: per index row, its name).

    ``types``: KB type -> its weight (the corpus's gold mentions of that type): a draw
    picks a type by weight, then one of its entities; none given, entities are drawn
    uniformly. Entities with fewer than two distinct names are never drawn. ``rng``: the
    draws' (the trainer's, so that a sampler built again after a refresh continues its
    sequence)."""

    def __init__(self, kb: KnowledgeBase, rows_of: Sequence[Sequence[int]],
                 row_texts: Sequence[str], types: Mapping[str, float] | None = None,
                 rng: random.Random | None = None) -> None:
        self.rows_of, self.row_texts = rows_of, row_texts
        self.rng = rng or random.Random(0)
        weights = {name: w for name, w in types.items() if w > 0} if types else {"": 1.0}
        by_type: dict[str, list[int]] = defaultdict(list)
        for position, rows in enumerate(rows_of):
            if len({name_key(row_texts[r]) for r in rows}) < 2:
                continue
            for name in kb.entity_at(position).types if types else ("",):
                if name in weights:
                    by_type[name].append(position)
        self.by_type = dict(by_type)
        self.names = [name for name in weights if name in self.by_type]
        self.weights = [weights[name] for name in self.names]
        self.entities = sorted({p for found in self.by_type.values() for p in found})

    def __len__(self) -> int:
        return len(self.entities)

    def sample(self, n: int) -> list[PseudoMention]:
        """``n`` pseudo-mentions of distinct entities (fewer when fewer are eligible)."""
        chosen: list[int] = []
        taken: set[int] = set()
        while len(chosen) < min(n, len(self.entities)):
            found = self.by_type[self.rng.choices(self.names, self.weights)[0]]
            entity = self.rng.choice(found)
            for _ in range(100):  # another of the type when this one is drawn already
                if entity not in taken:
                    break
                entity = self.rng.choice(found)
            else:
                entity = self.rng.choice([p for p in self.entities if p not in taken])
            taken.add(entity)
            chosen.append(entity)
        return [self._pseudo_mention(entity) for entity in chosen]

    def _pseudo_mention(self, entity: int) -> PseudoMention:
        rows = self.rows_of[entity]
        row = self.rng.choice(rows)
        positives = other_name_rows(rows, self.row_texts, self.row_texts[row])
        return PseudoMention(normalise_name(self.row_texts[row]), entity, positives)
