"""``arbo_linker``'s linked spans of each text, without spaCy: the heads' (a reader's
``scored_spans``), the dictionary's (``components.dictionary_spans``) or both, without the
links to an entity whose names say the opposite of the words linked (the candidate policy's
``opposites``), overlaps resolved for ``doc.ents``."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..extensions import Candidate
from ..kb.knowledge_base import KnowledgeBase
from .candidates import CandidatePolicy
from .opposites import unopposed, without_opposites
from .reader_spans import (
    DocLinks,
    LinkedSpan,
    best_per_span,
    longest_first,
    overlapping_none,
    resolve_spans,
)

# per text, its linked spans before overlaps are resolved, and its ``DocLinks``
Found = tuple[list[list[LinkedSpan]], list[DocLinks]]


def unopposed_links(texts: Sequence[str], found: list[list[LinkedSpan]],
                    links: list[DocLinks], policy: CandidatePolicy, kb: KnowledgeBase,
                    language: str = "en") -> list[list[LinkedSpan]]:
    """``found`` (per text, its linked spans) without the links to an opposite of the
    span's words, and each span's candidates in ``links`` without them, under the policy's
    ``opposites`` (``linking.opposites``)."""
    if not policy.opposites:
        return found

    def names_of(kb_id: str) -> tuple[str, ...]:
        return kb[kb_id].names

    for text, doc_links in zip(texts, links, strict=True):
        doc_links.candidates = {
            (start, end): unopposed(text[start:end], candidates, names_of, language)
            for (start, end), candidates in doc_links.candidates.items()}
    return [without_opposites(text, spans, names_of, language)
            for text, spans in zip(texts, found, strict=True)]


def text_links(texts: Sequence[str], heads: Found | None, dictionary: Found | None,
               policy: CandidatePolicy, kb: KnowledgeBase, language: str = "en"
               ) -> list[DocLinks]:
    """Each text's ``DocLinks``: the spans of the heads (best scored first where they
    overlap), of the dictionary (longest first), or of both (the dictionary's spans that
    overlap none of the heads' added, with their candidates), none linked to an opposite."""
    results: list[DocLinks] = []
    if heads is not None:
        found, results = heads
        found = unopposed_links(texts, found, results, policy, kb, language)
        for result, spans in zip(results, found, strict=True):
            result.spans = resolve_spans(spans)
            result.all_spans = best_per_span(spans)
    if dictionary is None:
        return results
    found, extra = dictionary
    found = unopposed_links(texts, found, extra, policy, kb, language)
    if heads is None:
        for text, result, spans in zip(texts, extra, found, strict=True):
            result.spans = resolve_spans(spans, longest_first(text))
        return extra
    for text, result, spans, more in zip(texts, results, found, extra, strict=True):
        kept = result.spans
        added = overlapping_none(resolve_spans(spans, longest_first(text)), kept)
        for key, candidates in more.candidates.items():
            result.candidates.setdefault(key, candidates)
        result.spans = sorted(kept + added, key=lambda s: (s.start_char, s.end_char))
        result.all_spans = best_per_span([*result.all_spans, *more.all_spans])
    return results


def linked_rows(links: DocLinks, spans: Sequence[LinkedSpan], label_of: Callable[[str], str]
                ) -> list[tuple[int, int, str, str, list[Candidate]]]:
    """``(start_char, end_char, label, kb_id, candidates)`` of each of ``spans`` (what a
    component writes), its candidates ``links``' (the span's own link alone where it has
    none), as ``Candidate`` records whose raw score is the reader's."""
    return [(s.start_char, s.end_char, label_of(s.kb_id), s.kb_id,
             [Candidate(i, score, score) for i, score in
              links.candidates.get((s.start_char, s.end_char), [(s.kb_id, s.score)])])
            for s in spans]
