"""Build a knowledge base from MeSH: the descriptor list and the disease-synonym table.

* ``mesh_descriptors_2026.csv``: columns ``id`` (``https://id.nlm.nih.gov/mesh/D000001``),
  ``scheme`` and ``subject`` (the preferred name).
* ``mesh_disease_synonyms.tsv``: columns ``mesh_id``, ``name``, ``tree_numbers`` and
  ``synonyms`` (both ``|``-separated); a few rows carry ids that are not MeSH ids (e.g. ``8``),
  and a fifth carry the id of another descriptor than the one they name: those go to the
  descriptor of their name (:func:`place_rows_by_name`).
"""

from __future__ import annotations

import csv
import logging
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..errors import Errors
from ..kb.entity import Entity, dedupe_aliases
from ..kb.knowledge_base import KnowledgeBase
from ..kb.readers import KBReader
from ..parsing import input_problem, utf8_lines

logger = logging.getLogger(__name__)

DISEASE_TYPE = "Disease"
CHEMICAL_TYPE = "Chemical"
MESH_ID = re.compile(r"^[CD]\d{6,9}$")
# MeSH tree branches counted as diseases: C (Diseases) and F03 (Mental Disorders), the
# scope of CTD's MEDIC, whose ids BC5CDR's and NCBI-disease's Disease mentions carry.
DISEASE_TREES = ("C", "F03")
# MeSH's 16 tree categories by letter: a descriptor's KB type (``tree_types``). D (Chemicals
# and Drugs, CTD's chemical vocabulary) is ``Chemical``, the type name corpora label.
MESH_CATEGORIES = {
    "A": "Anatomy", "B": "Organisms", "C": DISEASE_TYPE, "D": CHEMICAL_TYPE,
    "E": "Analytical, Diagnostic and Therapeutic Techniques, and Equipment",
    "F": "Psychiatry and Psychology", "G": "Phenomena and Processes",
    "H": "Disciplines and Occupations",
    "I": "Anthropology, Education, Sociology, and Social Phenomena",
    "J": "Technology, Industry, and Agriculture", "K": "Humanities",
    "L": "Information Science", "M": "Named Groups", "N": "Health Care",
    "V": "Publication Characteristics", "Z": "Geographicals",
}


@dataclass(frozen=True)
class _DiseaseRow:
    id: str
    name: str
    tree_numbers: tuple[str, ...]
    synonyms: tuple[str, ...]

    @property
    def is_disease(self) -> bool:
        return not self.tree_numbers or any(t.startswith(DISEASE_TREES)
                                            for t in self.tree_numbers)


def read_mesh_descriptors(csv_path: str | Path) -> list[Entity]:
    """MeSH descriptors as entities: id = the D-number after the last ``/``, name = subject.
    A row without an id or a subject is E150, naming its line (it is not dropped unseen); an
    id the KB refuses (reserved: E035; repeated: E002) names its line too."""
    path = Path(csv_path)
    entities = KnowledgeBase()  # checks each id where it is read
    for line, row in _rows(path, ("id", "subject"), "MeSH descriptor CSV"):
        entity_id = (row["id"] or "").strip().rsplit("/", 1)[-1].strip()
        name = (row["subject"] or "").strip()
        if not entity_id or not name:
            raise ValueError(Errors.E150.format(
                path=path, line=line, what="MeSH descriptor CSV",
                problem=f"the row has no {'id' if not entity_id else 'subject'} (id "
                        f"{row['id']!r}, subject {row['subject']!r})"))
        entities.add(Entity(id=entity_id, name=name), source=f"{path}:{line}")
    return list(entities)


def build_mesh_kb(
    descriptors_csv: str | Path,
    disease_synonyms_tsv: str | Path | None = None,
    stats: dict[str, Any] | None = None,
) -> KnowledgeBase:
    """A KB of the MeSH descriptors, with the disease synonyms merged in as aliases.

    Aliases keep file order and are deduplicated case-insensitively against the name and each
    other. Entities in a disease tree (C, or F03 mental disorders) get ``types=("Disease",)``.
    Synonym rows for ids absent from the descriptors are not added (counted in ``stats``);
    rows whose id is not a MeSH id (``8``) are skipped, their number and ids in
    ``stats["skipped"]`` and ``stats["skipped_ids"]``.
    A row whose name is another descriptor's preferred name goes to that descriptor
    (:func:`place_rows_by_name`).
    """
    stats = {} if stats is None else stats
    entities = read_mesh_descriptors(descriptors_csv)
    rows: dict[str, _DiseaseRow] = {}
    if disease_synonyms_tsv is not None:
        rows = place_rows_by_name(_read_disease_rows(disease_synonyms_tsv, stats), entities,
                                  stats)
    merged = []
    n_aliases = n_disease = 0
    for entity in entities:
        row = rows.get(entity.id)
        if row is None:
            merged.append(entity)
            continue
        aliases = dedupe_aliases(entity.name, [*entity.aliases, *row.synonyms])
        types = (DISEASE_TYPE,) if row.is_disease else entity.types
        n_aliases += len(aliases) - len(entity.aliases)
        n_disease += row.is_disease
        merged.append(replace(entity, aliases=aliases, types=types))
    known = {entity.id for entity in entities}
    stats.update(
        entities=len(merged),
        aliases_added=n_aliases,
        disease_entities=n_disease,
        synonym_ids_absent=sorted(set(rows) - known),
    )
    return KnowledgeBase(merged)


def tree_types(tree_numbers: Iterable[str]) -> tuple[str, ...]:
    """A MeSH descriptor's KB types by its tree numbers, in first-seen order: ``Disease`` for
    the disease trees (``DISEASE_TREES``), else the name of the number's category
    (``MESH_CATEGORIES``: ``Chemical`` for D, ``Psychiatry and Psychology`` for F01's
    *Depression*); an unknown letter gives no type."""
    types = []
    for number in tree_numbers:
        number = number.strip()
        found = DISEASE_TYPE if number.startswith(DISEASE_TREES) else MESH_CATEGORIES.get(
            number[:1])
        if found and found not in types:
            types.append(found)
    return tuple(types)


def type_by_tree_numbers(kb: KnowledgeBase, tree_numbers: Mapping[str, Iterable[str]],
                         stats: dict[str, Any] | None = None) -> KnowledgeBase:
    """``kb`` with each entity's ``types`` joined by the types of its MeSH tree numbers
    (``tree_types``; ``tree_numbers``: id -> numbers, e.g. ``read_mesh_entry_terms``'s).

    The descriptor list and the disease table type only diseases, so the type rule
    (``kb.type_rule``) could not keep a Disease mention off *Depression* (F01, behaviour) or
    *Nephrotomy* (E04): an untyped entity fits every label. Types an entity already has are
    kept first; ids absent from ``kb`` are ignored. ``stats`` gets ``entities_typed`` (those
    whose types changed) and ``types`` (entities by type, over the whole KB)."""
    entities, n_typed = [], 0
    for entity in kb:
        types = tuple(dict.fromkeys((*entity.types, *tree_types(tree_numbers.get(entity.id,
                                                                                   ())))))
        n_typed += types != entity.types
        entities.append(entity if types == entity.types else replace(entity, types=types))
    if stats is not None:
        by_type = Counter(name for entity in entities for name in entity.types)
        stats.update(entities_typed=n_typed, types=dict(sorted(by_type.items())))
    return KnowledgeBase(entities)


def place_rows_by_name(rows: Iterable[_DiseaseRow], entities: Iterable[Entity],
                       stats: dict[str, Any]) -> dict[str, _DiseaseRow]:
    """The synonym rows by the descriptor they describe.

    In the disease-synonym table a fifth of the rows (1,113 of 5,688) carry the id of another
    descriptor than the one they name, while their synonyms and tree numbers follow the name
    (``D007696 Seizures``: D007696 is *Kindling, Neurologic*; Seizures is D012640). A row
    whose id's descriptor has another name, and whose name is (case-insensitively) the
    preferred name of a descriptor, goes to that descriptor; otherwise its id is kept. Rows
    that land on one descriptor are merged (synonyms and tree numbers in file order).
    ``stats["synonym_rows_placed_by_name"]`` counts the moved rows.
    """
    names = {entity.id: entity.name.casefold() for entity in entities}
    by_name: dict[str, str] = {}
    for entity_id, name in names.items():
        by_name.setdefault(name, entity_id)
    placed: dict[str, _DiseaseRow] = {}
    moved = 0
    for row in rows:
        target = row.id
        name = row.name.casefold()
        if names.get(row.id) != name and name in by_name:
            target = by_name[name]
            moved += 1
        old = placed.get(target)
        if old is not None:
            row = _DiseaseRow(target, old.name, _union(old.tree_numbers, row.tree_numbers),
                              _union(old.synonyms, row.synonyms))
        elif target != row.id:
            row = _DiseaseRow(target, row.name, row.tree_numbers, row.synonyms)
        placed[target] = row
    stats["synonym_rows_placed_by_name"] = moved
    return placed


def _union(first: tuple[str, ...], second: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(dict.fromkeys((*first, *second)))


def _read_disease_rows(tsv_path: str | Path, stats: dict[str, Any] | None) -> Iterator[_DiseaseRow]:
    path = Path(tsv_path)
    skipped: list[str] = []
    for _, row in _rows(path, ("mesh_id", "name", "synonyms"), "MeSH disease-synonym TSV",
                        delimiter="\t", quoting=csv.QUOTE_NONE):
        entity_id = (row["mesh_id"] or "").strip()
        if not MESH_ID.match(entity_id):
            skipped.append(entity_id)
            continue
        yield _DiseaseRow(
            id=entity_id,
            name=(row["name"] or "").strip(),
            tree_numbers=_split(row.get("tree_numbers")),
            synonyms=_split(row["synonyms"]),
        )
    if skipped:
        logger.info("%s: skipped %d rows without a MeSH id (%s)", path, len(skipped),
                    ", ".join(skipped[:5]))
    if stats is not None:
        stats["skipped"] = len(skipped)
        stats["skipped_ids"] = skipped


def _split(value: str | None) -> tuple[str, ...]:
    return tuple(part.strip() for part in (value or "").split("|") if part.strip())


def _rows(path: Path, expected: tuple[str, ...], what: str,
          **dialect: Any) -> Iterator[tuple[int, dict[str, str | None]]]:
    """The rows of the CSV or TSV file ``path``, which must have the ``expected`` columns
    (E100), each with the number of its (last) line; a line that is not UTF-8 or that csv
    cannot read is E150, naming it."""

    def fail(number: int, problem: str) -> ValueError:
        return ValueError(Errors.E150.format(path=path, line=number, what=what,
                                             problem=problem))

    read = 0  # lines given to csv (its line_num lags behind on some errors)

    def counted(lines: Iterable[str]) -> Iterator[str]:
        nonlocal read
        for line in lines:
            read += 1
            yield line

    with path.open("rb") as file_:
        reader = csv.DictReader(counted(utf8_lines(file_, fail)), **dialect)
        try:
            _check_columns(path, reader.fieldnames, expected, what)
            for row in reader:
                yield read, row
        except csv.Error as err:  # e.g. a field over csv's size limit
            raise fail(read, str(err)) from None


def _check_columns(path: Path, found: Iterable[str] | None, expected: tuple[str, ...],
                   what: str) -> None:
    columns = list(found or ())
    if any(column not in columns for column in expected):
        raise ValueError(Errors.E100.format(path=path, what=what, expected=list(expected),
                                            found=columns))


def _check_disease_synonyms(path: Path, disease_synonyms: str | Path | None = None) -> None:
    """E230 where the disease-synonym TSV given beside the descriptors cannot be read."""
    problem = disease_synonyms and input_problem(disease_synonyms)
    if problem:
        raise ValueError(Errors.E230.format(path=disease_synonyms, what="MeSH disease-synonym "
                                            "TSV", error=problem, hint=""))


def _mesh_notes(path: Path, stats: dict) -> list[str]:
    return [f"MeSH: {stats['entities']} entities, {stats.get('aliases_added', 0)} synonym "
            f"aliases, {stats.get('skipped', 0)} synonym rows without a MeSH id skipped, "
            f"{stats.get('synonym_rows_placed_by_name', 0)} placed by their name (their id "
            "was another descriptor's)"]


# ``build_kb``'s reader of the MeSH descriptor CSV; its option: ``disease_synonyms``, the TSV
MESH_READER = KBReader(
    what="MeSH descriptor CSV", check=_check_disease_synonyms, notes=_mesh_notes,
    read=lambda path, stats, disease_synonyms=None: build_mesh_kb(path, disease_synonyms,
                                                                  stats))
