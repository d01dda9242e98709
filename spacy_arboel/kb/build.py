"""Assemble a KB from its sources, each read by its registered reader (``readers``: JSONL
KBs, ours or scispaCy's; OBO / OWL ontologies; a UMLS release; MeSH files), with aliases
harvested from corpora (``spacy_data.aliases`` harvests them from docs), and take entities
out of a KB."""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from ..errors import Errors
from ..parsing import input_problem
from .alias_file import read_alias_file, unknown_ids, without_aliases
from .entity import dedupe_aliases
from .knowledge_base import KnowledgeBase, add_counts
from .readers import KBEnricher, KBSource, check_source, read_source, source_notes

# ``build_kb``'s arguments that list sources or files (read twice: checked, then read),
# which ``check_kb_sources`` takes too
LISTED_SOURCES = ("sources", "enrichers", "alias_files", "remove_alias_files")


@dataclass
class KBBuildReport:
    """What ``build_kb`` did: ``notes()`` and ``counts()`` say it (the CLI prints them)."""

    sources: list[tuple[KBSource, dict]] = field(default_factory=list)
    merged: list[tuple[Path, int]] = field(default_factory=list)
    corpus_aliases: int = 0
    file_aliases: int = 0
    removed_aliases: int = 0
    absent_removals: list[tuple[str, str]] = field(default_factory=list)
    typed: int = 0
    absent: set[str] = field(default_factory=set)
    resolved: set[str] = field(default_factory=set)
    enriched: list[tuple[KBEnricher, dict]] = field(default_factory=list)
    outside_types: int = 0
    entities: int = 0

    def notes(self) -> list[str]:
        """One line per source read."""
        notes = [note for source, stats in self.sources for note in source_notes(source, stats)]
        notes.extend(note for enricher, stats in self.enriched for note in enricher.notes(stats))
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
    sources: Iterable[KBSource] = (),
    *,
    aliases: Mapping[str, Sequence[str]] | None = None,
    mention_counts: Mapping[str, Mapping[str, int]] | None = None,
    types: Mapping[str, Counter[str]] | None = None,
    enrichers: Iterable[KBEnricher] = (),
    alias_files: Iterable[Path] = (),
    remove_alias_files: Iterable[Path] = (),
    keep_types: Collection[str] = (),
) -> tuple[KnowledgeBase, KBBuildReport]:
    """The KB of ``sources`` (``readers.KBSource``: a registered reader's name, a path and
    the reader's options, e.g. ``KBSource("obo", Path("hp.obo"), {"roots": ["HP:0000118"]})``),
    each read by its reader and merged by id in their order (an id in several keeps its
    first entry, ``merge_kbs``); ``aliases`` (per id, e.g. the gold mention texts of a
    corpus: ``spacy_data.aliases.harvest_aliases``) come before the others,
    ``mention_counts`` (per id, how often each text was linked to it there) join the
    entities' link counts (the mention prior: ``KnowledgeBase.mention_prior``), and
    ``types`` (per id, a Counter of labels: ``spacy_data.aliases.types_from_docs``) join
    the entities' types (``add_corpus_types``); a corpus id that is an alternate id joins
    the entity it names (``report.resolved`` lists them). ``enrichers``
    (``readers.KBEnricher``) add to the merged KB in turn, before the corpus aliases (the
    MeSH-keyed vocabularies: ``biomedical.synonym_sources.SynonymSources``).
    ``alias_files`` and ``remove_alias_files``:
    plain alias files (``alias_file``: ``id<TAB>alias``) whose aliases join their entities
    after the corpus's (before the others, as those) or leave them, with their link counts
    (``alias_file.without_aliases``); an id the KB lacks is E260. ``keep_types``: keep
    only the entities with one of these types, once all is merged
    (``keep_entities_of_types``: MeSH's Disease and Chemical descriptors, a UMLS semantic
    type). Every input is checked before any is read (``check_kb_sources``), and
    everything is read before anything is returned: a bad input raises its coded error."""
    # checked first, then read
    sources, alias_files = list(sources), list(alias_files)
    enrichers, remove_alias_files = list(enrichers), list(remove_alias_files)
    check_kb_sources(sources, enrichers=enrichers, alias_files=alias_files,
                     remove_alias_files=remove_alias_files)
    edits = {option: [(path, read_alias_file(path, option)) for path in paths]
             for option, paths in (("--aliases", alias_files),
                                   ("--remove-aliases", remove_alias_files))}
    report = KBBuildReport()
    kb = KnowledgeBase()
    for source in sources:
        stats: dict = {}
        report.sources.append((source, stats))
        kb = _merge(kb, read_source(source, stats), source.path, report)
    for enricher in enrichers:
        stats = {}
        report.enriched.append((enricher, stats))
        kb = enricher.enrich(kb, stats)
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
    sources: Iterable[KBSource] = (),
    *,
    enrichers: Iterable[KBEnricher] = (),
    alias_corpus: Iterable[Path] = (),
    alias_files: Iterable[Path] = (),
    remove_alias_files: Iterable[Path] = (),
) -> None:
    """What ``build_kb`` (and ``alias_corpus``, the corpora whose aliases join it) would
    read, checked before anything is read, so that a command fails at once rather than
    after a long read (a full MRCONSO.RRF is about 16 GB): each source's reader is
    registered (E263) and its path readable as its reader says (E230; the UMLS folder's
    MRCONSO.RRF: E234; pronto installed for an ontology: E232), every alias file and
    corpus is readable (E230; a corpus may be a folder: E253), and what every enricher's
    ``check`` says (the vocabularies' packages or files: E007, E175, E253)."""
    for source in sources:
        check_source(source)
    for path in [*alias_files, *remove_alias_files]:
        problem = input_problem(path)
        if problem:
            raise ValueError(Errors.E230.format(path=path, what="alias file", error=problem,
                                                hint=" of one `ID<TAB>alias` a line"))
    for path in alias_corpus:
        problem = input_problem(path, folder_ok=True)
        if problem:
            raise ValueError(Errors.E253.format(
                option="--alias-corpus", path=path, problem=problem,
                what="a corpus (a .spacy, PubTator, JSONL or brat file, or a folder of them)"))
    for enricher in enrichers:
        enricher.check()


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
