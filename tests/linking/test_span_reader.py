"""The spaCy-free one-pass span reader (ELQ): proposing spans, per-span retrieval, scoring,
joint training steps, cross re-reading, saving and loading, bad input."""


import numpy as np
import pytest
import torch

from spacy_arboel.encoders.inputs import MentionSpan
from spacy_arboel.kb import KnowledgeBase
from spacy_arboel.linking import SpanReader, SpanReaderSettings
from spacy_arboel.linking.span_scores import span_vectors

TEXTS = ["Aspirin induced cough in patients.", "Fever was caused by aspirin."]
SPANS = [MentionSpan(0, 0, 7), MentionSpan(0, 16, 21), MentionSpan(1, 0, 5),
         MentionSpan(1, 20, 27)]
GOLD = [["D001241"], ["D003371"], ["D005334"], ["D001241"]]


def _reader(tiny_encoder, toy_kb_path, **settings) -> SpanReader:
    torch.manual_seed(0)
    values = {"top_k": 3, "train_top_k": 2, "threshold": 0.0, "span_threshold": 0.0,
              "max_span_length": 4, "passage_length": 48, "passage_stride": 40, **settings}
    reader = SpanReader.from_pretrained(KnowledgeBase.from_jsonl(toy_kb_path), tiny_encoder,
                                        SpanReaderSettings(**values))
    reader.entities.ensure_index()
    return reader


def _train(reader: SpanReader, steps: int) -> list[float]:
    trained = [p for name in ("spans", "cross") if name in reader.modules
               for p in reader.modules[name].parameters()]
    optimizer = torch.optim.Adam(trained, lr=3e-3)
    losses = []
    for _ in range(steps):
        optimizer.zero_grad()
        losses.append(reader.step(TEXTS, SPANS, GOLD))
        optimizer.step()
    return losses


def test_proposes_spans_and_retrieves_candidates_per_span(tiny_encoder, toy_kb_path):
    reader = _reader(tiny_encoder, toy_kb_path, max_spans=5)
    passages = reader.passages.passages(TEXTS)
    proposals = reader.propose(passages, TEXTS)
    # every passage proposes its 5 best spans, each with its own 3 candidates
    assert np.bincount(proposals.rows).tolist() == [5, 5]
    assert (proposals.lasts - proposals.firsts < 4).all()
    assert proposals.candidates.shape == (10, 3) and (proposals.candidates >= 0).all()
    assert np.allclose(proposals.p_entity.sum(axis=1), 1)
    # the candidates are the entity index's top 3 for each span's mean vector
    encoded = reader.encode(passages, TEXTS)
    hidden, logits = encoded.hidden, encoded.logits
    vectors = span_vectors(hidden, torch.as_tensor(proposals.rows),
                           torch.as_tensor(proposals.firsts), torch.as_tensor(proposals.lasts))
    expected = reader.index.search(vectors.numpy(), 3)[1]
    assert (proposals.candidates == expected).all()
    p_mention = torch.sigmoid(logits).numpy()
    widths = proposals.lasts - proposals.firsts
    assert np.allclose(proposals.p_mention, p_mention[proposals.rows, proposals.firsts, widths])


def test_scored_spans_are_p_mention_times_p_entity(tiny_encoder, toy_kb_path):
    reader = _reader(tiny_encoder, toy_kb_path, max_spans=3)
    found, links = reader.scored_spans(TEXTS + ["   ", ""])
    assert found[2] == [] and found[3] == [] and links[2].passages == []
    proposals = reader.propose(reader.passages.passages(TEXTS[:1]), TEXTS)
    joint = proposals.p_mention[:, None] * proposals.p_entity
    # the same spans, encoded in another batch: float32 noise of the encoder only
    assert sorted(s.score for s in found[0]) == pytest.approx(sorted(joint.ravel()),
                                                             rel=1e-5)
    for span in found[0]:
        assert 0 <= span.start_char < span.end_char <= len(TEXTS[0])
        assert span.kb_id in reader.kb
        assert (span.start_char, span.end_char) in links[0].candidates
    assert len(links[0].passages) == 1
    strict, _ = reader.scored_spans(TEXTS, threshold=0.999)
    assert strict == [[], []]


def test_joint_training_lowers_the_loss_and_learns_the_gold_spans(tiny_encoder, toy_kb_path):
    reader = _reader(tiny_encoder, toy_kb_path)
    losses = _train(reader, 25)
    assert losses[-1] < 0.5 * losses[0]
    assert reader.updates == 25
    assert all(p.grad is None for p in reader.modules["entity"].parameters())
    found, _ = reader.scored_spans(TEXTS, threshold=0.3)
    predicted = {(d, s.start_char, s.end_char, s.kb_id) for d, spans in enumerate(found)
                 for s in spans}
    gold = {(s.doc_index, s.start_char, s.end_char, g[0]) for s, g in zip(SPANS, GOLD, strict=True)}
    assert len(predicted & gold) >= 3


def test_mentions_outside_the_kb_are_neither_positive_nor_negative(tiny_encoder, toy_kb_path):
    reader = _reader(tiny_encoder, toy_kb_path)
    passages = reader.passages.passages(TEXTS)
    gold = reader.passage_gold(passages, SPANS[:2], [["D001241"], ["C999999"]])
    assert gold[0] == [(0, 1, [reader.kb.position("D001241")]), (4, 4, [])] or \
        gold[0][1][2] == []
    assert reader.step(TEXTS, SPANS[1:2], [["C999999"]]) is not None  # mention loss only


def test_cross_reread_scores_the_top_candidates_and_trains(tiny_encoder, toy_kb_path):
    reader = _reader(tiny_encoder, toy_kb_path, cross_reread=2)
    proposals = reader.propose(reader.passages.passages(TEXTS[:1]), TEXTS)
    assert (proposals.p_entity[:, 2:] == 0).all()
    assert np.allclose(proposals.p_entity[:, :2].sum(axis=1), 1)
    losses = _train(reader, 8)
    assert losses[-1] < losses[0]
    assert any(p.grad is not None for p in reader.modules["cross"].parameters())
    _, links = reader.scored_spans(TEXTS)
    for candidates in links[0].candidates.values():
        scores = [score for _, score in candidates]
        assert scores == sorted(scores, reverse=True) and scores[2] == 0.0


def test_the_cross_loss_in_groups_has_the_gradient_of_one_mean(tiny_encoder, toy_kb_path):
    grads, losses = [], []
    for batch_size in (1, 8):  # 1 span per backward; all spans in one
        reader = _reader(tiny_encoder, toy_kb_path, cross_reread=2, batch_size=batch_size)
        losses.append(reader.step(TEXTS, SPANS, GOLD))
        grads.append([p.grad.clone() for p in reader.modules["cross"].parameters()
                      if p.grad is not None])
    assert losses[0] == pytest.approx(losses[1], rel=1e-5)
    assert len(grads[0]) == len(grads[1]) > 0
    for one, other in zip(*grads, strict=True):
        torch.testing.assert_close(one, other, rtol=1e-4, atol=1e-6)


def test_cross_reread_only_reads_spans_that_can_pass_the_threshold(tiny_encoder, toy_kb_path):
    from spacy_arboel.linking.span_scores import candidate_probabilities

    reader = _reader(tiny_encoder, toy_kb_path, cross_reread=2, max_spans=6)
    passages = reader.passages.passages(TEXTS[:1])
    everything = reader.propose(passages, TEXTS)
    threshold = float(np.median(everything.p_mention))
    pruned = reader.propose(passages, TEXTS, threshold)
    above = everything.p_mention > threshold
    assert 0 < above.sum() < len(above)
    np.testing.assert_allclose(pruned.p_entity[above], everything.p_entity[above], atol=1e-6)
    # the others keep the bi-encoder's p(e | m): p(m)·p(e | m) <= p(m) cannot pass anyway
    encoded = reader.encode(passages, TEXTS)
    vectors = span_vectors(encoded.hidden, *(torch.as_tensor(a[~above]) for a in (
        pruned.rows, pruned.firsts, pruned.lasts)))
    scores = reader.index.search(vectors.numpy(), 3)[0]
    np.testing.assert_allclose(pruned.p_entity[~above], candidate_probabilities(scores),
                               atol=1e-5)


def test_a_trained_span_reader_starts_one_with_a_cross_reread(tiny_encoder, toy_kb_path):
    trained = _reader(tiny_encoder, toy_kb_path)
    _train(trained, 3)
    settings = SpanReaderSettings(**{**trained.settings.__dict__, "cross_reread": 2})
    modules = SpanReader.modules_from_reader(trained, settings)
    reader = SpanReader(trained.kb, trained.tokenizer, modules, settings)
    for name in ("spans", "entity"):
        old, new = trained.modules[name].state_dict(), modules[name].state_dict()
        assert old.keys() == new.keys() and all(torch.equal(old[k], new[k]) for k in old)
    passage = trained.modules["spans"].encoder.state_dict()
    cross = modules["cross"].passage.state_dict()
    assert all(torch.equal(passage[k], cross[k]) for k in passage)  # the cross reader's start
    assert modules["spans"].encoder is not trained.modules["spans"].encoder  # copies
    assert reader.entities.reuse_index(trained.kb, trained.index)
    assert np.shares_memory(reader.index.embeddings, trained.index.embeddings)
    losses = _train(reader, 2)
    assert all(np.isfinite(losses)) and reader.updates == 2
    assert all(p.grad is not None for p in modules["cross"].rank.parameters())


def test_cross_reread_needs_a_cross_reader(tiny_encoder, toy_kb_path):
    reader = _reader(tiny_encoder, toy_kb_path)
    with pytest.raises(ValueError, match="E027"):
        SpanReader(reader.kb, reader.tokenizer, reader.modules,
                   SpanReaderSettings(cross_reread=1))


def test_save_and_load_give_identical_predictions(tiny_encoder, toy_kb_path, tmp_path):
    reader = _reader(tiny_encoder, toy_kb_path, cross_reread=1)
    _train(reader, 2)
    reader.entity_labels = {"D001241": "Chemical"}
    written = reader.save(tmp_path / "reader")
    assert "span_reader.json" in written and "cross_encoder" in written
    loaded = SpanReader.load(tmp_path / "reader")
    assert loaded.updates == 2 and loaded.label_of("D001241", "X") == "Chemical"
    assert loaded.scored_spans(TEXTS)[0] == reader.scored_spans(TEXTS)[0]


@pytest.mark.parametrize("bad", [{"top_k": 0}, {"cross_reread": 5, "top_k": 3},
                                 {"threshold": 1.0}, {"span_threshold": -0.1},
                                 {"max_spans": 0}])
def test_bad_settings_are_coded_errors(bad):
    with pytest.raises(ValueError, match="E011"):
        SpanReaderSettings(**bad)


def test_a_long_document_in_one_call(tiny_encoder, toy_kb_path):
    reader = _reader(tiny_encoder, toy_kb_path, threshold=0.2, max_spans=2, batch_size=16)
    text = ("Aspirin induced cough in patients. \x00\u200b Ünïcödé fever. " * 3000)[:200_000]
    found, links = reader.scored_spans([text])
    assert len(links[0].passages) == len(reader.passages.passages([text]))
    assert all(0 <= s.start_char < s.end_char <= len(text) for s in found[0])


def test_passages_longer_than_the_encoder_window_are_refused(tiny_encoder, toy_kb_path):
    with pytest.raises(ValueError, match="E028"):
        _reader(tiny_encoder, toy_kb_path, passage_length=127, passage_stride=100)
    with pytest.raises(ValueError, match="E028"):
        _reader(tiny_encoder, toy_kb_path, passage_length=100, passage_stride=100,
                cross_reread=1)


