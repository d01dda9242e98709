"""Assemble a KB from MeSH files, existing JSONL KBs and aliases harvested from corpora
(``spacy_data.aliases`` harvests them from docs), and take entities out of a KB."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from .knowledge_base import KnowledgeBase
from .mesh import build_mesh_kb, dedupe_aliases
from .synonym_sources import SOURCE_NAMES, add_synonym_sources


@dataclass
class KBBuildReport:
    """What ``build_kb`` did, for the CLI's summary."""

    mesh: dict = field(default_factory=dict)
    merged: list[tuple[Path, int]] = field(default_factory=list)
    corpus_aliases: int = 0
    typed: int = 0
    absent: set[str] = field(default_factory=set)
    synonyms: dict = field(default_factory=dict)


def build_kb(
    *,
    mesh_descriptors: Path | None = None,
    disease_synonyms: Path | None = None,
    jsonl: Iterable[Path] = (),
    aliases: Mapping[str, Sequence[str]] | None = None,
    types: Mapping[str, Counter[str]] | None = None,
    synonym_sources: Mapping[str, bool | str | Path] | None = None,
) -> tuple[KnowledgeBase, KBBuildReport]:
    """MeSH descriptors (with disease synonyms) and/or JSONL KBs, merged by id; ``aliases``
    (per id, e.g. the gold mention texts of a corpus: ``spacy_data.aliases.harvest_aliases``)
    come before the others, and ``types`` (per id, a Counter of labels:
    ``spacy_data.aliases.types_from_docs``) type the entities that have none.
    ``synonym_sources``: ``drug_ner``, ``gilda``, ``mondo``, ``doid`` (``True`` for the
    installed package's file, or its path), whose MeSH synonyms join the KB before the
    corpus aliases
    (``synonym_sources.add_synonym_sources``)."""
    report = KBBuildReport()
    kb = KnowledgeBase()
    if mesh_descriptors is not None:
        kb = build_mesh_kb(mesh_descriptors, disease_synonyms, report.mesh)
    for path in jsonl:
        kb, shared = merge_kbs(kb, KnowledgeBase.from_jsonl(path))
        report.merged.append((path, shared))
    if synonym_sources:
        kb = add_synonym_sources(kb, **{name: synonym_sources.get(name, False)
                                        for name in SOURCE_NAMES}, stats=report.synonyms)
    if aliases:
        report.absent = {entity_id for entity_id in aliases if entity_id not in kb}
        before = sum(len(entity.aliases) for entity in kb)
        kb = kb.with_aliases(aliases, first=True)
        report.corpus_aliases = sum(len(entity.aliases) for entity in kb) - before
    if types:
        kb, report.typed = add_missing_types(kb, types)
    return kb, report


def merge_kbs(first: KnowledgeBase, second: KnowledgeBase) -> tuple[KnowledgeBase, int]:
    """Append ``second`` to ``first``; an id in both keeps the first entry, aliases, types,
    alternate ids and xrefs are combined. Returns the merged KB and the number of shared ids."""
    entities = {entity.id: entity for entity in first}
    shared = 0
    for entity in second:
        old = entities.get(entity.id)
        if old is None:
            entities[entity.id] = entity
            continue
        shared += 1
        aliases = dedupe_aliases(old.name, [*old.aliases, entity.name, *entity.aliases])
        entities[entity.id] = replace(
            old, description=old.description or entity.description, aliases=aliases,
            **{key: tuple(dict.fromkeys([*getattr(old, key), *getattr(entity, key)]))
               for key in ("types", "alt_ids", "xrefs")})
    return KnowledgeBase(entities.values()), shared


def add_missing_types(
    kb: KnowledgeBase, labels: Mapping[str, Counter[str]]
) -> tuple[KnowledgeBase, int]:
    """Give entities without types the corpus labels of their id (most frequent first)."""
    entities, typed = [], 0
    for entity in kb:
        counter = labels.get(entity.id)
        if not entity.types and counter:
            entity = replace(entity, types=tuple(label for label, _ in counter.most_common()))
            typed += 1
        entities.append(entity)
    return KnowledgeBase(entities), typed


def without_entities(kb: KnowledgeBase, ids: set[str]) -> KnowledgeBase:
    """A copy of ``kb`` without the entities ``ids`` (the discovery setting holds them out,
    ``spacy_data.discovery``; ``prepare --remove-types`` removes those of some types)."""
    return KnowledgeBase(entity for entity in kb if entity.id not in ids)
