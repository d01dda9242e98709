"""KB names as pseudo-mentions mixed into corpus training (issue 41, item 2).

Corpus training shows the encoders only the entities its mentions name, and pulls them
away from what the untrained encoder (or ``pretrain-kb``'s, SapBERT §2) knew of the KB's
other names. SapBERT learns from (name, synonym) pairs of one concept; here a few such
pairs join every training batch: one of an entity's names is a mention, and its positive
rows are the entity's *other* names (a row that spells the mention's own text, case and
spaces aside, is no positive: it would teach nothing). Its negatives are the objective's,
as for a corpus mention. Entities are drawn among those of the corpus's types (the types
of its gold entities), so that a disease corpus keeps its disease names.
"""

from __future__ import annotations

import random
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from ..kb.knowledge_base import KnowledgeBase
from .self_alignment import name_key


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

    ``types``: draw only entities that have one of these KB types (none given: all);
    entities with fewer than two distinct names are never drawn. ``rng``: the draws' (the
    trainer's, so that a sampler built again after a refresh continues its sequence)."""

    def __init__(self, kb: KnowledgeBase, rows_of: Sequence[Sequence[int]],
                 row_texts: Sequence[str], types: Collection[str] = (),
                 rng: random.Random | None = None) -> None:
        self.rows_of, self.row_texts = rows_of, row_texts
        self.rng = rng or random.Random(0)
        wanted = set(types)
        self.entities = [
            position for position, rows in enumerate(rows_of)
            if len({name_key(row_texts[r]) for r in rows}) > 1
            and (not wanted or not wanted.isdisjoint(kb.entity_at(position).types))]

    def __len__(self) -> int:
        return len(self.entities)

    def sample(self, n: int) -> list[PseudoMention]:
        """``n`` pseudo-mentions of distinct entities (fewer when fewer are eligible)."""
        found = []
        for entity in self.rng.sample(self.entities, min(n, len(self.entities))):
            rows = self.rows_of[entity]
            row = self.rng.choice(rows)
            key = name_key(self.row_texts[row])
            positives = [r for r in rows if name_key(self.row_texts[r]) != key]
            found.append(PseudoMention(" ".join(self.row_texts[row].split()), entity,
                                       positives))
        return found
