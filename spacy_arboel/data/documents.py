"""The document every reader gives, whatever its format (PubTator, JSONL, brat, plain text,
spaCy's DocBins through ``spacy_data``): an id, a text and the mentions annotated in it. No
spaCy here."""

from __future__ import annotations

from dataclasses import dataclass, field

from .ids import join_ids


@dataclass(frozen=True)
class Mention:
    """One annotated mention: character offsets into its document's text, the text there,
    its label and its gold ids (none: a mention with no id)."""

    start: int
    end: int
    text: str
    label: str
    ids: tuple[str, ...] = ()


@dataclass
class Document:
    """One document: its id (PubTator's PMID, a JSONL ``id``, a file's stem, ...), its text
    and its mentions, in text order."""

    id: str
    text: str
    mentions: list[Mention] = field(default_factory=list)

    @property
    def gold_links(self) -> tuple[tuple[int, int, str], ...]:
        """The mentions that have ids, as ``(start, end, ids joined by "|")``: the gold
        links ``render`` checks."""
        return tuple((m.start, m.end, join_ids(m.ids)) for m in self.mentions if m.ids)
