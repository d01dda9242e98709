"""The entity record held by the knowledge base."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ..errors import Errors


@dataclass(frozen=True)
class Entity:
    """One knowledge-base entity: id, preferred name, description, aliases and types."""

    id: str
    name: str
    description: str = ""
    aliases: tuple[str, ...] = field(default_factory=tuple)
    types: tuple[str, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "description": self.description,
            "aliases": list(self.aliases),
            "types": list(self.types),
        }

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
        for key in ("aliases", "types"):
            value = data.get(key)
            if value is None:
                value = []
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise EntityValueError(Errors.E105.format(key=key, expected="a list of strings",
                                                          found=json.dumps(value)[:80]))
            lists[key] = tuple(value)
        return cls(id=data["id"], name=data["name"], description=description or "", **lists)


class EntityValueError(ValueError):
    """A KB value of the wrong type (the reader adds the file and line)."""


def _json_type(value: Any) -> str:
    return "null" if value is None else f"{type(value).__name__} {json.dumps(value)[:40]}"
