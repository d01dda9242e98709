"""``arbo_entity_linker``: links ``doc.ents`` (or the spans its ``span_getter`` gives) with the
dense retriever (BLINK's bi-encoder),
trained with any objective of ``spacy_arboel.objectives``. A thin adapter over
``spacy_arboel.linking.DenseRetriever`` and ``BiEncoderTrainer``."""

import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np
from spacy.language import Language
from spacy.tokens import Doc
from spacy.training import Example, validate_examples
from spacy.util import ensure_path
from thinc.api import Model, Optimizer

from ..artefacts import VERIFY_MODES
from ..encoders.inputs import INPUT_FORMATS, InputBuilder, MentionSpan
from ..encoders.loading import DEFAULT_ENCODER, load_tokenizer
from ..encoders.transformer import PooledEncoder, load_pooled_encoders
from ..errors import Errors
from ..extensions import CANDIDATES_EXT, RAW_SCORES_EXT, VECTOR_EXT, register_extensions
from ..factories import ENTITY_LINKER
from ..kb.index import DenseIndex
from ..kb.index_builder import INDEX_KINDS
from ..kb.knowledge_base import KnowledgeBase
from ..kb.type_rule import TypeRule
from ..linking import BiEncoderTrainer, DenseRetriever, RetrieverSettings
from ..linking.abstention import held_out_first_scores, recall_threshold
from ..linking.bi_encoder_trainer import NAME_PAIRS, REFRESH_EVERY, SKIP_OWN_NAME
from ..linking.candidates import CandidatePolicy
from ..linking.dense_retriever import GRANULARITIES
from ..linking.loop_settings import DistillSettings
from ..linking.mention_distiller import MentionDistiller, shrink_encoder
from ..ml.bi_encoder import torch_encoders
from ..ml.candidates import make_candidates  # noqa: F401  (registers get_candidates)
from ..ml.module_holder import initialize_with
from ..objectives import Objective
from ..settings import NonNegativeInt, PositiveInt, Recall, choices, defaults
from ..spacy_data.spans import SpanGetter
from .base import KBComponent
from .common import (
    candidate_loss,
    gold_mentions,
    run_update,
    settings_from,
)
from .concurrency import one_thread_at_a_time

# the settings the factory and its model's architecture take from the core's defaults
MODEL_SETTINGS = ("pooling", "share_weights", "mixed_precision")
INPUT_SETTINGS = ("mention_max_length", "entity_max_length", "entity_granularity",
                  "expand_abbreviations", "american_spelling", "row_dedupe_threshold",
                  "index_kind", "batch_size")
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
# the share of the KB's held-out names whose right link the default NIL threshold keeps
# (``linking.abstention``): BC5CDR/NCBI with a fifth of their entities out of MeSH, 50%/21%
# of those mentions abstained for 1.9 points of in-KB R@1 (BENCHMARKS.md, issue 61)
NIL_RECALL = 0.95
# two candidates whose raw scores differ by no more than this tie (a name both entities have)
TIE = 1e-6
# what to_disk writes (from_bytes accepts no other names)
SAVED_FILES = ("cfg.json", "kb.jsonl", "tokenizer", "mention_encoder", "entity_encoder", "index")


@Language.factory(
    ENTITY_LINKER,
    requires=["doc.ents"],
    assigns=["token.ent_kb_id", f"span._.{CANDIDATES_EXT}", f"span._.{VECTOR_EXT}"],
    default_config={
        "model": DEFAULT_MODEL, "objective": DEFAULT_OBJECTIVE, "kb_path": None,
        "top_k": 64, "threshold": None, "nil_recall": NIL_RECALL, "nil_id": "NIL",
        **defaults(RetrieverSettings, INPUT_SETTINGS), "refresh_every": REFRESH_EVERY,
        "name_pairs": NAME_PAIRS, "skip_own_name": SKIP_OWN_NAME,
        **defaults(RetrieverSettings, ("quantize", "cpu_bf16")),
        "verify_files": "sha256",
        **defaults(RetrieverSettings, ("inputs",)),
        "get_candidates": DEFAULT_CANDIDATES, "span_getter": DEFAULT_SPAN_GETTER,
        "scorer": {"@scorers": "spacy_arboel.entity_linking_scorer.v1"},
    },
    default_score_weights={"nel_inkb_recall@1": 1.0, "nel_inkb_recall@64": 0.0,
                           "nel_acc": 0.0, "nel_micro_f": 0.0},
)
def make_entity_linker(
    nlp: Language, name: str, model: Model, objective: Objective, kb_path: str | None,
    top_k: PositiveInt, threshold: float | None, nil_recall: Recall | None, nil_id: str,
    mention_max_length: int,
    entity_max_length: int, entity_granularity: choices(GRANULARITIES),
    expand_abbreviations: bool, american_spelling: bool, row_dedupe_threshold: float | None,
    index_kind: choices(INDEX_KINDS), batch_size: PositiveInt, refresh_every: int,
    name_pairs: NonNegativeInt, skip_own_name: bool, quantize: bool, cpu_bf16: bool,
    verify_files: choices(VERIFY_MODES),
    inputs: choices(INPUT_FORMATS),
    get_candidates: CandidatePolicy, span_getter: SpanGetter, scorer: Callable | None,
) -> "ArboEntityLinker":
    """Create an ``arbo_entity_linker``; see the class for what each setting does, and
    ``RetrieverSettings`` for the retriever's (their defaults come from there)."""
    settings = settings_from(RetrieverSettings, {
        **locals(), "similarity": objective.similarity,
        **{key: model.attrs[key] for key in MODEL_SETTINGS}})
    return ArboEntityLinker(nlp.vocab, model, name, objective=objective, settings=settings,
                            kb_path=kb_path, top_k=top_k, threshold=threshold,
                            nil_recall=nil_recall, nil_id=nil_id,
                            refresh_every=refresh_every, name_pairs=name_pairs,
                            skip_own_name=skip_own_name, verify_files=verify_files,
                            get_candidates=get_candidates,
                            span_getter=span_getter, scorer=scorer)


class ArboEntityLinker(KBComponent):
    """Links each span of ``doc.ents`` (or of the span groups ``span_getter`` names: edsnlp's
    ``span_getter``, e.g. a spancat's ``doc.spans["sc"]``) to a KB entity by dense retrieval.

    Each mention's top-``top_k`` entities come from the retriever's FAISS index; the best
    becomes the span's ``kb_id_`` (``nil_id`` when its score is below the NIL threshold, or when
    the first two tie, as a name two entities share does), the ranked ``(kb_id, score)`` list
    goes to ``span._.kb_candidates`` and the mention vector to ``span._.mention_vector`` (read
    by ``arbo_coref``). The NIL threshold is ``threshold`` (``tune-nil`` chooses it on a dev
    corpus), else the score that keeps ``nil_recall`` of the right links of the KB's own names
    held out as mentions (``linking.abstention``; set from the KB with no corpus, once per
    index, and saved); both None: never NIL. The index is refreshed every ``refresh_every``
    updates in training, and after updates before docs are processed (``nlp(...)``,
    ``nlp.pipe``; ``ensure_ready()`` does it explicitly). ``name_pairs``: KB names that join
    each training batch as pseudo-mentions of their entity, with its other names as positives
    (``linking.name_pairs``; 0: none). ``skip_own_name``: in training under ``names`` inputs, a
    mention's positive is a name of its gold entity other than its own text
    (``BiEncoderTrainer``). ``settings`` hold the retriever's input and index settings (the
    factory's arguments). ``verify_files``: how ``from_disk`` checks the saved files, ``sha256``
    (all read whole) or ``quick`` (large files by size and ends; see
    ``artefacts.check_folder``). ``inputs`` (in ``settings``): ``names`` links and trains by the
    mention's text against a row per KB name and alias, cosine (how the base sentence encoder or
    ``pretrain-kb``'s encoder learnt to compare names), ``blink`` by BLINK's mention in context
    against ``name [TITLE] description`` rows. ``get_candidates``
    (``linking.candidates.CandidatePolicy``, registered as ``spacy_arboel.candidates.v1``) turns
    the retrieved entities into candidates: their scale (p(e | m) or raw scores), BioSyn's
    lexical union, the KB's mention prior (``incl_prior``: the link counts of a KB built with a
    corpus) and the type rule (``label_types``: ``{"Chemical": ["Chemical"]}``; ``type_rule``
    ``restrict`` drops the candidates of other types, ``prefer`` ranks them last).
    """

    saved_files = SAVED_FILES
    core_attribute = "retriever"

    def __init__(self, vocab, model: Model, name: str = ENTITY_LINKER, *,
                 objective: Objective, settings: RetrieverSettings, kb_path: str | None,
                 top_k: int, threshold: float | None, nil_id: str, refresh_every: int,
                 nil_recall: float | None = NIL_RECALL,
                 verify_files: str, name_pairs: int = NAME_PAIRS,
                 skip_own_name: bool = SKIP_OWN_NAME,
                 get_candidates: CandidatePolicy | None = None, span_getter: SpanGetter,
                 scorer: Callable | None) -> None:
        self.vocab, self.model, self.name, self.scorer = vocab, model, name, scorer
        self.objective, self.settings = objective, settings
        self.cfg: dict[str, Any] = {"kb_path": kb_path, "top_k": top_k, "threshold": threshold,
                                    "nil_recall": nil_recall, "nil_id": nil_id,
                                    "refresh_every": refresh_every,
                                    "name_pairs": name_pairs, "skip_own_name": skip_own_name,
                                    "verify_files": verify_files}
        self.get_candidates = get_candidates or CandidatePolicy()
        self.get_candidates.check_threshold(threshold)
        self.span_getter = span_getter
        self.retriever: DenseRetriever | None = None
        self.trainer: BiEncoderTrainer | None = None
        # the NIL threshold taken from the KB: (what it was set for, its value)
        self._kb_threshold: tuple[tuple, float | None] | None = None
        register_extensions()

    @property
    def type_rule(self) -> TypeRule | None:
        """The type rule of its candidate policy (``arbo_coref`` follows it)."""
        return self.get_candidates.rule

    @property
    def seen_ids(self) -> set[str]:
        """The gold ids of the training corpus (for seen/unseen scores)."""
        return self.trainer.seen_ids if self.trainer is not None else set()

    def _check_kb(self, kb: KnowledgeBase) -> KnowledgeBase:
        """``kb`` if the linker can link with it: E035 when it holds the NIL id, E225/W022
        when ``label_types`` names types it lacks."""
        if self.cfg["nil_id"] in kb:
            raise ValueError(Errors.E035.format(where="the knowledge base",
                                                entity_id=self.cfg["nil_id"],
                                                reason=f"it is {self.name}'s nil_id"))
        if self.type_rule is not None:
            self.type_rule.check_types(kb.types())
        return kb

    def _set_up(self, kb: KnowledgeBase, tokenizer: str | None = None,
                sources: dict[str, Any] | None = None) -> None:
        """The retriever over ``kb`` with the encoders of ``sources`` (default: the base
        encoder) loaded into the thinc model."""
        tokenizer = load_tokenizer(str(tokenizer or self.model.attrs["encoder_name"]))
        initialize_with(self.model, sources and (lambda: load_pooled_encoders(
            sources, self.settings.pooling, self.settings.share_weights, len(tokenizer),
            InputBuilder(tokenizer).marker_ids)))
        self.retriever = DenseRetriever(self._check_kb(kb), tokenizer,
                                        torch_encoders(self.model), self.settings)
        self.trainer = BiEncoderTrainer(self.retriever, self.objective,
                                        refresh_every=self.cfg["refresh_every"],
                                        mixed_precision=self.settings.mixed_precision,
                                        name_pairs=self.cfg["name_pairs"],
                                        skip_own_name=self.cfg["skip_own_name"])

    def use_mention_encoder(self, encoder) -> None:
        """Link with another mention encoder (a ``PooledEncoder``, e.g. the smaller one of
        ``distill-mentions``), saved with the component from now on; the entity encoder and
        its index are kept as they are (E123 when the two sides share weights)."""
        retriever = self._require("encoders")
        if self.settings.share_weights:
            raise ValueError(Errors.E123)
        entity = retriever.encoders["entity"]
        initialize_with(self.model, lambda: {"mention": encoder, "entity": entity})
        retriever.use_encoders(torch_encoders(self.model))
        retriever.prepare_inference()

    def distil_mention_encoder(self, docs: Iterable[Doc], settings: DistillSettings, *,
                               on_start: Callable[[int], None] | None = None,
                               on_epoch: Callable[[int, float], None] | None = None
                               ) -> PooledEncoder:
        """A mention encoder of ``settings.layers`` layers distilled from this linker's on
        the mentions (``span_getter``) of ``docs`` against its index (``MentionDistiller``;
        E123 when the two encoders share weights); ``use_mention_encoder`` links with it.
        ``on_start`` gets the number of mentions, ``on_epoch`` each epoch's number and
        loss."""
        self.ensure_ready()
        texts, spans, _ = gold_mentions(docs, self.span_getter)
        student = shrink_encoder(self.retriever.encoders["mention"], settings.layers)
        distiller = MentionDistiller(self.retriever, student, settings)
        if on_start is not None:
            on_start(len(spans))
        distiller.fit(texts, spans, on_epoch=on_epoch)
        return student

    def tune_lexical_weight(self, docs: Iterable[Doc], top_k: int = 64
                            ) -> tuple[float, dict[float, float]]:
        """The weight of BioSyn's lexical score added to the dense score that maximises
        in-KB recall@1 on the gold mentions of ``docs`` (over the union of the dense and
        lexical top ``top_k``), and the recall@1 of each weight tried
        (``DenseRetriever.tune_lexical_weight``)."""
        self.ensure_ready()
        texts, spans, gold_ids = gold_mentions(docs, self.span_getter, self.kb)
        return self.retriever.tune_lexical_weight(texts, spans, gold_ids, top_k)

    def build_index(self, build: Callable[[DenseRetriever], DenseIndex]) -> DenseIndex:
        """Link with the index that ``build`` makes of the retriever's KB rows
        (``build-index``: ``jobs.build_index.build_kb_index`` on an engine); returns it."""
        self.ensure_ready()
        index = build(self.retriever)
        self.retriever.entities.set_index(index)
        return index

    @property
    def vector_width(self) -> int:
        """The width of the mention vectors (``span._.mention_vector``)."""
        return self._require("encoders").vector_width

    def mention_fingerprint(self) -> str:
        """A hash of the mention encoder's weights and input settings: what the mention
        vectors depend on besides the KB."""
        return self._require("encoders").mention_fingerprint()

    def mention_batches(self, docs: Sequence[Doc]) -> list[tuple[np.ndarray, np.ndarray]]:
        """The mentions of ``docs`` as the mention encoder's padded ``(ids, mask)`` batches,
        length-sorted as linking makes them (``forward_mentions`` runs one)."""
        retriever = self._require("encoders")
        spans = [MentionSpan(i, e.start_char, e.end_char)
                 for i, d in enumerate(docs) for e in self.span_getter(d)]
        inputs = retriever.builder.mention_ids([d.text for d in docs], spans)
        return retriever.builder.sorted_batches(inputs, retriever.settings.batch_size)[1]

    def forward_mentions(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """The mention vectors of one padded batch, as linking embeds them (fp32 or int8)."""
        return self._require("encoders").forward("mention", ids, mask)

    def _set_up_from_config(self) -> None:
        self._set_up(self._config_kb())

    def _make_current(self) -> None:
        """Bring the index up to date with the encoders (also before docs are processed,
        after training updates or ``set_kb``: spacy train's evaluation), and the NIL
        threshold taken from the KB with it."""
        self.retriever.entities.ensure_index()
        self.nil_threshold()

    def _kb_threshold_key(self) -> tuple:
        """What the KB's NIL threshold depends on: the index, the mention encoder, the
        share kept and the score scale."""
        return (id(self.retriever.entities.index), self.mention_fingerprint(),
                self.cfg["nil_recall"], self.get_candidates.scores)

    def nil_threshold(self) -> float | None:
        """The score below which a mention is NIL: ``threshold``, else the one
        ``nil_recall`` takes from the KB's held-out names (``linking.abstention``; None
        for a KB with too few entities of two names), else None (never NIL)."""
        if self.cfg["threshold"] is not None or self.cfg["nil_recall"] is None:
            return self.cfg["threshold"]
        retriever = self._require("knowledge base or encoders")
        retriever.entities.ensure_index()  # before the key: it names the current index
        key = self._kb_threshold_key()
        if self._kb_threshold is None or self._kb_threshold[0] != key:
            first, right = held_out_first_scores(
                retriever,
                lambda raw: self.get_candidates.scaled(raw, retriever.probabilities)[0],
                self.get_candidates.retrieval_k(self.cfg["top_k"]))
            value = recall_threshold(first, right, self.cfg["nil_recall"])
            # rounded as cfg.json keeps it, so that a loaded pipeline reads the same number
            self._kb_threshold = (key, None if value is None else round(value, 6))
        return self._kb_threshold[1]

    def initialize(self, get_examples: Callable[[], Iterable[Example]], *,
                   nlp: Language | None = None,
                   kb_loader: Callable[[Language], KnowledgeBase] | None = None) -> None:
        """Load the KB (``kb_loader``, else ``kb_path``) and the base encoder, collect the
        gold training mentions and build the index."""
        kb = kb_loader(nlp) if kb_loader is not None else None
        self._set_up(kb if kb is not None else self._config_kb())
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

    def get_loss(self, examples: Iterable[Example], predictions) -> tuple[float, list]:
        """The softmax loss of each mention's gold among the top-k ``predict`` scored, and its
        gradient: a diagnostic (``update`` trains through the objective)."""
        kb = self._require("a knowledge base").kb
        return candidate_loss(examples, [
            [(ent, [kb.entity_at(int(p)).id if p >= 0 else None for p in row_p], row_s)
             for ent, row_s, row_p in zip(self.span_getter(eg.predicted), s, p, strict=True)]
            for eg, (s, p, _) in zip(examples, predictions, strict=True)], self.span_getter, kb)

    def finish_update(self, sgd: Optimizer) -> None:
        """Apply the optimizer; the index is stale until the next refresh."""
        super().finish_update(sgd)
        self.retriever.entities.changed()

    @one_thread_at_a_time
    def predict(self, docs: Iterable[Doc]) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """Per doc: top-k scores and entity positions, and the vectors of its mentions
        (``span_getter``);
        an index older than the encoders is an error (E050): see ``ensure_ready()``."""
        docs = list(docs)
        retriever = self._require("knowledge base or encoders")
        if not docs:
            return []
        if not retriever.entities.is_current:
            raise ValueError(Errors.E050)
        mentions = [self.span_getter(d) for d in docs]
        spans = [MentionSpan(i, e.start_char, e.end_char) for i, found in enumerate(mentions)
                 for e in found]
        scores, positions, vectors = retriever.link(
            [d.text for d in docs], spans, self.get_candidates.retrieval_k(self.cfg["top_k"]),
            lexical_weight=self.get_candidates.lexical_weight)
        bounds = np.cumsum([len(found) for found in mentions])[:-1]
        return list(zip(*(np.split(a, bounds) for a in (scores, positions, vectors)),
                        strict=True))

    def set_annotations(self, docs: Iterable[Doc], predictions) -> None:
        """Set ``kb_id_`` (best entity, or ``nil_id`` below the NIL threshold or on a tie,
        when there is a threshold), the top-k
        candidates (``get_candidates``' ranking) and the mention vector (None for a mention
        with nothing to encode)."""
        threshold, nil_id, top_k = self.nil_threshold(), self.cfg["nil_id"], self.cfg["top_k"]
        kb = self.kb

        def types_of(kb_id: str) -> tuple[str, ...]:  # the type rule asks for each candidate
            return kb[kb_id].types

        def names_of(kb_id: str) -> tuple[str, ...]:  # the opposites check asks for some
            return kb[kb_id].names

        for doc, (scores, positions, vectors) in zip(docs, predictions, strict=True):
            lists = self.retriever.candidates(scores, positions)
            kb_ids = {}
            for ent, candidates, vector in zip(self.span_getter(doc), lists, vectors,
                                               strict=True):
                encoded = bool(candidates)
                scored = self.get_candidates.rank(
                    ent.label_, candidates, self.retriever.probabilities, types_of, top_k,
                    kb.mention_prior(ent.text, self.get_candidates.prior_smoothing),
                    mention=ent.text, names_of=names_of,
                    language=self.vocab.lang)
                candidates = [(i, score) for i, score, _ in scored]
                raw = [r for _, _, r in scored]
                best = candidates[0] if candidates else (nil_id, float("-inf"))
                tie = len(raw) > 1 and raw[0] - raw[1] <= TIE
                kb_id = best[0] if threshold is None or (best[1] >= threshold and not tie) \
                    else nil_id
                kb_ids[ent.start_char, ent.end_char] = kb_id
                ent._.set(CANDIDATES_EXT, candidates)
                ent._.set(RAW_SCORES_EXT, raw)
                ent._.set(VECTOR_EXT, vector if encoded else None)
            self.span_getter.write(doc, kb_ids)

    def score(self, examples: Iterable[Example], **kwargs) -> dict[str, Any]:
        validate_examples(examples, "ArboEntityLinker.score")
        return self.scorer(examples, kb_ids=self.kb,
                           seen_ids=self.seen_ids, nil_id=self.cfg["nil_id"])

    def to_disk(self, path, *, exclude: Iterable[str] = tuple()) -> None:
        """Save the KB, tokenizer, encoders, index and training state; ``exclude`` leaves
        out any of ``cfg``, ``kb``, ``tokenizer``, ``mention_encoder``, ``entity_encoder``,
        ``index``."""
        self._write(path, lambda: {"seen_ids": sorted(self.seen_ids),
                                   "inputs": self.settings.inputs,
                                   "scores": self.get_candidates.scores,
                                   "threshold": self.cfg["threshold"],
                                   "kb_threshold": self._saved_kb_threshold(),
                                   "n_missing_gold_ids": self.trainer.n_missing_gold_ids},
                    exclude)

    def _saved_kb_threshold(self) -> dict[str, Any] | None:
        """The KB's NIL threshold as ``cfg.json`` keeps it (with the share and scale it was
        set for), so that a loaded pipeline abstains as the saved one did."""
        if self._kb_threshold is None or self._kb_threshold[0] != self._kb_threshold_key():
            return None
        return {"nil_recall": self.cfg["nil_recall"], "scores": self.get_candidates.scores,
                "value": self._kb_threshold[1]}

    def _restore_kb_threshold(self, saved: dict[str, Any] | None) -> None:
        """Take the saved KB threshold when it was set for this share and scale (else it is
        set again from the KB, when first needed)."""
        if saved and self.cfg["nil_recall"] is not None \
                and math.isclose(saved["nil_recall"], self.cfg["nil_recall"]) \
                and saved["scores"] == self.get_candidates.scores:
            self._kb_threshold = (self._kb_threshold_key(), saved["value"])

    def from_disk(self, path, *, exclude: Iterable[str] = tuple()) -> "ArboEntityLinker":
        """Load a saved linker; every file is checked first (E030, as ``verify_files``
        says), and a ``cfg.json`` without the ``inputs`` and ``scores`` it was saved with is
        damaged (E030). A ``kb_path`` in the config naming another KB than the saved one is
        honoured: the index is rebuilt for it with the trained entity encoder (W004)."""
        path, exclude = ensure_path(path), set(exclude)
        folders = DenseRetriever.saved_folders(self.settings)
        required = ("cfg.json", "kb.jsonl", "tokenizer", *dict.fromkeys(folders.values()),
                    "index")
        with self._reading(path, exclude, required) as state:
            lacking = [key for key in ("inputs", "scores") if key not in state["cfg"]]
            if "cfg" not in exclude and lacking:
                raise ValueError(Errors.E030.format(
                    component=self.name, path=path,
                    problem=f"cfg.json lacks {' and '.join(map(repr, lacking))}"))
            cfg = {"seen_ids": [], "n_missing_gold_ids": 0, **state["cfg"]}
            # an excluded side's encoder comes from the config; the others from their
            # folder, or the folder their reference names (the untrained entity encoder)
            sources = {side: (self.model.attrs["encoder_name"] if folders[side] in exclude
                              else source)
                       for side, source in DenseRetriever.saved_sources(
                           path, self.settings).items()}
            self._set_up(state["kb"], state["tokenizer"], sources)
            # a saved threshold holds on the scale it was chosen on: another scale is
            # refused, never a silent change; a threshold given at load with the scale is
            # the user's own (with cfg.json left out, the config's are taken as they are)
            scale = self.get_candidates.scores
            saved_scores = cfg.get("scores", scale)
            saved_threshold = cfg.get("threshold", self.cfg["threshold"])
            if self.cfg["threshold"] is not None and saved_scores != scale \
                    and self.cfg["threshold"] == saved_threshold:
                raise ValueError(Errors.E224.format(name=self.name, saved=saved_scores,
                                                    threshold=self.cfg["threshold"],
                                                    scores=scale))
            self.trainer.seen_ids = set(cfg["seen_ids"])
            self.trainer.n_missing_gold_ids = cfg["n_missing_gold_ids"]
            if "index" not in exclude:
                self.retriever.entities.load_index(path / "index")
        kb = self._kb_override(cfg)
        if kb is not None:
            self.set_kb(kb)
        self.retriever.entities.ensure_index()
        if kb is None and "index" not in exclude:  # the index the threshold was set on
            self._restore_kb_threshold(cfg.get("kb_threshold"))
        self.retriever.prepare_inference()
        return self
