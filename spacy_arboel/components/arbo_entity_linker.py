"""``arbo_entity_linker``: links ``doc.ents`` (or the spans its ``span_getter`` gives) with the
dense retriever (BLINK's bi-encoder), trained with any objective of
``spacy_arboel.objectives``. A thin adapter over ``linking.MentionLinker`` (links or NIL),
``linking.DenseRetriever`` and ``BiEncoderTrainer``."""

from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
from spacy.language import Language
from spacy.tokens import Doc
from spacy.training import Example, validate_examples
from spacy.util import ensure_path
from thinc.api import Model, Optimizer

from ..encoders.inputs import INPUT_FORMATS, InputBuilder, MentionSpan
from ..encoders.loading import DEFAULT_ENCODER, load_tokenizer
from ..encoders.normalisers import MentionNormalisers
from ..encoders.transformer import load_pooled_encoders
from ..errors import Errors
from ..extensions import CANDIDATE_ATTRS, RECORDS_EXT, VECTOR_EXT, register_extensions
from ..factories import ENTITY_LINKER
from ..kb.index_builder import INDEX_KINDS
from ..kb.knowledge_base import KnowledgeBase
from ..linking import BiEncoderTrainer, DenseRetriever, RetrieverSettings
from ..linking.bi_encoder_trainer import TrainerSettings
from ..linking.candidates import CandidatePolicy
from ..linking.dense_retriever import GRANULARITIES
from ..linking.mention_linker import (
    Link,
    LinkSettings,
    MentionLinker,
    check_linkable,
    check_saved_scale,
    check_threshold_scale,
)
from ..ml.bi_encoder import torch_encoders
from ..ml.candidates import make_candidates  # noqa: F401  (registers get_candidates)
from ..ml.module_holder import initialize_with
from ..objectives import Objective
from ..settings import (
    VERIFY_MODES,
    NonNegativeInt,
    PositiveInt,
    Recall,
    choices,
    component_settings,
    defaults,
    taken,
)
from ..spacy_data.spans import SpanGetter
from .base import KBComponent
from .common import candidate_loss, gold_mentions, run_update
from .concurrency import one_thread_at_a_time

# the settings its model's architecture holds (the retriever's)
MODEL_SETTINGS = ("pooling", "share_weights", "mixed_precision")
ArboEntityLinkerSettings = component_settings(
    "ArboEntityLinkerSettings", __name__, """The settings of ``arbo_entity_linker`` (its
    factory's, defaults included): the linker's (``LinkSettings``), the retriever's inputs
    and index (``RetrieverSettings``) and the trainer's (``TrainerSettings``).""",
    [*taken(LinkSettings), *taken(RetrieverSettings, (
        "mention_max_length", "entity_max_length", "entity_granularity",
        "expand_abbreviations", "normalisers", "row_dedupe_threshold", "index_kind",
        "batch_size", "quantize", "cpu_bf16", "inputs")), *taken(TrainerSettings)])
DEFAULT_MODEL = {"@architectures": "spacy_arboel.BiEncoder.v1", "encoder_name": DEFAULT_ENCODER,
                 **defaults(RetrieverSettings, MODEL_SETTINGS)}
# the best measured objective (BENCHMARKS.md), its settings the registered function's;
# arboEL's is "spacy_arboel.ArborescenceObjective.v1"
DEFAULT_OBJECTIVE = {"@misc": "spacy_arboel.KnnNegativesObjective.v1"}
# the spans it links: doc.ents by default (the registered function's defaults)
DEFAULT_SPAN_GETTER = {"@misc": "spacy_arboel.span_getter.v1"}
# its candidate policy: scale, lexical union, mention prior, type rule (``CandidatePolicy``'s
# defaults)
DEFAULT_CANDIDATES = {"@misc": "spacy_arboel.candidates.v1"}
# what to_disk writes (from_bytes accepts no other names)
SAVED_FILES = ("cfg.json", "kb.jsonl", "tokenizer", "mention_encoder", "entity_encoder", "index")


@Language.factory(
    ENTITY_LINKER,
    requires=["doc.ents"],
    assigns=["token.ent_kb_id", *CANDIDATE_ATTRS, f"span._.{VECTOR_EXT}"],
    default_config={
        "model": DEFAULT_MODEL, "objective": DEFAULT_OBJECTIVE,
        **ArboEntityLinkerSettings.config(), "get_candidates": DEFAULT_CANDIDATES,
        "span_getter": DEFAULT_SPAN_GETTER,
        "scorer": {"@scorers": "spacy_arboel.entity_linking_scorer.v1"},
    },
    default_score_weights={"nel_inkb_recall@1": 1.0, "nel_inkb_recall@64": 0.0,
                           "nel_acc": 0.0, "nel_micro_f": 0.0},
)
def make_entity_linker(
    nlp: Language, name: str, model: Model, objective: Objective, kb_path: str | None,
    verify_files: choices(VERIFY_MODES), top_k: PositiveInt, threshold: float | None,
    nil_recall: Recall | None, nil_id: str, mention_max_length: int, entity_max_length: int,
    entity_granularity: choices(GRANULARITIES), expand_abbreviations: bool,
    normalisers: MentionNormalisers, row_dedupe_threshold: float | None,
    index_kind: choices(INDEX_KINDS), batch_size: PositiveInt, quantize: bool, cpu_bf16: bool,
    inputs: choices(INPUT_FORMATS), refresh_every: PositiveInt, name_pairs: NonNegativeInt,
    skip_own_name: bool, get_candidates: CandidatePolicy, span_getter: SpanGetter,
    scorer: Callable | None,
) -> "ArboEntityLinker":
    """Create an ``arbo_entity_linker``; ``ArboEntityLinkerSettings`` says what each setting
    is (and where it is declared)."""
    return ArboEntityLinker(nlp.vocab, model, name, objective=objective,
                            settings=ArboEntityLinkerSettings.from_arguments(locals()),
                            get_candidates=get_candidates, span_getter=span_getter,
                            scorer=scorer)


class ArboEntityLinker(KBComponent):
    """Links each span of ``doc.ents`` (or of the span groups ``span_getter`` names, e.g. a
    spancat's ``doc.spans["sc"]``) to a KB entity by dense retrieval, in one call of its
    ``MentionLinker``: ``get_candidates`` (``CandidatePolicy``) gives each mention's first
    ``top_k`` candidates, the first becomes its ``kb_id_``, ``nil_id`` below the NIL
    threshold (``linking``: ``LinkSettings``) or on a tie. The candidates go to
    ``span._.candidates`` (``kb_candidates`` and ``kb_raw_scores`` are views of them), the
    mention vector to ``span._.mention_vector`` (read by ``arbo_coref``). ``settings``:
    ``ArboEntityLinkerSettings``, of which ``core_settings`` are the retriever's
    (``RetrieverSettings``, with its model's). docs/components.md says what each does."""

    saved_files = SAVED_FILES
    core_attribute = "retriever"

    def __init__(self, vocab, model: Model, name: str = ENTITY_LINKER, *,
                 objective: Objective, settings: Any, get_candidates: CandidatePolicy,
                 span_getter: SpanGetter, scorer: Callable | None) -> None:
        self.vocab, self.model, self.name, self.scorer = vocab, model, name, scorer
        self.objective, self.settings = objective, settings
        self.linking = settings.of(LinkSettings)
        self.core_settings = settings.of(RetrieverSettings, similarity=objective.similarity,
                                         **{key: model.attrs[key] for key in MODEL_SETTINGS})
        self.get_candidates = get_candidates
        check_threshold_scale(get_candidates, self.linking.threshold)
        self.span_getter = span_getter
        self.retriever: DenseRetriever | None = None
        self.linker: MentionLinker | None = None
        self.trainer: BiEncoderTrainer | None = None
        register_extensions()

    @property
    def seen_ids(self) -> set[str]:
        """The gold ids of the training corpus (for seen/unseen scores)."""
        return self.trainer.seen_ids if self.trainer is not None else set()

    def _check_kb(self, kb: KnowledgeBase) -> KnowledgeBase:
        """``kb`` if the linker can link with it (``check_linkable``: E035, E225/W022)."""
        return check_linkable(kb, self.get_candidates, self.linking, self.name)

    def _set_up(self, kb: KnowledgeBase, tokenizer: str | None = None,
                sources: dict[str, Any] | None = None) -> None:
        """The retriever over ``kb`` with the encoders of ``sources`` (default: the base
        encoder) loaded into the thinc model, and the linker over it."""
        tokenizer = load_tokenizer(str(tokenizer or self.model.attrs["encoder_name"]))
        core = self.core_settings
        initialize_with(self.model, sources and (lambda: load_pooled_encoders(
            sources, core.pooling, core.share_weights, len(tokenizer),
            InputBuilder(tokenizer).marker_ids)))
        self.retriever = DenseRetriever(self._check_kb(kb), tokenizer,
                                        torch_encoders(self.model), core)
        self.linker = MentionLinker(self.retriever, self.get_candidates, self.linking)
        self.trainer = BiEncoderTrainer(self.retriever, self.objective,
                                        self.settings.of(TrainerSettings),
                                        mixed_precision=core.mixed_precision)

    def use_mention_encoder(self, encoder) -> None:
        """Link with another mention encoder (a ``PooledEncoder``, e.g. the smaller one of
        ``distill-mentions``), saved with the component from now on; the entity encoder and
        its index are kept as they are (E123 when the two sides share weights)."""
        retriever = self._require("encoders")
        if self.core_settings.share_weights:
            raise ValueError(Errors.E123)
        entity = retriever.encoders["entity"]
        initialize_with(self.model, lambda: {"mention": encoder, "entity": entity})
        retriever.use_encoders(torch_encoders(self.model))
        retriever.prepare_inference()

    def _make_current(self) -> None:
        """Bring the index up to date with the encoders (also before docs are processed,
        after training updates or ``set_kb``: spacy train's evaluation), and the NIL
        threshold taken from the KB with it."""
        self.retriever.entities.ensure_index()
        self.linker.nil_threshold()

    def nil_threshold(self) -> float | None:
        """The score below which a mention is NIL (``MentionLinker.nil_threshold``)."""
        self._require("knowledge base or encoders")
        return self.linker.nil_threshold()

    def initialize(self, get_examples: Callable[[], Iterable[Example]], *,
                   nlp: Language | None = None,
                   kb_loader: Callable[[Language], KnowledgeBase] | None = None) -> None:
        """Load the KB (``kb_loader``, else ``kb_path``) and the base encoder, collect the
        gold training mentions and build the index."""
        self._set_up(self._initial_kb(kb_loader, nlp))
        texts, spans, gold_ids = gold_mentions((eg.reference for eg in get_examples()),
                                               self.span_getter, self.kb)
        self.trainer.collect(texts, spans, gold_ids)
        self.trainer.refresh()

    def update(self, examples: Iterable[Example], *, drop: float = 0.0,
               sgd: Optimizer | None = None,
               losses: dict[str, float] | None = None) -> dict[str, float]:
        """One step of the configured objective on the gold mentions of ``examples``."""
        self._require("encoders (call initialize first)")
        return run_update(self, examples, lambda egs: self.trainer.step(
            *gold_mentions((eg.reference for eg in egs), self.span_getter, self.kb)), sgd,
            losses)

    def get_loss(self, examples: Iterable[Example], predictions: list[list[Link]]
                 ) -> tuple[float, list]:
        """The softmax loss of each mention's gold among the candidates ``predict`` gave it
        (their raw scores), and its gradient: a diagnostic (``update`` trains through the
        objective)."""
        kb = self._require("a knowledge base").kb
        return candidate_loss(examples, [
            [(ent, [c.id for c in link.candidates],
              np.asarray([c.raw for c in link.candidates], dtype="float32"))
             for ent, link in zip(self.span_getter(eg.predicted), links, strict=True)]
            for eg, links in zip(examples, predictions, strict=True)], self.span_getter, kb)

    def finish_update(self, sgd: Optimizer) -> None:
        """Apply the optimizer; the index is stale until the next refresh."""
        super().finish_update(sgd)
        self.retriever.entities.changed()

    @one_thread_at_a_time
    def predict(self, docs: Iterable[Doc]) -> list[list[Link]]:
        """Per doc, each mention's (``span_getter``) ``Link``: its id or ``nil_id``, its
        candidates and its vector, in one call of the linker (``MentionLinker.link``); an
        index older than the encoders is an error (E050): see ``ensure_ready()``."""
        docs = list(docs)
        self._require("knowledge base or encoders")
        mentions = [list(self.span_getter(d)) for d in docs]
        spans = [MentionSpan(i, e.start_char, e.end_char) for i, found in enumerate(mentions)
                 for e in found]
        labels = [e.label_ for found in mentions for e in found]
        links = self.linker.link([d.text for d in docs], spans, labels,
                                 language=self.vocab.lang) if spans else []
        bounds = np.cumsum([0, *(len(found) for found in mentions)])
        return [links[start:end] for start, end in zip(bounds[:-1], bounds[1:], strict=True)]

    def set_annotations(self, docs: Iterable[Doc], predictions: list[list[Link]]) -> None:
        """Write each mention's ``kb_id_``, its candidates (``span._.candidates``) and its
        vector (None for a mention with nothing to encode)."""
        for doc, links in zip(docs, predictions, strict=True):
            kb_ids = {}
            for ent, link in zip(self.span_getter(doc), links, strict=True):
                kb_ids[ent.start_char, ent.end_char] = link.kb_id
                ent._.set(RECORDS_EXT, link.candidates)
                ent._.set(VECTOR_EXT, link.vector)
            self.span_getter.write(doc, kb_ids)

    def score(self, examples: Iterable[Example], **kwargs) -> dict[str, Any]:
        validate_examples(examples, "ArboEntityLinker.score")
        return self.scorer(examples, kb_ids=self.kb,
                           seen_ids=self.seen_ids, nil_id=self.linking.nil_id)

    def to_disk(self, path, *, exclude: Iterable[str] = tuple()) -> None:
        """Save the KB, tokenizer, encoders, index and training state; ``exclude`` leaves
        out any of ``cfg``, ``kb``, ``tokenizer``, ``mention_encoder``, ``entity_encoder``,
        ``index``."""
        self._write(path, lambda: {"seen_ids": sorted(self.seen_ids),
                                   "inputs": self.core_settings.inputs,
                                   **self.linker.saved_state(),
                                   "n_missing_gold_ids": self.trainer.n_missing_gold_ids},
                    exclude)

    def from_disk(self, path, *, exclude: Iterable[str] = tuple()) -> "ArboEntityLinker":
        """Load a saved linker; every file is checked first (E030, as ``verify_files``
        says), and a ``cfg.json`` without the ``inputs`` and ``scores`` it was saved with is
        damaged (E030); a saved threshold on another scale is E224 (``check_saved_scale``).
        A ``kb_path`` in the config naming another KB than the saved one is honoured: the
        index is rebuilt for it with the trained entity encoder (W004)."""
        path, exclude = ensure_path(path), set(exclude)
        folders = DenseRetriever.saved_folders(self.core_settings)
        required = ("cfg.json", "kb.jsonl", "tokenizer", *dict.fromkeys(folders.values()),
                    "index")
        with self._reading(path, exclude, required, cfg_keys=("inputs", "scores")) as state:
            cfg = {"seen_ids": [], "n_missing_gold_ids": 0, **state["cfg"]}
            self._set_up(state["kb"], state["tokenizer"], DenseRetriever.saved_sources(
                path, self.core_settings, exclude, self.model.attrs["encoder_name"]))
            check_saved_scale(cfg, self.linking.threshold, self.get_candidates, self.name)
            self.trainer.seen_ids = set(cfg["seen_ids"])
            self.trainer.n_missing_gold_ids = cfg["n_missing_gold_ids"]
            if "index" not in exclude:
                self.retriever.entities.load_index(path / "index")
        kb = self._kb_override(cfg)
        if kb is not None:
            self.set_kb(kb)
        self.retriever.entities.ensure_index()
        if kb is None and "index" not in exclude:  # the index the threshold was set on
            self.linker.restore_kb_threshold(cfg.get("kb_threshold"))
        self.retriever.prepare_inference()
        return self
