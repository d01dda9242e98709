"""The arbo_linker component with either core: the one-pass span reader (ELQ, the default)
and the passage reader (EntQA / BEER², ``RetrieverReader.v1``): pipe, training, save/load,
bad input."""

import json
import warnings

import numpy as np
import pytest
import spacy
import srsly
import torch
from thinc.api import Adam

from spacy_arboel.artefacts import write_manifest
from spacy_arboel.errors import Errors
from tests.conftest import check_another_kb_is_refused, passage_linker_config


def _nlp(tiny_encoder, kb_path, model=None, ready=True, reader="passage", lang="xx",
         **config):
    """A pipeline with an arbo_linker (the ``passage`` or ``span`` reader) set up from its
    config (``ensure_ready``) unless ``ready`` is False (for tests that initialise it). Its
    heads propose the spans, trained or not (``dictionary_spans = "never"``: the dictionary
    proposals of an untrained linker are tested in test_arbo_linker_dictionary.py)."""
    nlp = spacy.blank(lang)
    model = {"encoder_name": tiny_encoder, **(model or {})}
    config = {"kb_path": str(kb_path), "dictionary_spans": "never", **config}
    if reader == "passage":
        config = passage_linker_config(config, model)
    else:
        config = {"passage_length": 48, "passage_stride": 40, **config,
                  "model": {"max_spans": 16, **model}}
    linker = nlp.add_pipe("arbo_linker", config=config)
    if ready:
        linker.ensure_ready()
    return nlp


def _links(docs):
    return [[(e.start_char, e.end_char, e.label_, e.kb_id_) for e in doc.ents] for doc in docs]


def test_raw_text_in_linked_ents_out(tiny_encoder, toy_kb_path):
    # threshold 0: every decoded pair passes, so a random model still yields ents
    nlp = _nlp(tiny_encoder, toy_kb_path, threshold=0.0, top_k=3)
    doc = nlp("Aspirin induced cough in patients with heart failure.")
    assert doc.ents
    kb = {json.loads(line)["id"]: json.loads(line)
          for line in toy_kb_path.read_text().splitlines()}
    for ent in doc.ents:
        assert ent.kb_id_ in kb
        assert ent.label_ == kb[ent.kb_id_]["types"][0]  # the KB type is the label
        assert ent._.kb_candidates and ent._.kb_candidates[0][0] == ent.kb_id_
    starts = [e.start for e in doc.ents]
    assert starts == sorted(starts)  # no overlaps: set_ents would have raised
    # label_types names the labels of the linked entities' types
    named = _nlp(tiny_encoder, toy_kb_path, threshold=0.0, top_k=3,
                 get_candidates={"label_types": {"Drug": ["Chemical"],
                                                 "Condition": ["Disease"]}})
    doc = named("Aspirin induced cough in patients with heart failure.")
    assert doc.ents and all(
        e.label_ == {"Chemical": "Drug", "Disease": "Condition"}[kb[e.kb_id_]["types"][0]]
        for e in doc.ents)
    passages = doc._.passage_candidates
    assert passages and all(len(cands) == 3 for _, _, cands in passages)
    for _, _, cands in passages:
        assert abs(sum(score for _, score in cands) - 1.0) < 1e-4  # p_rank over K


def test_threshold_one_gives_no_ents_and_bad_settings_raise(tiny_encoder, toy_kb_path):
    nlp = _nlp(tiny_encoder, toy_kb_path, threshold=0.999)
    assert nlp("Aspirin induced cough.").ents == ()
    with pytest.raises(ValueError, match="threshold"):
        _nlp(tiny_encoder, toy_kb_path, threshold=1.5)
    with pytest.raises(ValueError, match="share_weights"):
        _nlp(tiny_encoder, toy_kb_path, mode="pipeline")
    with pytest.raises(ValueError, match="mode"):
        _nlp(tiny_encoder, toy_kb_path, mode="sideways")
    no_kb = spacy.blank("xx")
    linker = no_kb.add_pipe("arbo_linker", config={"model": {"encoder_name": tiny_encoder}})
    with pytest.raises(ValueError, match="E051"):
        no_kb("Aspirin.")  # predict never sets anything up behind the user's back
    with pytest.raises(ValueError, match="knowledge base"):
        linker.ensure_ready()


@pytest.mark.parametrize("text", ["", "   \n\t ", "the of and", "\x00\x07\u200b 🙂 αβγ",
                                  "Aspirin\x00induced\u200bcough 🙂 in café patients."])
def test_bad_and_odd_text(tiny_encoder, toy_kb_path, text):
    nlp = _nlp(tiny_encoder, toy_kb_path, threshold=0.0, top_k=2)
    doc = nlp(text)
    for ent in doc.ents:
        assert doc.text[ent.start_char : ent.end_char] == ent.text
    if not text.strip():
        assert doc.ents == () and not doc._.passage_candidates


@pytest.mark.slow
def test_long_doc_is_linked_in_bounded_passages(tiny_encoder, toy_kb_path):
    nlp = _nlp(tiny_encoder, toy_kb_path, threshold=0.0, top_k=1, span_retrieval=False,
               batch_size=64)
    sentence = "Aspirin induced cough in patients. "
    text = sentence * (100_500 // len(sentence))
    assert len(text) > 100_000
    doc = nlp(text)
    passages = doc._.passage_candidates
    assert passages[-1][1] == len(text.rstrip())  # the last passage reaches the end
    assert all(end > start for start, end, _ in passages)
    assert doc.ents and doc.ents[-1].end_char > 99_000


@pytest.mark.parametrize("mode", ["joint", "pipeline"])
def test_training_lowers_the_loss(tiny_encoder, toy_kb_path, toy_examples, mode):
    torch.manual_seed(0)
    model = {"share_weights": mode == "joint"}
    nlp = _nlp(tiny_encoder, toy_kb_path, model=model, mode=mode, train_top_k=3,
               warmup_retriever_steps=0 if mode == "joint" else 12, warmup_reader_steps=0)
    nlp.initialize(lambda: toy_examples)
    linker = nlp.get_pipe("arbo_linker")
    optimizer = Adam(0.003)
    phases, losses = [], []
    for _ in range(12):
        phases.append(linker.reader.phase())
        losses.append(nlp.update(toy_examples, sgd=optimizer)["arbo_linker"])
    assert set(phases) == ({"joint"} if mode == "joint" else {"retriever"})
    assert linker.reader.phase() == ("joint" if mode == "joint" else "reader")
    assert sum(losses[-3:]) < sum(losses[:3]), losses
    if mode == "pipeline":  # the reader phase trains too
        reader = [nlp.update(toy_examples, sgd=optimizer)["arbo_linker"] for _ in range(10)]
        assert sum(reader[-3:]) < sum(reader[:3]), reader


@pytest.mark.slow
def test_training_links_the_toy_corpus(tiny_encoder, toy_kb_path, toy_examples):
    """Enough joint steps on six sentences make the reader find their gold links."""
    torch.manual_seed(0)
    nlp = _nlp(tiny_encoder, toy_kb_path, train_top_k=5, top_k=5, warmup_retriever_steps=5,
               warmup_reader_steps=5)
    nlp.initialize(lambda: toy_examples)
    optimizer = Adam(0.005)
    for _ in range(60):
        nlp.update(toy_examples, sgd=optimizer)
    scores = nlp.evaluate(toy_examples)
    assert scores["e2e_inkb_f"] > 0.5, scores


def test_save_load_round_trip(tiny_encoder, toy_kb_path, toy_examples, tmp_path):
    nlp = _nlp(tiny_encoder, toy_kb_path, threshold=0.0, top_k=3,
               model={"share_weights": False}, mode="pipeline", warmup_retriever_steps=1)
    nlp.initialize(lambda: toy_examples)
    optimizer = Adam(0.003)
    for _ in range(3):
        nlp.update(toy_examples, sgd=optimizer)
    texts = [eg.reference.text for eg in toy_examples]
    before = _links(nlp.pipe(texts))
    nlp.to_disk(tmp_path / "pipeline")
    assert (tmp_path / "pipeline" / "arbo_linker" / "reader_encoder").is_dir()
    assert not list((tmp_path / "pipeline").rglob("*.pkl"))
    loaded = spacy.load(tmp_path / "pipeline")
    assert _links(loaded.pipe(texts)) == before
    from_bytes = spacy.blank("xx").from_config(nlp.config)
    from_bytes.from_bytes(nlp.to_bytes())
    assert _links(from_bytes.pipe(texts)) == before
    # a pipeline loaded with another KB is an error, not wrong links
    kb_file = tmp_path / "pipeline" / "arbo_linker" / "kb.jsonl"
    kb_file.write_text(kb_file.read_text().replace("Fever", "Fevers"))
    with pytest.raises(ValueError, match=r"\[E030\].*kb.jsonl"):
        spacy.load(tmp_path / "pipeline")
    check_another_kb_is_refused(tmp_path / "pipeline", "arbo_linker")


@pytest.mark.parametrize("reader", ["passage", "span"])
def test_kb_without_types_labels_from_training_or_default(tiny_encoder, tmp_path,
                                                          toy_examples, reader):
    from tests.conftest import TOY_ENTITIES

    path = tmp_path / "untyped.jsonl"
    path.write_text("\n".join(json.dumps({**e, "types": []}) for e in TOY_ENTITIES) + "\n")
    nlp = _nlp(tiny_encoder, path, threshold=0.0, top_k=2, default_label="THING",
               reader=reader)
    nlp.initialize(lambda: toy_examples[:2])  # sees Aspirin, Cough, Fever
    linker = nlp.get_pipe("arbo_linker")
    assert linker.reader.entity_labels == {
        "D001241": "Chemical", "D003371": "Disease", "D005334": "Disease"}
    assert linker.reader.label_of("D006333", "THING") == "THING"
    doc = nlp("Cardiac failure and aspirin.")
    assert {e.label_ for e in doc.ents} <= {"Chemical", "Disease", "THING"}


@pytest.mark.parametrize("reader", ["passage", "span"])
def test_keep_existing_ents(tiny_encoder, toy_kb_path, reader):
    nlp = _nlp(tiny_encoder, toy_kb_path, threshold=0.0, top_k=2, ents="keep", reader=reader,
               model={"span_threshold": 0.0} if reader == "span" else None)
    doc = nlp.make_doc("Aspirin induced cough in patients.")
    doc.ents = [doc.char_span(0, 7, label="DRUG", kb_id="X1")]
    doc = nlp.get_pipe("arbo_linker")(doc)
    assert (doc.ents[0].text, doc.ents[0].label_, doc.ents[0].kb_id_) == ("Aspirin", "DRUG",
                                                                          "X1")
    replaced = _nlp(tiny_encoder, toy_kb_path, threshold=0.0, top_k=2, ents="replace",
                    reader=reader,
                    model={"span_threshold": 0.0} if reader == "span" else None)
    doc2 = replaced.make_doc("Aspirin induced cough in patients.")
    doc2.ents = [doc2.char_span(0, 7, label="DRUG", kb_id="X1")]
    doc2 = replaced.get_pipe("arbo_linker")(doc2)
    assert all(e.kb_id_ != "X1" for e in doc2.ents)


def test_losses_follow_the_paper():
    from spacy_arboel.objectives.reader_losses import reader_loss, retriever_loss

    scores = torch.tensor([[2.0, 1.0, 0.0]])
    positive = torch.tensor([[True, False, False]])
    expected = -np.log(np.exp(2) / (np.exp(2) + np.exp(1) + np.exp(0)))
    assert abs(retriever_loss(scores, positive).item() - expected) < 1e-5
    # two gold entities: each is scored against the negatives only (eq. 13)
    both = torch.tensor([[True, True, False]])
    expected_two = (-np.log(np.exp(2) / (np.exp(2) + 1)) - np.log(np.exp(1) / (np.exp(1) + 1))) / 2
    assert abs(retriever_loss(scores, both).item() - expected_two) < 1e-5
    # reader: uniform logits over 3 allowed positions, 2 candidates, candidate 0 gold at (1, 2)
    start = torch.zeros(1, 2, 4)
    allowed = torch.tensor([[[True, True, True, False]] * 2])
    loss = reader_loss(start, start.clone(), torch.zeros(1, 2), allowed, [[(1, 2)], []])
    assert abs(loss.item() - (2 * np.log(3) + np.log(2))) < 1e-5
    assert Errors.E020  # the pipeline-mode error exists


def test_starts_from_a_trained_entity_linker(tiny_encoder, toy_kb_path, toy_examples, tmp_path):
    linker_nlp = spacy.blank("xx")
    linker_nlp.add_pipe("arbo_entity_linker", config={
        "kb_path": str(toy_kb_path), "entity_granularity": "alias",
        "model": {"encoder_name": tiny_encoder, "pooling": "mention"}})
    linker_nlp.initialize(lambda: toy_examples)
    linker_nlp.update(toy_examples, sgd=Adam(0.001))
    linker_nlp.to_disk(tmp_path / "linker")
    bi_encoder = linker_nlp.get_pipe("arbo_entity_linker")

    nlp = spacy.blank("xx")
    nlp.add_pipe("arbo_linker", config={"entity_granularity": "entity",
                                        "model": {"encoder_name": tiny_encoder}})
    with pytest.raises(ValueError, match="knowledge base"):
        nlp.initialize(lambda: toy_examples)  # no KB anywhere: a clear error
    # the config is the source of truth: a linker of another granularity is an error
    with pytest.raises(ValueError, match="E056"):
        nlp.get_pipe("arbo_linker").initialize(lambda: toy_examples, nlp=nlp,
                                               linker_path=str(tmp_path / "linker"))
    from spacy_arboel.ml.bi_encoder import torch_encoders
    from spacy_arboel.ml.module_holder import torch_modules

    mention = torch_encoders(bi_encoder.model)["mention"].transformer.state_dict()
    for reader, passage_encoder in (("span", lambda m: m["spans"].encoder),
                                    ("passage", lambda m: m["heads"].passage)):
        nlp = _nlp(tiny_encoder, toy_kb_path, reader=reader, ready=False,
                   entity_granularity="alias")
        linker = nlp.get_pipe("arbo_linker")
        linker.initialize(lambda: toy_examples, nlp=nlp,
                          linker_path=str(tmp_path / "linker"))
        assert linker.kb.fingerprint() == bi_encoder.kb.fingerprint()
        assert linker.settings.entity_granularity == "alias"
        np.testing.assert_allclose(linker.reader.index.embeddings,
                                   bi_encoder.retriever.index.embeddings)
        passage = passage_encoder(torch_modules(linker.model)).state_dict()
        assert all(torch.equal(mention[k], passage[k]) for k in mention)
    with pytest.raises(ValueError, match="arbo_entity_linker"):
        linker.initialize(lambda: toy_examples, nlp=nlp, linker_path=str(tmp_path))


def test_training_passages_sample_only_the_empty_ones():
    from spacy_arboel.linking.retriever_reader import training_passages

    gold = [{3: [(0, 1)]}, {}, {}, {1: [(2, 2)]}] * 50
    assert training_passages(gold, 1.0) == list(range(200))
    assert training_passages(gold, 0.0) == [i for i in range(200) if i % 4 in (0, 3)]
    half = training_passages(gold, 0.5, seed=3)
    assert set(training_passages(gold, 0.0)) <= set(half)
    empty_kept = len(half) - 100
    assert 30 < empty_kept < 70  # about half of the 100 empty passages
    assert half == training_passages(gold, 0.5, seed=3)


def test_threshold_tuning_scores_each_threshold_from_one_reading(tiny_encoder, toy_kb_path,
                                                                 toy_examples, monkeypatch):
    from spacy_arboel.evaluation.end_to_end_eval import tune_threshold
    from spacy_arboel.linking.reader_spans import LinkedSpan

    nlp = _nlp(tiny_encoder, toy_kb_path)
    linker = nlp.get_pipe("arbo_linker")
    gold = [eg.reference for eg in toy_examples[:2]]
    # doc 0 gold: Aspirin (0, 7) D001241, cough (16, 21) D003371
    # doc 1 gold: Fever (0, 5) D005334, aspirin (20, 27) D001241
    spans = [[LinkedSpan(0, 7, "D001241", 0.5), LinkedSpan(16, 21, "D005334", 0.2),
              LinkedSpan(16, 21, "D003371", 0.05)],
             [LinkedSpan(0, 5, "D005334", 0.01), LinkedSpan(8, 15, "D010146", 0.3)]]
    calls = []

    def scored(texts, threshold=None):
        calls.append(threshold)
        return spans, None

    linker.ensure_ready()
    monkeypatch.setattr(linker.reader, "scored_spans", scored)
    best, rows = tune_threshold(linker, gold, [0.1, 0.001, 0.04])
    assert calls == [0.001]  # one reading at the lowest threshold
    by_t = {r["threshold"]: r for r in rows}
    # 0.001: resolution keeps (16, 21) D005334 over D003371: tp = Aspirin, Fever
    assert (by_t[0.001]["tp"], by_t[0.001]["n_predicted"]) == (2, 4)
    assert (by_t[0.04]["tp"], by_t[0.04]["n_predicted"]) == (1, 3)
    assert (by_t[0.1]["tp"], by_t[0.1]["n_predicted"]) == (1, 3)
    assert best["threshold"] == 0.001 and best["f1"] == pytest.approx(2 * 0.5 * 0.5)


# --- component save/load with exclude ------------------------------------------------------

LINKER = "arbo_linker"
# links with a random model (threshold 0), and a separate reader so that every saved
# transformer is exercised
CONFIG = {"threshold": 0.0, "top_k": 3, "mode": "pipeline", "warmup_retriever_steps": 1,
          "dictionary_spans": "never"}
MODEL = {"share_weights": False}


def _trained(tiny_encoder, kb_path, examples):
    """An initialised arbo_linker after a retriever step and a reader step."""
    torch.manual_seed(0)
    nlp = _nlp(tiny_encoder, kb_path, model=MODEL, ready=False, **CONFIG)
    nlp.initialize(lambda: examples)
    optimizer = Adam(0.003)
    for _ in range(2):
        nlp.update(examples, sgd=optimizer)
    linker = nlp.get_pipe(LINKER)
    assert linker.reader.updates == 2
    return linker


def _fresh(tiny_encoder, **config):
    """An arbo_linker with the settings of ``_trained``, neither initialised nor loaded."""
    return spacy.blank("xx").add_pipe(LINKER, config=passage_linker_config(
        {**CONFIG, **config}, {"encoder_name": tiny_encoder, **MODEL}))


def _predictions(linker, examples):
    """The linked ents with their scored candidates, and the passage candidates."""
    make_doc = spacy.blank("xx").make_doc
    docs = [linker(make_doc(eg.reference.text)) for eg in examples]
    return [([(e.start_char, e.end_char, e.label_, e.kb_id_, e._.kb_candidates)
              for e in doc.ents], doc._.passage_candidates) for doc in docs]


def test_component_to_disk_from_disk_round_trip(tiny_encoder, toy_kb_path, toy_examples,
                                                tmp_path):
    linker = _trained(tiny_encoder, toy_kb_path, toy_examples)
    expected = _predictions(linker, toy_examples)
    assert any(ents for ents, _ in expected)
    base = _fresh(tiny_encoder, kb_path=str(toy_kb_path))
    base.ensure_ready()
    assert _predictions(base, toy_examples) != expected  # training changed the weights
    linker.to_disk(tmp_path / "saved")
    assert {p.name for p in (tmp_path / "saved").iterdir()} == {
        "cfg.json", "kb.jsonl", "tokenizer", "passage_encoder", "reader_encoder",
        "entity_encoder", "heads.safetensors", "index", "manifest.json"}
    restored = _fresh(tiny_encoder).from_disk(tmp_path / "saved")
    assert _predictions(restored, toy_examples) == expected
    assert restored.reader.updates == 2
    assert restored.reader.phase() == linker.reader.phase() == "reader"
    assert restored.kb.fingerprint() == linker.kb.fingerprint()


def test_component_to_disk_without_the_index_rebuilds_it(tiny_encoder, toy_kb_path,
                                                         toy_examples, tmp_path):
    linker = _trained(tiny_encoder, toy_kb_path, toy_examples)
    expected = _predictions(linker, toy_examples)
    linker.to_disk(tmp_path / "no_index", exclude=["index"])
    assert not (tmp_path / "no_index" / "index").exists()
    assert (tmp_path / "no_index" / "heads.safetensors").exists()
    manifest = srsly.read_json(tmp_path / "no_index" / "manifest.json")["files"]
    assert manifest and not any(name.startswith("index") for name in manifest)
    with pytest.raises(ValueError, match=r"E030.*index missing"):
        _fresh(tiny_encoder).from_disk(tmp_path / "no_index")
    restored = _fresh(tiny_encoder).from_disk(tmp_path / "no_index", exclude=["index"])
    index = restored.reader.index
    assert index is not None and index.n_entities == len(linker.kb)
    np.testing.assert_allclose(index.embeddings, linker.reader.index.embeddings,
                               rtol=1e-5, atol=1e-6)
    assert _predictions(restored, toy_examples) == expected


def test_component_from_disk_without_the_kb_takes_kb_path(tiny_encoder, toy_kb_path,
                                                          toy_examples, tmp_path):
    linker = _trained(tiny_encoder, toy_kb_path, toy_examples)
    expected = _predictions(linker, toy_examples)
    linker.to_disk(tmp_path / "no_kb", exclude=["kb"])
    assert not (tmp_path / "no_kb" / "kb.jsonl").exists()
    assert (tmp_path / "no_kb" / "index").is_dir()
    with pytest.raises(ValueError, match=r"E030.*kb.jsonl missing"):
        _fresh(tiny_encoder).from_disk(tmp_path / "no_kb")
    with pytest.raises(ValueError, match="E008"):
        _fresh(tiny_encoder).from_disk(tmp_path / "no_kb", exclude=["kb"])
    restored = _fresh(tiny_encoder, kb_path=str(toy_kb_path)).from_disk(tmp_path / "no_kb",
                                                                        exclude=["kb"])
    assert restored.kb.fingerprint() == linker.kb.fingerprint()
    assert _predictions(restored, toy_examples) == expected
    # the saved KB left out on load: the config's KB is used, its index built (no W004)
    linker.to_disk(tmp_path / "full")
    smaller = tmp_path / "smaller.jsonl"
    smaller.write_text("\n".join(toy_kb_path.read_text().splitlines()[:3]) + "\n")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        other = _fresh(tiny_encoder, kb_path=str(smaller)).from_disk(
            tmp_path / "full", exclude=["kb", "index"])
    assert not [w for w in caught if "W004" in str(w.message)]
    assert len(other.kb) == 3 and other.reader.index.n_entities == 3
    ids = {e[3] for ents, _ in _predictions(other, toy_examples) for e in ents}
    assert ids and ids <= set(other.kb.ids)


def test_component_to_bytes_from_bytes_with_exclude(tiny_encoder, toy_kb_path, toy_examples):
    linker = _trained(tiny_encoder, toy_kb_path, toy_examples)
    expected = _predictions(linker, toy_examples)
    restored = _fresh(tiny_encoder).from_bytes(linker.to_bytes())
    assert _predictions(restored, toy_examples) == expected
    assert restored.reader.updates == 2
    data = linker.to_bytes(exclude=["cfg"])
    packed = srsly.msgpack_loads(data)
    assert "cfg.json" not in packed and "heads.safetensors" in packed
    with pytest.raises(ValueError, match=r"E030.*cfg.json missing"):
        _fresh(tiny_encoder).from_bytes(data)
    restored = _fresh(tiny_encoder).from_bytes(data, exclude=["cfg"])
    assert _predictions(restored, toy_examples) == expected  # the KB's types are the labels
    assert restored.reader.updates == 0  # the training state was left out


def test_nlp_to_disk_can_leave_the_linker_out(tiny_encoder, toy_kb_path, toy_examples,
                                              tmp_path):
    nlp = _nlp(tiny_encoder, toy_kb_path, ready=False)
    nlp.initialize(lambda: toy_examples)
    nlp.to_disk(tmp_path / "pipeline", exclude=[LINKER])
    assert not (tmp_path / "pipeline" / LINKER).exists()
    assert (tmp_path / "pipeline" / "config.cfg").exists()
    with pytest.raises(ValueError, match=r"E030.*does not exist"):
        spacy.load(tmp_path / "pipeline")  # never the base encoder in its place
    assert spacy.load(tmp_path / "pipeline", exclude=[LINKER]).pipe_names == []


def test_a_saved_cfg_without_trained_is_damaged(tiny_encoder, toy_kb_path, tmp_path):
    """Whether the heads were trained is read from cfg.json, never guessed from the updates:
    a cfg.json without it is refused."""
    _nlp(tiny_encoder, toy_kb_path).to_disk(tmp_path / "pipeline")
    folder = tmp_path / "pipeline" / LINKER
    cfg = srsly.read_json(folder / "cfg.json")
    assert cfg["trained"] is False
    del cfg["trained"]
    srsly.write_json(folder / "cfg.json", cfg)
    write_manifest(folder, [p.name for p in folder.iterdir() if p.name != "manifest.json"])
    with pytest.raises(ValueError, match=r"E030.*cfg\.json lacks 'trained'"):
        spacy.load(tmp_path / "pipeline")


# --- the one-pass span reader (the default architecture) -----------------------------------

def test_the_span_reader_is_the_default(tiny_encoder, toy_kb_path):
    linker = spacy.blank("xx").add_pipe("arbo_linker", config={
        "kb_path": str(toy_kb_path), "model": {"encoder_name": tiny_encoder}})
    assert linker.model.attrs["reader"] == "span"
    assert linker.settings.passage_length == 128 and linker.settings.threshold == 0.3


def test_span_reader_links_raw_text(tiny_encoder, toy_kb_path):
    nlp = _nlp(tiny_encoder, toy_kb_path, reader="span", threshold=0.0, top_k=3,
               model={"span_threshold": 0.0})
    doc = nlp("Aspirin induced cough in patients with heart failure.")
    assert doc.ents
    for ent in doc.ents:
        assert ent.label_ == nlp.get_pipe("arbo_linker").kb[ent.kb_id_].types[0]
        candidates = ent._.kb_candidates
        assert candidates[0][0] == ent.kb_id_ and len(candidates) == 3
        assert [s for _, s in candidates] == sorted((s for _, s in candidates), reverse=True)
    (start, end, merged), = doc._.passage_candidates
    assert (start, end) == (0, len(doc.text)) and len(merged) >= 3


@pytest.mark.parametrize("text", ["", "   \n\t ", "the of and", "\x00\x07\u200b 🙂 αβγ",
                                  "Aspirin\x00induced\u200bcough 🙂 in café patients."])
def test_span_reader_bad_and_odd_text(tiny_encoder, toy_kb_path, text):
    nlp = _nlp(tiny_encoder, toy_kb_path, reader="span", threshold=0.0,
               model={"span_threshold": 0.0})
    doc = nlp(text)
    for ent in doc.ents:
        assert doc.text[ent.start_char : ent.end_char] == ent.text
    if not text.strip():
        assert doc.ents == () and not doc._.passage_candidates


def test_span_reader_links_200k_characters_in_bounded_passages(tiny_encoder, toy_kb_path):
    nlp = _nlp(tiny_encoder, toy_kb_path, reader="span", threshold=0.0, top_k=1,
               batch_size=32, model={"span_threshold": 0.0, "max_spans": 2})
    sentence = "Aspirin induced cough in patients. "
    text = sentence * (200_000 // len(sentence))
    doc = nlp(text)
    passages = doc._.passage_candidates
    assert passages[-1][1] == len(text.rstrip())
    assert doc.ents and doc.ents[-1].end_char > 190_000


def test_span_reader_training_links_the_toy_corpus(tiny_encoder, toy_kb_path, toy_examples):
    """Joint steps (mention + entity loss) on six sentences find their gold links."""
    torch.manual_seed(0)
    nlp = _nlp(tiny_encoder, toy_kb_path, reader="span", ready=False, train_top_k=3)
    nlp.initialize(lambda: toy_examples)
    optimizer = Adam(0.003)
    losses = [nlp.update(toy_examples, sgd=optimizer)["arbo_linker"] for _ in range(40)]
    assert sum(losses[-3:]) < 0.3 * sum(losses[:3]), losses
    scores = nlp.evaluate(toy_examples)
    assert scores["e2e_inkb_f"] > 0.8, scores


@pytest.mark.parametrize("cross_reread", [0, 2])
def test_span_reader_save_load_with_exclude(tiny_encoder, toy_kb_path, toy_examples, tmp_path,
                                            cross_reread):
    torch.manual_seed(0)
    settings = {"reader": "span", "threshold": 0.0, "top_k": 3,
                "model": {"span_threshold": 0.0, "cross_reread": cross_reread}}
    nlp = _nlp(tiny_encoder, toy_kb_path, ready=False, **settings)
    nlp.initialize(lambda: toy_examples)
    optimizer = Adam(0.003)
    for _ in range(2):
        nlp.update(toy_examples, sgd=optimizer)
    linker = nlp.get_pipe(LINKER)
    expected = _predictions(linker, toy_examples)
    linker.to_disk(tmp_path / "saved")
    saved = {p.name for p in (tmp_path / "saved").iterdir()}
    assert ("cross_encoder" in saved) == bool(cross_reread) and "reader_encoder" not in saved
    fresh = _nlp(tiny_encoder, toy_kb_path, ready=False, **settings).get_pipe(LINKER)
    restored = fresh.from_disk(tmp_path / "saved")
    assert _predictions(restored, toy_examples) == expected
    assert restored.reader.updates == 2
    fresh = _nlp(tiny_encoder, toy_kb_path, ready=False, **settings).get_pipe(LINKER)
    restored = fresh.from_bytes(linker.to_bytes(exclude=["index"]), exclude=["index"])
    assert _predictions(restored, toy_examples) == expected
    # the config is the source of truth: another architecture or cross_reread is an error
    other = {**settings, "model": {"span_threshold": 0.0, "cross_reread": 2 - cross_reread}}
    with pytest.raises(ValueError, match=r"E080.*cross_reread"):
        _nlp(tiny_encoder, toy_kb_path, ready=False, **other).get_pipe(LINKER).from_disk(
            tmp_path / "saved")
    with pytest.raises(ValueError, match=r"E080.*RetrieverReader"):
        _fresh(tiny_encoder).from_disk(tmp_path / "saved")


def test_span_reader_settings_are_checked(tiny_encoder, toy_kb_path):
    with pytest.raises(ValueError, match="E011"):
        _nlp(tiny_encoder, toy_kb_path, reader="span", ready=False,
             model={"cross_reread": 20}, top_k=4)
    with pytest.raises(ValueError, match="E028"):
        _nlp(tiny_encoder, toy_kb_path, reader="span", passage_length=200,
             passage_stride=100)


def test_span_reader_candidate_scores_are_python_floats(tiny_encoder, toy_kb_path):
    nlp = _nlp(tiny_encoder, toy_kb_path, reader="span", threshold=0.0,
               model={"span_threshold": 0.0})
    doc = nlp("Aspirin induced cough.")
    assert doc.ents
    assert all(type(s) is float for e in doc.ents for _, s in e._.kb_candidates)


def test_a_trained_span_reader_starts_the_cross_reread_setting(tiny_encoder, toy_kb_path,
                                                               toy_examples, tmp_path,
                                                               monkeypatch):
    """reader_path: train on from a saved span reader, here adding the cross re-read."""
    from spacy_arboel.linking.indexed_kb import IndexedKB
    from spacy_arboel.ml.module_holder import torch_modules

    torch.manual_seed(0)
    nlp = _nlp(tiny_encoder, toy_kb_path, reader="span", ready=False)
    nlp.initialize(lambda: toy_examples)
    nlp.update(toy_examples, sgd=Adam(0.003))
    nlp.to_disk(tmp_path / "span")
    trained = nlp.get_pipe(LINKER)
    cross = _nlp(tiny_encoder, toy_kb_path, reader="span", ready=False,
                 model={"cross_reread": 2}, top_k=4)
    linker = cross.get_pipe(LINKER)
    with monkeypatch.context() as patch:  # the saved index is taken, not built again
        patch.setattr(IndexedKB, "refresh",
                      lambda self, desc=None: pytest.fail("index built again"))
        linker.initialize(lambda: toy_examples, nlp=cross, reader_path=str(tmp_path / "span"))
    np.testing.assert_array_equal(linker.reader.index.embeddings, trained.reader.index.embeddings)
    old, new = torch_modules(trained.model)["spans"], torch_modules(linker.model)["spans"]
    assert all(torch.equal(old.state_dict()[k], v) for k, v in new.state_dict().items())
    assert "cross" in torch_modules(linker.model)
    assert cross.update(toy_examples, sgd=Adam(0.003))[LINKER] > 0
    with pytest.raises(ValueError, match="E029"):  # one starting point, not two
        linker.initialize(lambda: toy_examples, nlp=cross, reader_path=str(tmp_path / "span"),
                          linker_path=str(tmp_path / "span"))
    passage = _nlp(tiny_encoder, toy_kb_path, ready=False)
    passage.initialize(lambda: toy_examples)
    passage.to_disk(tmp_path / "passage")
    for path in (tmp_path / "passage", tmp_path):  # a passage reader; not a pipeline
        with pytest.raises(ValueError, match="E029"):
            linker.initialize(lambda: toy_examples, nlp=cross, reader_path=str(path))


@pytest.mark.parametrize("reader", ["passage", "span"])
def test_no_span_is_linked_to_its_opposite(tiny_encoder, tmp_path, reader):
    """Of a span's links (the heads' above the threshold, the dictionary's candidates) those
    to an entity whose names say the opposite of its words are dropped: the next one is
    linked; with ``opposites = false`` they are kept."""
    from spacy_arboel.linking.reader_spans import DocLinks, LinkedSpan
    from spacy_arboel.linking.text_links import unopposed_links

    kb_path = tmp_path / "kb.jsonl"
    kb_path.write_text("".join(json.dumps(e) + "\n" for e in (
        {"id": "T", "name": "Tall stature"}, {"id": "S", "name": "Short stature",
                                              "aliases": ["small stature"]})))
    text = "She had short stature."
    for opposites, kept in ((True, ["S"]), (False, ["T", "S"])):
        linker = _nlp(tiny_encoder, kb_path, reader=reader, lang="en",
                      get_candidates={"opposites": opposites}).get_pipe("arbo_linker")
        links = DocLinks(candidates={(8, 21): [("T", 0.9), ("S", 0.5)]})
        found = unopposed_links(
            [text], [[LinkedSpan(8, 21, "T", 0.9), LinkedSpan(8, 21, "S", 0.5)]], [links],
            linker.get_candidates, linker.kb, "en")
        assert [s.kb_id for s in found[0]] == kept
        assert [i for i, _ in links.candidates[(8, 21)]] == kept
    # the dictionary's link of a KB name is never dropped: "short stature" is Short stature
    nlp = _nlp(tiny_encoder, kb_path, reader=reader, lang="en", dictionary_spans="untrained")
    assert [(e.text, e.kb_id_) for e in nlp(text).ents] == [("short stature", "S")]


@pytest.mark.parametrize("reader", ["passage", "span"])
def test_an_untrained_linker_saves_each_encoder_once(tiny_encoder, toy_kb_path, tmp_path,
                                                     reader):
    """Untrained, the passage and entity encoders hold the base weights: one is saved as a
    reference to the other's folder, and the loaded pipeline links the same."""
    from spacy_arboel.encoders.saved_transformers import SAME_AS

    nlp = _nlp(tiny_encoder, toy_kb_path, reader=reader)
    text = "Aspirin induced cough and fever in patients with heart failure."
    expected = _links([nlp(text)])
    nlp.to_disk(tmp_path / "saved")
    folder = tmp_path / "saved" / "arbo_linker"
    assert [p.name for p in (folder / "entity_encoder").iterdir()] == [SAME_AS]
    assert (folder / "passage_encoder" / "model.safetensors").is_file()
    assert _links([spacy.load(tmp_path / "saved")(text)]) == expected
