"""Dictionary proposals: how ``arbo_linker`` links raw text before its span heads are trained.

An untrained span reader's mention heads are random: they propose garbage (";") and, unseeded,
other garbage in every process. Until they are trained, ``arbo_linker`` proposes instead the
spans of a text that read as a name or alias of its KB, and links them with the zero-shot
encoder, so that ``nlp.add_pipe("arbo_linker", config={"kb_path": ...}); nlp.initialize()``
links a user's own KB:

* ``DictionarySpans`` finds every span that reads as a name or alias on the pipeline's own
  tokens: as written for names without a lowercase letter (acronyms and symbols: "ALL",
  "CO", "K") and one-character names, so that "all patients" is no leukaemia and the article
  "a" no adenine; lowercased for the others; and under their key (``NameKeys``: stems, any
  word order, the stop words the KB does not need, the words its synonyms make one), over
  contiguous words or around a coordination ("aplastic or hypoplastic nails"). Every match is
  kept, nested and overlapping ones too (``inside`` marks a match inside a longer contiguous
  one); the component keeps the longest of overlapping ones as ``doc.ents``. Names with no
  letter or digit (W013) and names longer than ``max_length`` tokens (W012) are never
  matched, so punctuation is never proposed.
* ``dictionary_linker.DictionaryLinker`` links each match with the zero-shot encoder; its
  ``DocLinks.all_spans`` are the span group ``arbo_concepts``: every linked match but those
  inside a longer one, unless ``nested``.

Everything here is deterministic: the same KB, encoder and text give the same spans and ids.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field

from spacy.tokens import Doc

from ..errors import Warnings
from ..factories import LINKER
from ..kb.knowledge_base import KnowledgeBase
from ..linking.coordination import (
    BREAK,
    COORDINATOR,
    COORDINATORS,
    OUTER,
    STOP,
    STOP_COORDINATOR,
    UNKNOWN,
    WORD,
    Unit,
    compound_end,
    coordinated,
    glued,
)
from ..linking.name_variants import Key, NameKeys, has_letter_or_digit

# the most words of a name of one content word among stop words ("factor nine", "vitamin a")
MAX_STOP_KEPT = 4
DICTIONARY_MODES = ("untrained", "always", "never")
PATTERN_BATCH = 1000


@dataclass(frozen=True)
class NameEntry:
    """One name or alias of the KB: its entity's position, whether it is the entity's
    preferred name, and its text."""

    position: int
    is_name: bool
    text: str


@dataclass
class DictionaryMatch:
    """A span of a doc that reads as a KB name or alias, with the entries it matched;
    ``gapped``: read over a coordination, without the words of the gap; ``inside``: inside
    another, contiguous, match ("colitis" in "ulcerative colitis")."""

    start_char: int
    end_char: int
    text: str
    entries: list[NameEntry] = field(default_factory=list)
    gapped: bool = False
    inside: bool = False


def matched_as_written(name: str) -> bool:
    """Whether a name is matched in its own case only: one character, or no lowercase letter
    (acronyms and symbols such as "ALL", "CO", "K"; names of digits alone lose nothing)."""
    return len(name) == 1 or not any(ch.islower() for ch in name)


class DictionarySpans:
    """The spans of a doc that read as a name or alias of ``kb``, nested and overlapping
    ones all.

    ``make_docs``: the pipeline's tokenizer over many texts (``nlp.tokenizer.pipe``), so that
    names are tokenised as the docs they are matched in; ``max_length``: the most tokens a
    matched name may have; ``stop_words`` and ``language``: the pipeline's (``NameKeys``).
    ``n_names`` names are matched; ``n_long`` (W012) and ``n_empty`` (no letter or digit,
    W013) are not.
    """

    def __init__(self, make_docs, kb: KnowledgeBase, max_length: int, name: str = LINKER,
                 stop_words: Iterable[str] = (), language: str = "en") -> None:
        self.kb = kb
        self.max_length = max_length
        entries: list[NameEntry] = []
        empty: list[str] = []
        for position, entity in enumerate(kb):
            for is_name, text in ((True, entity.name), *((False, a) for a in entity.aliases)):
                text = text.strip()
                if has_letter_or_digit(text):
                    entries.append(NameEntry(position, is_name, text))
                else:
                    empty.append(text)
        long: list[tuple[str, int]] = []
        kept: list[tuple[NameEntry, list[str], list[bool]]] = []
        for entry, doc in zip(entries, make_docs((e.text for e in entries),
                                                 batch_size=PATTERN_BATCH), strict=True):
            if len(doc) > max_length:
                long.append((entry.text, len(doc)))
            else:
                kept.append((entry, [t.text for t in doc], [bool(t.whitespace_) for t in doc]))
        by_entity: dict[int, list[list[str]]] = {}
        for entry, words, _ in kept:
            by_entity.setdefault(entry.position, []).append(words)
        self.keys = NameKeys.learn(list(by_entity.values()), stop_words, language)
        # token texts as written (acronyms, symbols) or lowercased (other names) -> entries,
        # and the keys of the other names -> entries
        self._exact: dict[bool, dict[tuple[str, ...], list[NameEntry]]] = {True: {}, False: {}}
        self._keyed: dict[Key, list[NameEntry]] = {}
        for entry, words, spaces in kept:
            written = matched_as_written(entry.text)
            self._exact[written].setdefault(
                tuple(words if written else (w.lower() for w in words)), []).append(entry)
            if written:
                continue
            for key in {self.keys.key(words), self.keys.key(glued(words, spaces))}:
                if key:
                    self._keyed.setdefault(key, []).append(entry)
        # the stems that may be words of a key of several words, with the words of their
        # classes, and the light forms of one-word names
        forms = {form for key in self._keyed if len(key) > 1 for form in key}
        self._stems = forms | {s for s, form in self.keys.canonical.items() if form in forms}
        self._lights = {key[0] for key in self._keyed if len(key) == 1}
        self._exact_starts = {written: {words[0] for words in table}
                              for written, table in self._exact.items()}
        self._exact_length = max((len(words) for table in self._exact.values()
                                  for words in table), default=0)
        self.n_names = len(entries) - len(long)
        self.n_long, self.n_empty = len(long), len(empty)
        if long:
            text, n_tokens = max(long, key=lambda x: x[1])
            warnings.warn(Warnings.W012.format(n=len(long), name=name, max_length=max_length,
                                               example=text[:80], n_tokens=n_tokens),
                          stacklevel=3)
        if empty:
            warnings.warn(Warnings.W013.format(n=len(empty), name=name, example=empty[0][:80]),
                          stacklevel=3)

    def _units(self, doc: Doc) -> list[Unit]:
        """The doc's tokens as units: a hyphenated compound whose glued stem is a word of
        the names ("pre-auricular" for "preauricular") is one unit."""
        units: list[Unit] = []
        words, spaces = [t.text for t in doc], [bool(t.whitespace_) for t in doc]
        i, n = 0, len(doc)
        while i < n:
            j = compound_end(words, spaces, i)
            if j > i:
                glued = "".join(doc[k].text for k in range(i, j + 1, 2))
                stem, light = self.keys.stem(glued), self.keys.stem.light(glued)
                if stem in self._stems or light in self._lights:
                    units.append(Unit(i, j + 1, WORD, stem, light))
                    i = j + 1
                    continue
            units.append(self._unit(doc[i]))
            i += 1
        return units

    def _unit(self, token) -> Unit:
        text = token.text
        lower = text.lower()
        coordinates = lower in COORDINATORS
        ignorable = has_letter_or_digit(text) and self.keys.is_ignorable(text)
        if coordinates:
            inner = ignorable and lower in self.keys.inner
            kind = STOP_COORDINATOR if inner else COORDINATOR
            return Unit(token.i, token.i + 1, kind, self.keys.stem(lower) if inner else lower)
        if ignorable:
            kind = STOP if lower in self.keys.inner else OUTER
            return Unit(token.i, token.i + 1, kind, self.keys.stem(text))
        if not has_letter_or_digit(text):
            return Unit(token.i, token.i + 1, BREAK, "")
        stem, light = self.keys.stem(text), self.keys.stem.light(text)
        known = stem in self._stems or light in self._lights
        return Unit(token.i, token.i + 1, WORD if known else UNKNOWN, stem, light)

    def __call__(self, doc: Doc) -> list[DictionaryMatch]:
        """Every span of the doc that reads as a KB name, by start and end: names as written
        (acronyms and symbols) or lowercased ("d-penicillamine"), names by their key
        (``NameKeys``) over contiguous words, and over words around a coordination
        ("aplastic or hypoplastic nails": "aplastic nails")."""
        units = self._units(doc)
        found: dict[tuple[int, int], DictionaryMatch] = {}

        def add(first: Unit, last: Unit, entries: list[NameEntry], gapped: bool) -> None:
            span = doc[first.start:last.end]
            match = found.get((span.start_char, span.end_char))
            if match is None:
                found[(span.start_char, span.end_char)] = DictionaryMatch(
                    span.start_char, span.end_char, span.text, list(entries), gapped)
            else:
                match.entries.extend(e for e in entries if e not in match.entries)

        texts = {True: [t.text for t in doc], False: [t.lower_ for t in doc]}
        for written, table in self._exact.items():  # as written, or lowercased
            words, starts = texts[written], self._exact_starts[written]
            for start in range(len(doc)):
                if words[start] not in starts:
                    continue
                for end in range(start + 1, min(len(doc), start + self._exact_length) + 1):
                    entries = table.get(tuple(words[start:end]))
                    if entries:
                        add(Unit(start, start + 1, WORD, ""), Unit(end - 1, end, WORD, ""),
                            entries, False)
        for a, first in enumerate(units):  # by key, contiguous
            if first.kind not in (WORD, STOP, OUTER):
                continue
            content: list[Unit] = []
            every: list[str] = []
            outer = False
            for last in units[a:]:
                if last.end - first.start > self.max_length or last.kind not in (
                        WORD, STOP, OUTER, STOP_COORDINATOR):
                    break
                every.append(last.stem)
                if last.kind == WORD:
                    content.append(last)
                outer = outer or last.kind == OUTER
                if len(content) >= 2:
                    if outer or first.kind != WORD:  # no name of two words or more
                        break
                    if last.kind != WORD:
                        continue
                elif len(every) > MAX_STOP_KEPT:
                    break
                elif len(every) == 1 and last.kind != WORD:
                    continue
                entries = self._keyed.get(self.keys.key_of(
                    [u.stem for u in content], every, content[0].light if content else ""))
                if entries:
                    add(first, last, entries, False)
        for left, right in coordinated(units, self.max_length):
            stems = [u.stem for u in (*left, *right) if u.kind == WORD]
            entries = self._keyed.get(self.keys.key_of(stems, stems))
            if entries:
                add(left[0], right[-1], entries, True)
        matches = sorted(found.values(), key=lambda m: (m.start_char, m.end_char))
        _mark_inside(matches)
        for match in matches:
            match.entries = self.best_entries(match.entries, match.text)
        return matches

    @staticmethod
    def best_entries(entries: Iterable[NameEntry], text: str) -> list[NameEntry]:
        """An entity once, with its best entry: the same words as the text (case-folded)
        first, then a preferred name before an alias, then a name in the text's own case."""
        best: dict[int, NameEntry] = {}
        for entry in entries:
            old = best.get(entry.position)
            if old is None or entry_rank(entry, text) < entry_rank(old, text):
                best[entry.position] = entry
        return list(best.values())


def _mark_inside(matches: list[DictionaryMatch]) -> None:
    """Set ``inside`` on the ``matches`` inside another, contiguous, match."""
    for match in matches:
        match.inside = any(other is not match and not other.gapped
                           and other.start_char <= match.start_char
                           and match.end_char <= other.end_char for other in matches)


def entry_rank(entry: NameEntry, text: str) -> tuple[bool, bool, bool]:
    """Lower is better: the text's own words (case-folded), then the preferred name, then
    the same case as the text."""
    return (entry.text.lower() != text.lower(), not entry.is_name, entry.text != text)
