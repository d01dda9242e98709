"""Convert documents (``data.documents``, of any input format) to spaCy ``Doc`` objects and
``.spacy`` DocBins.

Each mention becomes a span whose ``kb_id_`` holds its gold ids joined by ``|`` (see
:func:`gold_ids`). ``doc.ents`` keeps the non-overlapping mentions (longer spans first); the span
group ``doc.spans["pubtator"]`` (its name kept from the PubTator converter, whatever the
input format) keeps every mention, so no annotation is lost.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from spacy.language import Language
from spacy.tokens import Doc, DocBin, Span
from spacy.util import filter_spans

from ..atomic import atomic_file
from ..data.documents import Document
from ..data.ids import gold_ids, join_ids  # noqa: F401  (gold_ids re-exported)
from ..errors import Warnings

SPAN_KEY = "pubtator"
PMID_KEY = "pmid"
MISALIGNED_KEY = "pubtator_misaligned"
UNALIGNED_KEY = "pubtator_unaligned"


def document_to_doc(document: Document, nlp: Language) -> Doc:
    """Tokenise one document with ``nlp.make_doc`` and add its mentions as spans.

    ``doc.user_data`` gets the document's id (as ``pmid``) and the number of mentions whose
    offsets had to be widened to token boundaries ("misaligned") or that cover no token at
    all ("unaligned", skipped).
    """
    doc = nlp.make_doc(document.text)
    spans: list[Span] = []
    misaligned = unaligned = 0
    for mention in document.mentions:
        span = doc.char_span(mention.start, mention.end, label=mention.label,
                             kb_id=join_ids(mention.ids), alignment_mode="expand")
        if span is None:
            unaligned += 1
            warnings.warn(Warnings.W102.format(pmid=document.id, text=mention.text,
                                               start=mention.start, end=mention.end),
                          stacklevel=2)
            continue
        if span.start_char != mention.start or span.end_char != mention.end:
            misaligned += 1
        spans.append(span)
    doc.spans[SPAN_KEY] = spans
    doc.ents = filter_spans(spans)
    doc.user_data[PMID_KEY] = document.id
    doc.user_data[MISALIGNED_KEY] = misaligned + unaligned
    doc.user_data[UNALIGNED_KEY] = unaligned
    return doc


def documents_to_docs(documents: Iterable[Document], nlp: Language) -> Iterator[Doc]:
    """Stream ``Doc`` objects for documents (see :func:`document_to_doc`)."""
    for document in documents:
        yield document_to_doc(document, nlp)


def summarize_docs(docs: Iterable[Doc]) -> dict[str, int]:
    """Counts over converted docs: docs, mentions, ents, dropped overlaps, misaligned."""
    summary = {"docs": 0, "mentions": 0, "ents": 0, "dropped_overlaps": 0, "misaligned": 0,
               "unaligned": 0}
    for doc in docs:
        _add_to_summary(summary, doc)
    return summary


def docs_to_docbin(docs: Iterable[Doc], path: str | Path,
                   check: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """Write docs to a ``.spacy`` DocBin (with user data), atomically, and return
    :func:`summarize_docs`; ``check`` gets the summary before anything is written (and
    raises to leave ``path`` as it was, e.g. where no document was read)."""
    docbin = DocBin(store_user_data=True)
    summary = summarize_docs([])
    for doc in docs:
        docbin.add(doc)
        _add_to_summary(summary, doc)
    if check is not None:
        check(summary)
    with atomic_file(path) as temp:
        docbin.to_disk(temp)
    return summary


def _add_to_summary(summary: dict[str, int], doc: Doc) -> None:
    mentions = len(doc.spans[SPAN_KEY]) if SPAN_KEY in doc.spans else len(doc.ents)
    unaligned = int(doc.user_data.get(UNALIGNED_KEY, 0))
    summary["docs"] += 1
    summary["mentions"] += mentions + unaligned
    summary["ents"] += len(doc.ents)
    summary["dropped_overlaps"] += mentions - len(doc.ents)
    summary["misaligned"] += int(doc.user_data.get(MISALIGNED_KEY, 0))
    summary["unaligned"] += unaligned
