"""The thinc wrappers of the PyTorch encoders: ``ml.bi_encoder``, ``ml.cross_encoder``,
``ml.reader_model`` and ``ml.torch_layers``.

Weights enter a model only through its ``init`` (``model.initialize()`` or
``initialize_with``); the shim serialises with safetensors, never with pickle."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import safetensors.torch
import srsly
import torch
from thinc.api import Adam

from spacy_arboel.encoders.cross_scorer import CrossScorer, load_scorer
from spacy_arboel.encoders.inputs import InputBuilder
from spacy_arboel.encoders.loading import load_tokenizer
from spacy_arboel.encoders.reader_heads import ReaderHeads, base_reader_modules
from spacy_arboel.encoders.transformer import PooledEncoder, load_pooled_encoders
from spacy_arboel.ml.bi_encoder import SIDES, build_bi_encoder, torch_encoders
from spacy_arboel.ml.cross_encoder import build_cross_encoder, torch_scorer
from spacy_arboel.ml.reader_model import build_retriever_reader, torch_parts
from spacy_arboel.ml.torch_layers import LOADER_ATTR, initialize_with, is_loaded, torch_modules

# [CLS] the cough [SEP] / [CLS] fever [SEP] [PAD] (ids of tests/conftest.py's vocabulary)
IDS = np.array([[2, 5, 10, 3], [2, 11, 3, 0]], dtype="int64")
MASK = np.array([[1, 1, 1, 1], [1, 1, 1, 0]], dtype="int64")


def _built(tiny_encoder: str, share_weights: bool = False, pooling: str = "cls"):
    return build_bi_encoder(encoder_name=tiny_encoder, pooling=pooling,
                            share_weights=share_weights)


def _modules(tiny_encoder: str, share_weights: bool = False, pooling: str = "cls"):
    tokenizer = load_tokenizer(tiny_encoder)
    return load_pooled_encoders({side: tiny_encoder for side in SIDES}, pooling, share_weights,
                                len(tokenizer), InputBuilder(tokenizer).marker_ids)


def _perturb(module: torch.nn.Module, seed: int = 1) -> None:
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for param in module.parameters():
            param.add_(torch.randn(param.shape, generator=generator) * 0.1)


def _d_vectors(shape) -> np.ndarray:
    """A fixed random gradient (all ones would vanish through BERT's final LayerNorm)."""
    return np.random.default_rng(0).normal(size=shape).astype("float32")


def _encode(model, side: str = "mention") -> np.ndarray:
    return np.asarray(model.predict((side, IDS, MASK)))


@pytest.fixture
def initialised(tiny_encoder):
    model = _built(tiny_encoder)
    model.initialize()
    return model


def test_building_loads_no_weights(monkeypatch):
    """The architecture is built without touching any encoder, even one that does not
    exist: loading a saved pipeline must never load the base model."""
    def refuse(*args, **kwargs):
        raise AssertionError("an encoder was loaded while building the model")

    monkeypatch.setattr("spacy_arboel.ml.bi_encoder.load_tokenizer", refuse)
    monkeypatch.setattr("spacy_arboel.ml.bi_encoder.load_pooled_encoders", refuse)
    for share_weights in (False, True):
        model = build_bi_encoder(encoder_name="/no/such/encoder", share_weights=share_weights)
        assert not is_loaded(model)
        assert len(model.layers) == (1 if share_weights else 2)


def test_the_base_encoder_loads_in_initialize(tiny_encoder):
    model = _built(tiny_encoder)
    model.initialize()
    assert is_loaded(model)
    vectors = _encode(model)
    assert vectors.shape == (2, 32) and np.isfinite(vectors).all()
    # the base weights: what the encoders of the same name give outside thinc
    expected = _modules(tiny_encoder)["mention"].eval()
    with torch.no_grad():
        direct = expected(torch.from_numpy(IDS), torch.from_numpy(MASK)).numpy()
    np.testing.assert_allclose(vectors, direct, rtol=1e-5, atol=1e-6)


def test_initialise_with_a_missing_encoder_fails_in_init_not_before():
    model = build_bi_encoder(encoder_name="/no/such/encoder")
    with pytest.raises(OSError, match=r"\[E006\]"):
        model.initialize()
    assert not is_loaded(model)


def test_initialize_with_puts_the_given_modules_in(tiny_encoder):
    modules = _modules(tiny_encoder)
    _perturb(modules["entity"])
    model = _built(tiny_encoder)
    initialize_with(model, lambda: modules)
    encoders = torch_encoders(model)
    assert encoders["mention"] is modules["mention"] and encoders["entity"] is modules["entity"]
    assert torch_modules(model) == modules
    assert model.attrs[LOADER_ATTR] is None  # used once: a later initialize() is the base
    assert not np.allclose(_encode(model, "mention"), _encode(model, "entity"))
    model.initialize()
    np.testing.assert_allclose(_encode(model, "mention"), _encode(model, "entity"), rtol=1e-5)


def test_forward_before_initialisation_is_e057(tiny_encoder):
    model = _built(tiny_encoder)
    with pytest.raises(ValueError, match=r"\[E057\]"):
        model.predict(("mention", IDS, MASK))
    with pytest.raises(ValueError, match=r"\[E057\]"):
        model.begin_update(("entity", IDS, MASK))
    with pytest.raises(ValueError, match=r"\[E057\]"):
        torch_modules(model)


def test_shared_weights_are_one_module_for_both_sides(tiny_encoder):
    model = _built(tiny_encoder, share_weights=True)
    model.initialize()
    encoders = torch_encoders(model)
    assert encoders["mention"] is encoders["entity"]
    before = _encode(model, "mention")
    _perturb(encoders["entity"])
    after_mention, after_entity = _encode(model, "mention"), _encode(model, "entity")
    assert not np.allclose(before, after_mention)  # changing "the entity encoder" changed both
    np.testing.assert_allclose(after_mention, after_entity, rtol=1e-6)


def test_separate_weights_are_two_modules(initialised):
    encoders = torch_encoders(initialised)
    assert encoders["mention"] is not encoders["entity"]
    # both start from the base encoder
    np.testing.assert_allclose(_encode(initialised, "mention"), _encode(initialised, "entity"),
                               rtol=1e-5)
    before = _encode(initialised, "mention")
    _perturb(encoders["entity"])
    np.testing.assert_allclose(_encode(initialised, "mention"), before, rtol=1e-6)
    assert not np.allclose(_encode(initialised, "entity"), before)


def test_gradients_reach_the_torch_module_through_backprop(initialised):
    encoders = torch_encoders(initialised)
    vectors, backprop = initialised.begin_update(("mention", IDS, MASK))
    assert vectors.shape == (2, 32)
    backprop(initialised.ops.asarray2f(_d_vectors(vectors.shape)))
    grads = {name: p.grad for name, p in encoders["mention"].named_parameters()}
    assert grads["transformer.embeddings.word_embeddings.weight"].any()
    # every parameter that the [CLS] vector depends on (BERT's pooler is not used)
    assert all(g is not None and g.any() for name, g in grads.items()
               if "pooler" not in name)
    # only the side that ran has gradients
    assert all(p.grad is None or not p.grad.any() for p in encoders["entity"].parameters())
    before = {k: v.clone() for k, v in encoders["mention"].state_dict().items()}
    initialised.finish_update(Adam(0.01))
    after = encoders["mention"].state_dict()
    assert any(not torch.equal(before[k], after[k]) for k in before)
    assert all(p.grad is None or not p.grad.any() for p in encoders["mention"].parameters())


def test_shared_weights_collect_the_gradients_of_both_sides(tiny_encoder):
    model = _built(tiny_encoder, share_weights=True)
    model.initialize()
    module = torch_encoders(model)["mention"]
    for side in SIDES:
        vectors, backprop = model.begin_update((side, IDS, MASK))
        backprop(model.ops.asarray2f(_d_vectors(vectors.shape)))
    one_side = _built(tiny_encoder, share_weights=True)
    one_side.initialize()
    vectors, backprop = one_side.begin_update(("mention", IDS, MASK))
    backprop(one_side.ops.asarray2f(_d_vectors(vectors.shape)))
    other = torch_encoders(one_side)["mention"]
    name, param = next(iter(module.named_parameters()))
    twice = dict(other.named_parameters())[name].grad * 2
    torch.testing.assert_close(param.grad, twice, rtol=1e-4, atol=1e-6)


def test_bytes_round_trip_restores_identical_outputs(tiny_encoder, initialised):
    for module in torch_encoders(initialised).values():
        _perturb(module)  # not the base weights, so that loading has to restore them
    data = initialised.to_bytes()
    loaded = _built(tiny_encoder)
    loaded.initialize()
    assert not np.allclose(_encode(loaded), _encode(initialised))
    loaded.from_bytes(data)
    for side in SIDES:
        np.testing.assert_array_equal(_encode(loaded, side), _encode(initialised, side))
    for side, module in torch_encoders(loaded).items():
        expected = torch_encoders(initialised)[side].state_dict()
        for key, value in module.state_dict().items():
            assert torch.equal(value, expected[key]), key


def test_bytes_hold_safetensors_not_pickle(initialised, monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("pickle was used")

    monkeypatch.setattr(torch, "save", refuse)
    monkeypatch.setattr(pickle, "dumps", refuse)
    monkeypatch.setattr(pickle, "dump", refuse)
    data = initialised.to_bytes()
    shims = [shim for node in srsly.msgpack_loads(data)["shims"] for shim in node]
    assert len(shims) == 2  # one per side
    for shim, side in zip(shims, SIDES, strict=True):
        state = srsly.msgpack_loads(shim)["state"]
        assert not state.startswith((b"PK", b"\x80"))  # neither torch.save's zip nor a pickle
        tensors = safetensors.torch.load(state)
        expected = torch_encoders(initialised)[side].state_dict()
        assert tensors.keys() == expected.keys()
        assert all(torch.equal(tensors[k], expected[k]) for k in tensors)


def test_from_bytes_into_an_uninitialised_model_is_e057(tiny_encoder, initialised):
    data = initialised.to_bytes()
    with pytest.raises(ValueError, match=r"\[E057\]"):
        _built(tiny_encoder).from_bytes(data)


# --- ml.cross_encoder ----------------------------------------------------------------------

# [CLS] the cough [SEP] fever [SEP] / [CLS] fever [SEP] aspirin [SEP] [PAD]
PAIR_IDS = np.array([[2, 5, 10, 3, 11, 3], [2, 11, 3, 12, 3, 0]], dtype="int64")
PAIR_MASK = np.array([[1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 1, 0]], dtype="int64")
PAIR_TYPES = np.array([[0, 0, 0, 0, 1, 1], [0, 0, 0, 1, 1, 0]], dtype="int64")
PAIRS = (PAIR_IDS, PAIR_MASK, PAIR_TYPES)


def _pair_scores(model) -> np.ndarray:
    return np.asarray(model.predict(PAIRS))


def _direct_scores(scorer: torch.nn.Module) -> np.ndarray:
    with torch.no_grad():
        return scorer.eval()(*(torch.from_numpy(a) for a in PAIRS)).numpy()


def _base_scorer(tiny_encoder: str) -> CrossScorer:
    return load_scorer(tiny_encoder, len(load_tokenizer(tiny_encoder)))


def _same_state(found: torch.nn.Module, expected: torch.nn.Module) -> bool:
    found, expected = found.state_dict(), expected.state_dict()
    return found.keys() == expected.keys() and all(torch.equal(found[k], expected[k])
                                                   for k in found)


def test_cross_encoder_building_loads_no_weights(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("an encoder was loaded while building the model")

    monkeypatch.setattr("spacy_arboel.ml.cross_encoder.load_tokenizer", refuse)
    monkeypatch.setattr("spacy_arboel.ml.cross_encoder.load_scorer", refuse)
    model = build_cross_encoder(encoder_name="/no/such/encoder")
    assert not is_loaded(model) and model.attrs["layer_names"] == ["scorer"]
    with pytest.raises(ValueError, match=r"\[E057\]"):
        model.predict(PAIRS)
    with pytest.raises(ValueError, match=r"\[E057\]"):
        torch_scorer(model)


def test_cross_encoder_initialize_loads_the_base_and_scores_each_pair(tiny_encoder):
    model = build_cross_encoder(encoder_name=tiny_encoder)
    model.initialize()
    assert is_loaded(model)
    scorer = torch_scorer(model)
    assert isinstance(scorer, CrossScorer)
    scores = _pair_scores(model)
    assert scores.shape == (2,) and np.isfinite(scores).all()
    # the base transformer, as loaded outside thinc; the head W is new (random), so the
    # direct scorer takes the model's
    direct = _base_scorer(tiny_encoder)
    assert _same_state(scorer.transformer, direct.transformer)
    direct.score.load_state_dict(scorer.score.state_dict())
    np.testing.assert_allclose(scores, _direct_scores(direct), rtol=1e-5, atol=1e-6)
    assert scores[0] != pytest.approx(scores[1])  # each pair has its own score


def test_cross_encoder_initialize_with_installs_the_given_scorer(tiny_encoder):
    given = _base_scorer(tiny_encoder)
    _perturb(given)
    model = build_cross_encoder(encoder_name=tiny_encoder)
    initialize_with(model, lambda: {"scorer": given})
    assert torch_scorer(model) is given
    assert model.attrs[LOADER_ATTR] is None
    np.testing.assert_allclose(_pair_scores(model), _direct_scores(given), rtol=1e-5, atol=1e-6)
    model.initialize()  # the loader was used once: this is the base again
    assert torch_scorer(model) is not given
    assert not _same_state(torch_scorer(model).transformer, given.transformer)


def test_cross_encoder_bytes_round_trip(tiny_encoder):
    model = build_cross_encoder(encoder_name=tiny_encoder)
    model.initialize()
    _perturb(torch_scorer(model))
    data = model.to_bytes()
    loaded = build_cross_encoder(encoder_name=tiny_encoder)
    loaded.initialize()
    assert not np.allclose(_pair_scores(loaded), _pair_scores(model))
    loaded.from_bytes(data)
    np.testing.assert_array_equal(_pair_scores(loaded), _pair_scores(model))
    assert _same_state(torch_scorer(loaded), torch_scorer(model))
    with pytest.raises(ValueError, match=r"\[E057\]"):
        build_cross_encoder(encoder_name=tiny_encoder).from_bytes(data)


# --- ml.reader_model -----------------------------------------------------------------------


def _reader(tiny_encoder: str, **settings):
    return build_retriever_reader(encoder_name=tiny_encoder, **settings)


def _base_parts(tiny_encoder: str, share_weights: bool = True, entity_pooling: str = "mean"):
    return base_reader_modules(tiny_encoder, len(load_tokenizer(tiny_encoder)),
                               share_weights=share_weights, entity_pooling=entity_pooling)


@pytest.mark.parametrize("setting,value", [("entity_pooling", "max"),
                                           ("query_pooling", "mention"),
                                           ("query_pooling", "CLS")])
def test_reader_bad_pooling_names_are_e007(setting, value):
    with pytest.raises(ValueError, match=rf"\[E007\].*{setting} '{value}'"):
        build_retriever_reader(encoder_name="/no/such/encoder", **{setting: value})


def test_reader_entity_pooling_mention_is_refused_at_build():
    # entity rows carry no mention markers: "mention" pooling would fail only in init (E109)
    with pytest.raises(ValueError, match="E007"):
        build_retriever_reader(entity_pooling="mention")


def test_reader_building_loads_no_weights(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("an encoder was loaded while building the model")

    monkeypatch.setattr("spacy_arboel.encoders.loading.load_tokenizer", refuse)
    monkeypatch.setattr("spacy_arboel.ml.reader_model.base_reader_modules", refuse)
    model = build_retriever_reader(encoder_name="/no/such/encoder")
    assert not is_loaded(model) and len(model.layers) == 2
    with pytest.raises(ValueError, match=r"\[E057\]"):
        torch_parts(model)
    with pytest.raises(ValueError, match=r"\[E057\]"):
        model.predict(("passage", IDS, MASK))


def test_span_reader_building_loads_no_weights(monkeypatch):
    from spacy_arboel.ml.span_reader_model import build_span_reader

    def refuse(*args, **kwargs):
        raise AssertionError("an encoder was loaded while building the model")

    monkeypatch.setattr("spacy_arboel.encoders.loading.load_tokenizer", refuse)
    monkeypatch.setattr("spacy_arboel.ml.span_reader_model.base_span_reader_modules", refuse)
    for cross, layers in ((0, 2), (3, 3)):
        model = build_span_reader(encoder_name="/no/such/encoder", cross_reread=cross)
        assert not is_loaded(model) and len(model.layers) == layers
        with pytest.raises(ValueError, match=r"\[E057\]"):
            model.predict(("spans", IDS, MASK))


def test_span_reader_initialize_loads_its_modules(tiny_encoder):
    from spacy_arboel.ml.span_reader_model import build_span_reader
    from spacy_arboel.ml.torch_layers import torch_modules

    model = build_span_reader(encoder_name=tiny_encoder, cross_reread=2)
    model.initialize()
    modules = torch_modules(model)
    assert set(modules) == {"spans", "entity", "cross"}
    hidden, start, end, inside = model.predict(("spans", IDS, MASK))
    assert hidden.shape[:2] == start.shape == end.shape == inside.shape == IDS.shape
    without_cross = build_span_reader(encoder_name=tiny_encoder)
    without_cross.initialize()
    with pytest.raises(ValueError, match="E027"):
        without_cross.predict(("read", IDS, MASK, MASK))


def test_reader_initialize_loads_heads_and_entity(tiny_encoder):
    model = _reader(tiny_encoder)
    model.initialize()
    assert is_loaded(model)
    parts = torch_parts(model)
    assert set(parts) == {"heads", "entity"}
    assert isinstance(parts["heads"], ReaderHeads) and isinstance(parts["entity"], PooledEncoder)
    assert [layer.shims[0].module for layer in model.layers] == [parts["heads"],
                                                                   parts["entity"]]
    assert parts["heads"].reader is None  # share_weights: the reader is the passage encoder
    assert parts["entity"].pooling == "mean"
    assert not any(p.requires_grad for p in parts["entity"].parameters())  # frozen
    base = _base_parts(tiny_encoder)
    assert _same_state(parts["heads"].passage, base["heads"].passage)
    assert _same_state(parts["entity"], base["entity"])


def test_reader_separate_weights_give_a_reader_of_its_own(tiny_encoder):
    model = _reader(tiny_encoder, share_weights=False)
    model.initialize()
    heads = torch_parts(model)["heads"]
    assert heads.reader is not None and heads.reader is not heads.passage
    assert _same_state(heads.reader, heads.passage)  # both start from the base
    before = np.asarray(model.predict(("passage", IDS, MASK)))
    _perturb(heads.reader)
    np.testing.assert_array_equal(np.asarray(model.predict(("passage", IDS, MASK))), before)
    shared = _reader(tiny_encoder, share_weights=True)
    shared.initialize()
    _perturb(torch_parts(shared)["heads"].passage)
    assert not np.allclose(np.asarray(shared.predict(("passage", IDS, MASK))), before)


def test_reader_forward_matches_the_torch_modules(tiny_encoder):
    model = _reader(tiny_encoder)
    model.initialize()
    hidden = np.asarray(model.predict(("passage", IDS, MASK)))
    assert hidden.shape == (2, 4, 32)  # (B, L, H)
    base = _base_parts(tiny_encoder)
    with torch.no_grad():
        direct = base["heads"].eval()("passage", torch.from_numpy(IDS),
                                      torch.from_numpy(MASK)).numpy()
        entity = base["entity"].eval()(torch.from_numpy(IDS), torch.from_numpy(MASK)).numpy()
    np.testing.assert_allclose(hidden, direct, rtol=1e-5, atol=1e-6)
    # "entity" goes to the entity layer: one mean-pooled vector per row
    vectors = np.asarray(model.predict(("entity", IDS, MASK)))
    assert vectors.shape == (2, 32)
    np.testing.assert_allclose(vectors, entity, rtol=1e-5, atol=1e-6)
    assert not np.allclose(vectors, hidden[:, 0])
