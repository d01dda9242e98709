"""scispaCy's KB JSONL, read and written as it is, so that a scispaCy user's KB works
unchanged (``scispacy.linking_utils.KnowledgeBase``: one JSON object a line)::

    {"concept_id": "C0010200", "canonical_name": "Coughing", "aliases": ["Cough"],
     "types": ["T184"], "definition": "A sudden, audible expulsion of air ..."}

``KnowledgeBase.from_jsonl`` reads a line with these keys (and no ``id``) as scispaCy's;
``KnowledgeBase.to_jsonl(path, format="scispacy")`` writes them. scispaCy's format has no
place for alternate ids and cross-references: they are not written.

No spaCy here.
"""

from __future__ import annotations

from typing import Any

from .entity import Entity

# scispaCy's key -> ours
SCISPACY_KEYS = {"concept_id": "id", "canonical_name": "name", "aliases": "aliases",
                 "types": "types", "definition": "description"}


def is_scispacy_line(data: dict[str, Any]) -> bool:
    """Whether a KB line's object is scispaCy's (``concept_id``, and no ``id`` of ours)."""
    return "concept_id" in data and "id" not in data


def from_scispacy_dict(data: dict[str, Any]) -> dict[str, Any]:
    """A scispaCy KB line's object with our keys (``Entity.from_dict`` checks its values);
    a line without ``canonical_name`` lacks ``name``, as a line of ours would."""
    return {ours: data[theirs] for theirs, ours in SCISPACY_KEYS.items() if theirs in data}


def to_scispacy_dict(entity: Entity) -> dict[str, Any]:
    """An entity as a scispaCy KB line's object (``definition`` null when it has none, as
    scispaCy writes it)."""
    return {"concept_id": entity.id, "canonical_name": entity.name,
            "aliases": list(entity.aliases), "types": list(entity.types),
            "definition": entity.description or None}
