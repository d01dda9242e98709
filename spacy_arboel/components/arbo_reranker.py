"""``arbo_reranker``: BLINK's cross-encoder (§4.2) re-ranking the candidates of
``arbo_entity_linker``; a thin adapter over ``spacy_arboel.linking.CrossEncoderReranker``.

Put it right after the linker: each ent's top ``top_k`` candidates are re-ordered by the
cross-encoder (the linker's others follow with probability 0) and the best becomes its
``kb_id_``; NIL ents stay NIL. Trained by ``spacy train`` with the linker frozen and
annotating: its candidates are the hard negatives (the gold injected: ``inject_gold``).
"""

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import srsly
from spacy.language import Language
from spacy.tokens import Doc, Span
from spacy.training import Example, validate_examples
from spacy.util import ensure_path
from thinc.api import Model, Optimizer

from ..encoders.cross_scorer import load_scorer
from ..encoders.inputs import MentionSpan
from ..encoders.loading import DEFAULT_ENCODER, load_tokenizer
from ..encoders.normalisers import MentionNormalisers
from ..errors import Errors
from ..extensions import CANDIDATE_ATTRS, CANDIDATES_EXT, register_extensions
from ..factories import ENTITY_LINKER, RERANKER
from ..kb.knowledge_base import KnowledgeBase
from ..linking import CrossEncoderReranker, RerankerSettings, check_state, ranked
from ..linking.mention_linker import LinkSettings
from ..ml.cross_encoder import torch_scorer
from ..ml.module_holder import initialize_with
from ..settings import VERIFY_MODES, PositiveInt, choices, component_settings, defaults, taken
from ..spacy_data.gold_ids import resolved_gold_ids
from .base import KBComponent
from .common import candidate_loss, run_update
from .concurrency import one_thread_at_a_time

DEFAULT_MODEL = {"@architectures": "spacy_arboel.CrossEncoder.v1",
                 "encoder_name": DEFAULT_ENCODER,
                 **defaults(RerankerSettings, ("mixed_precision",))}
ArboRerankerSettings = component_settings(
    "ArboRerankerSettings", __name__, """The settings of ``arbo_reranker`` (its factory's,
    defaults included): ``linker``, the ``arbo_entity_linker`` whose candidates it re-ranks
    (and whose KB it shares without a ``kb_path``); ``top_k`` candidates re-ranked per
    mention, ``train_top_k`` scored per mention in training with the gold among them
    (``inject_gold``); ``nil_id``, the linker's (``LinkSettings``); the scorer's inputs
    (``RerankerSettings``).""",
    [("linker", str, ENTITY_LINKER), ("top_k", PositiveInt, 4), ("train_top_k", PositiveInt, 8),
     ("inject_gold", bool, True), *taken(LinkSettings, ("nil_id",)),
     *taken(RerankerSettings, ("mention_max_length", "entity_max_length",
                               "expand_abbreviations", "normalisers", "batch_size",
                               "quantize"))])
# what to_disk writes (from_bytes accepts no other names)
SAVED_FILES = ("cfg.json", "kb.jsonl", "tokenizer", "encoder", "head.safetensors")


@Language.factory(
    RERANKER,
    requires=[f"span._.{CANDIDATES_EXT}"],
    assigns=["token.ent_kb_id", *CANDIDATE_ATTRS],
    default_config={"model": DEFAULT_MODEL, **ArboRerankerSettings.config(),
                    "scorer": {"@scorers": "spacy_arboel.entity_linking_scorer.v1"}},
    default_score_weights={"nel_inkb_recall@1": 1.0, "nel_acc": 0.0, "nel_micro_f": 0.0},
)
def make_reranker(nlp: Language, name: str, model: Model, kb_path: str | None,
                  verify_files: choices(VERIFY_MODES), linker: str, top_k: PositiveInt,
                  train_top_k: PositiveInt, inject_gold: bool, nil_id: str,
                  mention_max_length: int, entity_max_length: int, expand_abbreviations: bool,
                  normalisers: MentionNormalisers, batch_size: PositiveInt, quantize: bool,
                  scorer: Callable | None) -> "ArboReranker":
    """Create an ``arbo_reranker``; ``ArboRerankerSettings`` says what each setting is."""
    return ArboReranker(nlp.vocab, model, name,
                        settings=ArboRerankerSettings.from_arguments(locals()), scorer=scorer,
                        nlp=nlp)


class ArboReranker(KBComponent):
    """Re-ranks each ent's top ``top_k`` linker candidates with a cross-encoder.
    ``train_top_k`` candidates per mention are scored in training (softmax loss, BLINK eq. 4
    over the scores of eq. 5–6); ``kb_path`` is the KB (default: the ``linker``'s, shared
    with it: saved once, in the linker's folder, and followed when the linker's KB is
    swapped). ``settings``: ``ArboRerankerSettings``, of which ``core_settings`` are the
    scorer's inputs (``RerankerSettings``, with its model's)."""

    saved_files = SAVED_FILES
    core_attribute = "reranker"

    def __init__(self, vocab, model: Model, name: str = RERANKER, *, settings: Any,
                 scorer: Callable | None, nlp: Language | None) -> None:
        self.vocab, self.model, self.name, self.scorer = vocab, model, name, scorer
        self.settings = settings
        self.core_settings = settings.of(RerankerSettings,
                                         mixed_precision=model.attrs["mixed_precision"])
        self.reranker: CrossEncoderReranker | None = None
        self._nlp = nlp  # where the linker whose KB it shares is
        self.seen_ids: set[str] = set()  # the training corpus's gold ids (seen/unseen scores)
        register_extensions()

    def _set_up(self, kb: KnowledgeBase, tokenizer: Any = None, encoder: Any = None,
                head: Any = None) -> None:
        """The core over ``kb``, its scorer (default: base encoder, new head) in the model."""
        tokenizer = load_tokenizer(str(tokenizer or self.model.attrs["encoder_name"]))
        encoder = encoder or self.model.attrs["encoder_name"]
        initialize_with(self.model, lambda: {"scorer": load_scorer(encoder, len(tokenizer),
                                                                   head=head)})
        self.reranker = CrossEncoderReranker(kb, tokenizer, torch_scorer(self.model),
                                             self.core_settings)

    def _require(self, what: str = "knowledge base or cross-encoder") -> CrossEncoderReranker:
        return super()._require(what)

    def _kb_holder(self) -> CrossEncoderReranker:
        """The core holds its KB itself (no index)."""
        return self.reranker

    def check_state(self, kb: KnowledgeBase, where: str) -> None:
        """That the scorer goes with ``kb`` (E012) and was trained with this component's
        input settings (E071): ``linking.check_state``, ``where`` naming it in the errors."""
        check_state(self._require().state(), kb, self.core_settings, where)

    def _linker(self) -> Any:
        """The ``linker`` component when the pipeline has it (disabled or not), else None."""
        name = self.settings.linker
        if self._nlp is None or name not in self._nlp.component_names:
            return None
        return self._nlp.get_pipe(name)

    def _config_kb(self) -> KnowledgeBase:
        """The KB at ``kb_path``, else the linker's (shared: the same object)."""
        linker = self._linker()
        if self.settings.kb_path or linker is None:
            return super()._config_kb()
        linker.ensure_ready()
        return linker.kb

    @property
    def shares_linker_kb(self) -> bool:
        """Whether it links with the linker's KB (no ``kb_path``, the linker's KB taken):
        saved once, in the linker's folder."""
        linker = self._linker()
        if self.settings.kb_path or linker is None or linker.kb is None or self.kb is None:
            return False
        return self.kb is linker.kb or self.kb.fingerprint() == linker.kb.fingerprint()

    def _make_current(self) -> None:
        """Take the linker's KB again where it was swapped (``set_kb``, ``build-index``):
        before docs are processed, before an update and before saving. A linker with
        another ``nil_id`` is E226: its NIL mentions would be re-ranked into links."""
        linker = self._linker()
        if linker is not None and linker.linking.nil_id != self.settings.nil_id:
            raise ValueError(Errors.E226.format(name=self.name, nil_id=self.settings.nil_id,
                                                linker=linker.name,
                                                linker_nil_id=linker.linking.nil_id))
        if self.reranker is None or self.settings.kb_path or linker is None:
            return
        if linker.kb is not None and linker.kb is not self.reranker.kb:
            self.set_kb(linker.kb)

    def initialize(self, get_examples: Callable[[], Iterable[Example]], *,
                   nlp: Language | None = None,
                   kb_loader: Callable[[Language], KnowledgeBase] | None = None) -> None:
        """Take the KB (``kb_loader``, else ``kb_path``, else the linker's), load the base
        encoder and note the training corpus's gold ids (for seen/unseen scores)."""
        if nlp is not None:
            self._nlp = nlp  # component_names: spacy train disables the frozen linker here
        self._set_up(self._initial_kb(kb_loader, nlp))
        self.seen_ids = {i for eg in get_examples() for ent in eg.reference.ents
                         for i in resolved_gold_ids(ent.kb_id_, self.kb)}

    @one_thread_at_a_time
    def score_candidates(self, texts: Sequence[str], spans: Sequence[MentionSpan],
                         candidates: Sequence[Sequence[str]]) -> list[np.ndarray]:
        """s_cross(m, e) of each mention (``spans`` into ``texts``) with each of its candidate
        KB ids, without gradient (``CrossEncoderReranker.score``; a distillation teacher)."""
        return self._require().score(texts, spans, candidates)

    def _targets(self, doc: Doc) -> list[tuple[Span, list[str]]]:
        """The ents to re-rank (with candidates, not NIL) and their top-k candidate ids."""
        k, nil_id = self.settings.top_k, self.settings.nil_id
        return [(ent, [c for c, _ in ent._.get(CANDIDATES_EXT)[:k]]) for ent in doc.ents
                if ent._.get(CANDIDATES_EXT) and ent.kb_id_ != nil_id]

    def predict(self, docs: Iterable[Doc]) -> list[list[np.ndarray]]:
        """Per doc, the cross-encoder scores of each re-ranked ent's top-k candidates."""
        docs = list(docs)
        targets = [(i, ent, ids) for i, doc in enumerate(docs) for ent, ids in self._targets(doc)]
        result: list[list[np.ndarray]] = [[] for _ in docs]
        if targets:
            spans = [MentionSpan(i, ent.start_char, ent.end_char) for i, ent, _ in targets]
            scores = self.score_candidates([doc.text for doc in docs], spans,
                                           [ids for _, _, ids in targets])
            for (i, _, _), row in zip(targets, scores, strict=True):
                result[i].append(row)
        return result

    def set_annotations(self, docs: Iterable[Doc], predictions: list[list[np.ndarray]]) -> None:
        """Re-order each target ent's top-k by the cross-encoder and set its ``kb_id_``; the
        candidates' scores (and raw scores) become the cross-encoder's (0 for the candidates
        after its top-k)."""
        for doc, doc_scores in zip(docs, predictions, strict=True):
            for (ent, ids), scores in zip(self._targets(doc), doc_scores, strict=True):
                reranked = ranked(ids, scores)
                rest = [(c, 0.0) for c, _ in ent._.get(CANDIDATES_EXT)[len(ids):]]
                for token in ent:
                    token.ent_kb_id_ = reranked[0][0]
                ent._.set(CANDIDATES_EXT, reranked + rest)  # records: raw = score

    def _training_mentions(self, examples: Sequence[Example]):
        """Texts, spans, ``train_top_k`` candidates and gold id of each usable mention
        (``CrossEncoderReranker.training_batch``); E026 when the linker gave none."""
        texts, spans, retrieved, golds = [], [], [], []
        for index, eg in enumerate(examples):
            texts.append(eg.predicted.text)
            gold = {(e.start_char, e.end_char): resolved_gold_ids(e.kb_id_, self.kb)
                    for e in eg.reference.ents}
            for ent in eg.predicted.ents:
                spans.append(MentionSpan(index, ent.start_char, ent.end_char))
                retrieved.append([c for c, _ in (ent._.get(CANDIDATES_EXT) or [])])
                golds.append(gold.get((ent.start_char, ent.end_char), ()))
        if spans and not any(retrieved):
            raise ValueError(Errors.E026.format(name=self.name, linker=self.settings.linker))
        k, inject_gold = self.settings.train_top_k, self.settings.inject_gold
        return texts, *self.reranker.training_batch(spans, retrieved, golds, k, inject_gold)

    def update(self, examples: Iterable[Example], *, drop: float = 0.0,
               sgd: Optimizer | None = None,
               losses: dict[str, float] | None = None) -> dict[str, float]:
        """Softmax loss over each gold mention's candidates (BLINK §4.2)."""
        reranker = self._require()
        self._before_docs()
        return run_update(self, examples, lambda egs: reranker.step(
            *self._training_mentions(egs)), sgd, losses)

    def get_loss(self, examples: Iterable[Example], predictions) -> tuple[float, list]:
        """The softmax loss of each re-ranked ent's gold among the top-k ``predict`` scored,
        and its gradient: a diagnostic (``update`` trains with the gold injected)."""
        return candidate_loss(examples, [
            [(ent, ids, row) for (ent, ids), row in zip(self._targets(eg.predicted), s,
                                                        strict=True)]
            for eg, s in zip(examples, predictions, strict=True)], kb=self.kb)

    def finish_update(self, sgd: Optimizer) -> None:
        """Apply the optimizer; the int8 copy is made again when next needed."""
        super().finish_update(sgd)
        self._require().changed()

    def score(self, examples: Iterable[Example], **kwargs) -> dict[str, Any]:
        validate_examples(examples, "ArboReranker.score")
        return self.scorer(examples, kb_ids=self.kb,
                           seen_ids=self.seen_ids or None, nil_id=self.settings.nil_id)

    def to_disk(self, path, *, exclude: Iterable[str] = tuple()) -> None:
        """Save the KB (unless it is the linker's, saved there), tokenizer, transformer, head
        W and training state; ``exclude`` leaves out any of ``cfg``, ``kb``, ``tokenizer``,
        ``encoder``, ``head``."""
        shared = self.shares_linker_kb
        self._write(path, lambda: {"seen_ids": sorted(self.seen_ids), **self.reranker.state(),
                                   **({"kb_from": self.settings.linker} if shared else {})},
                    {*exclude, "kb"} if shared else exclude)

    def from_disk(self, path, *, exclude: Iterable[str] = tuple()) -> "ArboReranker":
        """Load a saved re-ranker, every file checked first (E030); a saved input setting the
        config contradicts is E071. Excluded, ``kb`` comes from ``kb_path`` (another KB there
        is honoured anyway, W004), ``tokenizer``/``encoder`` from the base, ``head`` is new."""
        path, exclude = ensure_path(path), set(exclude)
        if "kb" not in exclude and saved_with_linker_kb(path):  # the KB is in the linker's
            exclude.add("kb")                                      # folder
            if not self.settings.kb_path and self._linker() is None:
                raise ValueError(Errors.E220.format(name=self.name, linker=self.settings.linker))
        files: dict[str, Any] = {"encoder": None, "head": None}
        with self._reading(path, exclude, SAVED_FILES, {
                "encoder": lambda p: files.update(encoder=p),
                "head.safetensors": lambda p: files.update(head=p)}) as state:
            check_state(state["cfg"], state["kb"] if "kb" not in exclude else None,
                        self.core_settings, f"'{self.name}' ({path})")
            self._set_up(state["kb"], state["tokenizer"], files["encoder"], files["head"])
        self.seen_ids = set(state["cfg"].get("seen_ids", []))
        kb = self._kb_override(state["cfg"])
        if kb is not None:
            self.set_kb(kb)
        return self


def saved_with_linker_kb(path: Path) -> bool:
    """Whether the re-ranker saved at ``path`` shares its linker's KB (``kb_from`` in its
    ``cfg.json``, no ``kb.jsonl``); a cfg.json that cannot be read is left to
    ``check_folder`` (E030)."""
    if (path / "kb.jsonl").exists():
        return False
    try:
        return bool(srsly.read_json(path / "cfg.json").get("kb_from"))
    except (OSError, ValueError, AttributeError):
        return False
