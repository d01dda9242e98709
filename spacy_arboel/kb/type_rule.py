"""Type-aware linking: which KB types an ent label may link to (scispaCy issues #483, #220).
No spaCy here.

A ``TypeRule`` maps ent labels to KB ``types`` (``{"Chemical": ["Chemical"], "Disease":
["Disease"]}``). An entity fits a mention when the mention's label is not in the map, when
the entity has no type, or when they share a type: the rule never acts on what the KB or
the ``ner`` does not say. ``restrict`` drops the candidates that do not fit, ``prefer``
ranks them after those that do (their scores and order among themselves unchanged),
``clusters`` leaves the candidates as they are and acts on the clusters only. Two mentions
are compatible unless both labels are mapped to type sets that do not meet: ``arbo_coref``
joins no such pair and moves no mention to an entity that does not fit it (in every mode).
``clusters`` is for labels from a ``ner``, whose type errors would otherwise drop the right
entity (BENCHMARKS.md: end-to-end F1 on BC5CDR falls with ``restrict`` after a tok2vec
``ner``).
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from ..errors import Errors, Warnings

TYPE_RULES = ("restrict", "prefer", "clusters")
C = TypeVar("C", bound=Sequence)


@dataclass(frozen=True)
class TypeRule:
    """``label_types``: ent label -> the KB types it may link to; ``mode``: ``restrict``,
    ``prefer`` or ``clusters`` (see the module)."""

    label_types: Mapping[str, frozenset[str]] = field(default_factory=dict)
    mode: str = "restrict"

    @classmethod
    def from_settings(cls, label_types: Mapping[str, Iterable[str]] | str | None,
                      mode: str = "restrict") -> TypeRule | None:
        """The rule of a component's settings (None for no ``label_types``): a map, or its
        JSON text (how a config override gives it); E223 for what is not a map of label ->
        list of type names, E007 for another mode."""
        if isinstance(label_types, str):
            try:
                label_types = json.loads(label_types) if label_types.strip() else None
            except ValueError:
                raise ValueError(Errors.E223.format(value=label_types)) from None
        if not label_types:
            return None
        if mode not in TYPE_RULES:
            raise ValueError(Errors.E007.format(what="type_rule", value=mode,
                                                options=", ".join(TYPE_RULES)))
        if not isinstance(label_types, Mapping) or not all(
                isinstance(label, str) and not isinstance(types, str)
                and isinstance(types, Iterable) and all(isinstance(t, str) for t in types)
                for label, types in label_types.items()):
            raise ValueError(Errors.E223.format(value=label_types))
        rule = cls({label: frozenset(types) for label, types in label_types.items()}, mode)
        empty = [label for label, types in rule.label_types.items() if not types]
        if empty:
            raise ValueError(Errors.E225.format(
                problems=", ".join(f"{label!r} to no type" for label in empty),
                known="those named in the `types` of its entities"))
        return rule

    def check_types(self, known: Iterable[str]) -> None:
        """Against the KB's types (``known``): E225 when a label is mapped only to types no
        entity has (a typo, "Chemcial": its mentions would lose every typed candidate), W022
        when some of a label's types are unknown or the KB has no types at all (the rule
        then never acts)."""
        known = set(known)
        unknown = {label: sorted(types - known) for label, types in self.label_types.items()
                   if types - known}
        if not unknown:
            return
        described = {label: ", ".join(map(repr, types)) for label, types in unknown.items()}
        fatal = [label for label in unknown if known and not self.label_types[label] & known]
        if fatal:
            raise ValueError(Errors.E225.format(
                problems="; ".join(f"{label!r} only to {described[label]}, no type of the KB"
                                   for label in fatal),
                known=", ".join(sorted(known))))
        warnings.warn(Warnings.W022.format(
            types="; ".join(f"{label!r}: {types}" for label, types in described.items()),
            known=", ".join(sorted(known)) or "none: no entity has types, so the rule never "
                                             "acts"), stacklevel=3)

    def fits(self, label: str, entity_types: Iterable[str]) -> bool:
        """Whether an entity of ``entity_types`` may be the link of a ``label`` mention."""
        allowed = self.label_types.get(label)
        entity_types = set(entity_types)
        return allowed is None or not entity_types or bool(allowed & entity_types)

    def compatible(self, label: str, other: str) -> bool:
        """Whether mentions labelled ``label`` and ``other`` may be one entity."""
        first, second = self.label_types.get(label), self.label_types.get(other)
        return first is None or second is None or bool(first & second)

    def apply(self, label: str, candidates: list[C],
              types_of: Callable[[str], Iterable[str]]) -> list[C]:
        """The ``(id, score, ...)`` candidates of a ``label`` mention under the rule."""
        allowed = self.label_types.get(label)
        if allowed is None or self.mode == "clusters":
            return candidates
        # ``fits``, inlined: it runs on every candidate of every mention
        fit = [not (types := types_of(c[0])) or not allowed.isdisjoint(types)
               for c in candidates]
        if self.mode == "restrict":
            return [c for c, ok in zip(candidates, fit, strict=True) if ok]
        return ([c for c, ok in zip(candidates, fit, strict=True) if ok]
                + [c for c, ok in zip(candidates, fit, strict=True) if not ok])

    def label_for(self, entity_types: Iterable[str]) -> str | None:
        """The first label (in the map's order) whose types meet ``entity_types``."""
        entity_types = set(entity_types)
        return next((label for label, allowed in self.label_types.items()
                     if allowed & entity_types), None)
