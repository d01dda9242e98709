"""Harvest aliases and entity types from gold-annotated docs (e.g. a training corpus), for
``kb.build.build_kb`` (the corpus side: the ``kb`` package reads no docs), and build a KB
with those of corpora (``build_kb_with_corpus_aliases``: ``build-kb``, ``prepare``).

The gold mentions are read from ``doc.spans["pubtator"]`` when the docs come from the PubTator
converter (it holds every mention, overlapping ones included), otherwise from ``doc.ents``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import spacy
from spacy.tokens import Doc, Span

from ..data.ids import gold_ids
from ..kb.build import LISTED_SOURCES, KBBuildReport, build_kb, check_kb_sources
from ..kb.knowledge_base import KnowledgeBase
from .convert import SPAN_KEY
from .readers import read_corpus_docs


def gold_mentions(doc: Doc) -> Iterator[Span]:
    """The gold mentions of a doc: its PubTator span group if present, else ``doc.ents``."""
    yield from doc.spans[SPAN_KEY] if SPAN_KEY in doc.spans else doc.ents


def harvest_aliases(docs: Iterable[Doc]) -> dict[str, dict[str, int]]:
    """Map each gold id to the surface forms of its mentions, with how often each was
    linked to it (its aliases are the keys; the counts are the KB's link counts,
    ``Entity.mention_counts``).

    A composite mention gives its text to each of its ids. Forms are deduplicated
    case-insensitively (the most frequent spelling stands for its group, with the group's
    count) and ordered by frequency, then first occurrence.
    """
    counts: dict[str, dict[str, Counter[str]]] = {}
    for doc in docs:
        for span in gold_mentions(doc):
            text = " ".join(span.text.split())
            if not text:
                continue
            for entity_id in gold_ids(span.kb_id_):
                counts.setdefault(entity_id, {}).setdefault(text.lower(), Counter())[text] += 1
    aliases = {}
    for entity_id, groups in counts.items():
        # dicts and Counters keep insertion order, so ties fall back to first occurrence
        ranked = sorted(groups.values(), key=lambda forms: -sum(forms.values()))
        aliases[entity_id] = {forms.most_common(1)[0][0]: sum(forms.values())
                              for forms in ranked}
    return aliases


def types_from_docs(docs: Iterable[Doc]) -> dict[str, Counter[str]]:
    """Map each gold id to a Counter of the labels of its mentions (e.g. Chemical, Disease)."""
    types: dict[str, Counter[str]] = {}
    for doc in docs:
        for span in gold_mentions(doc):
            for entity_id in gold_ids(span.kb_id_):
                types.setdefault(entity_id, Counter())[span.label_] += 1
    return types


def build_kb_with_corpus_aliases(alias_corpus: Iterable[Path] = (), *,
                                 types_from_labels: bool = False, **options: Any
                                 ) -> tuple[KnowledgeBase, KBBuildReport]:
    """``kb.build.build_kb`` with ``options`` (its arguments: ``sources`` and the others)
    and the aliases and link counts of the gold mentions of the corpora ``alias_corpus``
    (any format ``read_corpus_docs`` reads) and, with ``types_from_labels``, their labels
    among their entities' types (``types_from_docs``: a KB typed by its source keeps its
    types unless asked); nothing is written. A bad input raises its coded error; what can
    be checked without reading (``kb.build.check_kb_sources``: the sources' readers and
    files, the enrichers' packages installed) is checked before the corpora are read."""
    alias_corpus = list(alias_corpus)
    # the lists of files once: a generator checked here would reach build_kb empty
    options = {key: list(value) if key in LISTED_SOURCES else value
               for key, value in options.items()}
    check_kb_sources(alias_corpus=alias_corpus, **{key: value for key, value in options.items()
                                                   if key in LISTED_SOURCES})
    docs = list(read_corpus_docs(alias_corpus, spacy.blank("en")))
    harvested = harvest_aliases(docs)
    return build_kb(aliases=harvested, mention_counts=harvested,
                    types=types_from_docs(docs) if types_from_labels else None, **options)
