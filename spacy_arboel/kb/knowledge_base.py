"""An in-memory knowledge base of entities, read from and written to JSONL.

The JSONL format has one JSON object per line::

    {"id": "D003371", "name": "Cough", "description": "...", "aliases": ["coughing"],
     "types": ["Disease"], "alt_ids": ["D000001"], "xrefs": ["UMLS:C0010200"]}

Only ``id`` and ``name`` are required. A line of scispaCy's KB JSONL (``concept_id``,
``canonical_name``, ...: ``scispacy_format``) is read as well, and written with
``to_jsonl(path, format="scispacy")``. The class knows nothing of spaCy (scispacy's layout):
components and the dense index are built on top of it.
"""

from __future__ import annotations

import hashlib
import json
import warnings
from array import array
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Literal, get_args

from ..atomic import atomic_file
from ..errors import Errors, Warnings
from ..parsing import parse_json
from ..settings import check_value
from .entity import Entity, EntityValueError, name_key
from .scispacy_format import from_scispacy_dict, is_scispacy_line, to_scispacy_dict

NIL_ID = "NIL"  # the default id of unlinked mentions
COMPOSITE_SEPARATOR = "|"  # joins the ids of a composite gold mention ("D1|D2")
# the links to an unseen entity that smooth the mention prior (``mention_prior``)
PRIOR_PSEUDO_LINKS = 1
KbFormat = Literal["spacy-arboel", "scispacy"]
KB_FORMATS: tuple[str, ...] = get_args(KbFormat)  # what ``to_jsonl`` writes, ours first


class KnowledgeBaseError(ValueError):
    """Raised for malformed or inconsistent knowledge-base input."""


class KnowledgeBase:
    """An ordered collection of unique entities with fast lookup by id."""

    def __init__(self, entities: Iterable[Entity] = ()) -> None:
        self._entities: list[Entity] = []
        self._index: dict[str, int] = {}
        self._alt_index: dict[str, int] = {}  # alternate id -> row
        self._fingerprint: str | None = None
        self._links: dict[str, dict[str, int]] | None = None  # mention key -> id -> count
        # where each row was read (``add``'s ``source``), for E002 and E235: "FILE:LINE" kept
        # as a file number and a line (two ints a row, not a string), -1 when not given
        self._files: dict[str, int] = {}
        self._places = array("q")
        for entity in entities:
            self.add(entity)

    def add(self, entity: Entity, *, source: str = "") -> None:
        """Append an entity; empty, reserved (``NIL``, ids with ``|``) and duplicate ids are
        errors, and so are blank names and ids with whitespace around them (gold ids are
        read stripped, ``data.ids``: ``" A "`` could never be linked, and would be another
        entity than ``"A"``); alternate ids follow the same rules, and one that is another
        entity's id or alternate id is E235. ``source``: ``path:line`` for the messages,
        which also name where the entity they clash with was read."""
        where = source or f"<kb>:{len(self) + 1}"
        if not entity.name.strip():
            raise KnowledgeBaseError(Errors.E001.format(
                where=where, reason="empty or whitespace-only id or name"))
        for entity_id in (entity.id, *entity.alt_ids):
            _check_id(entity_id, where)
        if entity.id in self._index:
            raise KnowledgeBaseError(Errors.E002.format(
                entity_id=entity.id, first=self._place(self._index[entity.id]),
                second=source or f"entry {len(self) + 1}"))
        row = len(self._entities)
        named = {alt_id: f"an alternate id of '{entity.id}'" for alt_id in entity.alt_ids
                 if alt_id != entity.id}
        for entity_id, what in [(entity.id, f"the id of '{entity.id}'"), *named.items()]:
            if entity_id in self._alt_index:
                taken_row = self._alt_index[entity_id]
                taken = f"an alternate id of '{self._entities[taken_row].id}'"
            elif entity_id in self._index and entity_id != entity.id:
                taken_row = self._index[entity_id]
                taken = f"the id of '{entity_id}'"
            else:
                continue
            taken += f" ({self._place(taken_row)})"
            raise KnowledgeBaseError(Errors.E235.format(where=where, entity_id=entity_id,
                                                        what=what, taken=taken))
        self._index[entity.id] = row
        self._alt_index.update(dict.fromkeys(named, row))
        self._entities.append(entity)
        file_, _, line = source.rpartition(":")
        if file_ and line.isdigit():
            self._places.extend((self._files.setdefault(file_, len(self._files)), int(line)))
        else:
            self._places.extend((-1, -1))
        self._fingerprint = None
        self._links = None

    def source(self, row: int) -> str:
        """Where the entity of ``row`` was read (``add``'s ``source`` when it was
        ``path:line``), else ""."""
        number, line = self._places[2 * row], self._places[2 * row + 1]
        if number < 0:
            return ""
        return f"{next(f for f, n in self._files.items() if n == number)}:{line}"

    def _place(self, row: int) -> str:
        return self.source(row) or f"entry {row + 1}"

    def __len__(self) -> int:
        return len(self._entities)

    def __iter__(self) -> Iterator[Entity]:
        return iter(self._entities)

    def __contains__(self, entity_id: object) -> bool:
        """Whether ``entity_id`` names an entity: its own id or one of its ``alt_ids``."""
        return entity_id in self._index or entity_id in self._alt_index

    def __getitem__(self, entity_id: str) -> Entity:
        """The entity that ``entity_id`` names (its id or an alternate id: ``resolve``)."""
        return self._entities[self.position(entity_id)]

    def position(self, entity_id: str) -> int:
        """The row of an entity in the KB's order (the order of the dense index); an
        alternate id gives the row of the entity it names."""
        row = self._index.get(entity_id)
        if row is None:
            row = self._alt_index.get(entity_id)
        if row is None:
            raise KeyError(Errors.E005.format(entity_id=entity_id, size=len(self)))
        return row

    def resolve(self, entity_id: str) -> str:
        """The id of the entity that ``entity_id`` names: ``entity_id`` itself, or the id of
        the entity that lists it among its ``alt_ids`` (E005 when neither)."""
        return self._entities[self.position(entity_id)].id

    def resolve_ids(self, entity_ids: Iterable[str]) -> tuple[str, ...]:
        """``entity_ids`` (e.g. a mention's gold ids) with each alternate id replaced by the
        id of its entity and ids the KB lacks kept as they are, without repeats: a corpus
        annotated with an older release of its ontology scores and trains on the ids the KB
        links to."""
        resolved = []
        for entity_id in entity_ids:
            row = self._alt_index.get(entity_id) if entity_id not in self._index else None
            resolved.append(entity_id if row is None else self._entities[row].id)
        return tuple(dict.fromkeys(resolved))

    def is_alternate_id(self, entity_id: str) -> bool:
        """Whether ``entity_id`` is an alternate id (not an entity's own id)."""
        return entity_id in self._alt_index and entity_id not in self._index

    @property
    def ids(self) -> list[str]:
        return [e.id for e in self._entities]

    def entity_at(self, position: int) -> Entity:
        return self._entities[position]

    def types(self) -> set[str]:
        """The types its entities have (``label_types`` is checked against them)."""
        return {t for entity in self._entities for t in entity.types}

    def fingerprint(self) -> str:
        """A hash of every entity's content: two KBs with equal fingerprints index alike."""
        if self._fingerprint is None:
            digest = hashlib.sha256()
            for entity in self._entities:
                digest.update(json.dumps(entity.to_dict(), sort_keys=True).encode("utf8"))
                digest.update(b"\n")
            self._fingerprint = digest.hexdigest()[:16]
        return self._fingerprint

    def with_aliases(
        self, aliases: Mapping[str, Iterable[str]], *, first: bool = False,
        counts: Mapping[str, Mapping[str, int]] | None = None,
    ) -> KnowledgeBase:
        """A copy with extra aliases per entity id; ids absent from the KB are ignored.

        ``first`` puts the new aliases before the existing ones (a truncated entity input
        then keeps them: aliases seen in annotated text beat generated variants).
        ``counts`` (per id, text -> how often it was linked to the entity: harvested from a
        corpus with the aliases) join the entities' ``mention_counts`` (``add_counts``).
        An alternate id's aliases and counts go to the entity it names.
        """
        aliases = self.by_entity({i: list(texts) for i, texts in aliases.items()})
        counts = self.by_entity({i: list(found.items()) for i, found in (counts or {}).items()})
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
            merged.append(replace(entity, aliases=tuple(new), mention_counts=add_counts(
                entity.mention_counts, counts.get(entity.id, ()))))
        return KnowledgeBase(merged)

    def by_entity(self, per_id: Mapping[str, list]) -> dict[str, list]:
        """The lists of ``per_id`` joined under the id of the entity each key names (an
        alternate id's under its entity's), in order; keys the KB lacks are dropped."""
        gathered: dict[str, list] = {}
        for entity_id, values in per_id.items():
            if entity_id in self:
                gathered.setdefault(self.resolve(entity_id), []).extend(values)
        return gathered

    def mention_prior(self, text: str, pseudo_links: float = PRIOR_PSEUDO_LINKS
                      ) -> dict[str, float]:
        """p(e | m) of a mention text by the KB's link counts (``Entity.mention_counts``):
        the share of the text's links that went to each entity, the texts compared by
        ``entity.name_key`` (case-folded, whitespace collapsed; Ganea & Hofmann's p(e | m)
        from anchor counts; spaCy's KB prior), smoothed by ``pseudo_links`` links to an
        entity the counts never saw: count / (links + pseudo_links), so that one example is
        no certainty that pins the linker's score at 1.0 (our deviation: Ganea & Hofmann's
        is the unsmoothed share). Empty for a text the counts never saw."""
        if self._links is None:
            links: dict[str, dict[str, int]] = {}
            for entity in self._entities:
                for linked, count in entity.mention_counts:
                    if count:
                        by_id = links.setdefault(name_key(linked), {})
                        by_id[entity.id] = by_id.get(entity.id, 0) + count
            self._links = links
        found = self._links.get(name_key(text))
        if not found:
            return {}
        total = sum(found.values()) + pseudo_links
        return {entity_id: count / total for entity_id, count in found.items()}

    # --- JSONL I/O -------------------------------------------------------------------------

    @classmethod
    def from_jsonl(cls, path: str | Path) -> KnowledgeBase:
        """Read a KB, in our JSONL or scispaCy's (told apart line by line:
        ``scispacy_format``); a malformed line (not UTF-8, not JSON, a value of the wrong
        type) is an error naming the file and line (E001), and so is an empty KB (E036) and
        a path that is no file to read (a folder: E230)."""
        path = Path(path)
        kb = cls()
        try:
            opened = path.open("rb")
        except (IsADirectoryError, PermissionError) as err:
            raise KnowledgeBaseError(Errors.E230.format(
                path=path, what="knowledge-base JSONL file", error=err.strerror,
                hint=' of one JSON object a line with "id" and "name"')) from None
        with opened as file_:
            for number, raw in enumerate(file_, start=1):
                def fail(reason: str, number: int = number) -> KnowledgeBaseError:
                    return KnowledgeBaseError(Errors.E001.format(where=f"{path}:{number}",
                                                                 reason=reason))
                if not raw.strip():
                    continue
                try:
                    data = parse_json(raw)
                except ValueError as err:
                    raise fail(str(err)) from None
                if isinstance(data, dict) and is_scispacy_line(data):
                    data = from_scispacy_dict(data)
                if not isinstance(data, dict) or "id" not in data or "name" not in data:
                    raise fail('missing "id" or "name" (or scispaCy\'s "concept_id" or '
                               '"canonical_name")')
                try:
                    entity = Entity.from_dict(data)
                except EntityValueError as err:
                    raise fail(str(err)) from None
                kb.add(entity, source=f"{path}:{number}")
        if not len(kb):
            raise KnowledgeBaseError(Errors.E036.format(path=path))
        return kb

    def to_jsonl(self, path: str | Path, *, format: KbFormat = "spacy-arboel") -> None:
        """Write the KB, atomically (a temporary file renamed over ``path``), in our JSONL
        or (``format="scispacy"``) scispaCy's, which drops alternate ids, xrefs and link
        counts; an empty KB is refused (E036) rather than written."""
        path = Path(path)
        check_value("KB format", format, KbFormat)
        if not len(self):
            raise KnowledgeBaseError(Errors.E036.format(path=path))
        to_dict = to_scispacy_dict if format == "scispacy" else Entity.to_dict
        with atomic_file(path) as tmp, tmp.open("w", encoding="utf8") as file_:
            for entity in self._entities:
                file_.write(json.dumps(to_dict(entity), ensure_ascii=False) + "\n")


def add_counts(first: Iterable[tuple[str, int]], second: Iterable[tuple[str, int]]
               ) -> tuple[tuple[str, int], ...]:
    """Two entities' link counts summed by text (``name_key``; the first spelling met
    stands for its text), in the order first met."""
    summed: dict[str, list] = {}
    for text, count in [*first, *second]:
        entry = summed.setdefault(name_key(text), [text, 0])
        entry[1] += count
    return tuple((text, count) for text, count in summed.values())


def _check_id(entity_id: str, where: str) -> None:
    """E001 for an empty id or one with whitespace around it, E035 for a reserved one."""
    if not entity_id.strip():
        raise KnowledgeBaseError(Errors.E001.format(
            where=where, reason="empty or whitespace-only id or name"))
    if entity_id != entity_id.strip():
        raise KnowledgeBaseError(Errors.E001.format(
            where=where, reason=f"the id {entity_id!r} has whitespace around it; gold ids "
            "are read without it, so no mention could link to it: write the id without "
            "the whitespace"))
    if entity_id == NIL_ID or COMPOSITE_SEPARATOR in entity_id:
        reason = (f"'{NIL_ID}' is the id of unlinked mentions" if entity_id == NIL_ID else
                  f"'{COMPOSITE_SEPARATOR}' joins the ids of composite mentions")
        raise KnowledgeBaseError(Errors.E035.format(where=where, entity_id=entity_id,
                                                    reason=reason))


def kb_override(kb_path: str | Path, saved: KnowledgeBase, component: str
                ) -> KnowledgeBase | None:
    """The KB a loaded component must switch to when ``kb_path`` was given explicitly at
    load time: the one at ``kb_path`` when it differs from the ``saved`` one (W004), else
    None. A path that names no file (missing, or a folder) is an error (E221), never
    ignored. A path only inherited from the saved config is never read (see
    ``KBComponent._kb_override``): a saved pipeline links with its saved KB wherever it is
    loaded."""
    if not Path(kb_path).is_file():
        raise ValueError(Errors.E221.format(name=component, path=kb_path))
    kb = KnowledgeBase.from_jsonl(kb_path)
    if kb.fingerprint() == saved.fingerprint():
        return None
    warnings.warn(Warnings.W004.format(name=component, path=kb_path, n_entities=len(kb)),
                  stacklevel=3)
    return kb
