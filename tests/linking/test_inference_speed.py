"""What makes linking and the KB's set-up faster without changing links (issue 43):
bfloat16 copies of the encoders on a CPU with native bfloat16, repeated mentions encoded
once, the KB's rows tokenised only when embedded (no spaCy)."""

import numpy as np
import pytest
import torch

from spacy_arboel.encoders import weights
from spacy_arboel.encoders.inputs import InputBuilder, MentionSpan, wordpiece_ids
from spacy_arboel.encoders.loading import load_tokenizer
from spacy_arboel.encoders.onnx_int8 import OnnxInt8Transformer
from spacy_arboel.encoders.transformer import bf16_copy, load_pooled_encoders
from spacy_arboel.kb import KnowledgeBase
from spacy_arboel.kb.entity import Entity
from spacy_arboel.linking import DenseRetriever, RetrieverSettings, dense_retriever


@pytest.fixture
def native_bf16(monkeypatch):
    """A CPU with native bfloat16 that pays, wherever the tests run (elsewhere it is
    emulated, or slower than float32)."""
    monkeypatch.setattr(weights, "cpu_has_native_bf16", lambda: True)
    monkeypatch.setattr(weights, "cpu_bf16_pays", lambda: True)


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)


def _retriever(encoder, kb, **settings) -> DenseRetriever:
    retriever = DenseRetriever.from_pretrained(kb, encoder, RetrieverSettings(**settings))
    retriever.entities.refresh()
    return retriever


def test_bf16_runs_where_asked_on_a_cpu_that_has_it(monkeypatch):
    module = torch.nn.Linear(2, 2)
    monkeypatch.setattr(weights, "cpu_has_native_bf16", lambda: False)
    assert not weights.runs_bf16(module, True)  # emulated: slower than float32
    monkeypatch.setattr(weights, "cpu_has_native_bf16", lambda: True)
    monkeypatch.setattr(weights, "cpu_bf16_pays", lambda: True)
    assert weights.runs_bf16(module, True) and not weights.runs_bf16(module, False)
    assert not weights.runs_bf16(torch.nn.Linear(2, 2, device="meta"), True)  # not a CPU
    monkeypatch.setattr(weights, "cpu_bf16_pays", lambda: False)  # native, but slower here
    assert not weights.runs_bf16(module, True)


def test_bf16_pays_with_amx_or_on_an_amd_cpu(monkeypatch):
    """AVX512-BF16 is not enough: an Intel Xeon without AMX runs bfloat16 slower."""
    for amx, vendor, pays in ((True, "GenuineIntel", True), (False, "GenuineIntel", False),
                              (False, "AuthenticAMD", True), (False, None, False)):
        monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda amx=amx: amx,
                            raising=False)
        monkeypatch.setattr(weights, "cpu_vendor", lambda vendor=vendor: vendor)
        weights.cpu_bf16_pays.cache_clear()
        try:
            assert weights.cpu_bf16_pays() is pays, (amx, vendor)
        finally:
            weights.cpu_bf16_pays.cache_clear()


def test_a_bf16_copy_embeds_as_float32_does(tiny_encoder):
    tokenizer = load_tokenizer(tiny_encoder)
    builder = InputBuilder(tokenizer, inputs="names")
    encoder = load_pooled_encoders({"mention": tiny_encoder}, "mention", True, len(tokenizer),
                                   builder.marker_ids)["mention"].eval()
    torch.manual_seed(5)
    expected = torch.rand(3)
    torch.manual_seed(5)
    half = bf16_copy(encoder)
    assert torch.equal(torch.rand(3), expected)  # the caller's random state is left alone
    assert half.transformer.dtype is torch.bfloat16
    assert half.transformer.config._attn_implementation == "eager"
    assert encoder.transformer.dtype is torch.float32  # the float module trains and saves
    ids, mask = builder.pad(builder.entity_ids(["aspirin", "heart failure", "pain"], [""] * 3))
    with torch.no_grad():
        full = encoder(torch.as_tensor(ids), torch.as_tensor(mask)).numpy()
        fast = half(torch.as_tensor(ids), torch.as_tensor(mask)).float().numpy()
    assert not np.array_equal(full, fast)
    assert _cosines(full, fast).min() > 0.999


def test_the_kb_is_embedded_by_a_copy_made_again_when_the_weights_change(
        native_bf16, tiny_encoder, toy_kb_path, monkeypatch):
    kb = KnowledgeBase.from_jsonl(toy_kb_path)
    retriever = _retriever(tiny_encoder, kb, share_weights=True)
    entities, encoder = retriever.entities, retriever.encoders["mention"]
    half = entities.inference_module("mention", encoder, retriever.encoders)
    assert half is not encoder and half.transformer.dtype is torch.bfloat16
    # one copy of the shared weights, kept while they do not change
    assert entities.inference_module("entity", entities.encoder) is half
    full = _retriever(tiny_encoder, kb, share_weights=True, cpu_bf16=False)
    assert full.entities.inference_module("entity", full.entities.encoder) is \
        full.entities.encoder
    assert not np.array_equal(retriever.index.embeddings, full.index.embeddings)
    assert _cosines(retriever.index.embeddings, full.index.embeddings).min() > 0.999
    before = retriever.index.embeddings.copy()
    with torch.no_grad():  # a training step
        for parameter in encoder.parameters():
            parameter.mul_(1.5)
    entities.changed()
    assert entities.inference_module("entity", entities.encoder) is not half
    entities.refresh()
    assert not np.allclose(retriever.index.embeddings, before, atol=1e-3)
    # under quantize the mentions are encoded by the int8 copy, not the bfloat16 one
    retriever.use_settings(RetrieverSettings(share_weights=True, quantize=True))
    used = []
    monkeypatch.setattr(dense_retriever, "forward_without_grad",
                        lambda module, *a, **k: used.append(module) or np.zeros((1, 4)))
    retriever.forward("mention", np.zeros((1, 2), "int64"), np.ones((1, 2), "int64"))
    assert used == [retriever.quantized_encoder("mention")]
    assert any(isinstance(m, OnnxInt8Transformer) for m in used[0].modules())


@pytest.mark.parametrize("lexical_weight", [None, 0.5])
def test_repeated_mentions_are_encoded_once_and_link_as_alone(
        tiny_encoder, toy_kb_path, monkeypatch, lexical_weight):
    retriever = _retriever(tiny_encoder, KnowledgeBase.from_jsonl(toy_kb_path),
                           share_weights=True, cpu_bf16=False)
    texts = ["Aspirin and aspirin, then Aspirin.", "Aspirin (ASA) and ASA; fever."]
    spans = [MentionSpan(0, 0, 7), MentionSpan(0, 12, 19), MentionSpan(0, 26, 33),
             MentionSpan(1, 0, 7), MentionSpan(1, 9, 12), MentionSpan(1, 18, 21),
             MentionSpan(1, 23, 28)]
    encoded = []
    encode = retriever.encode
    monkeypatch.setattr(retriever, "encode",
                        lambda side, sequences, *a, **k: encoded.append(len(sequences))
                        or encode(side, sequences, *a, **k))
    scores, positions, vectors = retriever.link(texts, spans, k=3,
                                                lexical_weight=lexical_weight)
    # "Aspirin" three times, "aspirin" (another text: the lexical score reads it), "ASA"
    # twice (expanded to its long form in that document), "fever"
    assert encoded == [4]
    for i, span in enumerate(spans):
        alone = retriever.link(texts, [span], k=3, lexical_weight=lexical_weight)
        assert positions[i].tolist() == alone[1][0].tolist()
        np.testing.assert_allclose(scores[i], alone[0][0], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(vectors[i], alone[2][0], rtol=1e-5, atol=1e-6)


def test_wordpiece_ids_are_the_tokenizers_own(tiny_encoder):
    tokenizer = load_tokenizer(tiny_encoder)
    texts = ["Aspirin-induced cough", "naïve  Ünïcode\u200b text", "", "   ", "x y " * 100]
    expected = tokenizer(texts, add_special_tokens=False)["input_ids"]
    # as a sentence encoder's tokenizer.json may hold them: neither may cut or pad
    tokenizer.backend_tokenizer.enable_truncation(4)
    tokenizer.backend_tokenizer.enable_padding(length=16)
    assert wordpiece_ids(tokenizer, texts) == expected


def test_rows_left_out_by_their_words_are_never_tokenised(tiny_encoder):
    kb = KnowledgeBase([
        Entity("D1", "Anemia, Hemolytic",
               aliases=("hemolytic anemia", "Anemias, Hemolytic", "haemolytic anaemia")),
        Entity("D2", "Fever", aliases=("fevers", "pyrexia"))])
    retriever = _retriever(tiny_encoder, kb, cpu_bf16=False)
    tokenised = [ids is not None for ids in retriever.entities._row_inputs]
    # the plural of the name's words, and a plural alias, are not embedded
    assert tokenised == [True, True, False, True, True, False, True]
    assert set(retriever.index.rows.tolist()) <= {0, 1, 3, 4, 6}
    assert retriever.entities.inputs_of([2])[0][0] == retriever.builder.open_ids[0]
