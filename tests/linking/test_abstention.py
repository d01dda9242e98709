"""The NIL threshold taken from the KB's own held-out names (issue 61, item 1)."""

from __future__ import annotations

import json
import random
import string

import numpy as np
import pytest

from spacy_arboel.kb.entity import Entity
from spacy_arboel.kb.knowledge_base import KnowledgeBase
from spacy_arboel.linking import DenseRetriever, RetrieverSettings
from spacy_arboel.linking.abstention import (
    MIN_RIGHT,
    held_out_first_scores,
    recall_threshold,
)


def _word(rng: random.Random) -> str:
    return "".join(rng.choice(string.ascii_lowercase) for _ in range(7))


def two_name_entities(n: int, seed: int = 0) -> list[dict]:
    """``n`` entities with two unrelated names each (no name shared)."""
    rng = random.Random(seed)
    return [{"id": f"E{i}", "name": f"{_word(rng)} {_word(rng)}",
             "aliases": [f"{_word(rng)} {_word(rng)}"]} for i in range(n)]


def test_recall_threshold_keeps_the_share_of_right_links_asked_for():
    first = np.linspace(0.01, 1.0, 100)
    right = np.ones(100, dtype=bool)
    right[::4] = False  # wrong links do not move the threshold
    kept = first[right]
    for recall in (0.5, 0.8, 0.95, 1.0):
        threshold = recall_threshold(first, right, recall)
        assert (kept >= threshold).mean() >= recall
        # the highest such score: one step up keeps too few
        assert (kept > threshold).mean() < recall or threshold == kept.max()
    assert recall_threshold(first, right, 1.0) == kept.min()
    assert recall_threshold(first, right, 0.5) > recall_threshold(first, right, 0.95)
    few = np.zeros(100, dtype=bool)
    few[:MIN_RIGHT - 1] = True
    assert recall_threshold(first, few, 0.9) is None


def test_a_held_out_name_is_linked_by_its_entitys_other_names_only(tiny_encoder):
    """Under a random encoder a name's own row scores a cosine of 1: with it left out, no
    pseudo-mention reaches 1 on its own entity (their names are unrelated)."""
    kb = KnowledgeBase(Entity(**{**e, "aliases": tuple(e["aliases"])})
                       for e in two_name_entities(40))
    retriever = DenseRetriever.from_pretrained(
        kb, tiny_encoder, RetrieverSettings(inputs="names", pooling="mention",
                                            row_dedupe_threshold=None))
    retriever.entities.refresh()
    first, right = held_out_first_scores(retriever, lambda raw: raw[0], k=8, n=30)
    assert len(first) == len(right) == 30
    assert (first < 0.9999).all()
    again, _ = held_out_first_scores(retriever, lambda raw: raw[0], k=8, n=30)
    assert np.array_equal(first, again)  # seeded


@pytest.fixture
def two_name_kb_path(tmp_path):
    path = tmp_path / "kb.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in two_name_entities(120)))
    return path
