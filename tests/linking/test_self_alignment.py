"""SapBERT-style self-alignment pretraining (spacy_arboel.linking.self_alignment) and the
KB's positive name pairs it trains on (spacy_arboel.linking.kb_pairs); the loss and its miner
are tested in tests/objectives/test_multi_similarity.py."""

from __future__ import annotations

import itertools
import json
import time
import warnings

import pytest
import torch

from spacy_arboel.kb.entity import Entity
from spacy_arboel.kb.knowledge_base import KnowledgeBase
from spacy_arboel.linking.kb_pairs import (
    PairStats,
    count_positive_pairs,
    distinct_names,
    iter_positive_pairs,
    opposite_pairs,
    with_opposite_pairs,
)
from spacy_arboel.linking.loop_settings import SelfAlignmentSettings
from spacy_arboel.linking.self_alignment import SelfAlignmentTrainer, pretrain_encoder

# names built from the tiny BERT's vocabulary (whole words or single-letter wordpieces)
TOY_NAMES = {
    "E1": ["cough", "tussis", "coughing"],
    "E2": ["fever", "pyrexia", "febrile"],
    "E3": ["aspirin", "acetylsalicylic acid", "asa"],
    "E4": ["heart failure", "cardiac failure", "hf", "acute heart failure"],
    "E5": ["pain", "ache", "dolor"],
    "E6": ["drug induced", "caused by drug"],
}


def _kb(names: dict[str, list[str]]) -> KnowledgeBase:
    return KnowledgeBase(Entity(id=key, name=values[0], aliases=tuple(values[1:]))
                         for key, values in names.items())


def _labelled(names: dict[str, list[str]]) -> tuple[list[str], list[int]]:
    texts, labels = [], []
    for label, values in enumerate(names.values()):
        texts += values
        labels += [label] * len(values)
    return texts, labels


def _cosine_gap(vectors: torch.Tensor, labels: list[int]) -> float:
    """Mean cosine of same-entity name pairs minus that of different-entity pairs."""
    sim = vectors @ vectors.T
    lab = torch.tensor(labels)
    same = lab[:, None] == lab[None, :]
    off = ~torch.eye(len(labels), dtype=torch.bool)
    return float(sim[same & off].mean() - sim[~same].mean())


# --- (3) the pair stream ------------------------------------------------------------------


def test_stream_pairs_single_names_caps_and_duplicates():
    names = {
        "single": ["Pain"],
        "dup": ["Cold", " cold ", "COLD"],  # one name after normalising: no pair
        "empty": ["Fever", "   ", "pyrexia"],
        "many": [f"name {i}" for i in range(20)],  # 190 pairs, capped
        "shared_a": ["cold", "common cold"],
        "shared_b": ["chill", "cold"],
    }
    kb = _kb(names)
    stats = PairStats()
    pairs = list(iter_positive_pairs(kb, max_pairs_per_entity=50, seed=0, shuffle_buffer=7,
                                     stats=stats))
    counted = count_positive_pairs(kb, max_pairs_per_entity=50)
    assert len(pairs) == stats.pairs == counted.pairs == 50 + 1 + 1 + 1
    assert stats.entities_without_pair == counted.entities_without_pair == 2
    assert stats.empty_names == counted.empty_names == 1
    assert stats.duplicate_names == 2 and stats.capped_entities == 1
    for position, a, b in pairs:
        own = {n.strip().casefold() for n in distinct_names(kb.entity_at(position))}
        assert a.casefold() in own and b.casefold() in own and a.casefold() != b.casefold()
    many = [tuple(sorted(p[1:])) for p in pairs if kb.entity_at(p[0]).id == "many"]
    assert len(many) == len(set(many)) == 50
    assert {kb.entity_at(p[0]).id for p in pairs} == {"empty", "many", "shared_a", "shared_b"}
    # seeded: the same order again, another with another seed
    assert pairs == list(iter_positive_pairs(kb, 50, 0, shuffle_buffer=7))
    assert pairs != list(iter_positive_pairs(kb, 50, 1, shuffle_buffer=7))


def test_stream_is_lazy_on_a_large_kb():
    kb = KnowledgeBase(Entity(id=f"C{i}", name=f"concept {i}", aliases=(f"synonym {i}",))
                       for i in range(200_000))
    stats = PairStats()
    started = time.perf_counter()
    stream = iter_positive_pairs(kb, 50, seed=0, shuffle_buffer=1_000, stats=stats)
    first = list(itertools.islice(stream, 5))
    assert time.perf_counter() - started < 5.0
    assert len(first) == 5
    # only the buffer's worth of entities was read, not the whole KB
    assert stats.entities <= 1_010 and stats.pairs <= 1_010


def test_trainer_masks_a_name_shared_by_two_entities(tiny_encoder):
    trainer = SelfAlignmentTrainer(tiny_encoder, SelfAlignmentSettings(batch_size=4))
    pairs = [(0, "cold", "common cold"), (1, "chill", "COLD")]
    _, n_pos, n_neg, n_identical = trainer.batch_loss(pairs)
    assert n_identical == 1
    # 4 rows: at most 2 positive (ordered) pairs, 8 negative minus the masked 2
    assert n_pos <= 4 and n_neg <= 6


# --- (2) a tiny training run and (5) the saved output --------------------------------------


def test_training_aligns_names_and_saved_output_reloads(tiny_encoder, tmp_path):
    from spacy_arboel.encoders.loading import load_tokenizer, load_transformer
    from spacy_arboel.encoders.transformer import PooledEncoder

    settings = SelfAlignmentSettings(batch_size=8, learning_rate=1e-3, epochs=20,
                                     max_steps=30, seed=0)
    trainer = SelfAlignmentTrainer(tiny_encoder, settings)
    texts, labels = _labelled(TOY_NAMES)
    before = _cosine_gap(trainer.embed(texts), labels)
    kb = _kb(TOY_NAMES)
    report = trainer.fit(kb, progress=False)
    after_vectors = trainer.embed(texts)
    after = _cosine_gap(after_vectors, labels)
    assert report["steps"] == 30 and report["stopped_by"] == "max_steps"
    assert after > before + 0.1, (before, after)

    out = trainer.save(tmp_path / "sap", report)
    assert (out / "model.safetensors").is_file()
    assert not list(out.glob("*.bin")) and not list(out.glob("*.pt"))
    saved = json.loads((out / "self_alignment.json").read_text())
    assert saved["kb_fingerprint"] == kb.fingerprint()
    assert saved["steps"] == 30 and saved["pairs_seen"] == report["pairs_seen"]
    assert saved["positive_pairs_per_epoch"] == 3 + 3 + 3 + 6 + 3 + 1

    tokenizer = load_tokenizer(str(out))
    assert len(tokenizer) == len(trainer.tokenizer)
    assert "[START]" in tokenizer.get_vocab()
    encoder = PooledEncoder(load_transformer(str(out), len(tokenizer)), "mean").eval()
    inputs = tokenizer(texts, truncation=True, max_length=25, padding=True,
                       return_tensors="pt")
    with torch.no_grad():
        reloaded = torch.nn.functional.normalize(
            encoder(inputs["input_ids"], inputs["attention_mask"]), dim=-1)
    assert torch.allclose(reloaded, after_vectors, atol=1e-5)


def test_pretrain_encoder_writes_report_and_stops_on_time(tiny_encoder, tmp_path):
    settings = SelfAlignmentSettings(batch_size=4, time_limit_s=1e-6)
    report = pretrain_encoder(_kb(TOY_NAMES), tiny_encoder, tmp_path / "out", settings,
                              progress=False)
    assert report["stopped_by"] == "time_limit" and report["steps"] == 1
    assert report["entities_without_pair"] == 0
    assert json.loads((tmp_path / "out" / "self_alignment.json").read_text())["steps"] == 1
    # an earlier output may be replaced; a foreign folder may not (E168, before training)
    pretrain_encoder(_kb(TOY_NAMES), tiny_encoder, tmp_path / "out",
                     SelfAlignmentSettings(batch_size=4, max_steps=1), progress=False)
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match=r"\[E168\]"):
        pretrain_encoder(_kb(TOY_NAMES), tiny_encoder, foreign, settings, progress=False)
    assert (foreign / "notes.txt").read_text() == "mine"


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU")
def test_trains_on_a_gpu(tiny_encoder, tmp_path):
    settings = SelfAlignmentSettings(batch_size=4, max_steps=2, mixed_precision=True)
    report = pretrain_encoder(_kb(TOY_NAMES), tiny_encoder, tmp_path / "gpu", settings,
                              progress=False, device="cuda")
    assert report["device"].startswith("cuda") and report["steps"] == 2


# --- (4) bad input --------------------------------------------------------------------------


def test_kb_without_aliases_or_with_one_entity_is_refused(tiny_encoder, tmp_path):
    no_alias = _kb({"A": ["cough"], "B": ["fever"], "C": ["pain"]})
    with pytest.raises(ValueError, match=r"\[E165\].*aliases"):
        pretrain_encoder(no_alias, tiny_encoder, tmp_path / "a", progress=False)
    one = _kb({"A": ["cough", "tussis", "coughing"]})
    with pytest.raises(ValueError, match=r"\[E166\]"):
        pretrain_encoder(one, tiny_encoder, tmp_path / "b", progress=False)
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_long_empty_and_unknown_script_names(tiny_encoder, tmp_path):
    names = dict(TOY_NAMES)
    names["LONG"] = ["fever " * 1_700, "long fever"]  # 10,200 characters
    names["E5"] = ["pain", "ache", "  ", ""]
    trainer = SelfAlignmentTrainer(tiny_encoder, SelfAlignmentSettings(batch_size=32,
                                                                        max_steps=1))
    assert trainer.tokenize([names["LONG"][0]])["input_ids"].shape[1] == 25
    with pytest.warns(UserWarning, match=r"\[W008\] 2 name"):
        report = trainer.fit(_kb(names), progress=False)
    assert report["steps"] == 1 and report["empty_names"] == 2

    chinese = _kb({"A": ["咳嗽", "咳"], "B": ["发热", "发烧"], "C": ["疼痛", "痛"]})
    with pytest.raises(ValueError, match=r"\[E167\].*vocabulary"):
        SelfAlignmentTrainer(tiny_encoder).fit(chinese, progress=False)
    mixed = _kb({**TOY_NAMES, "ZH": ["咳嗽", "cough zh"]})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        SelfAlignmentTrainer(tiny_encoder, SelfAlignmentSettings(max_steps=1)).fit(
            mixed, progress=False)
    assert any("[W009]" in str(w.message) for w in caught)


@pytest.mark.parametrize("bad", [
    {"batch_size": 0}, {"max_length": 2}, {"learning_rate": 0}, {"margin": -0.1},
    {"max_steps": 0}, {"time_limit_s": 0}, {"base": 2.0}, {"max_pairs_per_entity": 0},
])
def test_settings_are_validated(bad):
    with pytest.raises(ValueError, match=r"\[E011\]"):
        SelfAlignmentSettings(**bad)


def test_pooling_and_device_are_validated(tiny_encoder):
    with pytest.raises(ValueError, match=r"\[E007\]"):
        SelfAlignmentSettings(pooling="mention")
    with pytest.raises(ValueError, match=r"\[E169\]"):
        SelfAlignmentTrainer(tiny_encoder, device="tpu")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match=r"\[E169\]"):
            SelfAlignmentTrainer(tiny_encoder, device="cuda")


OPPOSITE_NAMES = {
    "T": ["tall stature", "increased body height"],
    "S": ["short stature", "decreased body height", "small stature"],
    "C": ["cough", "tussis"],
}


def test_an_entitys_opposite_joins_its_batch_as_a_hard_negative(tiny_encoder):
    """With ``opposite_negatives``, each pair of *Short stature* is followed by a pair of
    *Tall stature* (labelled as its own entity) and the other way round; other entities'
    pairs are alone."""
    import random

    kb = _kb(OPPOSITE_NAMES)
    found = opposite_pairs(kb)
    assert set(found) == {kb.position("T"), kb.position("S")}
    assert all(b == kb.position("S") for b, _, _ in found[kb.position("T")])
    stream = list(with_opposite_pairs(iter_positive_pairs(kb, seed=0), found,
                                      random.Random(0)))
    plain = list(iter_positive_pairs(kb, seed=0))
    rest = iter(stream)
    for pair in plain:  # each plain pair, then its opposite's after it where it has one
        assert next(rest) == pair
        if pair[0] in found:
            following = next(rest)
            assert following[0] == ({kb.position("T"), kb.position("S")} - {pair[0]}).pop()
            assert following[1] in OPPOSITE_NAMES[kb.entity_at(following[0]).id]
    assert next(rest, None) is None
    settings = SelfAlignmentSettings(batch_size=4, max_steps=2, opposite_negatives=True)
    trainer = SelfAlignmentTrainer(tiny_encoder, settings)
    assert trainer.fit(kb, progress=False)["entities_with_an_opposite"] == 2
