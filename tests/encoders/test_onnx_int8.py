"""quantize = true's engine: int8 ONNX Runtime copies of the transformers inside a module
(``encoders.onnx_int8``, ``weights.quantized_copy``)."""

import collections
import copy
import multiprocessing
import pickle
import sys

import numpy as np
import pytest
import torch
from transformers import PreTrainedModel

from spacy_arboel.encoders import onnx_int8
from spacy_arboel.encoders.cross_scorer import CrossScorer
from spacy_arboel.encoders.onnx_int8 import OnnxInt8Transformer
from spacy_arboel.encoders.reader_heads import ReaderHeads
from spacy_arboel.encoders.span_heads import MentionHeads
from spacy_arboel.encoders.transformer import PooledEncoder
from spacy_arboel.encoders.weights import forward_without_grad, module_device, quantized_copy

VOCAB = 64


def _bert():
    """A tiny random BERT whose layers matter: with BERT's default initialisation (0.02) a
    2-layer, 32-wide model hardly changes its embeddings, and any copy would look close."""
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    return BertModel(BertConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2,
                                num_attention_heads=2, intermediate_size=64,
                                max_position_embeddings=64, initializer_range=0.2))


def _batch(rows: int = 16, length: int = 12, seed: int = 1):
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(1, VOCAB, (rows, length), generator=generator)
    mask = torch.ones_like(ids)
    mask[::2, length * 2 // 3:] = 0
    return ids, mask


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(-1) / np.linalg.norm(a, axis=-1) / np.linalg.norm(b, axis=-1)


def _run(module, *args):
    with torch.no_grad():
        output = module(*args)
    if isinstance(output, tuple):
        return tuple(o.numpy() for o in output)
    return output.numpy()


def _op_counts(module: OnnxInt8Transformer) -> dict[str, int]:
    """How many nodes of each kind the int8 model has."""
    import onnx

    model = onnx.load_model_from_string(module.model)
    return collections.Counter(node.op_type for node in model.graph.node)


@pytest.fixture(scope="module")
def encoder():
    return PooledEncoder(_bert(), "mean").eval()


@pytest.fixture(scope="module")
def int8_encoder(encoder):
    return quantized_copy(encoder)


def test_int8_vectors_stay_close_to_float32(encoder, int8_encoder):
    assert isinstance(int8_encoder.transformer, OnnxInt8Transformer)
    assert not list(int8_encoder.parameters())
    assert module_device(int8_encoder) == torch.device("cpu")
    kinds = _op_counts(int8_encoder.transformer)
    assert kinds["MatMulInteger"] == 2 * 6  # Q, K, V, attention out, FFN in and out a layer
    ids, mask = _batch()
    exact, fast = _run(encoder, ids, mask), _run(int8_encoder, ids, mask)
    assert fast.dtype == np.float32 and fast.shape == exact.shape
    assert not np.allclose(exact, fast, atol=1e-3)  # int8 indeed
    # each vector within cosine 0.999 of float32's (0.9997 at worst here), where the float32
    # vectors of the batch's rows are at 0.88 of each other on average and a copy that
    # ignored the mask would be below 0.99 on the padded rows
    assert _cosines(exact, fast).min() > 0.999
    pairs = _cosines(exact[:, None], exact[None])[np.triu_indices(len(exact), 1)]
    assert pairs.mean() < 0.95
    unmasked = _run(encoder, ids, torch.ones_like(ids))
    assert _cosines(exact[::2], unmasked[::2]).min() < 0.99


@pytest.mark.parametrize("shape", [(1, 2), (1, 5), (3, 40), (130, 7)])
def test_any_batch_size_and_length(encoder, int8_encoder, shape):
    ids, mask = _batch(*shape, seed=sum(shape))
    exact, fast = _run(encoder, ids, mask), _run(int8_encoder, ids, mask)
    assert fast.shape == exact.shape
    assert _cosines(exact, fast).min() > 0.999


def test_the_hidden_states_are_the_transformers(encoder, int8_encoder):
    """Called like the transformer: ``[0]`` is the last hidden state, a missing mask all
    ones and missing token types all zeros."""
    ids, mask = _batch(4, 9)
    with torch.no_grad():
        exact = encoder.transformer(input_ids=ids, attention_mask=mask)[0].numpy()
        fast = int8_encoder.transformer(input_ids=ids, attention_mask=mask)
        plain = int8_encoder.transformer(input_ids=ids)[0].numpy()
        full = int8_encoder.transformer(input_ids=ids, attention_mask=torch.ones_like(ids),
                                        token_type_ids=torch.zeros_like(ids))[0].numpy()
    assert isinstance(fast, tuple) and isinstance(fast[0], torch.Tensor)
    assert fast[0].dtype == torch.float32
    kept = mask.bool().numpy()
    assert _cosines(exact[kept], fast[0].numpy()[kept]).min() > 0.999
    np.testing.assert_array_equal(plain, full)


def test_the_module_passed_in_is_untouched_and_keeps_training(encoder, int8_encoder):
    module = PooledEncoder(_bert(), "mean").train()
    before = {k: v.clone() for k, v in module.state_dict().items()}
    copied = quantized_copy(module)
    assert module.training and not copied.training
    assert isinstance(module.transformer, PreTrainedModel)
    assert all(torch.equal(before[k], v) for k, v in module.state_dict().items())
    assert all(p.requires_grad for p in module.parameters())
    ids, mask = _batch(4, 9)
    frozen = _run(copied, ids, mask)
    optimizer = torch.optim.SGD(module.parameters(), lr=0.5)
    module(ids, mask).pow(2).sum().backward()
    optimizer.step()
    assert not torch.equal(before["transformer.encoder.layer.0.output.dense.weight"],
                           module.state_dict()["transformer.encoder.layer.0.output.dense.weight"])
    np.testing.assert_array_equal(_run(copied, ids, mask), frozen)  # the copy is its own


def test_the_cross_scorer_reads_token_types():
    scorer = CrossScorer(_bert()).eval()
    fast = quantized_copy(scorer)
    assert fast.transformer.inputs == onnx_int8.INPUTS
    assert isinstance(fast.score, torch.nn.Linear)  # the head stays float32 torch
    torch.testing.assert_close(fast.score.weight, scorer.score.weight)
    ids, mask = _batch()
    types = torch.zeros_like(ids)
    types[:, 6:] = 1
    exact, scores = _run(scorer, ids, mask, types), _run(fast, ids, mask, types)
    untyped = _run(scorer, ids, mask, torch.zeros_like(ids))
    spread = exact.max() - exact.min()
    assert np.abs(exact - untyped).max() > 0.2 * spread  # the token types matter
    assert np.abs(exact - scores).max() < 0.05 * spread
    assert np.corrcoef(exact, scores)[0, 1] > 0.99


def test_reader_modules_run_their_ops_through_one_copy_of_a_shared_transformer():
    transformer = _bert()
    heads = ReaderHeads(transformer, transformer).eval()  # one transformer, two names
    fast = quantized_copy(heads)
    assert isinstance(fast.passage, OnnxInt8Transformer) and fast.reader is fast.passage
    ids, mask = _batch()
    types = (torch.arange(ids.shape[1]) >= 6).long().expand_as(ids)
    passage = forward_without_grad(heads, (ids, mask), prefix=("passage",))
    fast_passage = forward_without_grad(fast, (ids, mask), prefix=("passage",))
    kept = mask.bool().numpy()
    assert _cosines(passage[kept], fast_passage[kept]).min() > 0.999
    read = forward_without_grad(heads, (ids, mask, types), prefix=("read",))
    fast_read = forward_without_grad(fast, (ids, mask, types), prefix=("read",))
    for exact, quick in zip(read, fast_read, strict=True):
        assert exact.shape == quick.shape
        assert np.abs(exact - quick).max() < 0.05 * (exact.max() - exact.min())
    spans = MentionHeads(_bert()).eval()
    hidden, *logits = forward_without_grad(quantized_copy(spans), (ids, mask))
    exact_hidden, *exact_logits = forward_without_grad(spans, (ids, mask))
    assert _cosines(exact_hidden[kept], hidden[kept]).min() > 0.999
    assert all(np.abs(a - b).max() < 0.05 * (a.max() - a.min())
               for a, b in zip(exact_logits, logits, strict=True))


def test_copies_and_pickles_keep_the_model_not_the_session(int8_encoder):
    ids, mask = _batch(3, 5)
    expected = _run(int8_encoder, ids, mask)
    for again in (copy.deepcopy(int8_encoder), pickle.loads(pickle.dumps(int8_encoder))):
        assert again.transformer._session is None
        np.testing.assert_array_equal(_run(again, ids, mask), expected)


_FORKED: dict = {}


def _use(_: int) -> bool:
    torch.set_num_threads(1)
    ids, mask, expected = _FORKED["batch"]
    return bool(np.array_equal(_run(_FORKED["module"], ids, mask), expected))


def _use_then_drop(results) -> None:
    results.put(_use(0))
    _FORKED.clear()  # freeing the parent's session here must not hang


@pytest.mark.skipif(sys.platform != "linux", reason="fork")
def test_forked_workers_run_their_own_sessions(int8_encoder):
    """``nlp.pipe(n_process > 1)`` forks: the parent's ONNX Runtime threads are not in a
    child, which makes its own session and never frees the parent's (freeing it there hung
    in some runs: after a pool of workers had forked, in every run here)."""
    ids, mask = _batch(3, 5)
    threads = torch.get_num_threads()
    module = copy.deepcopy(int8_encoder)
    try:
        torch.set_num_threads(2)  # a session with a thread pool (one thread has none)
        _FORKED.update(module=module, batch=(ids, mask, _run(module, ids, mask)))
    finally:
        torch.set_num_threads(threads)
    context = multiprocessing.get_context("fork")
    try:
        with context.Pool(2) as pool:
            assert pool.map_async(_use, range(4)).get(timeout=60) == [True] * 4
        results = context.Queue()
        worker = context.Process(target=_use_then_drop, args=(results,))
        worker.start()
        worker.join(60)
        if worker.is_alive():
            worker.kill()
        assert worker.exitcode == 0 and results.get(timeout=5)
    finally:
        _FORKED.clear()


def test_a_module_without_a_transformer_is_refused():
    with pytest.raises(ValueError, match=r"\[E271\] .*Linear"):
        quantized_copy(torch.nn.Linear(4, 2))


def test_without_onnx_runtime_quantize_names_the_fast_extra(encoder, monkeypatch):
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # import onnxruntime fails
    with pytest.raises(ImportError, match=r'\[E270\] .*onnxruntime.*pip install onnxruntime'):
        quantized_copy(encoder)


def test_an_export_failure_is_named(encoder, monkeypatch):
    def fail(*args, **kwargs):
        raise RuntimeError("unsupported operator")

    monkeypatch.setattr(torch.onnx, "export", fail)
    with pytest.raises(RuntimeError, match=r"\[E272\] .*BertModel.*unsupported operator"):
        quantized_copy(encoder)
