"""The dictionary proposals' linker: the spans ``dictionary_spans.DictionarySpans`` finds,
linked by the zero-shot encoder (a ``DenseRetriever`` in ``names`` mode: the mention's own
text against a row per KB name and alias, cosine, both sides ``arbo_linker``'s entity
encoder). The entities whose name or alias matched come first (the preferred name before an
alias, a match in the same case before another, then the encoder's score); the rest of the
encoder's top-k follow as candidates. A defined abbreviation ("DOX" after "doxorubicin
(DOX)") takes its long form's link (``abbreviation_links``)."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from spacy.tokens import Doc
from spacy.vocab import Vocab

from ..artefacts import reading
from ..encoders.inputs import MentionSpan
from ..encoders.transformer import PooledEncoder
from ..factories import LINKER
from ..kb.index import read_index_meta
from ..kb.knowledge_base import KnowledgeBase
from ..linking.abbreviation_links import link_abbreviations
from ..linking.dense_retriever import DenseRetriever, RetrieverSettings
from ..linking.reader_spans import DocLinks, LinkedSpan, best_per_span
from .dictionary_spans import DictionaryMatch, DictionarySpans, entry_rank

ENCODER_BATCH = 64


def names_settings(settings, normalisers: Sequence[str] = ()) -> RetrieverSettings:
    """The zero-shot retriever's settings from those of an ``arbo_linker`` core: ``names``
    inputs (cosine, a row per name and alias), mean pooling as the sentence encoder was
    trained, the core's entity length (the mention side truncated alike), index kind,
    quantisation and precision (float32 on a CPU: ``cpu_bf16`` is ``arbo_entity_linker``'s
    setting, measured there; the readers' numbers were measured in float32), and the
    component's mention ``normalisers``."""
    length = max(9, settings.entity_max_length)  # the mention side needs 8
    return RetrieverSettings(
        pooling="mean", share_weights=True, mention_max_length=length - 1,
        entity_max_length=length, expand_abbreviations=False, normalisers=tuple(normalisers),
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
              nested: bool = False, previous: DictionaryLinker | None = None,
              normalisers: Sequence[str] = ()) -> DictionaryLinker:
        """Patterns from ``nlp``'s tokenizer, and the names index of ``kb`` embedded by
        ``transformer`` (the component's entity encoder, frozen and not copied) or loaded
        from ``index_path`` (checked against the KB and the encoder). ``previous``: the
        dictionary of the KB this one replaces; with the same encoder and settings, its
        names index is brought up to date (only the rows of new text embedded:
        ``IndexedKB.set_kb``). ``normalisers``: how its spans are read (``names_settings``)."""
        make_docs = getattr(nlp.tokenizer, "pipe", None) or (
            lambda texts, batch_size: (nlp.make_doc(t) for t in texts))
        spans = DictionarySpans(make_docs, kb, settings.max_span_length, name,
                                stop_words=nlp.Defaults.stop_words, language=nlp.lang)
        old = previous.retriever if previous is not None else None
        if index_path is None and old is not None \
                and old.encoders["entity"].transformer is transformer \
                and old.settings == names_settings(settings, normalisers):
            retriever = old
            retriever.entities.set_kb(kb)
        else:
            encoder = PooledEncoder(transformer, "mean")
            retriever = DenseRetriever(kb, tokenizer, {"mention": encoder, "entity": encoder},
                                       names_settings(settings, normalisers))
        if index_path is not None:
            retriever.entities.load_index(index_path)
        else:
            retriever.entities.refresh(desc="Embedding KB names")
        return cls(spans, retriever, settings.top_k, getattr(settings, "abbreviations", True),
                   nested)

    @classmethod
    def of_reader(cls, reader, nlp, settings, *, name: str, nested: bool,
                  previous: DictionaryLinker | None, index_path: Path | None = None,
                  normalisers: Sequence[str] = ()) -> DictionaryLinker:
        """``previous`` while it is over ``reader``'s KB, else ``build`` over that KB with
        the reader's tokenizer and entity encoder (an ``arbo_linker``'s dictionary; ``nlp``:
        its pipeline, or the vocab of a blank one)."""
        if previous is not None and previous.kb is reader.kb:
            return previous
        if isinstance(nlp, Vocab):
            import spacy

            nlp = spacy.blank(nlp.lang or "xx", vocab=nlp)
        return cls.build(nlp, reader.kb, reader.tokenizer, reader.modules["entity"].transformer,
                         settings, name=name, index_path=index_path, nested=nested,
                         previous=previous, normalisers=normalisers)

    @staticmethod
    def saved_index(path: Path, kb: KnowledgeBase, name: str) -> Path | None:
        """The names index saved in the component folder ``path`` when there is one for
        ``kb`` (it was saved for the saved KB, not one a ``kb_path`` gives at load)."""
        names = path / "names_index"
        if not names.exists():
            return None
        with reading(path, name):
            return names if read_index_meta(names).kb_fingerprint == kb.fingerprint() else None

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
            rank = (*entry_rank(entry, flat[j][1].text), -round(float(score), 4),
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
