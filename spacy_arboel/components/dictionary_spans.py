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
* ``DictionaryLinker`` links each match with a ``DenseRetriever`` in ``names`` mode: the
  mention's own text ``[CLS] mention [SEP]`` against a row per KB name and alias, cosine,
  both sides the component's entity encoder (the base sentence encoder, or ``pretrain-kb``'s
  self-aligned one: what they learnt to compare). The entities whose name or alias matched
  come first (the preferred name before an alias, a match in the same case before another,
  then the encoder's score): for an exact name the encoder can only tie them with each other;
  the rest of the encoder's top-k follow as candidates. A defined abbreviation ("DOX" after
  "doxorubicin (DOX)") takes its long form's link (``abbreviation_links``). Its
  ``DocLinks.all_spans`` are the span group ``arbo_concepts``: every linked match but those
  inside a longer one, unless ``nested``.

Everything here is deterministic: the same KB, encoder and text give the same spans and ids.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from spacy.tokens import Doc

from ..encoders.inputs import MentionSpan
from ..encoders.transformer import PooledEncoder
from ..errors import Warnings
from ..factories import LINKER
from ..kb.knowledge_base import KnowledgeBase
from ..linking.abbreviation_links import link_abbreviations
from ..linking.dense_retriever import DenseRetriever, RetrieverSettings
from ..linking.name_variants import Key, NameKeys, has_letter_or_digit
from ..linking.reader_spans import LinkedSpan, best_per_span
from ..linking.retriever_reader import DocLinks

DICTIONARY_MODES = ("untrained", "always", "never")
PATTERN_BATCH = 1000
ENCODER_BATCH = 64


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


# what a unit of a doc is to the matcher
WORD, STOP, COORDINATOR, STOP_COORDINATOR, UNKNOWN, BREAK, OUTER = range(7)
# the most words of a name of one content word among stop words ("factor nine", "vitamin a")
MAX_STOP_KEPT = 4
# English coordinators (a name distributed over a coordination: ``_coordinated``)
COORDINATORS = frozenset({"and", "or", ",", "and/or", "/", "nor"})
HYPHENS = frozenset({"-", "\u2010", "\u2011"})
MAX_GAP = 6
MAX_PART = 4


@dataclass(frozen=True)
class Unit:
    """Tokens ``start``..``end`` of a doc read as one unit: a word of the names (with its
    ``NameKeys`` stem and light form), a stop word names have inside them (``STOP``) or not
    (``OUTER``), a coordinator, an unknown word or a break."""

    start: int
    end: int
    kind: int
    stem: str
    light: str = ""


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
            for key in {self.keys.key(words), self.keys.key(_glued(words, spaces))}:
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
            j = _compound_end(words, spaces, i)
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
        for left, right in _coordinated(units, self.max_length):
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
            if old is None or _entry_rank(entry, text) < _entry_rank(old, text):
                best[entry.position] = entry
        return list(best.values())


def _mark_inside(matches: list[DictionaryMatch]) -> None:
    """Set ``inside`` on the ``matches`` inside another, contiguous, match."""
    for match in matches:
        match.inside = any(other is not match and not other.gapped
                           and other.start_char <= match.start_char
                           and match.end_char <= other.end_char for other in matches)


def _gluable(left: str, right: str) -> bool:
    """Whether two words joined by a hyphen read as one word: two letters each at least
    ("pre-auricular"; not "L-Arg", whose "larg" would read as "large", nor "T-ALL")."""
    return sum(ch.isalpha() for ch in left) >= 2 and sum(ch.isalpha() for ch in right) >= 2


def _compound_end(words: list[str], spaces: list[bool], i: int) -> int:
    """The last word of the hyphenated compound starting at word ``i`` ("pre - auricular",
    no space between, each part gluable): ``i`` itself where there is none."""
    j = i
    while (j + 2 < len(words) and words[j + 1] in HYPHENS and not spaces[j]
           and not spaces[j + 1] and _gluable(words[j], words[j + 2])):
        j += 2
    return j


def _glued(words: list[str], spaces: list[bool]) -> list[str]:
    """A name's words with hyphenated compounds glued ("pre-auricular" -> "preauricular")."""
    out: list[str] = []
    i = 0
    while i < len(words):
        j = _compound_end(words, spaces, i)
        out.append("".join(words[k] for k in range(i, j + 1, 2)))
        i = j + 1
    return out


def _coordinated(units: list[Unit], max_length: int
                 ) -> Iterator[tuple[list[Unit], list[Unit]]]:
    """The (left, right) parts around a coordination gap: a name distributed over a
    coordination reads its words without the gap. Either the gap starts at a coordinator and
    ends with a conjunct, after a left part of words alone ("aplastic [or hypoplastic] nails",
    "auricular[, ophthalmologic, and oral] anomalies"), or it starts with a conjunct and ends
    at a coordinator ("renal [hypoplasia and] agenesis"). Each part is up to ``MAX_PART``
    units of words and stop words with a word at its outer edge, and the outer edges are a
    phrase's (no word before or after: "acute [heart failure and] heart failure" reads no
    "acute heart"); the gap is up to ``MAX_GAP`` units of words and coordinators, no other
    stop word ("anomaly [and a flat] face" is no name)."""
    n = len(units)
    gap_kinds = (WORD, UNKNOWN, COORDINATOR, STOP_COORDINATOR)
    for c, unit in enumerate(units):
        if unit.kind not in (COORDINATOR, STOP_COORDINATOR):
            continue
        gaps = [(c, g2, True) for g2 in range(c + 2, min(n, c + MAX_GAP + 1))
                if units[g2 - 1].kind in (WORD, UNKNOWN)]
        gaps += [(g1, c + 1, False) for g1 in range(max(0, c - MAX_GAP + 1), c)
                 if units[g1].kind in (WORD, UNKNOWN)]
        for g1, g2, modifiers in gaps:
            gap = units[g1:g2]
            if not all(u.kind in gap_kinds for u in gap) or not any(
                    u.kind in (COORDINATOR, STOP_COORDINATOR) and u.stem != "," for u in gap):
                continue
            for s in range(g1 - 1, max(-1, g1 - MAX_PART - 1), -1):
                left = units[s:g1]
                if not _is_part(left) or left[0].kind != WORD or (
                        modifiers and any(u.kind != WORD for u in left)):
                    continue
                if s > 0 and units[s - 1].kind in (WORD, UNKNOWN):
                    continue
                for e in range(g2 + 1, min(n, g2 + MAX_PART) + 1):
                    right = units[g2:e]
                    if (right[-1].end - left[0].start > max_length + MAX_GAP
                            or not _is_part(right) or right[-1].kind != WORD
                            or (e < n and units[e].kind in (WORD, UNKNOWN))):
                        continue
                    yield left, right


def _is_part(units: list[Unit]) -> bool:
    return any(u.kind == WORD for u in units) and all(
        u.kind in (WORD, STOP, STOP_COORDINATOR) for u in units)


def _entry_rank(entry: NameEntry, text: str) -> tuple[bool, bool, bool]:
    """Lower is better: the text's own words (case-folded), then the preferred name, then
    the same case as the text."""
    return (entry.text.lower() != text.lower(), not entry.is_name, entry.text != text)


def names_settings(settings) -> RetrieverSettings:
    """The zero-shot retriever's settings from those of an ``arbo_linker`` core: ``names``
    inputs (cosine, a row per name and alias), mean pooling as the sentence encoder was
    trained, the core's entity length (the mention side truncated alike), index kind,
    quantisation and precision (float32 on a CPU: ``cpu_bf16`` is ``arbo_entity_linker``'s
    setting, measured there; the readers' numbers were measured in float32)."""
    length = max(9, settings.entity_max_length)  # the mention side needs 8
    return RetrieverSettings(
        pooling="mean", share_weights=True, mention_max_length=length - 1,
        entity_max_length=length, expand_abbreviations=False,
        index_kind=settings.index_kind, batch_size=ENCODER_BATCH,
        quantize=settings.quantize, cpu_bf16=False, mixed_precision=settings.mixed_precision,
        inputs="names")


class DictionaryLinker:
    """Dictionary proposals (``spans``) linked by the zero-shot ``retriever``, ``top_k``
    candidates per span; ``abbreviations``: a defined short form takes its long form's link;
    ``nested``: the names inside a longer contiguous name ("colitis" in "ulcerative colitis")
    join ``DocLinks.all_spans`` (the parts of a coordination join it either way).
    """

    def __init__(self, spans: DictionarySpans, retriever: DenseRetriever, top_k: int,
                 abbreviations: bool = True, nested: bool = False) -> None:
        self.spans = spans
        self.retriever = retriever
        self.top_k = top_k
        self.abbreviations = abbreviations
        self.nested = nested

    @classmethod
    def build(cls, nlp, kb: KnowledgeBase, tokenizer, transformer, settings, *,
              name: str = LINKER, index_path: Path | None = None,
              nested: bool = False, previous: DictionaryLinker | None = None
              ) -> DictionaryLinker:
        """Patterns from ``nlp``'s tokenizer, and the names index of ``kb`` embedded by
        ``transformer`` (the component's entity encoder, frozen and not copied) or loaded
        from ``index_path`` (checked against the KB and the encoder). ``previous``: the
        dictionary of the KB this one replaces; with the same encoder and settings, its
        names index is brought up to date (only the rows of new text embedded:
        ``IndexedKB.set_kb``)."""
        make_docs = getattr(nlp.tokenizer, "pipe", None) or (
            lambda texts, batch_size: (nlp.make_doc(t) for t in texts))
        spans = DictionarySpans(make_docs, kb, settings.max_span_length, name,
                                stop_words=nlp.Defaults.stop_words, language=nlp.lang)
        old = previous.retriever if previous is not None else None
        if index_path is None and old is not None \
                and old.encoders["entity"].transformer is transformer \
                and old.settings == names_settings(settings):
            retriever = old
            retriever.entities.set_kb(kb)
        else:
            encoder = PooledEncoder(transformer, "mean")
            retriever = DenseRetriever(kb, tokenizer, {"mention": encoder, "entity": encoder},
                                       names_settings(settings))
        if index_path is not None:
            retriever.entities.load_index(index_path)
        else:
            retriever.entities.refresh(desc="Embedding KB names")
        return cls(spans, retriever, settings.top_k, getattr(settings, "abbreviations", True),
                   nested)

    @property
    def kb(self) -> KnowledgeBase:
        return self.retriever.kb

    def write_index(self, path: Path) -> None:
        self.retriever.index.to_disk(path)

    def link(self, docs: Sequence[Doc]) -> tuple[list[list[LinkedSpan]], list[DocLinks]]:
        """Per doc, its matches linked (overlaps not yet resolved with the abbreviations'
        links), and its ``DocLinks``: each span's ranked ``(kb_id, score)`` candidates, one
        passage, the whole text, with the best score of each candidate entity, and
        ``all_spans``: the linked matches, those inside a longer one only with ``nested``."""
        texts = [doc.text for doc in docs]
        matches = [self.spans(doc) for doc in docs]
        flat = [(i, m) for i, found in enumerate(matches) for m in found]
        results = [DocLinks() for _ in docs]
        found: list[list[LinkedSpan]] = [[] for _ in docs]
        if flat:
            for (i, match), ranked in zip(flat, self._ranked(texts, flat), strict=True):
                found[i].append(LinkedSpan(match.start_char, match.end_char, *ranked[0]))
                results[i].candidates[(match.start_char, match.end_char)] = ranked
        for text, spans, result, doc_matches in zip(texts, found, results, matches,
                                                    strict=True):
            inside = set() if self.nested else {(m.start_char, m.end_char)
                                                for m in doc_matches if m.inside}
            if self.abbreviations and spans:
                spans[:] = link_abbreviations(text, spans)
                for span in spans:  # a short form leads with its long form's entity
                    key = (span.start_char, span.end_char)
                    old = result.candidates.get(key, [])
                    if not old or old[0][0] != span.kb_id:
                        result.candidates[key] = [(span.kb_id, span.score)] + [
                            c for c in old if c[0] != span.kb_id]
            result.all_spans = best_per_span(
                s for s in spans if (s.start_char, s.end_char) not in inside)
            if text.strip():
                best: dict[str, float] = {}
                for candidates in result.candidates.values():
                    for kb_id, score in candidates:
                        best[kb_id] = max(best.get(kb_id, -np.inf), score)
                result.passages.append((0, len(text.rstrip()), sorted(
                    best.items(), key=lambda x: (-x[1], x[0]))))
        return found, results

    def _ranked(self, texts: Sequence[str], flat: list[tuple[int, DictionaryMatch]]
                ) -> list[list[tuple[str, float]]]:
        """Each match's candidates: its matched entities (preferred name first, then the
        same case, then the encoder's cosine, then KB order), then the encoder's top-k."""
        spans = [MentionSpan(i, m.start_char, m.end_char) for i, m in flat]
        with warnings.catch_warnings():  # a long match is truncated alike on both sides
            warnings.filterwarnings("ignore", message=r"\[W002\]")
            scores, positions, vectors = self.retriever.link(texts, spans, self.top_k)
        pairs = [(j, e) for j, (_, m) in enumerate(flat) for e in m.entries]
        dense = self.retriever.dense_scores(vectors[[j for j, _ in pairs]],
                                            np.asarray([e.position for _, e in pairs]))
        matched: list[list[tuple[tuple, int, float]]] = [[] for _ in flat]
        for (j, entry), score in zip(pairs, dense, strict=True):
            rank = (*_entry_rank(entry, flat[j][1].text), -round(float(score), 4),
                    entry.position)
            matched[j].append((rank, entry.position, float(score)))
        out = []
        kb = self.retriever.kb
        for j in range(len(flat)):
            ranked = [(p, s) for _, p, s in sorted(matched[j])]
            taken = {p for p, _ in ranked}
            ranked += [(int(p), float(s)) for s, p in zip(scores[j], positions[j], strict=True)
                       if p >= 0 and int(p) not in taken]
            out.append([(kb.entity_at(p).id, s) for p, s in ranked[: max(self.top_k, 1)]])
        return out
