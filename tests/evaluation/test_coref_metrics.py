"""Coreference metrics on the textbook example of Bagga and Baldwin (1998)."""

import pytest

from spacy_arboel.evaluation.coref_metrics import coref_metrics

# gold {1..5}, {6, 7}, {8..12}; the response merges the last two
GOLD = ["a"] * 5 + ["b"] * 2 + ["c"] * 5
PREDICTED = ["x"] * 5 + ["y"] * 7


def test_textbook_example():
    m = coref_metrics(GOLD, PREDICTED)
    assert m["muc"]["r"] == pytest.approx(1.0) and m["muc"]["p"] == pytest.approx(0.9)
    assert m["b3"]["r"] == pytest.approx(1.0)
    assert m["b3"]["p"] == pytest.approx((5 + 2 * 2 / 7 + 5 * 5 / 7) / 12)
    aligned = 1.0 + 10 / 12  # {1..5} with x, {8..12} with y
    assert m["ceafe"]["r"] == pytest.approx(aligned / 3)
    assert m["ceafe"]["p"] == pytest.approx(aligned / 2)
    assert m["conll_f1"] == pytest.approx((m["muc"]["f"] + m["b3"]["f"] + m["ceafe"]["f"]) / 3)
    assert 0 < m["ari"] < 1 and 0 < m["nmi"] < 1


def test_perfect_and_label_names_do_not_matter():
    m = coref_metrics(GOLD, [{"a": 3, "b": 1, "c": 2}[g] for g in GOLD])
    for key in ("muc", "b3", "ceafe"):
        assert m[key]["f"] == pytest.approx(1.0)
    assert m["ari"] == pytest.approx(1.0) and m["nmi"] == pytest.approx(1.0)


def test_all_singletons_and_bad_lengths():
    m = coref_metrics(list("abcd"), list("abcd"))
    assert m["muc"]["f"] == 0.0  # MUC has no links to count
    assert m["b3"]["f"] == pytest.approx(1.0) and m["ceafe"]["f"] == pytest.approx(1.0)
    assert coref_metrics([], []) == {"n": 0}
    with pytest.raises(ValueError, match="labels"):
        coref_metrics(["a"], ["a", "b"])


def test_mention_recall_counts_coreferent_neighbours():
    import numpy as np

    from spacy_arboel.evaluation.coref_metrics import mention_recall

    gold = ["a", "a", "a", "b"]
    # mention 0 finds 1 of its 2 coreferent mentions, 1 finds both, 2 finds none (k = 2);
    # mention 3 has no coreferent mention and is not counted
    neighbours = np.array([[1, 3], [0, 2], [3, -1], [0, 1]])
    assert mention_recall(neighbours, gold) == pytest.approx((0.5 + 1.0 + 0.0) / 3)
    assert mention_recall(neighbours, list("abcd")) is None


def test_string_baseline_groups_normalised_texts(toy_examples):
    from spacy_arboel.evaluation.coref_eval import normalised, string_baseline

    assert normalised("Cox-2") == normalised("COX 2") == "cox2"
    metrics = string_baseline(toy_examples)
    # toy mentions of one entity are spelt differently ("cough", "Coughing"): B3 recall < 1,
    # while no two different entities share a text: precision 1
    assert metrics["b3"]["p"] == pytest.approx(1.0) and metrics["b3"]["r"] < 1
