"""Which spans of a ``Doc`` a linker links (edsnlp's ``span_getter``): ``doc.ents``, the span
groups ``doc.spans[key]`` (e.g. a spancat's ``"sc"``), or both, and how a link is written
back to where its span came from."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import spacy
from spacy.tokens import Doc, Span, SpanGroup


@dataclass(frozen=True)
class SpanGetter:
    """The mentions of a doc: its ents (``ents``), then the spans of each group of
    ``spans_keys`` that a doc has, in order, each offset pair once (the first span with it).
    ``write`` sets each linked span's ``kb_id_`` where the span came from: an ent's tokens
    (``token.ent_kb_id``), a group's span (the group is rebuilt: a span of a ``SpanGroup``
    keeps no ``kb_id_`` set on it)."""

    ents: bool = True
    spans_keys: tuple[str, ...] = ()

    def __call__(self, doc: Doc) -> list[Span]:
        if not self.spans_keys:  # ents alone never share offsets
            return list(doc.ents) if self.ents else []
        seen: set[tuple[int, int]] = set()
        found = []
        for span in self._sources(doc):
            if (span.start_char, span.end_char) not in seen:
                seen.add((span.start_char, span.end_char))
                found.append(span)
        return found

    def _sources(self, doc: Doc) -> Iterable[Span]:
        if self.ents:
            yield from doc.ents
        for key in self.spans_keys:
            if key in doc.spans:
                yield from doc.spans[key]

    def write(self, doc: Doc, kb_ids: Mapping[tuple[int, int], str]) -> None:
        """Give each span whose character offsets ``kb_ids`` holds that KB id."""
        if self.ents:
            for ent in doc.ents:
                kb_id = kb_ids.get((ent.start_char, ent.end_char))
                if kb_id is not None:
                    for token in ent:
                        token.ent_kb_id_ = kb_id
        for key in self.spans_keys:
            if key not in doc.spans:
                continue
            group = doc.spans[key]
            spans = [Span(doc, span.start, span.end, label=span.label, span_id=span.id,
                          kb_id=kb_ids.get((span.start_char, span.end_char), span.kb_id_))
                     for span in group]
            doc.spans[key] = SpanGroup(doc, name=group.name, attrs=dict(group.attrs),
                                       spans=spans)


@spacy.registry.misc("spacy_arboel.span_getter.v1")
def make_span_getter(ents: bool = SpanGetter.ents,
                     spans_keys: list[str] | None = None) -> SpanGetter:
    """The spans a linker links: ``doc.ents`` (``ents``) and the span groups named in
    ``spans_keys`` (``["sc"]``: a spancat's spans)."""
    return SpanGetter(ents, tuple(spans_keys or ()))
