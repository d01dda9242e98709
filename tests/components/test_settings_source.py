"""One source of settings: each component's settings dataclass declares its factory's
settings (the factory's arguments, field for field and type for type, and its
``default_config``), copied from its cores' dataclasses where a core takes them; a model's
architecture takes its core's defaults and types (the configs' encoder name is tied to
``DEFAULT_ENCODER`` in tests/configs/test_packaged_configs.py); a bad value in a config is
refused by confection, naming the setting."""

import inspect
from dataclasses import fields
from typing import get_type_hints

import pytest
import spacy
from confection import ConfigValidationError
from spacy.util import registry

from spacy_arboel.components.arbo_coref import ArboCorefSettings, make_coref
from spacy_arboel.components.arbo_entity_linker import (
    ArboEntityLinkerSettings,
    make_entity_linker,
)
from spacy_arboel.components.arbo_linker import ArboLinkerSettings, make_linker
from spacy_arboel.components.arbo_reranker import ArboRerankerSettings, make_reranker
from spacy_arboel.coref import ClusterSettings
from spacy_arboel.linking import (
    ReaderSettings,
    RerankerSettings,
    RetrieverSettings,
    SpanReaderSettings,
)
from spacy_arboel.linking.bi_encoder_trainer import TrainerSettings
from spacy_arboel.linking.candidates import CandidatePolicy
from spacy_arboel.linking.mention_linker import LinkSettings
from spacy_arboel.settings import PositiveInt, check_fields, plain

# each factory with its core settings (arbo_linker drives one of two cores)
FACTORIES = [("arbo_entity_linker", make_entity_linker, RetrieverSettings),
             ("arbo_linker", make_linker, SpanReaderSettings),
             ("arbo_linker", make_linker, ReaderSettings),
             ("arbo_reranker", make_reranker, RerankerSettings)]
# each component's factory, settings dataclass and the cores' dataclasses it copies from
# (with the names it takes; None: every name both have)
COMPONENTS = [("arbo_entity_linker", make_entity_linker, ArboEntityLinkerSettings,
               [(LinkSettings, None), (RetrieverSettings, None), (TrainerSettings, None)]),
              ("arbo_linker", make_linker, ArboLinkerSettings, [(SpanReaderSettings, None)]),
              ("arbo_reranker", make_reranker, ArboRerankerSettings,
               [(LinkSettings, ("nil_id",)), (RerankerSettings, None)]),
              ("arbo_coref", make_coref, ArboCorefSettings, [(ClusterSettings, None)])]
# a factory's arguments that are no setting: spaCy's and the registered blocks
BLOCKS = {"nlp", "name", "model", "objective", "get_candidates", "span_getter", "scorer",
          "return"}
# each architecture with the core whose settings it holds
ARCHITECTURES = [("spacy_arboel.BiEncoder.v1", RetrieverSettings),
                 ("spacy_arboel.SpanReader.v1", SpanReaderSettings),
                 ("spacy_arboel.RetrieverReader.v1", ReaderSettings),
                 ("spacy_arboel.CrossEncoder.v1", RerankerSettings)]


def _defaults(settings_class) -> dict:
    """The dataclass's defaults as a config holds them (a tuple as a list)."""
    return {f.name: plain(f.default) for f in fields(settings_class)}


@pytest.mark.parametrize("factory,make,core", FACTORIES,
                         ids=[f"{f}-{c.__name__}" for f, _, c in FACTORIES])
def test_a_factorys_defaults_are_its_cores(factory, make, core):
    config = spacy.blank("xx").get_factory_meta(factory).default_config
    defaults = _defaults(core)
    shared = set(defaults) & set(config)
    assert len(shared) >= 5, shared
    assert {k: config[k] for k in shared} == {k: defaults[k] for k in shared}
    in_model = set(defaults) & set(config["model"])
    assert {k: config["model"][k] for k in in_model} == {k: defaults[k] for k in in_model}
    # a setting the factory and its core both take has one type
    factory_types, core_types = get_type_hints(make), get_type_hints(core)
    assert {k: factory_types[k] for k in shared} == {k: core_types[k] for k in shared}


@pytest.mark.parametrize("factory,make,settings,cores", COMPONENTS,
                         ids=[c[0] for c in COMPONENTS])
def test_a_factory_takes_its_settings_field_for_field(factory, make, settings, cores):
    """The factory's arguments are the dataclass's fields and the registered blocks, each
    of the field's type; its default_config holds the fields' defaults; the dataclass is
    frozen and checks a value as it is built."""
    types, declared = get_type_hints(make), get_type_hints(settings)
    assert set(types) - BLOCKS == set(declared)
    assert {k: types[k] for k in declared} == declared
    config = spacy.blank("xx").get_factory_meta(factory).default_config
    assert {k: config[k] for k in declared} == settings.config()
    assert settings.__dataclass_params__.frozen
    # a field a core takes is the core's: same type, same default
    copied = 0
    for core, names in cores:
        core_types, core_defaults = get_type_hints(core), _defaults(core)
        for name in set(core_types) & set(declared) & set(names or core_types):
            assert (declared[name], settings.config()[name]) == \
                (core_types[name], core_defaults[name]), (core.__name__, name)
            copied += 1
    assert copied >= 3


@pytest.mark.parametrize("architecture,core", ARCHITECTURES)
def test_an_architectures_defaults_and_types_are_its_cores(architecture, core):
    function = registry.architectures.get(architecture)
    parameters = inspect.signature(function).parameters
    defaults = _defaults(core)
    shared = set(parameters) & set(defaults)
    assert shared
    assert {k: parameters[k].default for k in shared} == {k: defaults[k] for k in shared}
    types, core_types = get_type_hints(function), get_type_hints(core)
    assert {k: types[k] for k in shared} == {k: core_types[k] for k in shared}


def test_the_cores_alone_get_the_components_defaults():
    """``RetrieverReader.from_pretrained(kb, name)`` reads as ``arbo_linker`` with
    ``RetrieverReader.v1`` does (issue 31: it read 32-wordpiece passages, threshold 0.03)."""
    reader, span_reader = ReaderSettings(), SpanReaderSettings()
    assert (reader.passage_length, reader.passage_stride, reader.threshold,
            reader.max_span_length, reader.batch_size) == (128, 96, 0.3, 24, 8)
    shared = set(_defaults(ReaderSettings)) & set(_defaults(SpanReaderSettings))
    assert {k: getattr(reader, k) for k in shared if k not in ("entity_pooling",)} == \
        {k: getattr(span_reader, k) for k in shared if k not in ("entity_pooling",)}
    retriever = RetrieverSettings()
    assert (retriever.pooling, retriever.expand_abbreviations) == ("mention", True)
    assert retriever.inputs == "names"  # the component's too (one declaration)


@pytest.mark.parametrize("core,bad,code", [
    (RetrieverSettings, {"pooling": "max"}, r"E007.*pooling 'max'.*cls, mean, mention"),
    (RetrieverSettings, {"batch_size": 0}, r"E011.*batch_size.*>= 1"),
    (CandidatePolicy, {"lexical_weight": -1.0}, r"E011.*lexical_weight.*>= 0"),
    (CandidatePolicy, {"scores": "logit"}, r"E007.*scores 'logit'.*probability, raw"),
    (CandidatePolicy, {"label_types": {"Chemical": "Chemical"}}, r"E223"),
    (ReaderSettings, {"warmup_reader_steps": -1}, r"E011.*warmup_reader_steps.*>= 0"),
    (ReaderSettings, {"empty_passage_rate": 1.5}, r"E011.*empty_passage_rate.*\[0, 1\]"),
    (ReaderSettings, {"mode": "cascade"}, r"E007.*mode 'cascade'.*joint, pipeline"),
    (SpanReaderSettings, {"index_kind": "lsh"}, r"E007.*index_kind 'lsh'"),
    (SpanReaderSettings, {"top_k": True}, r"E011.*top_k"),
    (RerankerSettings, {"batch_size": 0}, r"E011.*batch_size"),
])
def test_a_core_used_alone_checks_its_settings_once(core, bad, code):
    with pytest.raises(ValueError, match=code):
        core(**bad)
    check_fields(core())  # the defaults pass


@pytest.mark.parametrize("factory,config,named", [
    ("arbo_linker", {"ents": "merge"}, r"ents.*'replace', 'keep'"),
    ("arbo_linker", {"threshold": 1.0}, r"threshold.*Probability"),
    ("arbo_linker", {"train_top_k": 0}, r"train_top_k.*PositiveInt"),
    ("arbo_linker", {"index_kind": "lsh"}, r"index_kind.*'flat'"),
    ("arbo_reranker", {"top_k": 0}, r"top_k.*PositiveInt"),
    ("arbo_reranker", {"train_top_k": -1}, r"train_top_k.*PositiveInt"),
    ("arbo_reranker", {"batch_size": 0}, r"batch_size.*PositiveInt"),
    ("arbo_entity_linker", {"inputs": "context"}, r"inputs.*'blink', 'names'"),
    # the settings the model's architecture holds are typed there
    ("arbo_entity_linker", {"model": {"pooling": "max"}}, r"pooling.*'cls', 'mean', 'mention'"),
    ("arbo_linker", {"model": {"entity_pooling": "mention"}}, r"entity_pooling.*'cls', 'mean'"),
    ("arbo_linker", {"model": {"@architectures": "spacy_arboel.RetrieverReader.v1",
                               "query_pooling": "max"}}, r"query_pooling.*'cls', 'mean'"),
])
def test_a_bad_factory_setting_is_refused_when_the_pipe_is_added(factory, config, named):
    with pytest.raises(ConfigValidationError, match=named):
        spacy.blank("xx").add_pipe(factory, config=config)


def test_positive_settings_refuse_a_bool():
    assert PositiveInt.strict  # True is no top_k
