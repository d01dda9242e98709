"""The readers of the KB sources users hold, registered like spaCy's ``kb_loader``s: the
catalogue registry ``kb_readers`` (entry-point group ``spacy_arboel_kb_readers``) maps a
name to a ``KBReader``, which turns one source (a file, or a folder) into a
``KnowledgeBase`` behind one signature; ``build.build_kb`` checks every ``KBSource`` it is
given, then reads each and merges them. A new format is one module holding its
``KBReader`` and one registration: an entry point, or ``@kb_readers.register(name)``.
Registered here: ``jsonl`` (ours or scispaCy's), ``obo`` (``obo.py``), ``umls``
(``umls.py``); the biomedical package registers ``mesh``."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import catalogue

from ..errors import Errors
from ..factories import registered
from ..parsing import input_problem
from .knowledge_base import KnowledgeBase

kb_readers = catalogue.create("spacy_arboel", "kb_readers", entry_points=True)


@dataclass(frozen=True)
class KBReader:
    """How one format is read: ``read(path, stats, **options)`` gives its KB (``stats``: a
    dict it fills with what it found, for ``notes(path, stats)``, the report's lines);
    ``what`` names a source of the format in errors (``hint``: what it holds); ``check(path,
    **options)``, what can be checked before anything is read, beyond the path being a
    readable file (a folder with ``folder``)."""

    what: str
    read: Callable[..., KnowledgeBase]
    check: Callable[..., Any] | None = None
    notes: Callable[[Path, dict], list[str]] | None = None
    hint: str = ""
    folder: bool = False


@dataclass(frozen=True)
class KBSource:
    """One source of a KB: the registered ``reader`` of its format, its ``path`` and the
    reader's ``options`` (keyword arguments of its ``read``)."""

    reader: str
    path: Path
    options: Mapping[str, Any] = field(default_factory=dict)


class KBEnricher(Protocol):
    """What adds to a whole KB once its sources are merged, before the corpus aliases
    (``build.build_kb``'s ``enrichers``; e.g. ``biomedical.synonym_sources.SynonymSources``,
    vocabularies whose synonyms join a MeSH KB): ``check()`` before anything is read,
    ``enrich(kb, stats)`` the KB with what it adds (``stats`` filled for ``notes(stats)``,
    the report's lines)."""

    def check(self) -> None: ...

    def enrich(self, kb: KnowledgeBase, stats: dict) -> KnowledgeBase: ...

    def notes(self, stats: dict) -> list[str]: ...


def get_reader(name: str) -> KBReader:
    """The reader registered as ``name`` (E263 naming those there are)."""
    return registered(kb_readers, name, Errors.E263)


def check_source(source: KBSource) -> None:
    """That ``source`` can be read, without reading it: its reader is registered (E263),
    its path a readable file (E230; a folder for a folder reader: its own check), and what
    its reader's ``check`` says."""
    reader = get_reader(source.reader)
    if not reader.folder:
        problem = input_problem(source.path)
        if problem:
            raise ValueError(Errors.E230.format(path=source.path, what=reader.what,
                                                error=problem, hint=reader.hint))
    if reader.check is not None:
        reader.check(source.path, **source.options)


def read_source(source: KBSource, stats: dict) -> KnowledgeBase:
    """The KB of ``source`` (``stats`` filled by its reader)."""
    return get_reader(source.reader).read(source.path, stats, **source.options)


def source_notes(source: KBSource, stats: dict) -> list[str]:
    """The report's lines on what reading ``source`` found."""
    notes = get_reader(source.reader).notes
    return notes(source.path, stats) if notes is not None else []


def _read_jsonl(path: Path, stats: dict) -> KnowledgeBase:
    kb = KnowledgeBase.from_jsonl(path)
    stats["entities"] = len(kb)
    return kb


JSONL_READER = KBReader(what="knowledge-base JSONL file", read=_read_jsonl,
                        hint=' of one JSON object a line with "id" and "name"')
