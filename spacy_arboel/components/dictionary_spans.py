"""Dictionary proposals: how ``arbo_linker`` links raw text before its span heads are trained.

An untrained span reader's mention heads are random: they propose garbage (";") and, unseeded,
other garbage in every process. Until they are trained, ``arbo_linker`` proposes instead the
spans of a text that read as a name or alias of its KB, and links them with the zero-shot
encoder, so that ``nlp.add_pipe("arbo_linker", config={"kb_path": ...}); nlp.initialize()``
links a user's own KB:

* ``DictionarySpans`` matches every name and alias with spaCy's ``PhraseMatcher`` on the
  pipeline's own tokens: case-insensitively (``LOWER``), except names without a lowercase
  letter (acronyms and symbols: "ALL", "CO", "K") and one-character names, matched as written
  (``ORTH``), so that "all patients" is no leukaemia and the article "a" no adenine. The
  longest match wins over a shorter nested or crossing one (``spacy.util.filter_spans``:
  longest first, then earliest). Names with no letter or digit (W013) and names longer than
  ``max_length`` tokens (W012) are never matched, so punctuation is never proposed.
* ``DictionaryLinker`` links each match with a ``DenseRetriever`` in ``names`` mode: the
  mention's own text ``[CLS] mention [SEP]`` against a row per KB name and alias, cosine,
  both sides the component's entity encoder (the base sentence encoder, or ``pretrain-kb``'s
  self-aligned one: what they learnt to compare). The entities whose name or alias matched
  come first (the preferred name before an alias, a match in the same case before another,
  then the encoder's score): for an exact name the encoder can only tie them with each other;
  the rest of the encoder's top-k follow as candidates. A defined abbreviation ("DOX" after
  "doxorubicin (DOX)") takes its long form's link (``abbreviation_links``).

Everything here is deterministic: the same KB, encoder and text give the same spans and ids.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from spacy.matcher import PhraseMatcher
from spacy.tokens import Doc, Span
from spacy.util import filter_spans

from ..encoders.inputs import MentionSpan
from ..encoders.transformer import PooledEncoder
from ..errors import Warnings
from ..factories import LINKER
from ..kb.knowledge_base import KnowledgeBase
from ..linking.abbreviation_links import link_abbreviations
from ..linking.dense_retriever import DenseRetriever, RetrieverSettings
from ..linking.reader_spans import LinkedSpan
from ..linking.retriever_reader import DocLinks

DICTIONARY_MODES = ("untrained", "always", "never")
PATTERN_BATCH = 1000
ENCODER_BATCH = 64
MATCH_KEY = "KB_NAME"


@dataclass(frozen=True)
class NameEntry:
    """One name or alias of the KB: its entity's position, whether it is the entity's
    preferred name, and its text."""

    position: int
    is_name: bool
    text: str


@dataclass
class DictionaryMatch:
    """A span of a doc that reads as a KB name or alias, with the entries it matched."""

    start_char: int
    end_char: int
    text: str
    entries: list[NameEntry] = field(default_factory=list)


def matched_as_written(name: str) -> bool:
    """Whether a name is matched in its own case only: one character, or no lowercase letter
    (acronyms and symbols such as "ALL", "CO", "K"; names of digits alone lose nothing)."""
    return len(name) == 1 or not any(ch.islower() for ch in name)


def has_letter_or_digit(text: str) -> bool:
    return any(ch.isalnum() for ch in text)


class DictionarySpans:
    """The spans of a doc that read as a name or alias of ``kb``.

    ``make_docs``: the pipeline's tokenizer over many texts (``nlp.tokenizer.pipe``), so that
    patterns are tokenised as the docs they are matched in; ``max_length``: the most tokens a
    matched name may have. ``n_names`` names are matched; ``n_long`` (W012) and ``n_empty``
    (no letter or digit, W013) are not.
    """

    def __init__(self, make_docs, vocab, kb: KnowledgeBase, max_length: int,
                 name: str = LINKER) -> None:
        self.kb = kb
        self.max_length = max_length
        self.folded = PhraseMatcher(vocab, attr="LOWER")
        self.as_written = PhraseMatcher(vocab, attr="ORTH")
        # token texts (lowercased for ``folded``) -> the entries that read so
        self._folded: dict[tuple[str, ...], list[NameEntry]] = {}
        self._as_written: dict[tuple[str, ...], list[NameEntry]] = {}
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
        patterns: dict[bool, list[Doc]] = {True: [], False: []}
        for entry, doc in zip(entries, make_docs((e.text for e in entries),
                                                 batch_size=PATTERN_BATCH), strict=True):
            if len(doc) > max_length:
                long.append((entry.text, len(doc)))
                continue
            written = matched_as_written(entry.text)
            table = self._as_written if written else self._folded
            key = tuple(t.text if written else t.lower_ for t in doc)
            if key not in table:
                table[key] = []
                patterns[written].append(doc)
            table[key].append(entry)
        for written, matcher in ((False, self.folded), (True, self.as_written)):
            found = patterns[written]
            for at in range(0, len(found), PATTERN_BATCH):
                matcher.add(MATCH_KEY, found[at : at + PATTERN_BATCH])
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

    def entries_of(self, span: Span) -> list[NameEntry]:
        """The entries a span reads as (an entity once, with the best of its entries:
        a preferred name before an alias, a name in the span's own case before another)."""
        found = [*self._folded.get(tuple(t.lower_ for t in span), ()),
                 *self._as_written.get(tuple(t.text for t in span), ())]
        best: dict[int, NameEntry] = {}
        for entry in found:
            old = best.get(entry.position)
            if old is None or _entry_rank(entry, span.text) < _entry_rank(old, span.text):
                best[entry.position] = entry
        return list(best.values())

    def __call__(self, doc: Doc) -> list[DictionaryMatch]:
        """The doc's matches, longest first among overlapping ones, in text order."""
        spans = {(start, end) for _, start, end in (*self.folded(doc),
                                                      *self.as_written(doc))}
        kept = filter_spans([doc[start:end] for start, end in sorted(spans)])
        matches = []
        for span in sorted(kept, key=lambda s: s.start):
            if not has_letter_or_digit(span.text):
                continue
            entries = self.entries_of(span)
            if entries:
                matches.append(DictionaryMatch(span.start_char, span.end_char, span.text,
                                               entries))
        return matches


def _entry_rank(entry: NameEntry, text: str) -> tuple[bool, bool]:
    """Lower is better: the preferred name, then the same case as the text."""
    return (not entry.is_name, entry.text != text)


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
    candidates per span; ``abbreviations``: a defined short form takes its long form's link.
    """

    def __init__(self, spans: DictionarySpans, retriever: DenseRetriever, top_k: int,
                 abbreviations: bool = True) -> None:
        self.spans = spans
        self.retriever = retriever
        self.top_k = top_k
        self.abbreviations = abbreviations

    @classmethod
    def build(cls, nlp, kb: KnowledgeBase, tokenizer, transformer, settings, *,
              name: str = LINKER, index_path: Path | None = None) -> DictionaryLinker:
        """Patterns from ``nlp``'s tokenizer, and the names index of ``kb`` embedded by
        ``transformer`` (the component's entity encoder, not copied) or loaded from
        ``index_path`` (checked against the KB and the encoder)."""
        make_docs = getattr(nlp.tokenizer, "pipe", None) or (
            lambda texts, batch_size: (nlp.make_doc(t) for t in texts))
        spans = DictionarySpans(make_docs, nlp.vocab, kb, settings.max_span_length, name)
        encoder = PooledEncoder(transformer, "mean")
        retriever = DenseRetriever(kb, tokenizer, {"mention": encoder, "entity": encoder},
                                   names_settings(settings))
        if index_path is not None:
            retriever.entities.load_index(index_path)
        else:
            retriever.entities.refresh(desc="Embedding KB names")
        return cls(spans, retriever, settings.top_k, getattr(settings, "abbreviations", True))

    @property
    def kb(self) -> KnowledgeBase:
        return self.retriever.kb

    def write_index(self, path: Path) -> None:
        self.retriever.index.to_disk(path)

    def link(self, docs: Sequence[Doc]) -> tuple[list[list[LinkedSpan]], list[DocLinks]]:
        """Per doc, its matches linked (overlaps not yet resolved with the abbreviations'
        links), and its ``DocLinks``: each span's ranked ``(kb_id, score)`` candidates and
        one passage, the whole text, with the best score of each candidate entity."""
        texts = [doc.text for doc in docs]
        matches = [self.spans(doc) for doc in docs]
        flat = [(i, m) for i, found in enumerate(matches) for m in found]
        results = [DocLinks() for _ in docs]
        found: list[list[LinkedSpan]] = [[] for _ in docs]
        if flat:
            for (i, match), ranked in zip(flat, self._ranked(texts, flat), strict=True):
                found[i].append(LinkedSpan(match.start_char, match.end_char, *ranked[0]))
                results[i].candidates[(match.start_char, match.end_char)] = ranked
        for text, spans, result in zip(texts, found, results, strict=True):
            if self.abbreviations and spans:
                spans[:] = link_abbreviations(text, spans)
                for span in spans:  # a short form leads with its long form's entity
                    key = (span.start_char, span.end_char)
                    old = result.candidates.get(key, [])
                    if not old or old[0][0] != span.kb_id:
                        result.candidates[key] = [(span.kb_id, span.score)] + [
                            c for c in old if c[0] != span.kb_id]
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
