"""NIL detection by a tuned score threshold (PEL §5.3)."""

import pytest

from spacy_arboel.evaluation.nil import nil_metrics, plot_nil_pr_curves, tune_nil_threshold


def test_tuner_finds_the_known_best_threshold():
    # NIL mentions score low; one linked mention (0.35) scores below one NIL (0.4).
    scores = [0.1, 0.2, 0.35, 0.4, 0.7, 0.8, 0.9]
    is_nil = [True, True, False, True, False, False, False]
    tuned = tune_nil_threshold(scores, is_nil)
    # cut at 0.55: NIL = {0.1, 0.2, 0.35, 0.4}: P 3/4, R 1, F1 6/7 (0.30: P 1, R 2/3, F1 0.8)
    assert tuned.threshold == pytest.approx(0.55)
    assert (tuned.precision, tuned.recall) == pytest.approx((0.75, 1.0))
    assert tuned.f1 == pytest.approx(6 / 7)


def test_tuner_separates_perfectly_separable_scores_and_handles_ties():
    tuned = tune_nil_threshold([0.5, 0.5, 0.9, 0.9], [True, True, False, False])
    assert tuned.threshold == pytest.approx(0.7) and tuned.f1 == 1.0
    # tied scores cannot be split: both go together
    tuned = tune_nil_threshold([0.5, 0.5, 0.9], [True, False, False])
    assert tuned.threshold == pytest.approx(0.7) and tuned.precision == 0.5


def test_metrics_at_a_threshold_and_au_pr():
    scores = [0.1, 0.2, 0.35, 0.4, 0.7]
    is_nil = [True, True, False, True, False]
    m = nil_metrics(scores, is_nil, threshold=0.3)
    assert (m["precision"], m["recall"]) == pytest.approx((1.0, 2 / 3))
    # ranking by -score: NIL, NIL, linked, NIL, linked → AP = (1 + 1 + 3/4) / 3
    assert m["au_pr"] == pytest.approx((1 + 1 + 0.75) / 3)
    assert m["n"] == 5 and m["n_nil"] == 3


def test_tuning_needs_both_kinds_of_mentions():
    with pytest.raises(ValueError, match="0 NIL and 2 in-KB"):
        tune_nil_threshold([0.1, 0.2], [False, False])
    with pytest.raises(ValueError, match="one length"):
        tune_nil_threshold([0.1], [True, False])


def test_pr_curve_plot_is_written(tmp_path):
    path = tmp_path / "plots" / "nil_pr.png"
    plot_nil_pr_curves({"proxy": ([0.1, 0.9, 0.3], [True, False, True]),
                        "ce": ([0.5, 0.6, 0.4], [True, False, True])}, path)
    assert path.exists() and path.stat().st_size > 1000


def test_tune_nil_command_saves_the_threshold(tiny_encoder, toy_kb_path, toy_examples, tmp_path,
                                              cli):
    import json

    import spacy
    from spacy.tokens import DocBin

    # Fever (D005334) is left out of the KB: its three mentions are NIL
    entities = [json.loads(line) for line in toy_kb_path.read_text().splitlines()]
    kb = tmp_path / "kb.jsonl"
    kb.write_text("".join(json.dumps(e) + "\n" for e in entities if e["id"] != "D005334"))
    nlp = spacy.blank("xx")
    nlp.add_pipe("arbo_entity_linker", config={"kb_path": str(kb),
                                               "model": {"encoder_name": tiny_encoder}})
    nlp.initialize(lambda: toy_examples)
    nlp.to_disk(tmp_path / "pipeline")
    DocBin(docs=[eg.reference for eg in toy_examples]).to_disk(tmp_path / "dev.spacy")
    result = cli(
        "tune-nil", tmp_path / "pipeline", tmp_path / "dev.spacy",
        "--test", tmp_path / "dev.spacy", "--output-model", tmp_path / "tuned",
        "--output", tmp_path / "nil.json", "--plot", tmp_path / "nil.png")
    assert result.exit_code == 0, result.output
    metrics = json.loads((tmp_path / "nil.json").read_text())
    assert metrics["dev"]["nil"]["n_nil"] == 3 and metrics["dev"]["nil"]["n"] == 11
    assert metrics["test"]["nil"]["f1"] == metrics["dev"]["nil"]["f1"] > 0
    tuned = spacy.load(tmp_path / "tuned")
    threshold = tuned.get_pipe("arbo_entity_linker").linking.threshold
    assert threshold == pytest.approx(metrics["threshold"])
    docs = list(tuned.pipe(eg.predicted for eg in toy_examples))
    for doc in docs:
        for ent in doc.ents:
            below = ent._.kb_candidates[0][1] < threshold
            assert (ent.kb_id_ == "NIL") == below
    assert (tmp_path / "nil.png").exists()
