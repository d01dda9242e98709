"""A KB from a UMLS release in Rich Release Format (for UMLS licensees): one entity per
concept (CUI) of ``MRCONSO.RRF``, typed from ``MRSTY.RRF`` and described from ``MRDEF.RRF``
where the folder holds them.

* ``MRCONSO.RRF`` gives the names: its rows of the languages ``languages`` (LAT, default
  English), the source vocabularies ``sources`` (SAB, default all) and a SUPPRESS flag not in
  ``drop_suppressed`` (default O, E and Y: obsolete, suppressed by the editors or by the
  source) are kept. The concept's name is the string of its best row: UMLS's preferred one
  (TS=P, STT=PF, ISPREF=Y) first, then a row whose term type is a source's preferred name
  (TTY in ``PREFERRED_TTYS``), then the first; its other strings are its aliases.
  ``xrefs=True`` keeps each row's ``SAB:CODE`` (memory grows with the release).
* ``MRSTY.RRF``: the semantic types of each kept concept, as ``types`` (``types="sty"``,
  the type's name, "Disease or Syndrome"; ``"tui"``, its id, "T047", as scispaCy's UMLS KB).
* ``MRDEF.RRF``: the first definition of each kept concept (of a kept source and SUPPRESS
  flag) as its ``description``.

Every file is read line by line (a full MRCONSO.RRF is about 16 GB): only what the KB keeps
is held. A line that is not of the file's layout (number of fields, a CUI, a string) is E233
with its file and line; a CUI the KB refuses (``NIL``, whitespace around it: E035, E001) names
the concept's first kept MRCONSO row.

No spaCy here.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

from ..errors import Errors
from ..parsing import input_problem, utf8_lines
from ..settings import check_value
from .entity import Entity, dedupe_aliases
from .knowledge_base import KnowledgeBase, KnowledgeBaseError
from .readers import KBReader

MRCONSO_COLUMNS = ("CUI", "LAT", "TS", "LUI", "STT", "SUI", "ISPREF", "AUI", "SAUI", "SCUI",
                   "SDUI", "SAB", "TTY", "CODE", "STR", "SRL", "SUPPRESS", "CVF")
MRSTY_COLUMNS = ("CUI", "TUI", "STN", "STY", "ATUI", "CVF")
MRDEF_COLUMNS = ("CUI", "AUI", "ATUI", "SATUI", "SAB", "DEF", "SUPPRESS", "CVF")
DEFAULT_LANGUAGES = ("ENG",)
DEFAULT_DROP_SUPPRESSED = ("O", "E", "Y")
UmlsTypes = Literal["sty", "tui"]
UMLS_TYPES: tuple[str, ...] = get_args(UmlsTypes)
DEFAULT_UMLS_TYPES: UmlsTypes = "sty"
# term types that name a source's preferred term (the metathesaurus' own, MeSH's main
# heading, a source's preferred term): a concept's name when no row is UMLS's preferred one
PREFERRED_TTYS = frozenset({"PN", "MH", "PT", "PEP", "PCE"})


@dataclass
class _Concept:
    rank: tuple[bool, ...]
    name: str
    line: int  # of its first kept MRCONSO row: where a message names the concept
    strings: list[str] = field(default_factory=list)
    xrefs: list[str] = field(default_factory=list)
    types: list[str] = field(default_factory=list)
    definition: str = ""


def umls_file(folder: str | Path, name: str) -> Path:
    """``name`` (``MRCONSO.RRF``, ...) in a UMLS release's folder, or in its ``META``
    subfolder (where the release puts them); the first place when neither has it."""
    folder = Path(folder)
    for place in (folder / name, folder / "META" / name):
        if place.is_file():
            return place
    return folder / name


def check_umls_folder(folder: str | Path) -> Path:
    """The ``MRCONSO.RRF`` of the release at ``folder`` (E234 when it has none, E230 when
    this user may not read it)."""
    path = umls_file(folder, "MRCONSO.RRF")
    if not path.is_file():
        raise KnowledgeBaseError(Errors.E234.format(path=folder))
    problem = input_problem(path)
    if problem:
        raise KnowledgeBaseError(Errors.E230.format(path=path, what="UMLS MRCONSO.RRF",
                                                    error=problem, hint=""))
    return path


def read_umls(
    folder: str | Path,
    *,
    languages: Collection[str] = DEFAULT_LANGUAGES,
    sources: Collection[str] | None = None,
    drop_suppressed: Collection[str] = DEFAULT_DROP_SUPPRESSED,
    types: UmlsTypes = DEFAULT_UMLS_TYPES,
    xrefs: bool = False,
    stats: dict[str, Any] | None = None,
) -> KnowledgeBase:
    """The KB of the UMLS release at ``folder`` (see the module); ``sources`` None keeps
    every source vocabulary. No MRCONSO.RRF is E234, a malformed line E233, no row kept
    E236, an unknown ``types`` E007. ``stats`` receives the numbers of rows read and kept,
    entities, typed and described entities."""
    check_value("UMLS types", types, UmlsTypes)
    mrconso = check_umls_folder(folder)
    languages, dropped = set(languages), set(drop_suppressed)
    sources = None if sources is None else set(sources)
    concepts: dict[str, _Concept] = {}
    n_rows = n_kept = 0
    for number, row in _rows(mrconso, MRCONSO_COLUMNS, required=("CUI", "STR")):
        n_rows += 1
        cui, lat, ts, _, stt, _, ispref, _, _, _, _, sab, tty, code, string, _, suppress, _ = row
        if lat not in languages or suppress in dropped or (sources is not None
                                                           and sab not in sources):
            continue
        n_kept += 1
        rank = (ts == "P", stt == "PF", ispref == "Y", tty in PREFERRED_TTYS)
        concept = concepts.get(cui)
        if concept is None:
            concept = concepts[cui] = _Concept(rank, string, number)
        elif rank > concept.rank:
            concept.rank, concept.name = rank, string
        if string not in concept.strings:
            concept.strings.append(string)
        if xrefs and code and f"{sab}:{code}" not in concept.xrefs:
            concept.xrefs.append(f"{sab}:{code}")
    if not concepts:
        raise KnowledgeBaseError(Errors.E236.format(
            path=mrconso, why=f"none of its {n_rows} rows is of the languages "
            f"{', '.join(sorted(languages))}, of the sources "
            f"{'(all)' if sources is None else ', '.join(sorted(sources))} and not "
            f"suppressed ({', '.join(sorted(dropped))})",
            options="--umls-language, --umls-sources"))
    mrsty = umls_file(mrconso.parent, "MRSTY.RRF")
    if mrsty.is_file():
        for _, (cui, tui, _, sty, _, _) in _rows(mrsty, MRSTY_COLUMNS,
                                                 required=("CUI", "TUI")):
            concept = concepts.get(cui)
            value = tui if types == "tui" else sty
            if concept is not None and value and value not in concept.types:
                concept.types.append(value)
    mrdef = umls_file(mrconso.parent, "MRDEF.RRF")
    if mrdef.is_file():
        for _, (cui, _, _, _, sab, definition, suppress, _) in _rows(mrdef, MRDEF_COLUMNS,
                                                                   required=("CUI",)):
            concept = concepts.get(cui)
            if (concept is not None and not concept.definition and suppress not in dropped
                    and (sources is None or sab in sources)):
                concept.definition = " ".join(definition.split())
    kb = KnowledgeBase()
    for cui, concept in concepts.items():  # a CUI the KB refuses names its first row
        kb.add(Entity(id=cui, name=concept.name, description=concept.definition,
                      aliases=dedupe_aliases(concept.name, concept.strings),
                      types=tuple(concept.types), xrefs=tuple(concept.xrefs)),
               source=f"{mrconso}:{concept.line}")
    if stats is not None:
        stats.update(rows=n_rows, rows_kept=n_kept, entities=len(kb),
                     typed=sum(1 for c in concepts.values() if c.types),
                     described=sum(1 for c in concepts.values() if c.definition))
    return kb


def _rows(path: Path, columns: tuple[str, ...], required: tuple[str, ...]
          ) -> Iterator[tuple[int, list[str]]]:
    """The line number and fields of each line of the RRF file ``path`` (a line ends with
    ``|``: one field more than ``columns``), streamed; E233 for a line that is not UTF-8,
    has another number of fields or a blank ``required`` field."""
    positions = [(name, columns.index(name)) for name in required]

    def fail(number: int, problem: str) -> KnowledgeBaseError:
        return KnowledgeBaseError(Errors.E233.format(
            where=f"{path}:{number}", file=path.name, problem=problem, columns=len(columns),
            layout="|".join(columns) + "|"))

    with path.open("rb") as file_:
        for number, line in enumerate(utf8_lines(file_, fail), start=1):
            line = line.rstrip("\r\n")
            if not line:
                continue
            fields = line.split("|")
            if fields[-1]:
                raise fail(number, "the line does not end with '|'")
            if len(fields) != len(columns) + 1:
                raise fail(number, f"{len(fields) - 1} fields, expected {len(columns)}")
            for name, position in positions:
                if not fields[position].strip():
                    raise fail(number, f"the {name} field is empty")
            yield number, fields[:-1]


def _umls_notes(path: Path, stats: dict) -> list[str]:
    return [f"UMLS: {stats['entities']} concepts from {stats['rows_kept']} of {stats['rows']} "
            f"MRCONSO rows, {stats['typed']} typed, {stats['described']} with a definition"]


# ``build_kb``'s reader of a UMLS release (a folder); its options: ``read_umls``'s
UMLS_READER = KBReader(what="UMLS release folder",
                       read=lambda path, stats, **options: read_umls(path, stats=stats,
                                                                     **options),
                       check=lambda path, **options: check_umls_folder(path),
                       notes=_umls_notes, folder=True)
