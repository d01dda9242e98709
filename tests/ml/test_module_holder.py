"""The thinc models of the architectures (``spacy_arboel.ml``): declared holders of the
PyTorch modules that the components' cores run.

Weights enter a model only through its ``init`` (``model.initialize()`` or
``initialize_with``); its forward and its own serialisation refuse (E058, E059); spaCy's
optimizer steps exactly the modules the core computes with, and a saved pipeline's weights
are written and read without pickle."""

from __future__ import annotations

import dataclasses
import pickle

import numpy as np
import pytest
import spacy
import torch
from thinc.api import Adam, get_torch_default_device

from spacy_arboel.encoders.cross_scorer import CrossScorer, load_scorer
from spacy_arboel.encoders.inputs import InputBuilder
from spacy_arboel.encoders.loading import load_tokenizer
from spacy_arboel.encoders.reader_heads import ReaderHeads, base_reader_modules
from spacy_arboel.encoders.span_heads import base_span_reader_modules
from spacy_arboel.encoders.transformer import PooledEncoder, load_pooled_encoders
from spacy_arboel.ml.bi_encoder import SIDES, build_bi_encoder, torch_encoders
from spacy_arboel.ml.cross_encoder import build_cross_encoder, torch_scorer
from spacy_arboel.ml.module_holder import LOADER_ATTR, initialize_with, is_loaded, torch_modules
from spacy_arboel.ml.reader_model import build_retriever_reader
from spacy_arboel.ml.span_reader_model import build_span_reader
from tests.conftest import passage_linker_config

# [CLS] the cough [SEP] / [CLS] fever [SEP] [PAD] (ids of tests/conftest.py's vocabulary)
IDS = torch.tensor([[2, 5, 10, 3], [2, 11, 3, 0]])
MASK = torch.tensor([[1, 1, 1, 1], [1, 1, 1, 0]])

# architecture, its arguments, the modules it holds
ARCHITECTURES = {
    "bi_encoder": (build_bi_encoder, {}, ["mention", "entity"]),
    "bi_encoder_shared": (build_bi_encoder, {"share_weights": True}, ["mention"]),
    "cross_encoder": (build_cross_encoder, {}, ["scorer"]),
    "retriever_reader": (build_retriever_reader, {}, ["heads", "entity"]),
    "span_reader": (build_span_reader, {}, ["spans", "entity"]),
    "span_reader_cross": (build_span_reader, {"cross_reread": 2}, ["spans", "entity", "cross"]),
}
# where each architecture loads its base modules
BASE_LOADERS = ("spacy_arboel.ml.module_holder.load_tokenizer",
                "spacy_arboel.ml.bi_encoder.load_pooled_encoders",
                "spacy_arboel.ml.cross_encoder.load_scorer",
                "spacy_arboel.ml.reader_model.base_reader_modules",
                "spacy_arboel.ml.span_reader_model.base_span_reader_modules")


def _built(kind: str, encoder_name: str):
    build, arguments, _ = ARCHITECTURES[kind]
    return build(encoder_name=encoder_name, **arguments)


def _pooled(tiny_encoder: str, share_weights: bool = False) -> dict[str, PooledEncoder]:
    tokenizer = load_tokenizer(tiny_encoder)
    return load_pooled_encoders({side: tiny_encoder for side in SIDES}, "cls", share_weights,
                                len(tokenizer), InputBuilder(tokenizer).marker_ids)


def _perturb(module: torch.nn.Module, seed: int = 1) -> None:
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for param in module.parameters():
            param.add_(torch.randn(param.shape, generator=generator) * 0.1)


def _same_state(found: torch.nn.Module, expected: torch.nn.Module) -> bool:
    found, expected = found.state_dict(), expected.state_dict()
    return found.keys() == expected.keys() and all(torch.equal(found[k], expected[k])
                                                   for k in found)


def _vectors(encoder: torch.nn.Module) -> torch.Tensor:
    """What a core computes with a pooled encoder: one vector per row."""
    return encoder(IDS, MASK)


# --- building and init ---------------------------------------------------------------------


@pytest.mark.parametrize("kind", ARCHITECTURES)
def test_building_loads_no_weights(kind, monkeypatch):
    """Built without touching any encoder, even one that does not exist: loading a saved
    pipeline must never load the base model."""
    def refuse(*args, **kwargs):
        raise AssertionError("an encoder was loaded while building the model")

    for where in BASE_LOADERS:
        monkeypatch.setattr(where, refuse)
    model = _built(kind, "/no/such/encoder")
    assert not is_loaded(model)
    assert model.attrs["module_names"] == ARCHITECTURES[kind][2]
    assert len(model.shims) == len(ARCHITECTURES[kind][2]) and not model.layers
    with pytest.raises(ValueError, match=r"\[E057\]"):
        torch_modules(model)


def test_a_missing_encoder_fails_in_init_not_before():
    model = build_bi_encoder(encoder_name="/no/such/encoder")
    with pytest.raises(OSError, match=r"\[E006\]"):
        model.initialize()
    assert not is_loaded(model)


def test_initialize_loads_the_base_encoders(tiny_encoder):
    model = build_bi_encoder(encoder_name=tiny_encoder)
    model.initialize()
    assert is_loaded(model)
    encoders, base = torch_encoders(model), _pooled(tiny_encoder)
    assert encoders["mention"] is not encoders["entity"]
    for side in SIDES:
        assert isinstance(encoders[side], PooledEncoder)
        assert _same_state(encoders[side], base[side])
    device = get_torch_default_device()
    assert all(p.device == device for m in torch_modules(model).values()
               for p in m.parameters())


def test_shared_weights_are_one_module_for_both_sides(tiny_encoder):
    model = build_bi_encoder(encoder_name=tiny_encoder, share_weights=True)
    model.initialize()
    encoders = torch_encoders(model)
    assert encoders["mention"] is encoders["entity"] is torch_modules(model)["mention"]


def test_initialize_with_puts_the_given_modules_in_once(tiny_encoder):
    modules = _pooled(tiny_encoder)
    _perturb(modules["entity"])
    model = build_bi_encoder(encoder_name=tiny_encoder)
    initialize_with(model, lambda: modules)
    assert torch_modules(model) == modules  # the very objects
    assert model.attrs[LOADER_ATTR] is None  # used once: a later initialize() is the base
    model.initialize()
    entity = torch_encoders(model)["entity"]
    assert entity is not modules["entity"] and not _same_state(entity, modules["entity"])
    assert _same_state(entity, _pooled(tiny_encoder)["entity"])


def test_cross_encoder_holds_the_base_scorer_or_the_given_one(tiny_encoder):
    model = build_cross_encoder(encoder_name=tiny_encoder)
    model.initialize()
    scorer = torch_scorer(model)
    assert isinstance(scorer, CrossScorer)
    # the head W is new (random); the transformer is the base encoder
    assert _same_state(scorer.transformer,
                       load_scorer(tiny_encoder, len(load_tokenizer(tiny_encoder))).transformer)
    given = load_scorer(tiny_encoder, len(load_tokenizer(tiny_encoder)))
    initialize_with(model, lambda: {"scorer": given})
    assert torch_scorer(model) is given


@pytest.mark.parametrize("share_weights", [True, False])
def test_retriever_reader_holds_its_heads_and_frozen_entity_encoder(tiny_encoder, share_weights):
    model = build_retriever_reader(encoder_name=tiny_encoder, share_weights=share_weights)
    model.initialize()
    modules = torch_modules(model)
    assert set(modules) == {"heads", "entity"}
    heads, entity = modules["heads"], modules["entity"]
    assert isinstance(heads, ReaderHeads) and isinstance(entity, PooledEncoder)
    assert entity.pooling == "mean"
    assert not any(p.requires_grad for p in entity.parameters())  # frozen
    base = base_reader_modules(tiny_encoder, len(load_tokenizer(tiny_encoder)),
                               share_weights=share_weights, entity_pooling="mean")
    assert _same_state(heads.passage, base["heads"].passage)
    assert _same_state(entity, base["entity"])
    if share_weights:
        assert heads.reader is None  # the reader is the passage encoder
    else:
        assert heads.reader is not heads.passage and _same_state(heads.reader, heads.passage)


def test_span_reader_holds_the_cross_reader_only_when_it_rereads(tiny_encoder):
    base = base_span_reader_modules(tiny_encoder, len(load_tokenizer(tiny_encoder)),
                                    entity_pooling="mean", with_cross=False)
    for cross_reread, names in ((0, {"spans", "entity"}), (2, {"spans", "entity", "cross"})):
        model = build_span_reader(encoder_name=tiny_encoder, cross_reread=cross_reread)
        model.initialize()
        modules = torch_modules(model)
        assert set(modules) == names
        assert _same_state(modules["spans"].encoder, base["spans"].encoder)
        assert _same_state(modules["entity"], base["entity"])


# --- it computes nothing, and is not serialised --------------------------------------------


@pytest.mark.parametrize("kind", ARCHITECTURES)
def test_the_forward_refuses(kind):
    model = _built(kind, "/no/such/encoder")
    for run in (model.predict, model.begin_update, lambda x: model(x, is_train=False)):
        with pytest.raises(ValueError, match=rf"\[E058\].*'{model.name}'"):
            run((IDS, MASK))


def test_the_forward_refuses_once_loaded_too(tiny_encoder):
    model = build_bi_encoder(encoder_name=tiny_encoder)
    model.initialize()
    with pytest.raises(ValueError, match=r"\[E058\]"):
        model.predict(("mention", IDS.numpy(), MASK.numpy()))


def test_the_model_is_not_serialised_on_its_own(tiny_encoder, tmp_path, monkeypatch):
    """One way to write weights: the component's folder. The model's own bytes refuse, so
    neither they nor thinc's pickling default (``torch.save``) can become a second way."""
    def refuse(*args, **kwargs):
        raise AssertionError("pickle was used")

    for where, name in ((torch, "save"), (torch, "load"), (pickle, "dumps"), (pickle, "loads")):
        monkeypatch.setattr(where, name, refuse)
    model = build_bi_encoder(encoder_name=tiny_encoder)
    model.initialize()
    for write in (model.to_bytes, lambda: model.to_disk(tmp_path / "model")):
        with pytest.raises(ValueError, match=r"\[E059\]"):
            write()
    assert (tmp_path / "model").read_bytes() == b""  # thinc opens the file, nothing is written
    (tmp_path / "bytes").write_bytes(b"\x80\x04weights")
    shim = model.shims[0]
    for read in (lambda: shim.from_bytes(b"\x80\x04weights"),
                 lambda: shim.from_disk(tmp_path / "bytes")):
        with pytest.raises(ValueError, match=r"\[E059\]"):
            read()
    assert _same_state(torch_encoders(model)["mention"], _pooled(tiny_encoder)["mention"])


# --- the optimizer steps the modules the core runs ------------------------------------------


def test_finish_update_steps_the_held_modules(tiny_encoder):
    """A core's loss (plain PyTorch on the held modules), then ``finish_update``: the
    parameters with gradients move, the gradients are cleared, the outputs change."""
    model = build_bi_encoder(encoder_name=tiny_encoder)
    model.initialize()
    encoders = torch_encoders(model)
    with torch.no_grad():
        before = {side: _vectors(encoders[side]) for side in SIDES}
    _vectors(encoders["mention"]).pow(2).sum().backward()
    model.finish_update(Adam(0.01))
    with torch.no_grad():
        after = {side: _vectors(encoders[side]) for side in SIDES}
    assert not torch.allclose(after["mention"], before["mention"])
    torch.testing.assert_close(after["entity"], before["entity"], rtol=0, atol=0)
    assert all(p.grad is None or not p.grad.any() for m in encoders.values()
               for p in m.parameters())


def test_shared_weights_collect_the_gradients_of_both_sides(tiny_encoder):
    model = build_bi_encoder(encoder_name=tiny_encoder, share_weights=True, pooling="cls")
    model.initialize()
    encoder = torch_encoders(model)["mention"]
    for side in SIDES:
        _vectors(torch_encoders(model)[side]).sum().backward()
    name, param = next(iter(encoder.named_parameters()))
    once = _pooled(tiny_encoder, share_weights=True)["mention"]
    _vectors(once).sum().backward()
    torch.testing.assert_close(param.grad, dict(once.named_parameters())[name].grad * 2,
                               rtol=1e-4, atol=1e-6)


def _flat(value) -> list[float]:
    """The numbers of a component's ``predict`` output, in order."""
    if dataclasses.is_dataclass(value):
        return _flat(dataclasses.astuple(value))
    if isinstance(value, dict):
        return _flat(list(value.values()))
    if isinstance(value, (list, tuple)):
        return [x for item in value for x in _flat(item)]
    if isinstance(value, np.ndarray) or isinstance(value, (float, np.floating)):
        return np.asarray(value, dtype="float64").ravel().tolist()
    return []


def _core_parameters(value, seen: set[int] | None = None) -> list[torch.nn.Parameter]:
    """The parameters of every PyTorch module a core (a ``spacy_arboel`` object) holds,
    found through its attributes and their containers."""
    seen = set() if seen is None else seen
    if id(value) in seen:
        return []
    seen.add(id(value))
    if isinstance(value, torch.nn.Module):
        return list(value.parameters())
    if isinstance(value, dict):
        items = list(value.values())
    elif isinstance(value, (list, tuple)):
        items = list(value)
    elif type(value).__module__.startswith("spacy_arboel") and hasattr(value, "__dict__"):
        items = list(vars(value).values())
    else:
        return []
    return [p for item in items for p in _core_parameters(item, seen)]


def _pipeline(kind: str, tiny_encoder: str, kb_path) -> tuple[spacy.Language, str]:
    nlp = spacy.blank("xx")
    model = {"encoder_name": tiny_encoder}
    if kind == "arbo_linker_passage":
        nlp.add_pipe("arbo_linker", config=passage_linker_config(
            {"kb_path": str(kb_path), "dictionary_spans": "never"}, model))
        return nlp, "arbo_linker"
    if kind == "arbo_linker_span":
        nlp.add_pipe("arbo_linker", config={
            "kb_path": str(kb_path), "dictionary_spans": "never", "passage_length": 48,
            "passage_stride": 40, "model": {"max_spans": 16, **model}})
        return nlp, "arbo_linker"
    nlp.add_pipe("arbo_entity_linker", config={"kb_path": str(kb_path), "top_k": 4,
                                               "model": model})
    if kind == "arbo_reranker":
        nlp.add_pipe("arbo_reranker", config={"top_k": 3, "train_top_k": 3, "model": model})
    return nlp, kind


@pytest.mark.parametrize("kind", ["arbo_entity_linker", "arbo_reranker", "arbo_linker_passage",
                                  "arbo_linker_span"])
def test_the_optimizer_steps_the_modules_the_core_computes_with(kind, tiny_encoder,
                                                                toy_kb_path, toy_examples):
    """Through spaCy: the core's training loss leaves its gradients on the modules the thinc
    model holds, and the component's ``finish_update`` (spaCy's optimizer over the model's
    shims) moves exactly those parameters and changes what the core predicts. Every
    parameter the core trains is one the model holds."""
    torch.manual_seed(0)
    nlp, name = _pipeline(kind, tiny_encoder, toy_kb_path)
    nlp.initialize(lambda: toy_examples)
    pipe = nlp.get_pipe(name)
    params = {f"{module_name}.{n}": p
              for module_name, module in torch_modules(pipe.model).items()
              for n, p in module.named_parameters()}
    docs = list(nlp.pipe([eg.predicted.copy() for eg in toy_examples], disable=[name]))
    before = _flat(pipe.predict(docs))
    start = {n: p.detach().clone() for n, p in params.items()}
    linker = [] if name == "arbo_linker" else ["arbo_entity_linker"]
    losses = nlp.update(toy_examples, sgd=False, annotates=linker,
                        exclude=linker if name != "arbo_entity_linker" else [])
    assert losses[name] > 0
    stepped = {n for n, p in params.items() if p.grad is not None and p.grad.any()}
    assert stepped  # the core's loss reached the held modules
    # and no module beside them: every parameter of the core with a gradient is held
    held = {id(p) for p in params.values()}
    trained = [p for p in _core_parameters(pipe.core) if p.grad is not None and p.grad.any()]
    assert trained and all(id(p) in held for p in trained)
    assert all(torch.equal(p, start[n]) for n, p in params.items())  # no step without sgd
    pipe.finish_update(Adam(0.01))
    moved = {n for n, p in params.items() if not torch.equal(p.detach(), start[n])}
    assert moved == stepped
    assert all(p.grad is None or not p.grad.any() for p in params.values())
    pipe.ensure_ready()
    after = _flat(pipe.predict(docs))
    assert before and (len(after) != len(before) or not np.allclose(after, before))


@pytest.mark.parametrize("kind", ["arbo_reranker", "arbo_linker_passage", "arbo_linker_span"])
def test_a_saved_pipeline_writes_and_reads_its_weights_without_pickle(kind, tiny_encoder,
                                                                      toy_kb_path,
                                                                      toy_examples, tmp_path,
                                                                      monkeypatch):
    """The components' folders are the one way weights are written (safetensors): saving
    and loading a pipeline never pickles, and the loaded modules are the saved ones."""
    torch.manual_seed(0)
    nlp, name = _pipeline(kind, tiny_encoder, toy_kb_path)
    nlp.initialize(lambda: toy_examples)
    _perturb(next(iter(torch_modules(nlp.get_pipe(name).model).values())))

    def refuse(*args, **kwargs):
        raise AssertionError("pickle was used")

    with monkeypatch.context() as patch:
        for where, function in ((torch, "save"), (torch, "load"), (pickle, "dump"),
                                (pickle, "dumps"), (pickle, "load"), (pickle, "loads")):
            patch.setattr(where, function, refuse)
        nlp.to_disk(tmp_path / "saved")
        loaded = spacy.load(tmp_path / "saved")
        for pipe_name in loaded.pipe_names:
            loaded.get_pipe(pipe_name).ensure_ready()
    saved, restored = (torch_modules(p.get_pipe(name).model) for p in (nlp, loaded))
    assert saved.keys() == restored.keys()
    assert all(_same_state(restored[k], saved[k]) for k in saved)
