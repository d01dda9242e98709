"""Abbreviations linked through their long form, after end-to-end linking.

A one-pass reader sees "DOX" in a passage that may not hold "doxorubicin (DOX)", so it cannot
expand the short form as ``arbo_entity_linker`` does before encoding
(``expand_abbreviations``). Instead, once a document's spans are scored, every occurrence of a
short form the document defines (Schwartz & Hearst, ``data.abbreviations``) takes the entity
and score of the best link of its long form, as scispacy's linker resolves abbreviations
through their long forms.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..data.abbreviations import find_abbreviations, short_forms_spans
from .reader_spans import LinkedSpan


def link_abbreviations(text: str, spans: Sequence[LinkedSpan]) -> list[LinkedSpan]:
    """``spans`` (scored, not yet resolved) where each occurrence of a defined short form
    links to the best-scored entity of a span reading its long form (case-insensitive): its
    other links are dropped and the long form's link is added with the long form's score.
    Short forms whose long form was not linked keep their own links."""
    abbreviations = find_abbreviations(text)
    if not abbreviations:
        return list(spans)
    best: dict[str, LinkedSpan] = {}
    for span in spans:
        surface = text[span.start_char : span.end_char].lower()
        if surface not in best or span.score > best[surface].score:
            best[surface] = span
    sources = {short: best[long.lower()] for short, long in abbreviations.items()
               if long.lower() in best}
    occurrences = short_forms_spans(text, sources)  # one pass, whatever their number
    replaced: dict[tuple[int, int], LinkedSpan] = {}
    for short, source in sources.items():
        for start, end in occurrences[short]:
            replaced[(start, end)] = LinkedSpan(start, end, source.kb_id, source.score)
    kept = [s for s in spans if (s.start_char, s.end_char) not in replaced]
    return kept + list(replaced.values())
