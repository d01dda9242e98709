"""``arbo_linker``: end-to-end entity linking of raw text, no NER in front, ``doc.ents`` with
``label_`` and ``kb_id_`` out. A thin adapter over one of two linking cores, chosen by the
model's architecture: ``spacy_arboel.SpanReader.v1`` (default; ELQ's one pass per passage
with per-span retrieval, ``linking.SpanReader``) or ``spacy_arboel.RetrieverReader.v1``
(EntQA / BEER²'s per-passage retrieval and a reader pass per candidate,
``linking.RetrieverReader``). Until its heads are trained it proposes the KB's names and
aliases found in the text instead, linked by the zero-shot encoder (``dictionary_spans``,
see ``dictionary_spans.py`` and ``dictionary_linker.py``)."""

from collections.abc import Callable, Iterable
from dataclasses import asdict
from functools import partial
from pathlib import Path
from typing import Any

import torch
from spacy.language import Language
from spacy.tokens import Doc
from spacy.training import Example, validate_examples
from spacy.util import ensure_path
from thinc.api import Model, Optimizer

from ..artefacts import reading
from ..encoders.loading import DEFAULT_ENCODER, load_tokenizer
from ..errors import Errors
from ..extensions import CANDIDATE_ATTRS, PASSAGE_CANDIDATES_EXT, SPANS_KEY, register_extensions
from ..factories import ENTITY_LINKER, LINKER
from ..kb.index import read_index_meta
from ..kb.index_builder import INDEX_KINDS
from ..kb.knowledge_base import KnowledgeBase
from ..kb.type_rule import TypeRule
from ..linking.candidates import CandidatePolicy
from ..linking.dense_retriever import GRANULARITIES
from ..linking.reader_base import (
    ReaderBase,
    check_linker_source,
    check_saved_settings,
    structural_settings,
)
from ..linking.retriever_reader import DocLinks, ReaderSettings, RetrieverReader
from ..linking.span_reader import SpanReader, SpanReaderSettings, can_train_on
from ..linking.text_links import linked_rows, text_links
from ..ml.module_holder import initialize_with, torch_modules
from ..settings import VERIFY_MODES, PositiveInt, Probability, choices, defaults
from ..spacy_data.gold_ids import resolved_gold_ids
from .base import KBComponent
from .common import (
    add_linked_ents,
    gold_mentions,
    run_update,
    saved_component,
    set_linked_group,
    settings_from,
)
from .concurrency import one_thread_at_a_time
from .dictionary_linker import DictionaryLinker
from .dictionary_spans import DICTIONARY_MODES

# the settings the factory takes from its core's defaults (``SpanReaderSettings``, equal to
# ``ReaderSettings``'), and those the default architecture holds
PASSAGE_SETTINGS = ("passage_length", "passage_stride", "entity_max_length",
                    "entity_granularity", "top_k", "train_top_k", "threshold",
                    "max_span_length")
INDEX_SETTINGS = ("index_kind", "batch_size", "quantize")
MODEL_SETTINGS = ("entity_pooling", "span_threshold", "max_spans", "cross_reread",
                  "abbreviations", "mixed_precision")
DEFAULT_MODEL = {"@architectures": "spacy_arboel.SpanReader.v1",
                 "encoder_name": DEFAULT_ENCODER,
                 **defaults(SpanReaderSettings, MODEL_SETTINGS)}
ENTS_MODES = ("replace", "keep")
# the core of each architecture's "reader" attribute, with its settings
CORES = {"span": (SpanReader, SpanReaderSettings), "passage": (RetrieverReader, ReaderSettings)}
# what to_disk writes (from_bytes accepts no other names); ``names_index``: the zero-shot
# retriever's index of the KB's names, saved while dictionary proposals are in use
SAVED_FILES = ("cfg.json", "kb.jsonl", "tokenizer", "passage_encoder", "reader_encoder",
               "cross_encoder", "entity_encoder", "heads.safetensors", "index", "names_index")
# the seed of every newly initialised head: an untrained linker is the same in every process
HEAD_SEED = 0


@Language.factory(
    LINKER,
    assigns=["doc.ents", "token.ent_kb_id", "doc.spans",
             *CANDIDATE_ATTRS, f"doc._.{PASSAGE_CANDIDATES_EXT}"],
    default_config={
        "model": DEFAULT_MODEL, "kb_path": None,
        **defaults(SpanReaderSettings, PASSAGE_SETTINGS), "default_label": "ENTITY",
        "ents": "replace", **defaults(SpanReaderSettings, INDEX_SETTINGS),
        "verify_files": "sha256", "dictionary_spans": "untrained",
        "spans_key": SPANS_KEY, "nested_names": False,
        "get_candidates": {"@misc": "spacy_arboel.candidates.v1"},
        "scorer": {"@scorers": "spacy_arboel.end_to_end_scorer.v1"},
    },
    default_score_weights={"e2e_inkb_f": 1.0, "e2e_inkb_p": 0.0, "e2e_inkb_r": 0.0,
                           "e2e_retriever_mention_recall": 0.0},
)
def make_linker(
    nlp: Language, name: str, model: Model, kb_path: str | None, passage_length: int,
    passage_stride: int, entity_max_length: int, entity_granularity: choices(GRANULARITIES),
    top_k: PositiveInt, train_top_k: PositiveInt, threshold: Probability,
    max_span_length: PositiveInt, default_label: str, ents: choices(ENTS_MODES),
    index_kind: choices(INDEX_KINDS), batch_size: PositiveInt, quantize: bool,
    verify_files: choices(VERIFY_MODES), dictionary_spans: choices(DICTIONARY_MODES),
    spans_key: str | None, nested_names: bool, get_candidates: CandidatePolicy,
    scorer: Callable | None,
) -> "ArboLinker":
    """Create an ``arbo_linker``; ``SpanReaderSettings`` (and ``ReaderSettings`` for
    ``RetrieverReader.v1``) say what each setting does, and hold the defaults; the model's
    architecture holds the settings of its own core."""
    settings = settings_from(CORES[model.attrs["reader"]][1],
                             {**locals(), **model.attrs["settings"]})
    return ArboLinker(nlp.vocab, model, name, settings=settings, kb_path=kb_path,
                      default_label=default_label, ents=ents, verify_files=verify_files,
                      dictionary_spans=dictionary_spans, nlp=nlp, scorer=scorer,
                      get_candidates=get_candidates, spans_key=spans_key,
                      nested_names=nested_names)


class ArboLinker(KBComponent):
    """Finds and links entity mentions in raw text with a retriever and a reader (``reader``,
    the core it drives), no NER in front. ``dictionary_spans`` says where its spans come
    from: ``untrained`` (default), the KB's names and aliases found in the text
    (``DictionarySpans``) linked by the zero-shot encoder (``DictionaryLinker``) until the
    heads are trained, then theirs; ``always``, the dictionary's added to the heads' where
    they overlap none; ``never``, the heads' alone (``linking.text_links``). ``ents``:
    ``replace`` the doc's ents, or ``keep`` them and add the new ones that overlap none;
    ``doc.spans[spans_key]`` holds every linked span, overlapping ones too (the names inside
    a longer contiguous one under ``nested_names``). ``get_candidates``: the registered policy
    ``arbo_entity_linker`` takes, whose type rule names the label of a linked entity
    (``ReaderBase.label_of``; else ``default_label``) and whose ``opposites`` drops a link
    to an entity whose names say the opposite of the span's words. ``verify_files``: how
    ``from_disk`` checks the saved files. docs/components.md says what each setting does."""

    saved_files = SAVED_FILES
    core_attribute = "reader"

    def __init__(self, vocab, model: Model, name: str = LINKER, *,
                 settings: SpanReaderSettings | ReaderSettings, kb_path: str | None,
                 default_label: str, ents: str, verify_files: str, dictionary_spans: str,
                 nlp: Language | None, scorer: Callable | None,
                 get_candidates: CandidatePolicy | None = None,
                 spans_key: str | None = SPANS_KEY, nested_names: bool = False) -> None:
        self.vocab, self.model, self.name, self.scorer = vocab, model, name, scorer
        self.settings = settings
        self.cfg: dict[str, Any] = {"kb_path": kb_path, "default_label": default_label,
                                    "ents": ents, "verify_files": verify_files,
                                    "dictionary_spans": dictionary_spans,
                                    "spans_key": spans_key, "nested_names": nested_names}
        self.get_candidates = get_candidates or CandidatePolicy()
        self.core_class = CORES[model.attrs["reader"]][0]
        self.reader: ReaderBase | None = None
        # whether the heads were trained (the first update sets it; saved in cfg.json)
        self.trained = False
        self.dictionary: DictionaryLinker | None = None
        self._nlp = nlp  # its tokenizer makes the dictionary's patterns
        register_extensions()

    @property
    def uses_dictionary(self) -> bool:
        """Whether dictionary proposals are linked now (``dictionary_spans``)."""
        mode = self.cfg["dictionary_spans"]
        return mode == "always" or (mode == "untrained" and not self.trained)

    @property
    def uses_heads(self) -> bool:
        """Whether the span heads propose spans now: once trained, or always with
        ``dictionary_spans = "never"``."""
        return self.trained or self.cfg["dictionary_spans"] == "never"

    def _set_up(self, kb: KnowledgeBase, tokenizer, load: Callable | None = None) -> None:
        """The core over ``kb`` with the modules of ``load`` (default: the base encoder);
        new heads are drawn from ``HEAD_SEED`` (the caller's random state is left as it
        was)."""
        self._check_kb(kb)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(HEAD_SEED)
            initialize_with(self.model, load)
        self.reader = self.core_class(kb, tokenizer, torch_modules(self.model), self.settings)
        self.dictionary = None

    @property
    def type_rule(self) -> TypeRule | None:
        """The type rule of its candidate policy."""
        return self.get_candidates.rule

    def _check_kb(self, kb: KnowledgeBase) -> KnowledgeBase:
        """``kb``; E225/W022 when ``label_types`` names types it lacks."""
        if self.type_rule is not None:
            self.type_rule.check_types(kb.types())
        return kb

    def _set_up_from_config(self) -> None:
        self._set_up(self._config_kb(), load_tokenizer(self.model.attrs["encoder_name"]))

    def _make_current(self) -> None:
        """Build the entity index, and the dictionary and its names index while dictionary
        proposals are in use."""
        self.reader.entities.ensure_index()
        if self.uses_dictionary:
            self._ensure_dictionary()

    def _ensure_reader(self) -> None:
        if self.reader is None:
            self._set_up_from_config()
        self.reader.entities.ensure_index()

    def _ensure_dictionary(self, index_path: Path | None = None) -> DictionaryLinker:
        """The dictionary of the core's KB and its names index, embedded by the core's
        entity encoder (or loaded from ``index_path``), unless it is there already."""
        core = self.reader
        if self.dictionary is None or self.dictionary.kb is not core.kb:
            import spacy

            nlp = self._nlp or spacy.blank(self.vocab.lang or "xx", vocab=self.vocab)
            self.dictionary = DictionaryLinker.build(
                nlp, core.kb, core.tokenizer, core.modules["entity"].transformer,
                self.settings, name=self.name, index_path=index_path,
                nested=self.cfg["nested_names"], previous=self.dictionary)
        return self.dictionary

    def initialize(self, get_examples: Callable[[], Iterable[Example]], *,
                   nlp: Language | None = None,
                   kb_loader: Callable[[Language], KnowledgeBase] | None = None,
                   linker_path: str | None = None, reader_path: str | None = None) -> None:
        """Load the KB and the encoders, build the entity index, learn entity labels.
        ``linker_path``: an ``arbo_entity_linker`` whose encoders, tokenizer, KB and index
        start the reader (BEER² starts from BLINK's bi-encoder); ``reader_path``: a span-reader
        ``arbo_linker`` to train on from. Without gold mentions (``nlp.initialize()``) the
        dictionary is built too while in use; with them, when docs are first processed."""
        kb = kb_loader(nlp) if kb_loader is not None else None
        if nlp is not None:
            self._nlp = nlp
        if linker_path and reader_path:
            raise ValueError(Errors.E029.format(name=self.name,
                                                problem="both linker_path and reader_path"))
        self.trained = False
        if kb is None and self.cfg["kb_path"] and (reader_path or linker_path):
            kb = self._config_kb()
        if reader_path:
            self._from_reader(Path(reader_path), kb)
        elif linker_path:
            self._from_linker(Path(linker_path), kb)
        else:
            self._set_up(kb or self._config_kb(),
                         load_tokenizer(self.model.attrs["encoder_name"]))
        self._ensure_reader()
        mentions = [(resolved_gold_ids(ent.kb_id_, self.kb), ent.label_)
                    for eg in get_examples() for ent in eg.reference.ents]
        self.reader.learn_labels(mentions)
        if self.uses_dictionary and not mentions:
            self._ensure_dictionary()

    def _from_linker(self, path: Path, kb: KnowledgeBase | None) -> None:
        """Set up from the ``arbo_entity_linker`` saved at ``path`` (E021: none there)."""
        linker = saved_component(path, ENTITY_LINKER)
        if linker is None:
            raise ValueError(Errors.E021.format(path=path))
        retriever = linker.retriever
        check_linker_source(self.settings, retriever.settings, linker.model.attrs["pooling"],
                            self.name, path)
        linker.ensure_ready()
        self._set_up(kb or retriever.kb, retriever.tokenizer,
                     partial(self.core_class.modules_from, retriever, self.settings))
        self.reader.entities.reuse_index(retriever.kb, retriever.index)

    def _from_reader(self, path: Path, kb: KnowledgeBase | None) -> None:
        """Train on from the span-reader ``arbo_linker`` saved at ``path`` (E029)."""
        source = saved_component(path, LINKER)
        found = source.reader if source is not None else None
        if not can_train_on(found, self.core_class, self.settings):
            raise ValueError(Errors.E029.format(name=self.name, problem=f"reader_path '{path}' "
                                                f"({found and asdict(found.settings)})"))
        self._set_up(kb or found.kb, found.tokenizer,
                     partial(SpanReader.modules_from_reader, found, self.settings))
        self.trained = source.trained  # its trained heads are ours
        if found.settings.entity_max_length == self.settings.entity_max_length:
            self.reader.entities.reuse_index(found.kb, found.entities.ready_index())

    def _require(self, what: str = "encoders or index") -> ReaderBase:
        """The reader with its index (E051 before either is there)."""
        reader = super()._require(what)
        if reader.index is None:
            raise ValueError(Errors.E051.format(name=self.name, what=what))
        return reader

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
        key = self.cfg["spans_key"]

        def label_of(kb_id: str) -> str:
            return self.reader.label_of(kb_id, self.cfg["default_label"], self.type_rule)

        for doc, links in zip(docs, predictions, strict=True):
            add_linked_ents(doc, linked_rows(links, sorted(links.spans, key=lambda s: -s.score),
                                             label_of), keep=self.cfg["ents"] == "keep")
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
            "labels": self.reader.entity_labels, "updates": self.reader.updates,
            "trained": self.trained, "reader": self.model.attrs["reader"],
            **structural_settings(self.settings)}, exclude,
            lambda: ({"names_index": self.dictionary.write_index}
                     if self.uses_dictionary and "index" not in exclude else {}))

    def from_disk(self, path, *, exclude: Iterable[str] = tuple()) -> "ArboLinker":
        """Load a saved arbo_linker; every file is checked first (E030), and saved settings
        that disagree with the config are errors (E056, E080). Excluded parts come from the
        config (``kb``: its ``kb_path``; ``tokenizer``: the base encoder's; ``index``: built
        again). A ``kb_path`` given at load naming another KB than the saved one is
        honoured (W004)."""
        path, exclude = ensure_path(path), set(exclude)
        required = ("cfg.json", "kb.jsonl", "tokenizer", "passage_encoder", "entity_encoder",
                    "heads.safetensors", "index")
        with self._reading(path, exclude, required, cfg_keys=("trained",)) as state:
            cfg = {"labels": {}, "updates": 0, "trained": False, **state["cfg"]}
            check_saved_settings(cfg, {"reader": self.model.attrs["reader"],
                                       **structural_settings(self.settings)}, self.name, path)
            tokenizer = load_tokenizer(str(state["tokenizer"]
                                           or self.model.attrs["encoder_name"]))
            self._set_up(state["kb"], tokenizer, partial(self.core_class.load_modules, path,
                                                         tokenizer, self.settings))
            self.reader.entity_labels = dict(cfg["labels"])
            self.reader.updates = int(cfg["updates"])
            self.trained = bool(cfg["trained"])
            if "index" not in exclude:
                self.reader.entities.load_index(path / "index")
        kb = self._kb_override(cfg)
        names = path / "names_index"
        if self.uses_dictionary and not exclude & {"index", "names_index"} and names.exists():
            with reading(path, self.name):  # saved for the saved KB (not one from kb_path)
                if read_index_meta(names).kb_fingerprint == self.kb.fingerprint():
                    self._ensure_dictionary(names)
        if kb is not None:  # both indexes brought up to date: only rows of new text embedded
            self.set_kb(kb)
        self.ensure_ready()
        return self
