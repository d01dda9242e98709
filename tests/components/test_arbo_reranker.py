"""arbo_reranker: the cross-encoder re-ranking the linker's candidates (BLINK §4.2), as a
spaCy component over ``spacy_arboel.linking.CrossEncoderReranker``."""

import dataclasses

import numpy as np
import pytest
import spacy
import srsly
from spacy.tokens import DocBin, Span
from thinc.api import Adam

from spacy_arboel.components.arbo_reranker import make_reranker
from spacy_arboel.configs import packaged_config
from spacy_arboel.encoders.inputs import MentionSpan
from spacy_arboel.linking import CrossEncoderReranker

LINKER = "arbo_entity_linker"
RERANKER = "arbo_reranker"


def _same_model(reranker, nlp):
    """A new re-ranker over the model of ``reranker``, with the factory's defaults, in
    ``nlp`` (not added to its pipeline)."""
    config = spacy.blank("xx").get_factory_meta("arbo_reranker").default_config
    return make_reranker(nlp, RERANKER, reranker.model, scorer=None,
                         **{k: v for k, v in config.items() if k not in ("model", "scorer")})


def _nlp(tiny_encoder, linker_kb, linker=None, **config):
    nlp = spacy.blank("xx")
    nlp.add_pipe(LINKER, config={"kb_path": str(linker_kb), "top_k": 4,
                                 "model": {"encoder_name": tiny_encoder}, **(linker or {})})
    nlp.add_pipe(RERANKER, config={"top_k": 3, "train_top_k": 3,
                                   "model": {"encoder_name": tiny_encoder}, **config})
    return nlp


def test_reranker_rewrites_the_top_k_and_keeps_the_rest(tiny_encoder, toy_kb_path, toy_examples):
    nlp = _nlp(tiny_encoder, toy_kb_path)
    nlp.initialize(lambda: toy_examples)
    with nlp.select_pipes(disable=[RERANKER]):
        before = [[e._.kb_candidates for e in d.ents]
                  for d in nlp.pipe(eg.predicted.copy() for eg in toy_examples)]
    after = list(nlp.pipe(eg.predicted.copy() for eg in toy_examples))
    for doc, old_lists in zip(after, before, strict=True):
        for ent, old in zip(doc.ents, old_lists, strict=True):
            new = ent._.kb_candidates
            top = new[:3]
            assert {c for c, _ in top} == {c for c, _ in old[:3]}
            assert sum(p for _, p in top) == pytest.approx(1.0, abs=1e-5)
            assert [p for _, p in top] == sorted((p for _, p in top), reverse=True)
            assert new[3:] == [(c, 0.0) for c, _ in old[3:]]
            assert ent.kb_id_ == top[0][0]


def test_nil_ents_are_left_alone(tiny_encoder, toy_kb_path, toy_examples):
    nlp = _nlp(tiny_encoder, toy_kb_path,
               linker={"threshold": 1e9, "get_candidates": {"scores": "raw"}})
    nlp.initialize(lambda: toy_examples)
    doc = nlp(toy_examples[0].predicted.copy())
    assert {e.kb_id_ for e in doc.ents} == {"NIL"}


def test_a_nil_id_other_than_the_linkers_is_refused(tiny_encoder, toy_kb_path, toy_examples):
    """Issue 40, item 5: the linker's NIL mentions ("UNLINKED") were re-ranked into links,
    the re-ranker looking for "NIL"."""
    nlp = _nlp(tiny_encoder, toy_kb_path,
               linker={"threshold": 1e9, "get_candidates": {"scores": "raw"},
                       "nil_id": "UNLINKED"})
    with pytest.raises(ValueError, match=r"E226.*'UNLINKED'"):
        nlp.initialize(lambda: toy_examples)
        nlp(toy_examples[0].predicted.copy())
    nlp = _nlp(tiny_encoder, toy_kb_path, nil_id="UNLINKED",
               linker={"threshold": 1e9, "get_candidates": {"scores": "raw"},
                       "nil_id": "UNLINKED"})
    nlp.initialize(lambda: toy_examples)
    assert {e.kb_id_ for e in nlp(toy_examples[0].predicted.copy()).ents} == {"UNLINKED"}


def test_training_lowers_the_loss(tiny_encoder, toy_kb_path, toy_examples):
    nlp = _nlp(tiny_encoder, toy_kb_path)
    nlp.initialize(lambda: toy_examples)
    optimizer = Adam(0.002)
    losses = [nlp.update(toy_examples, sgd=optimizer, annotates=[LINKER],
                         exclude=[LINKER])[RERANKER] for _ in range(10)]
    assert sum(losses[-3:]) < sum(losses[:3]), losses


def test_training_without_linker_candidates_is_a_clear_error(tiny_encoder, toy_kb_path,
                                                             toy_examples):
    nlp = _nlp(tiny_encoder, toy_kb_path)
    nlp.initialize(lambda: toy_examples)
    with pytest.raises(ValueError, match="annotating_components"):
        nlp.get_pipe(RERANKER).update(toy_examples)


def test_save_load_round_trip(tiny_encoder, toy_kb_path, toy_examples, tmp_path):
    nlp = _nlp(tiny_encoder, toy_kb_path)
    nlp.initialize(lambda: toy_examples)
    nlp.update(toy_examples, sgd=Adam(0.002), annotates=[LINKER], exclude=[LINKER])
    docs = [eg.predicted.copy() for eg in toy_examples]
    expected = [[(e.kb_id_, e._.kb_candidates) for e in d.ents] for d in nlp.pipe(docs)]
    nlp.to_disk(tmp_path / "pipeline")
    loaded = spacy.load(tmp_path / "pipeline")
    got = [[(e.kb_id_, e._.kb_candidates) for e in d.ents]
           for d in loaded.pipe(eg.predicted.copy() for eg in toy_examples)]
    for doc_a, doc_b in zip(expected, got, strict=True):
        for (id_a, cands_a), (id_b, cands_b) in zip(doc_a, doc_b, strict=True):
            assert id_a == id_b
            assert np.allclose([p for _, p in cands_a], [p for _, p in cands_b], atol=1e-5)
    reranker = loaded.get_pipe(RERANKER)
    # the KB is the linker's, saved once in its folder and shared after loading
    assert not (tmp_path / "pipeline" / RERANKER / "kb.jsonl").exists()
    assert reranker.kb is loaded.get_pipe(LINKER).kb
    restored = _same_model(reranker, loaded).from_bytes(reranker.to_bytes())
    assert restored.kb is loaded.get_pipe(LINKER).kb
    alone = _same_model(reranker, spacy.blank("xx"))
    with pytest.raises(ValueError, match="E220"):
        alone.from_bytes(reranker.to_bytes())


def test_a_reranker_follows_the_linkers_swapped_kb(tiny_encoder, toy_kb_path, toy_examples):
    from spacy_arboel.kb import KnowledgeBase

    nlp = _nlp(tiny_encoder, toy_kb_path)
    nlp.initialize(lambda: toy_examples)
    linker, reranker = nlp.get_pipe(LINKER), nlp.get_pipe(RERANKER)
    assert reranker.kb is linker.kb
    smaller = KnowledgeBase(list(linker.kb)[:-1])
    linker.set_kb(smaller)
    nlp(toy_examples[0].predicted.text)
    assert reranker.kb is smaller


TEXTS = ["Aspirin induced cough in patients."]
SPANS = [MentionSpan(0, 0, 7), MentionSpan(0, 16, 21)]
CANDIDATES = [["D001241", "D003371", "D005334"], ["D003371", "D010146"]]


def _trained(tiny_encoder, toy_kb_path, toy_examples):
    """A trained arbo_reranker with a KB of its own (``kb_path``: saved with it)."""
    nlp = _nlp(tiny_encoder, toy_kb_path, kb_path=str(toy_kb_path))
    nlp.initialize(lambda: toy_examples)
    nlp.update(toy_examples, sgd=Adam(0.01), annotates=[LINKER], exclude=[LINKER])
    return nlp.get_pipe(RERANKER)


def _fresh(tiny_encoder, **config):
    """An arbo_reranker that was neither initialised nor loaded."""
    return spacy.blank("xx").add_pipe(RERANKER, config={
        "top_k": 3, "train_top_k": 3, "model": {"encoder_name": tiny_encoder}, **config})


def _same_scores(a, b) -> bool:
    return all(np.allclose(x, y, rtol=1e-5, atol=1e-6) for x, y in zip(
        a.score_candidates(TEXTS, SPANS, CANDIDATES), b.score_candidates(TEXTS, SPANS, CANDIDATES),
        strict=True))


def test_to_disk_from_disk_with_exclude(tiny_encoder, toy_kb_path, toy_examples, tmp_path):
    reranker = _trained(tiny_encoder, toy_kb_path, toy_examples)
    reranker.to_disk(tmp_path / "full")
    restored = _fresh(tiny_encoder).from_disk(tmp_path / "full")
    assert _same_scores(restored, reranker)
    assert restored.seen_ids == reranker.seen_ids == {"D001241", "D003371", "D005334",
                                                      "D006333", "D010146"}
    assert restored.kb.fingerprint() == reranker.kb.fingerprint()
    # excluded on load: the base encoder and a new head, so other scores
    base = _fresh(tiny_encoder).from_disk(tmp_path / "full", exclude=["encoder", "head"])
    assert not _same_scores(base, reranker)
    # the KB left out: not written, and taken from kb_path when loading without it
    reranker.to_disk(tmp_path / "no_kb", exclude=["kb"])
    assert not (tmp_path / "no_kb" / "kb.jsonl").exists()
    assert (tmp_path / "no_kb" / "head.safetensors").exists()
    with pytest.raises(ValueError, match="E030.*kb.jsonl missing"):
        _fresh(tiny_encoder).from_disk(tmp_path / "no_kb")
    with pytest.raises(ValueError, match="E008"):
        _fresh(tiny_encoder).from_disk(tmp_path / "no_kb", exclude=["kb"])
    restored = _fresh(tiny_encoder, kb_path=str(toy_kb_path)).from_disk(tmp_path / "no_kb",
                                                                        exclude=["kb"])
    assert _same_scores(restored, reranker)
    assert restored.seen_ids == reranker.seen_ids


def test_to_bytes_from_bytes_with_exclude(tiny_encoder, toy_kb_path, toy_examples):
    reranker = _trained(tiny_encoder, toy_kb_path, toy_examples)
    restored = _fresh(tiny_encoder).from_bytes(reranker.to_bytes())
    assert _same_scores(restored, reranker) and restored.seen_ids == reranker.seen_ids
    data = reranker.to_bytes(exclude=["cfg"])
    packed = srsly.msgpack_loads(data)
    assert "cfg.json" not in packed and "head.safetensors" in packed
    restored = _fresh(tiny_encoder).from_bytes(data, exclude=["cfg"])
    assert _same_scores(restored, reranker) and restored.seen_ids == set()
    with pytest.raises(ValueError, match="E030.*cfg.json missing"):
        _fresh(tiny_encoder).from_bytes(data)


def test_a_saved_setting_the_config_contradicts_is_an_error(tiny_encoder, toy_kb_path,
                                                            toy_examples, tmp_path):
    nlp = _nlp(tiny_encoder, toy_kb_path)
    nlp.initialize(lambda: toy_examples)
    nlp.to_disk(tmp_path / "pipeline")
    with pytest.raises(ValueError, match="E071.*mention_max_length = 32.*64"):
        spacy.load(tmp_path / "pipeline",
                   config={f"components.{RERANKER}.mention_max_length": 64})
    # inference settings may change
    loaded = spacy.load(tmp_path / "pipeline", config={f"components.{RERANKER}.batch_size": 2})
    assert loaded.get_pipe(RERANKER).reranker.settings.batch_size == 2


def test_predict_loads_nothing(tiny_encoder, toy_kb_path):
    from spacy_arboel.ml.module_holder import is_loaded

    reranker = _fresh(tiny_encoder, kb_path=str(toy_kb_path))
    assert Span.has_extension("kb_candidates")
    doc = spacy.blank("xx").make_doc("Aspirin induced cough.")
    doc.ents = [doc.char_span(0, 7, label="Chemical")]
    doc.ents[0]._.kb_candidates = [("D003371", 2.0), ("D001241", 1.0)]
    assert reranker.predict([spacy.blank("xx").make_doc("No ents.")]) == [[]]
    with pytest.raises(ValueError, match="E051"):
        reranker.predict([doc])
    assert reranker.reranker is None and not is_loaded(reranker.model)
    reranker.ensure_ready()  # the explicit set-up: kb_path and the base encoder
    assert is_loaded(reranker.model)
    doc = reranker(doc)
    assert {c for c, _ in doc.ents[0]._.kb_candidates} == {"D003371", "D001241"}
    assert doc.ents[0].kb_id_ == doc.ents[0]._.kb_candidates[0][0]


def test_candidate_from_another_kb_is_named(tiny_encoder, toy_kb_path, toy_examples):
    nlp = _nlp(tiny_encoder, toy_kb_path)
    nlp.initialize(lambda: toy_examples)
    reranker = nlp.get_pipe(RERANKER)
    with pytest.raises(ValueError, match=r"E070.*'Q42'.*another KB"):
        reranker.score_candidates(["Aspirin."], [MentionSpan(0, 0, 7)], [["D001241", "Q42"]])


def test_quantize_reaches_the_core_and_scores_stay_close(tiny_encoder, toy_kb_path,
                                                         toy_examples):
    nlp = _nlp(tiny_encoder, toy_kb_path, quantize=True, batch_size=1)
    nlp.initialize(lambda: toy_examples)
    reranker = nlp.get_pipe(RERANKER)
    core = reranker.reranker
    assert core.settings.quantize and core.settings.batch_size == 1
    exact = CrossEncoderReranker(core.kb, core.tokenizer, core.scorer,
                                 dataclasses.replace(core.settings, quantize=False))
    args = (["Aspirin induced cough."], [MentionSpan(0, 0, 7)], [["D001241", "D003371"]])
    quantized = reranker.score_candidates(*args)[0]
    assert np.allclose(quantized, exact.score(*args)[0], atol=0.1)


@pytest.mark.slow
def test_spacy_train_with_the_reranker_config(tiny_encoder, toy_kb_path, toy_examples, tmp_path):
    import subprocess
    import sys

    linker = spacy.blank("en")  # the config's language
    linker.add_pipe(LINKER, config={"kb_path": str(toy_kb_path),
                                    "model": {"encoder_name": tiny_encoder}})
    linker.initialize(lambda: toy_examples)
    linker.to_disk(tmp_path / "linker")
    DocBin(docs=[eg.reference for eg in toy_examples]).to_disk(tmp_path / "train.spacy")
    config = packaged_config("arbo_reranker")
    result = subprocess.run([
        sys.executable, "-m", "spacy", "train", str(config), "--output", str(tmp_path / "out"),
        "--paths.train", str(tmp_path / "train.spacy"),
        "--paths.dev", str(tmp_path / "train.spacy"), "--paths.linker", str(tmp_path / "linker"),
        "--paths.encoder", tiny_encoder, "--training.max_steps", "4",
        "--training.eval_frequency", "2", "--components.arbo_reranker.train_top_k", "3",
    ], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    trained = spacy.load(tmp_path / "out" / "model-last")
    assert trained.pipe_names == [LINKER, RERANKER]
    doc = trained(toy_examples[0].predicted.copy())
    assert all(e.kb_id_ for e in doc.ents)


def test_oracle_candidates():
    from spacy_arboel.evaluation.rerank_eval import oracle_candidates, union_candidates

    assert oracle_candidates(["a", "b", "c"], ["z"], "none", 2) == ["a", "b"]
    assert oracle_candidates(["a", "b", "c"], ["z"], "self", 2) == ["a", "z"]
    assert oracle_candidates(["a", "b", "c"], ["b"], "self", 2) == ["a", "b"]
    merged = union_candidates([["a", "b", "c"], ["b", "d", "e"]], 2)
    assert merged == ["a", "b", "d"]
    assert oracle_candidates(merged, ["z"], "union", 2) == ["a", "b", "d", "z"]
    with pytest.raises(ValueError, match="Unknown oracle"):
        oracle_candidates(["a"], ["a"], "best", 1)


def _distill(teacher_path: str, fgsm_epsilon: float) -> dict:
    """Distillation over knn_negatives, in FGSM with ``fgsm_epsilon`` > 0."""
    block = {"@misc": "spacy_arboel.DistillationObjective.v1", "teacher_path": teacher_path,
             "temperature": 2.0, "alpha": 0.5,
             "objective": {"@misc": "spacy_arboel.KnnNegativesObjective.v1", "n_negatives": 2}}
    if fgsm_epsilon:
        return {"@misc": "spacy_arboel.FGSMObjective.v1", "objective": block,
                "epsilon": fgsm_epsilon}
    return block


@pytest.mark.parametrize("fgsm_epsilon", [0.0, 0.01])
def test_distillation_from_the_cross_encoder_lowers_the_loss(tiny_encoder, toy_kb_path,
                                                            toy_examples, tmp_path, fgsm_epsilon):
    teacher = _nlp(tiny_encoder, toy_kb_path)
    teacher.initialize(lambda: toy_examples)
    optimizer = Adam(0.002)
    for _ in range(3):
        teacher.update(toy_examples, sgd=optimizer, annotates=[LINKER], exclude=[LINKER])
    teacher.to_disk(tmp_path / "teacher")
    student = spacy.blank("xx")
    student.add_pipe(LINKER, config={
        "kb_path": str(toy_kb_path), "model": {"encoder_name": tiny_encoder},
        "objective": _distill(str(tmp_path / "teacher"), fgsm_epsilon)})
    student.initialize(lambda: toy_examples)
    optimizer = Adam(0.002)
    losses = [student.update(toy_examples, sgd=optimizer)[LINKER] for _ in range(10)]
    assert sum(losses[-3:]) < sum(losses[:3]), losses


def test_teacher_with_another_kb_is_refused(tiny_encoder, toy_kb_path, toy_examples, tmp_path):
    import json

    from spacy_arboel.kb import KnowledgeBase
    from spacy_arboel.ml.objectives import teacher_loader

    teacher = _nlp(tiny_encoder, toy_kb_path)
    teacher.initialize(lambda: toy_examples)
    teacher.to_disk(tmp_path / "teacher")
    entities = [json.loads(line) for line in toy_kb_path.read_text().splitlines()][:-1]
    other = tmp_path / "other.jsonl"
    other.write_text("".join(json.dumps(e) + "\n" for e in entities))
    with pytest.raises(ValueError, match="fingerprint"):
        teacher_loader(str(tmp_path / "teacher"))(KnowledgeBase.from_jsonl(other))
    with pytest.raises(ValueError, match="no arbo_reranker"):
        nlp = spacy.blank("xx")
        nlp.to_disk(tmp_path / "blank")
        teacher_loader(str(tmp_path / "blank"))(KnowledgeBase.from_jsonl(toy_kb_path))


def test_get_loss_scores_the_gold_among_the_reranked_candidates(tiny_encoder, toy_kb_path,
                                                               toy_examples):
    from spacy.training import Example

    nlp = _nlp(tiny_encoder, toy_kb_path)
    nlp.initialize(lambda: toy_examples)
    reranker = nlp.get_pipe(RERANKER)
    with nlp.select_pipes(disable=[RERANKER]):
        docs = list(nlp.pipe(eg.predicted.copy() for eg in toy_examples))
    predictions = reranker.predict(docs)
    examples = [Example(d, eg.reference) for d, eg in zip(docs, toy_examples, strict=True)]
    loss, d_scores = reranker.get_loss(examples, predictions)
    expected, n = [], 0
    for doc, scores, eg in zip(docs, predictions, examples, strict=True):
        gold = {(e.start_char, e.end_char): e.kb_id_ for e in eg.reference.ents}
        for ent, row in zip(doc.ents, scores, strict=True):
            ids = [c for c, _ in ent._.kb_candidates[:3]]
            if gold[(ent.start_char, ent.end_char)] in ids:
                j = ids.index(gold[(ent.start_char, ent.end_char)])
                expected.append(-(row[j] - np.log(np.exp(row).sum())))
            n += 1
    assert expected and loss == pytest.approx(float(np.mean(expected)), rel=1e-4)
    assert len(d_scores) == n
