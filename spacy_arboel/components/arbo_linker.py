"""``arbo_linker``: end-to-end entity linking of raw text, no NER in front. A thin adapter over
one of two cores, chosen by the model's architecture: ``spacy_arboel.SpanReader.v1`` (ELQ,
``linking.SpanReader``; default) or ``spacy_arboel.RetrieverReader.v1`` (EntQA / BEER²,
``linking.RetrieverReader``); until its heads are trained, the KB's names found in the text
(``dictionary_spans.py``) linked by the zero-shot encoder (``dictionary_linker.py``)."""

from collections.abc import Callable, Iterable
from functools import partial
from pathlib import Path
from typing import Any

import torch
from spacy.language import Language
from spacy.tokens import Doc
from spacy.training import Example, validate_examples
from spacy.util import ensure_path
from thinc.api import Model, Optimizer

from ..encoders.loading import DEFAULT_ENCODER, load_tokenizer
from ..encoders.normalisers import MentionNormalisers
from ..errors import Errors
from ..extensions import CANDIDATE_ATTRS, PASSAGE_CANDIDATES_EXT, SPANS_KEY, register_extensions
from ..factories import LINKER
from ..kb.index_builder import INDEX_KINDS
from ..kb.knowledge_base import KnowledgeBase
from ..linking.candidates import CandidatePolicy
from ..linking.dense_retriever import GRANULARITIES, RetrieverSettings
from ..linking.reader_base import ReaderBase, check_saved_settings, structural_settings
from ..linking.reader_spans import DocLinks
from ..linking.retriever_reader import ReaderSettings, RetrieverReader
from ..linking.span_reader import SpanReader, SpanReaderSettings
from ..linking.text_links import linked_rows, text_links
from ..ml.module_holder import initialize_with, torch_modules
from ..settings import (
    VERIFY_MODES,
    PositiveInt,
    Probability,
    choices,
    component_settings,
    defaults,
    taken,
)
from ..spacy_data.gold_ids import resolved_gold_ids
from .base import KBComponent
from .common import add_linked_ents, gold_mentions, run_update, set_linked_group
from .concurrency import one_thread_at_a_time
from .dictionary_linker import DictionaryLinker
from .dictionary_spans import DICTIONARY_MODES
from .reader_starts import ReaderStart, saved_start

# the settings its default model's architecture holds (``SpanReaderSettings``')
MODEL_SETTINGS = ("entity_pooling", "span_threshold", "max_spans", "cross_reread",
                  "abbreviations", "mixed_precision")
DEFAULT_MODEL = {"@architectures": "spacy_arboel.SpanReader.v1",
                 "encoder_name": DEFAULT_ENCODER,
                 **defaults(SpanReaderSettings, MODEL_SETTINGS)}
ENTS_MODES = ("replace", "keep")
ArboLinkerSettings = component_settings(
    "ArboLinkerSettings", __name__, """The settings of ``arbo_linker`` (its factory's,
    defaults included): the reader's passages, spans and index (``SpanReaderSettings``,
    equal to ``ReaderSettings``'), and the adapter's own. ``dictionary_spans``: where spans
    come from: ``untrained``, the KB's names found in the text until the heads are
    trained, then the heads'; ``always``, the names' added to the heads' where they overlap
    none; ``never``, the heads' alone. ``ents``: ``replace`` the doc's ents, or ``keep``
    them and add the new ones that overlap none. ``doc.spans[spans_key]`` holds every
    linked span, overlapping ones too (the names inside a longer one under
    ``nested_names``). ``default_label``: the label of an entity the type rule names none
    for. ``normalisers``: how the dictionary's spans are read (the retriever's).""",
    [*taken(SpanReaderSettings, ("passage_length", "passage_stride", "entity_max_length",
                                 "entity_granularity", "top_k", "train_top_k", "threshold",
                                 "max_span_length", "index_kind", "batch_size", "quantize")),
     *taken(RetrieverSettings, ("normalisers",)),
     ("default_label", str, "ENTITY"), ("ents", choices(ENTS_MODES), "replace"),
     ("dictionary_spans", choices(DICTIONARY_MODES), "untrained"),
     ("spans_key", str | None, SPANS_KEY), ("nested_names", bool, False)])
# the core of each architecture's "reader" attribute, with its settings
CORES = {"span": (SpanReader, SpanReaderSettings), "passage": (RetrieverReader, ReaderSettings)}
# what to_disk writes (from_bytes accepts no other names); ``names_index``: the zero-shot
# retriever's index of the KB's names, saved while dictionary proposals are in use
SAVED_FILES = ("cfg.json", "kb.jsonl", "tokenizer", "passage_encoder", "reader_encoder",
               "cross_encoder", "entity_encoder", "heads.safetensors", "index", "names_index")
HEAD_SEED = 0  # every new head's: an untrained linker is the same in every process


@Language.factory(
    LINKER,
    assigns=["doc.ents", "token.ent_kb_id", "doc.spans",
             *CANDIDATE_ATTRS, f"doc._.{PASSAGE_CANDIDATES_EXT}"],
    default_config={
        "model": DEFAULT_MODEL, **ArboLinkerSettings.config(),
        "get_candidates": {"@misc": "spacy_arboel.candidates.v1"},
        "scorer": {"@scorers": "spacy_arboel.end_to_end_scorer.v1"},
    },
    default_score_weights={"e2e_inkb_f": 1.0, "e2e_inkb_p": 0.0, "e2e_inkb_r": 0.0,
                           "e2e_retriever_mention_recall": 0.0},
)
def make_linker(
    nlp: Language, name: str, model: Model, kb_path: str | None,
    verify_files: choices(VERIFY_MODES), passage_length: int, passage_stride: int,
    entity_max_length: int, entity_granularity: choices(GRANULARITIES), top_k: PositiveInt,
    train_top_k: PositiveInt, threshold: Probability, max_span_length: PositiveInt,
    index_kind: choices(INDEX_KINDS), batch_size: PositiveInt, quantize: bool,
    normalisers: MentionNormalisers, default_label: str, ents: choices(ENTS_MODES),
    dictionary_spans: choices(DICTIONARY_MODES), spans_key: str | None, nested_names: bool,
    get_candidates: CandidatePolicy, scorer: Callable | None,
) -> "ArboLinker":
    """Create an ``arbo_linker``; ``ArboLinkerSettings`` says what each setting is; the
    model's architecture holds the settings of its own core."""
    return ArboLinker(nlp.vocab, model, name, settings=ArboLinkerSettings.from_arguments(
        locals()), nlp=nlp, scorer=scorer, get_candidates=get_candidates)


class ArboLinker(KBComponent):
    """Finds and links entity mentions in raw text with a retriever and a reader (``reader``,
    the core it drives), no NER in front: spans of the heads, of the KB's names found in the
    text (``DictionaryLinker``) or both, as ``dictionary_spans`` says (``linking.text_links``).
    ``get_candidates``: the registered policy ``arbo_entity_linker`` takes (its type rule
    names a linked entity's label, its ``opposites`` drops a link saying the opposite of the
    span's words). ``settings``: ``ArboLinkerSettings`` (docs/components.md), of which
    ``core_settings`` are the reader's (with its model's)."""

    saved_files = SAVED_FILES
    core_attribute = "reader"

    def __init__(self, vocab, model: Model, name: str = LINKER, *, settings: Any,
                 nlp: Language | None, scorer: Callable | None,
                 get_candidates: CandidatePolicy | None = None) -> None:
        self.vocab, self.model, self.name, self.scorer = vocab, model, name, scorer
        self.settings, self.trained = settings, False  # trained: heads updated (in cfg.json)
        self.core_class, core_settings = CORES[model.attrs["reader"]]
        self.core_settings = settings.of(core_settings, **model.attrs["settings"])
        self.get_candidates = get_candidates or CandidatePolicy()
        self.reader: ReaderBase | None = None
        self.dictionary: DictionaryLinker | None = None
        self._nlp = nlp  # its tokenizer makes the dictionary's patterns
        register_extensions()

    @property
    def uses_dictionary(self) -> bool:
        """Whether the KB's names are proposed now (``dictionary_spans``)."""
        mode = self.settings.dictionary_spans
        return mode == "always" or (mode == "untrained" and not self.trained)

    @property
    def uses_heads(self) -> bool:
        """Whether the span heads propose spans now (``dictionary_spans``)."""
        return self.trained or self.settings.dictionary_spans == "never"

    def _set_up(self, kb: KnowledgeBase, tokenizer: Any = None, load: Callable | None = None,
                index: tuple[KnowledgeBase, Any] | None = None) -> None:
        """The core over ``kb`` with ``tokenizer`` and the modules of ``load`` (default:
        the base encoder's) and the ``index`` of ``(kb, index)`` reused; new heads are drawn
        from ``HEAD_SEED`` (the caller's random state is left as it was)."""
        self._check_kb(kb)
        if tokenizer is None:
            tokenizer = load_tokenizer(self.model.attrs["encoder_name"])
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(HEAD_SEED)
            initialize_with(self.model, load)
        self.reader = self.core_class(kb, tokenizer, torch_modules(self.model), self.core_settings)
        if index is not None:
            self.reader.entities.reuse_index(*index)
        self.dictionary = None

    def _check_kb(self, kb: KnowledgeBase) -> KnowledgeBase:
        return self.get_candidates.check_kb(kb)  # E225/W022: its type rule's types

    def _make_current(self) -> None:
        """Build the entity index, and the names' dictionary and index while in use."""
        self.reader.entities.ensure_index()
        if self.uses_dictionary:
            self._ensure_dictionary()

    def _ensure_dictionary(self, index_path: Path | None = None) -> DictionaryLinker:
        """The dictionary of the reader's KB, unless it is there already (its names index
        embedded by the reader's entity encoder, or loaded from ``index_path``)."""
        self.dictionary = DictionaryLinker.of_reader(
            self.reader, self._nlp or self.vocab, self.core_settings, name=self.name,
            nested=self.settings.nested_names, previous=self.dictionary, index_path=index_path,
            normalisers=self.settings.normalisers)
        return self.dictionary

    def initialize(self, get_examples: Callable[[], Iterable[Example]], *,
                   nlp: Language | None = None,
                   kb_loader: Callable[[Language], KnowledgeBase] | None = None,
                   linker_path: str | None = None, reader_path: str | None = None) -> None:
        """Load the KB and the encoders (or a saved linker's or reader's: ``reader_starts``),
        build the entity index, learn entity labels. Without gold mentions the dictionary
        is built too while in use; with them, when docs are first processed."""
        if nlp is not None:
            self._nlp = nlp
        kb = kb_loader(nlp) if kb_loader is not None else None
        if kb is None and self.settings.kb_path and (linker_path or reader_path):
            kb = self._config_kb()  # else the saved component's
        start = saved_start(linker_path, reader_path, kb, self.core_class,
                            self.core_settings, self.name) or ReaderStart(kb or self._config_kb())
        self._set_up(start.kb, start.tokenizer, start.load, start.index)
        self.trained = start.trained  # a saved reader's trained heads are ours
        self.reader.entities.ensure_index()
        mentions = [(resolved_gold_ids(ent.kb_id_, self.kb), ent.label_)
                    for eg in get_examples() for ent in eg.reference.ents]
        self.reader.learn_labels(mentions)
        if self.uses_dictionary and not mentions:
            self._ensure_dictionary()

    def _require(self, what: str = "encoders or index") -> ReaderBase:
        """The reader with its index (E051 before either is there)."""
        if super()._require(what).index is None:
            raise ValueError(Errors.E051.format(name=self.name, what=what))
        return self.reader

    def update(self, examples: Iterable[Example], *, drop: float = 0.0,
               sgd: Optimizer | None = None,
               losses: dict[str, float] | None = None) -> dict[str, float]:
        """One step of the loss of the current phase (BEER² eq. 13–15). The component is
        trained from now on: under ``dictionary_spans = "untrained"`` its heads propose the
        spans (the dictionary is let go)."""
        losses = run_update(self, examples, lambda egs: self._require().step(
            *gold_mentions((eg.reference for eg in egs), kb=self.kb)), sgd, losses)
        self.trained = True
        if not self.uses_dictionary:
            self.dictionary = None
        return losses

    @one_thread_at_a_time
    def predict(self, docs: Iterable[Doc]) -> list[DocLinks]:
        """Linked spans, per-span candidates and per-passage candidates; no side effects.
        The spans come from the heads, the dictionary or both (``dictionary_spans``)."""
        docs = list(docs)
        texts = [doc.text for doc in docs]
        if not any(t.strip() for t in texts):
            return [DocLinks() for _ in docs]
        core = self._require()
        if self.uses_dictionary and (self.dictionary is None or self.dictionary.kb is not core.kb):
            raise ValueError(Errors.E051.format(name=self.name,
                                                what="dictionary (its names index)"))
        return text_links(texts, core.scored_spans(texts) if self.uses_heads else None,
                          self.dictionary.link(docs) if self.uses_dictionary else None,
                          self.get_candidates, self.kb, self.vocab.lang)

    def set_annotations(self, docs: Iterable[Doc], predictions: list[DocLinks]) -> None:
        """Write ``doc.ents`` (replacing or keeping the old ones), every linked span as
        ``doc.spans[spans_key]``, ``span._.candidates`` and ``doc._.passage_candidates``."""
        key = self.settings.spans_key

        def label_of(kb_id: str) -> str:
            return self.reader.label_of(kb_id, self.settings.default_label,
                                        self.get_candidates.rule)

        for doc, links in zip(docs, predictions, strict=True):
            add_linked_ents(doc, linked_rows(links, sorted(links.spans, key=lambda s: -s.score),
                                             label_of), keep=self.settings.ents == "keep")
            if key:
                set_linked_group(doc, key, linked_rows(links, links.all_spans or links.spans,
                                                       label_of))
            doc._.set(PASSAGE_CANDIDATES_EXT, links.passages)

    def score(self, examples: Iterable[Example], **kwargs) -> dict[str, Any]:
        validate_examples(examples, "ArboLinker.score")
        return self.scorer(examples, kb_ids=self.kb)

    def to_disk(self, path, *, exclude: Iterable[str] = tuple()) -> None:
        """Save the KB, tokenizer, encoders, heads and index (and, while dictionary
        proposals are in use, the names index as ``names_index``); ``exclude`` leaves out any
        of ``cfg``, ``kb``, ``tokenizer``, ``index`` (both indexes)."""
        self._write(path, lambda: {
            **self.reader.learnt_state(), "trained": self.trained,
            "reader": self.model.attrs["reader"], **structural_settings(self.core_settings)},
            exclude,
            lambda: ({"names_index": self.dictionary.write_index}
                     if self.uses_dictionary and "index" not in exclude else {}))

    def from_disk(self, path, *, exclude: Iterable[str] = tuple()) -> "ArboLinker":
        """Load a saved arbo_linker; every file is checked first (E030), and saved settings
        that disagree with the config are errors (E056, E080). Excluded parts come from the
        config (``kb``, ``tokenizer``) or are built again (``index``); a ``kb_path`` given at
        load naming another KB than the saved one is honoured (W004)."""
        path, exclude = ensure_path(path), set(exclude)
        required = ("cfg.json", "kb.jsonl", "tokenizer", "passage_encoder", "entity_encoder",
                    "heads.safetensors", "index")
        with self._reading(path, exclude, required, cfg_keys=("trained",)) as state:
            cfg = {"labels": {}, "updates": 0, "trained": False, **state["cfg"]}
            check_saved_settings(cfg, {"reader": self.model.attrs["reader"],
                                       **structural_settings(self.core_settings)}, self.name, path)
            tokenizer = load_tokenizer(str(state["tokenizer"] or self.model.attrs["encoder_name"]))
            self._set_up(state["kb"], tokenizer, partial(self.core_class.load_modules, path,
                                                         tokenizer, self.core_settings))
            self.reader.restore_learnt(cfg)
            self.trained = bool(cfg["trained"])
            if "index" not in exclude:
                self.reader.entities.load_index(path / "index")
        kb = self._kb_override(cfg)
        if self.uses_dictionary and not exclude & {"index", "names_index"}:
            names = DictionaryLinker.saved_index(path, self.kb, self.name)
            if names is not None:
                self._ensure_dictionary(names)
        if kb is not None:  # both indexes brought up to date: only rows of new text embedded
            self.set_kb(kb)
        self.ensure_ready()
        return self
