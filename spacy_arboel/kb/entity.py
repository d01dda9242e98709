"""The entity record held by the knowledge base."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ..errors import Errors

# the list fields of an entity, in the order its JSON object writes them
LIST_FIELDS = ("aliases", "types", "alt_ids", "xrefs")
# written only when not empty: a KB without them keeps its lines, and its fingerprint
OPTIONAL_LIST_FIELDS = ("alt_ids", "xrefs")


@dataclass(frozen=True)
class Entity:
    """One knowledge-base entity: id, preferred name, description, aliases and types;
    ``alt_ids``, other ids that resolve to it (an ontology's ``alt_id``s, the ids of
    obsolete terms it replaces: ``KnowledgeBase.resolve``), ``xrefs``, its ids in other
    vocabularies as ``PREFIX:ID`` (``MSH:D003371``, ``UMLS:C0010200``), and
    ``mention_counts``, how often a text was linked to it in annotated documents (``(text,
    count)`` pairs; a JSON object in the file): the link counts of the mention prior
    p(e | m) (``KnowledgeBase.mention_prior``; spaCy's KB holds the same prior per alias)."""

    id: str
    name: str
    description: str = ""
    aliases: tuple[str, ...] = field(default_factory=tuple)
    types: tuple[str, ...] = field(default_factory=tuple)
    alt_ids: tuple[str, ...] = field(default_factory=tuple)
    xrefs: tuple[str, ...] = field(default_factory=tuple)
    mention_counts: tuple[tuple[str, int], ...] = field(default_factory=tuple)

    @property
    def names(self) -> tuple[str, ...]:
        """Its name, then its aliases."""
        return (self.name, *self.aliases)

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"id": self.id, "name": self.name,
                                "description": self.description}
        for key in LIST_FIELDS:
            value = getattr(self, key)
            if value or key not in OPTIONAL_LIST_FIELDS:
                data[key] = list(value)
        if self.mention_counts:  # written only when present, as the optional lists
            data["mention_counts"] = dict(self.mention_counts)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Entity:
        """An entity from its JSON object; values of the wrong type are an error rather
        than coerced (``null`` would become the id "None"). An integer id is read as its
        decimal string (numeric ids are common)."""
        data = dict(data)
        if isinstance(data["id"], int) and not isinstance(data["id"], bool):
            data["id"] = str(data["id"])
        for key in ("id", "name"):
            if not isinstance(data[key], str):
                raise EntityValueError(Errors.E105.format(key=key, expected="a string",
                                                          found=_json_type(data[key])))
        description = data.get("description")
        if description is not None and not isinstance(description, str):
            raise EntityValueError(Errors.E105.format(key="description",
                                                      expected="a string or null",
                                                      found=_json_type(description)))
        lists = {}
        for key in LIST_FIELDS:
            value = data.get(key)
            if value is None:
                value = []
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise EntityValueError(Errors.E105.format(key=key, expected="a list of strings",
                                                          found=json.dumps(value)[:80]))
            lists[key] = tuple(value)
        return cls(id=data["id"], name=data["name"], description=description or "", **lists,
                   mention_counts=_counts(data.get("mention_counts")))


def name_key(text: str) -> str:
    """A name as names and mention texts are compared: case-folded, whitespace collapsed
    (the link counts' texts, ``KnowledgeBase.mention_prior``; the rows of one name)."""
    return " ".join(text.casefold().split())


class EntityValueError(ValueError):
    """A KB value of the wrong type (the reader adds the file and line)."""


def _counts(value: Any) -> tuple[tuple[str, int], ...]:
    """``mention_counts`` read from its JSON object: text -> a count that is a whole number
    of at least 0 (E105 for anything else; ``null`` or absent: none)."""
    if value is None:
        return ()
    if not isinstance(value, dict) or not all(
            isinstance(count, int) and not isinstance(count, bool) and count >= 0
            for count in value.values()):
        raise EntityValueError(Errors.E105.format(
            key="mention_counts", expected="an object of texts to whole numbers >= 0",
            found=json.dumps(value)[:80]))
    return tuple(value.items())


def _json_type(value: Any) -> str:
    return "null" if value is None else f"{type(value).__name__} {json.dumps(value)[:40]}"


def dedupe_aliases(name: str, aliases: Iterable[str]) -> tuple[str, ...]:
    """Aliases in order, without blanks or case-insensitive repeats of the name or each other."""
    seen = {name.strip().lower()}
    kept = []
    for alias in aliases:
        alias = alias.strip()
        if alias and alias.lower() not in seen:
            seen.add(alias.lower())
            kept.append(alias)
    return tuple(kept)
