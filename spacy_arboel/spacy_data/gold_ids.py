"""Gold ids read against a KB: a corpus annotated with an older release of its ontology
(HPO corpora, MeSH corpora after descriptor merges) names some entities by an ``alt_id`` or
by an obsolete term that another replaces. Each such id is resolved to the id of the entity
it names (``KnowledgeBase.resolve_ids``) where gold ids are read against a KB: in training,
in evaluation and in the scorers, so that a right link is scored right."""

from __future__ import annotations

from collections.abc import Iterable

from spacy.tokens import Doc, Span, SpanGroup
from spacy.training import Example

from ..data.ids import gold_ids, join_ids
from ..kb.knowledge_base import KnowledgeBase


def resolved_gold_ids(kb_id: str, kb: KnowledgeBase | None) -> tuple[str, ...]:
    """The gold ids of a span's ``kb_id_`` (``data.ids.gold_ids``) with each alternate id
    of ``kb`` replaced by its entity's id (as they are without a KB)."""
    return gold_ids(kb_id) if kb is None else kb.resolve_ids(gold_ids(kb_id))


def kb_of(kb_ids: object) -> KnowledgeBase | None:
    """``kb_ids`` when it is a KB (a scorer's ``kb_ids``: ids, a predicate or the KB), else
    None: only a KB resolves alternate ids."""
    return kb_ids if isinstance(kb_ids, KnowledgeBase) else None


def resolve_kb_id(kb_id: str, kb: KnowledgeBase | None) -> str:
    """A span's gold ``kb_id_`` with each alternate id replaced by its entity's id (the
    string unchanged when none is one, or without a KB)."""
    if kb is None or not any(kb.is_alternate_id(i) for i in gold_ids(kb_id)):
        return kb_id
    return join_ids(resolved_gold_ids(kb_id, kb))


def _alternate_ids(doc: Doc, kb: KnowledgeBase) -> int:
    """How many gold ids of the mentions of ``doc`` are alternate ids (a mention in its ents
    and in a span group counted once)."""
    spans = [*doc.ents, *(span for group in doc.spans.values() for span in group)]
    return len({(span.start_char, span.end_char, i) for span in spans
                for i in gold_ids(span.kb_id_) if kb.is_alternate_id(i)})


def resolve_gold_doc(doc: Doc, kb: KnowledgeBase | None) -> tuple[Doc, int]:
    """``doc`` with the gold ids of its ents and span groups resolved (:func:`resolve_kb_id`),
    and how many ids were resolved: ``doc`` itself when none was, else a copy (the caller's
    doc is left as it is)."""
    count = 0 if kb is None else _alternate_ids(doc, kb)
    if not count:
        return doc, 0
    doc = doc.copy()
    doc.set_ents([Span(doc, e.start, e.end, label=e.label, span_id=e.id,
                       kb_id=resolve_kb_id(e.kb_id_, kb)) for e in doc.ents],
                 default="unmodified")
    for key, group in list(doc.spans.items()):
        spans = [Span(doc, s.start, s.end, label=s.label, span_id=s.id,
                      kb_id=resolve_kb_id(s.kb_id_, kb)) for s in group]
        doc.spans[key] = SpanGroup(doc, name=group.name, attrs=dict(group.attrs), spans=spans)
    return doc, count


def resolve_gold_docs(docs: Iterable[Doc], kb: KnowledgeBase | None) -> tuple[list[Doc], int]:
    """:func:`resolve_gold_doc` of each doc, and the number of gold ids resolved in all."""
    resolved, total = [], 0
    for doc in docs:
        doc, count = resolve_gold_doc(doc, kb)
        resolved.append(doc)
        total += count
    return resolved, total


def resolve_examples(examples: Iterable[Example], kb: KnowledgeBase | None
                     ) -> tuple[list[Example], int]:
    """``examples`` with their reference docs' gold ids resolved (:func:`resolve_gold_doc`;
    an example whose reference needs none is passed on as it is), and the number of gold
    ids resolved."""
    resolved, total = [], 0
    for eg in examples:
        reference, count = resolve_gold_doc(eg.reference, kb)
        resolved.append(Example(eg.predicted, reference) if count else eg)
        total += count
    return resolved, total
