"""One source of settings: a factory's defaults, those of its default model and those of the
model's architecture are its core's settings dataclass's, and a setting both take has one
type; a bad value in a config is refused by confection, naming the setting."""

import inspect
from dataclasses import fields
from typing import get_type_hints

import pytest
import spacy
from confection import ConfigValidationError
from spacy.util import registry

import spacy_arboel.components.arbo_entity_linker
import spacy_arboel.components.arbo_linker
import spacy_arboel.components.arbo_reranker  # noqa: F401  (registers the factories)
from spacy_arboel.components.arbo_entity_linker import make_entity_linker
from spacy_arboel.components.arbo_linker import make_linker
from spacy_arboel.components.arbo_reranker import make_reranker
from spacy_arboel.linking import (
    ReaderSettings,
    RerankerSettings,
    RetrieverSettings,
    SpanReaderSettings,
)
from spacy_arboel.linking.candidates import CandidatePolicy
from spacy_arboel.settings import PositiveInt, check_fields

# each factory with its core settings (arbo_linker drives one of two cores)
FACTORIES = [("arbo_entity_linker", make_entity_linker, RetrieverSettings),
             ("arbo_linker", make_linker, SpanReaderSettings),
             ("arbo_linker", make_linker, ReaderSettings),
             ("arbo_reranker", make_reranker, RerankerSettings)]
# each architecture with the core whose settings it holds
ARCHITECTURES = [("spacy_arboel.BiEncoder.v1", RetrieverSettings),
                 ("spacy_arboel.SpanReader.v1", SpanReaderSettings),
                 ("spacy_arboel.RetrieverReader.v1", ReaderSettings),
                 ("spacy_arboel.CrossEncoder.v1", RerankerSettings)]


def _defaults(settings_class) -> dict:
    return {f.name: f.default for f in fields(settings_class)}


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


@pytest.mark.parametrize("architecture,core", ARCHITECTURES)
def test_an_architectures_defaults_are_its_cores(architecture, core):
    parameters = inspect.signature(registry.architectures.get(architecture)).parameters
    defaults = _defaults(core)
    shared = set(parameters) & set(defaults)
    assert shared
    assert {k: parameters[k].default for k in shared} == {k: defaults[k] for k in shared}
    # a choice both take has one type
    types, core_types = get_type_hints(registry.architectures.get(architecture)), \
        get_type_hints(core)
    choices = {k for k in set(parameters) & set(defaults) if "Literal" in str(core_types[k])}
    assert {k: types[k] for k in choices} == {k: core_types[k] for k in choices}


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
