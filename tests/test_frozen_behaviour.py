"""Behaviour frozen across refactors: tiny seeded models are trained, saved and loaded, and
their ``kb_id_``, candidate scores, cluster ids and end-to-end links on a fixed text set
must match ``data/frozen_behaviour.json``, which was written by the code before the
spaCy-free core (issue 15). Regenerate only for an intended change of behaviour:
``python tests/test_frozen_behaviour.py --write``.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

EXPECTED = Path(__file__).parent / "fixtures" / "frozen_behaviour.json"
LINKER_OBJECTIVES = {
    "in_batch": {"@misc": "spacy_arboel.InBatchObjective.v1"},
    "knn_negatives": {"@misc": "spacy_arboel.KnnNegativesObjective.v1", "n_negatives": 2},
    "arborescence": {"@misc": "spacy_arboel.ArborescenceObjective.v1", "n_negatives": 2},
    "proxy_fgsm": {"@misc": "spacy_arboel.FGSMObjective.v1", "epsilon": 0.01, "weight": 1.0,
                   "objective": {"@misc": "spacy_arboel.ProxyObjective.v1", "n_negatives": 2}},
}
# Training amplifies float noise (the thread count alone moves scores by 1e-2), so the test
# runs on one thread; the tolerance leaves room for another CPU's kernels: on a 2-core Xeon of
# 2026-11-28 the same code moved 99 of 286 scores by more than 1e-3 (at most 9.7e-3) and
# flipped near ties of proxy_fgsm, so 2e-2 (the kb_id is still checked where the top two
# differ by more than twice that).
SCORE_TOLERANCE = 2e-2


def _seed() -> None:
    import torch
    from spacy.util import fix_random_seed

    fix_random_seed(0)
    torch.manual_seed(0)


def _reload(nlp, folder: Path):
    import spacy

    nlp.to_disk(folder)
    return spacy.load(folder)


def _ents(docs) -> list[list[dict[str, Any]]]:
    return [[{"span": [e.start_char, e.end_char], "label": e.label_, "kb_id": e.kb_id_,
              # raw scores where the linker keeps them (its kb_candidates are probabilities
              # since issue 32), as they were recorded
              "candidates": [[c, round(float(s), 6)] for c, s in zip(
                  (c for c, _ in (e._.kb_candidates or [])),
                  e._.get("kb_raw_scores") if e.has_extension("kb_raw_scores")
                  and e._.get("kb_raw_scores") is not None
                  else (s for _, s in (e._.kb_candidates or [])), strict=False)],
              "cluster": e._.get("cluster_id") if e.has_extension("cluster_id") else None}
             for e in doc.ents] for doc in docs]


def linker_outputs(encoder: str, kb_path: Path, examples, folder: Path) -> dict[str, Any]:
    """Per objective: arbo_entity_linker (+ arbo_reranker, + arbo_coref for knn_negatives)
    trained 3 steps each from a seed, saved, loaded and run on the toy docs."""
    import spacy
    from thinc.api import Adam

    out = {}
    for key, objective in LINKER_OBJECTIVES.items():
        _seed()
        nlp = spacy.blank("en")
        # the factory's defaults when the outputs were frozen (pooling and abbreviations
        # changed with issue 30's zero-shot defaults; rows, batch size, inputs (then BLINK's
        # once trained) and the re-ranker's abbreviations with issue 42's one declaration
        # per setting; float32 on every CPU since issue 43's cpu_bf16)
        nlp.add_pipe("arbo_entity_linker", config={
            "kb_path": str(kb_path), "top_k": 4, "expand_abbreviations": False,
            "entity_granularity": "entity", "batch_size": 64, "inputs": "blink",
            "cpu_bf16": False,
            "model": {"encoder_name": encoder, "pooling": "cls"},
            "objective": objective})
        with_more = key == "knn_negatives"
        if with_more:
            nlp.add_pipe("arbo_reranker", config={"top_k": 3, "train_top_k": 3,
                                                  "expand_abbreviations": False,
                                                  "model": {"encoder_name": encoder}})
            nlp.add_pipe("arbo_coref", config={"k": 2, "threshold": None})
        nlp.initialize(lambda: examples)
        optimizer = Adam(0.003)
        for _ in range(3):
            nlp.update(examples, sgd=optimizer, exclude=["arbo_reranker"])
        if with_more:
            # the old code re-embedded the KB inside predict; now that is explicit
            nlp.get_pipe("arbo_entity_linker").ensure_ready()
            for _ in range(3):
                nlp.update(examples, sgd=optimizer, annotates=["arbo_entity_linker"],
                           exclude=["arbo_entity_linker"])
        loaded = _reload(nlp, folder / key)
        out[key] = _ents(loaded.pipe(eg.predicted.copy() for eg in examples))
    return out


def end_to_end_outputs(encoder: str, kb_path: Path, examples, folder: Path) -> dict[str, Any]:
    """arbo_linker (the passage reader, joint mode) trained 6 steps from a seed, saved,
    loaded, run on raw text."""
    import spacy
    from thinc.api import Adam

    _seed()
    nlp = spacy.blank("en")
    nlp.add_pipe("arbo_linker", config={
        "kb_path": str(kb_path), "threshold": 0.0, "top_k": 3, "train_top_k": 3,
        "passage_length": 32, "passage_stride": 24, "batch_size": 16, "max_span_length": 16,
        "entity_granularity": "entity",
        "model": {"@architectures": "spacy_arboel.RetrieverReader.v1", "encoder_name": encoder,
                  "warmup_retriever_steps": 2, "warmup_reader_steps": 2}})
    nlp.initialize(lambda: examples)
    optimizer = Adam(0.003)
    for _ in range(6):
        nlp.update(examples, sgd=optimizer)
    loaded = _reload(nlp, folder / "arbo_linker")
    docs = list(loaded.pipe(eg.reference.text for eg in examples))
    return {"ents": _ents(docs),
            "passages": [[[a, b, [[c, round(float(s), 6)] for c, s in cands]]
                          for a, b, cands in doc._.passage_candidates] for doc in docs]}


def all_outputs(encoder: str, kb_path: Path, examples, folder: Path) -> dict[str, Any]:
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return {"linker": linker_outputs(encoder, kb_path, examples, folder),
                "arbo_linker": end_to_end_outputs(encoder, kb_path, examples, folder)}
    finally:
        torch.set_num_threads(threads)


def _same_ent(found: dict[str, Any], expected: dict[str, Any], where: str) -> None:
    """Same span, label and cluster; the same candidates with the same scores (order may
    differ only between near ties); the same ``kb_id`` unless the top two nearly tie."""
    assert (found["span"], found["label"]) == (expected["span"], expected["label"]), where
    assert dict(found["candidates"]).keys() == dict(expected["candidates"]).keys(), where
    for kb_id, score in expected["candidates"]:
        assert dict(found["candidates"])[kb_id] == pytest.approx(score, abs=SCORE_TOLERANCE), (
            f"{where} {kb_id}")
    scores = [s for _, s in expected["candidates"]]
    if len(scores) < 2 or scores[0] - scores[1] > 2 * SCORE_TOLERANCE:
        assert found["kb_id"] == expected["kb_id"], where
        assert found["cluster"] == expected["cluster"], where


def _same(found: Any, expected: Any, where: str = "") -> None:
    if isinstance(expected, dict) and "candidates" in expected:
        _same_ent(found, expected, where)
    elif isinstance(expected, float):
        assert found == pytest.approx(expected, abs=SCORE_TOLERANCE), where
    elif isinstance(expected, list):
        assert isinstance(found, list) and len(found) == len(expected), where
        for i, (a, b) in enumerate(zip(found, expected, strict=True)):
            _same(a, b, f"{where}[{i}]")
    elif isinstance(expected, dict):
        assert set(found) == set(expected), where
        for key in expected:
            _same(found[key], expected[key], f"{where}.{key}")
    else:
        assert found == expected, where


def test_outputs_match_the_code_before_the_refactor(tiny_encoder, toy_kb_path, toy_examples,
                                                    tmp_path):
    expected = json.loads(EXPECTED.read_text())
    found = json.loads(json.dumps(all_outputs(tiny_encoder, toy_kb_path, toy_examples,
                                              tmp_path)))
    _same(found, expected)


def _write() -> None:
    sys.path.insert(0, str(Path(__file__).parent))
    import conftest

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        (tmp / "bert").mkdir()
        encoder = conftest._tiny_bert(tmp / "bert")
        kb_path = tmp / "kb.jsonl"
        kb_path.write_text("\n".join(json.dumps(e) for e in conftest.TOY_ENTITIES) + "\n")
        examples = conftest.toy_examples.__wrapped__()
        outputs = all_outputs(encoder, kb_path, examples, tmp)
    EXPECTED.parent.mkdir(exist_ok=True)
    EXPECTED.write_text(json.dumps(outputs, indent=1) + "\n")


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: python tests/test_frozen_behaviour.py --write")
    _write()
