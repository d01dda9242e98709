"""The spaCy-free retriever-reader: reading raw text, a training step, saving and loading."""

import numpy as np
import pytest
import torch

from spacy_arboel.encoders.inputs import MentionSpan
from spacy_arboel.kb import KnowledgeBase
from spacy_arboel.linking import ReaderSettings, RetrieverReader
from spacy_arboel.linking.candidate_rows import union_rows, with_gold

TEXTS = ["Aspirin induced cough in patients.", "Fever was caused by aspirin."]
SPANS = [MentionSpan(0, 0, 7), MentionSpan(0, 16, 21), MentionSpan(1, 0, 5),
         MentionSpan(1, 20, 27)]
GOLD = [["D001241"], ["D003371"], ["D005334"], ["D001241"]]


def _reader(tiny_encoder, toy_kb_path, **settings) -> RetrieverReader:
    torch.manual_seed(0)
    reader = RetrieverReader.from_pretrained(
        KnowledgeBase.from_jsonl(toy_kb_path), tiny_encoder,
        ReaderSettings(top_k=3, train_top_k=3, threshold=0.0, **settings))
    reader.entities.ensure_index()
    return reader


def test_reads_raw_text_into_scored_spans(tiny_encoder, toy_kb_path):
    reader = _reader(tiny_encoder, toy_kb_path)
    found, links = reader.scored_spans(TEXTS + ["   "])
    assert found[0] and found[1] and found[2] == []  # threshold 0: a random reader finds spans
    for text, spans in zip(TEXTS, found[:2], strict=True):
        for span in spans:
            assert 0 <= span.start_char < span.end_char <= len(text)
            assert span.kb_id in reader.kb and 0.0 <= span.score <= 1.0
    for _, _, candidates in links[0].passages:
        assert len(candidates) == 3 and abs(sum(p for _, p in candidates) - 1) < 1e-4
    retrieved = reader.retrieve(TEXTS, k=2)
    assert [len(p) for p in retrieved] == [len(link.passages) for link in links[:2]]
    assert all(len(ids) == 2 for passages in retrieved for _, _, ids in passages)


def test_a_training_step_lowers_the_loss_of_each_phase(tiny_encoder, toy_kb_path):
    reader = _reader(tiny_encoder, toy_kb_path, warmup_retriever_steps=4,
                     warmup_reader_steps=4)
    heads = reader.modules["heads"]
    optimizer = torch.optim.Adam([p for p in heads.parameters() if p.requires_grad], lr=1e-2)
    losses: dict[str, list[float]] = {}
    for _ in range(12):
        phase = reader.phase()
        optimizer.zero_grad()
        losses.setdefault(phase, []).append(reader.step(TEXTS, SPANS, GOLD))
        optimizer.step()
    assert list(losses) == ["retriever", "reader", "joint"]
    assert losses["retriever"][-1] < losses["retriever"][0]
    assert losses["reader"][-1] < losses["reader"][0]
    assert reader.updates == 12
    # the entity encoder stays fixed: the index is built once
    assert all(p.grad is None for p in reader.modules["entity"].parameters())


def test_saves_and_loads_the_same_reader(tiny_encoder, toy_kb_path, tmp_path):
    reader = _reader(tiny_encoder, toy_kb_path)
    reader.learn_labels([(["D001241"], "Drug")])
    assert reader.entity_labels == {}  # a KB type wins over a learnt label
    reader.entity_labels = {"D001241": "Drug"}
    written = reader.save(tmp_path / "rr")
    assert sorted(written) == sorted(["kb.jsonl", "tokenizer", "passage_encoder",
                                      "entity_encoder", "heads.safetensors", "index",
                                      "retriever_reader.json"])
    loaded = RetrieverReader.load(tmp_path / "rr", batch_size=1)
    assert loaded.settings.batch_size == 1 and loaded.settings.top_k == 3
    assert loaded.entity_labels == {"D001241": "Drug"}
    found, _ = reader.scored_spans(TEXTS)
    again, _ = loaded.scored_spans(TEXTS)
    assert [[(s.start_char, s.end_char, s.kb_id) for s in d] for d in again] == \
        [[(s.start_char, s.end_char, s.kb_id) for s in d] for d in found]
    np.testing.assert_allclose([s.score for d in again for s in d],
                               [s.score for d in found for s in d], rtol=1e-4)
    (tmp_path / "rr" / "kb.jsonl").write_text('{"id": "X1", "name": "Other"}\n')
    with pytest.raises(ValueError, match="E012"):
        RetrieverReader.load(tmp_path / "rr")  # an index built for another KB


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="E020"):
        ReaderSettings(mode="pipeline", share_weights=True)
    with pytest.raises(ValueError, match="E011"):
        ReaderSettings(threshold=1.0)
    with pytest.raises(ValueError, match="E007"):
        ReaderSettings(query_pooling="max")


def test_candidate_rows_with_gold_and_union():
    candidates = np.array([[4, 3, 2], [1, -1, -1]])
    gold = [{0: [(0, 1)]}, {}]
    # the reader's K stays fixed: the gold entity replaces the lowest-ranked other
    assert with_gold(candidates, gold).tolist() == [[0, 4, 3], [1, -1, -1]]
    assert with_gold(candidates, gold, append=True).tolist() == [[4, 3, 2, 0], [1, -1, -1, -1]]
    union = union_rows(candidates, np.array([[2, 5, 6], [7, 8, 9]]), np.array([True, False]))
    assert union.tolist() == [[4, 3, 2, 5, 6], [1, -1, -1, -1, -1]]
