"""An in-memory knowledge base of entities, read from and written to JSONL.

The JSONL format has one JSON object per line::

    {"id": "D003371", "name": "Cough", "description": "...", "aliases": ["coughing"],
     "types": ["Disease"]}

Only ``id`` and ``name`` are required. The class knows nothing of spaCy (scispacy's layout):
components and the dense index are built on top of it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

from ..errors import Errors
from .entity import Entity


class KnowledgeBaseError(ValueError):
    """Raised for malformed or inconsistent knowledge-base input."""


class KnowledgeBase:
    """An ordered collection of unique entities with fast lookup by id."""

    def __init__(self, entities: Iterable[Entity] = ()) -> None:
        self._entities: list[Entity] = []
        self._index: dict[str, int] = {}
        for entity in entities:
            self.add(entity)

    def add(self, entity: Entity, *, source: str = "") -> None:
        if not entity.id or not entity.name:
            raise KnowledgeBaseError(
                Errors.E001.format(path=source or "<kb>", line=len(self) + 1,
                                   reason="empty id or name")
            )
        if entity.id in self._index:
            raise KnowledgeBaseError(
                Errors.E002.format(entity_id=entity.id, first=f"entry {self._index[entity.id] + 1}",
                                   second=source or f"entry {len(self) + 1}")
            )
        self._index[entity.id] = len(self._entities)
        self._entities.append(entity)

    def __len__(self) -> int:
        return len(self._entities)

    def __iter__(self) -> Iterator[Entity]:
        return iter(self._entities)

    def __contains__(self, entity_id: object) -> bool:
        return entity_id in self._index

    def __getitem__(self, entity_id: str) -> Entity:
        try:
            return self._entities[self._index[entity_id]]
        except KeyError:
            raise KeyError(Errors.E005.format(entity_id=entity_id, size=len(self))) from None

    def position(self, entity_id: str) -> int:
        """The row of an entity in the KB's order (the order of the dense index)."""
        try:
            return self._index[entity_id]
        except KeyError:
            raise KeyError(Errors.E005.format(entity_id=entity_id, size=len(self))) from None

    @property
    def ids(self) -> list[str]:
        return [e.id for e in self._entities]

    def entity_at(self, position: int) -> Entity:
        return self._entities[position]

    def fingerprint(self) -> str:
        """A hash of every entity's content: two KBs with equal fingerprints index alike."""
        digest = hashlib.sha256()
        for entity in self._entities:
            digest.update(json.dumps(entity.to_dict(), sort_keys=True).encode("utf8"))
            digest.update(b"\n")
        return digest.hexdigest()[:16]

    def with_aliases(
        self, aliases: Mapping[str, Iterable[str]], *, first: bool = False
    ) -> KnowledgeBase:
        """A copy with extra aliases per entity id; ids absent from the KB are ignored.

        ``first`` puts the new aliases before the existing ones (a truncated entity input
        then keeps them: aliases seen in annotated text beat generated variants).
        """
        merged = []
        for entity in self._entities:
            extra = aliases.get(entity.id, ())
            ordered = [*extra, *entity.aliases] if first else [*entity.aliases, *extra]
            known = {entity.name.lower()}
            new = []
            for alias in ordered:
                if alias.lower() not in known:
                    known.add(alias.lower())
                    new.append(alias)
            merged.append(Entity(entity.id, entity.name, entity.description, tuple(new),
                                 entity.types))
        return KnowledgeBase(merged)

    # --- JSONL I/O -------------------------------------------------------------------------

    @classmethod
    def from_jsonl(cls, path: str | Path) -> KnowledgeBase:
        path = Path(path)
        kb = cls()
        with path.open(encoding="utf8") as file_:
            for number, line in enumerate(file_, start=1):
                if not line.strip():
                    continue
                try:
                    data = json.loads(line)
                except json.JSONDecodeError as err:
                    raise KnowledgeBaseError(
                        Errors.E001.format(path=path, line=number, reason=f"invalid JSON: {err}")
                    ) from None
                if not isinstance(data, dict) or "id" not in data or "name" not in data:
                    raise KnowledgeBaseError(
                        Errors.E001.format(path=path, line=number,
                                           reason='missing "id" or "name"')
                    )
                for key in ("aliases", "types"):
                    if key in data and not isinstance(data[key], list):
                        raise KnowledgeBaseError(
                            Errors.E001.format(path=path, line=number,
                                               reason=f'"{key}" must be a list of strings')
                        )
                kb.add(Entity.from_dict(data), source=f"{path}:{number}")
        return kb

    def to_jsonl(self, path: str | Path) -> None:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w", encoding="utf8") as file_:
            for entity in self._entities:
                file_.write(json.dumps(entity.to_dict(), ensure_ascii=False) + "\n")
