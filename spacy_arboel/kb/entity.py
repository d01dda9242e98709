"""The entity record held by the knowledge base."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


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
        return cls(
            id=str(data["id"]),
            name=str(data["name"]),
            description=str(data.get("description") or ""),
            aliases=tuple(str(a) for a in data.get("aliases") or ()),
            types=tuple(str(t) for t in data.get("types") or ()),
        )
