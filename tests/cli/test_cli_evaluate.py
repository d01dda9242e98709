"""The evaluate, evaluate-e2e, tune-e2e and evaluate-rerank commands on the toy corpus."""

import json

import spacy
from spacy.tokens import DocBin


def _initialised(examples, *pipes):
    """A blank pipeline with ``(factory, config)`` pipes, initialised on ``examples``."""
    nlp = spacy.blank("xx")
    for factory, config in pipes:
        nlp.add_pipe(factory, config=config)
    nlp.initialize(lambda: examples)
    return nlp


def _saved(nlp, examples, folder, model="pipeline", gold="gold.spacy"):
    """Save ``nlp`` and the gold docs of ``examples`` under ``folder``; their paths."""
    nlp.to_disk(folder / model)
    DocBin(docs=[eg.reference for eg in examples]).to_disk(folder / gold)
    return str(folder / model), str(folder / gold)


def _reads_on_a_terminal(output: str, *cells: str) -> None:
    """The command printed a table, not JSON or wrapped Markdown: short lines, the cells."""
    lines = output.splitlines()
    assert lines and max(len(line) for line in lines) <= 100, output
    assert not any(line.lstrip().startswith(("{", "|")) for line in lines), output
    for cell in cells:
        assert any(cell in line for line in lines), (cell, output)


def test_evaluate_command_takes_config_overrides(tiny_encoder, toy_kb_path, toy_examples,
                                                 tmp_path, cli):
    nlp = _initialised(toy_examples, ("arbo_entity_linker", {
        "kb_path": str(toy_kb_path), "model": {"encoder_name": tiny_encoder},
        "entity_granularity": "alias"}))
    model, gold = _saved(nlp, toy_examples, tmp_path)
    result = cli(
        "evaluate", model, gold, "--output", tmp_path / "m.json", "--no-encoder-rate",
        "--components.arbo_entity_linker.threshold", "1e9",
        "--components.arbo_entity_linker.get_candidates.scores", "raw",
        "--components.arbo_entity_linker.expand_abbreviations", "true")
    assert result.exit_code == 0, result.output
    _reads_on_a_terminal(result.output, "R@64", "in-KB", "linking_mentions_per_s")
    written = json.loads((tmp_path / "m.json").read_text())
    metrics = written["in_kb"]
    # every mention scores below the overridden threshold: NIL, though candidates are found
    assert metrics["accuracy"] == 0.0 and metrics["recall@64"] > 0
    assert written["timings"]["search_engine"] == "faiss-cpu"  # where it searched, reported


def _e2e(tiny_encoder, kb_path, examples, **config):
    return _initialised(examples, ("arbo_linker", {
        "kb_path": str(kb_path), "model": {"encoder_name": tiny_encoder},
        "passage_length": 48, "passage_stride": 40, **config}))


def test_evaluate_e2e_command(tiny_encoder, toy_kb_path, toy_examples, tmp_path, cli):
    # the heads of the untrained span reader, whose retrieval recall is reported
    nlp = _e2e(tiny_encoder, toy_kb_path, toy_examples, threshold=0.0, top_k=2,
               dictionary_spans="never")
    model, test = _saved(nlp, toy_examples, tmp_path, "model", "test.spacy")
    result = cli("evaluate-e2e", model, test, "--output", tmp_path / "m.json")
    assert result.exit_code == 0, result.output
    _reads_on_a_terminal(result.output, "in_kb precision", "retriever_spans mention_recall@8")
    metrics = json.loads((tmp_path / "m.json").read_text())
    assert metrics["in_kb"]["n_gold"] == 11
    assert 0 <= metrics["in_kb"]["precision"] <= 1
    cls = metrics["retriever_spans"]  # the span reader (default): candidates per span
    recalls = [cls[f"mention_recall@{k}"] for k in (1, 2, 4, 8)]
    assert recalls == sorted(recalls) and recalls[-1] == 1.0  # K >= the 5 entities: all found
    assert metrics["timings"]["docs"] == len(toy_examples)


def test_tune_e2e_command_saves_the_threshold(tiny_encoder, toy_kb_path, toy_examples, tmp_path,
                                              cli):
    nlp = _e2e(tiny_encoder, toy_kb_path, toy_examples, top_k=2)
    model, dev = _saved(nlp, toy_examples, tmp_path, "model", "dev.spacy")
    result = cli("tune-e2e", model, dev, "--threshold", "0.0", "--threshold", "0.9999",
                 "--output", tmp_path / "t.json", "--output-model", tmp_path / "tuned")
    assert result.exit_code == 0, result.output
    tuned = json.loads((tmp_path / "t.json").read_text())
    assert [r["threshold"] for r in tuned["rows"]] == [0.0, 0.9999]
    assert tuned["rows"][1]["n_predicted"] == 0  # p(m)·p(e | m) untrained: far below 0.9999
    loaded = spacy.load(tmp_path / "tuned")
    assert loaded.get_pipe("arbo_linker").settings.threshold == tuned["best"]["threshold"]


def test_tune_e2e_tunes_the_nil_threshold_after_a_ner(tiny_encoder, toy_kb_path, toy_examples,
                                                      tmp_path, cli):
    """ner + arbo_entity_linker: the ents the ner finds (here an entity ruler, with a spurious
    "patients") are linked once; each NIL threshold keeps the ents scoring at least it."""
    nlp = spacy.blank("xx")
    ruler = nlp.add_pipe("entity_ruler")
    nlp.add_pipe("arbo_entity_linker", config={"kb_path": str(toy_kb_path),
                                               "model": {"encoder_name": tiny_encoder}})
    nlp.initialize(lambda: toy_examples)  # (clears the ruler's patterns)
    ruler.add_patterns([{"label": "X", "pattern": [{"LOWER": w}]}
                        for w in ("aspirin", "cough", "fever", "pyrexia", "patients")])
    model, dev = _saved(nlp, toy_examples, tmp_path, "model", "dev.spacy")
    scores = sorted(e._.kb_candidates[0][1] for eg in toy_examples
                    for e in nlp(eg.reference.text).ents)
    middle = (scores[len(scores) // 2 - 1] + scores[len(scores) // 2]) / 2
    result = cli("tune-e2e", model, dev, "--threshold", middle, "--threshold", "1e9",
                 "--output", tmp_path / "t.json", "--output-model", tmp_path / "tuned")
    assert result.exit_code == 0, result.output
    rows = json.loads((tmp_path / "t.json").read_text())["rows"]
    assert [r["threshold"] for r in rows] == [None, middle, 1e9]
    assert rows[0]["n_predicted"] == len(scores)  # no threshold: every ent found
    assert 0 < rows[1]["n_predicted"] < len(scores)  # the median score cuts some off
    assert rows[2]["n_predicted"] == rows[2]["tp"] == 0
    assert rows[0]["n_gold"] == 11 and rows[0]["tp"] <= rows[0]["n_predicted"]
    best = json.loads((tmp_path / "t.json").read_text())["best"]
    assert max(r["f1"] for r in rows) == best["f1"]
    loaded = spacy.load(tmp_path / "tuned")
    assert loaded.get_pipe("arbo_entity_linker").linking.threshold == best["threshold"]
    # the row without a threshold, chosen, is saved as never NIL (not the KB's default)
    result = cli("tune-e2e", model, dev, "--threshold", "1e9", "--output-model", tmp_path / "no")
    assert result.exit_code == 0, result.output
    never = spacy.load(tmp_path / "no").get_pipe("arbo_entity_linker")
    assert never.linking.threshold is None and never.linking.nil_recall is None


def test_evaluate_rerank_command(tiny_encoder, toy_kb_path, toy_examples, tmp_path, cli):
    nlp = _initialised(
        toy_examples,
        ("arbo_entity_linker", {"kb_path": str(toy_kb_path), "top_k": 4,
                                "model": {"encoder_name": tiny_encoder}}),
        ("arbo_reranker", {"top_k": 3, "train_top_k": 3,
                           "model": {"encoder_name": tiny_encoder}}))
    model, gold = _saved(nlp, toy_examples, tmp_path)
    result = cli("evaluate-rerank", model, gold, "--oracle", "none", "--oracle", "self",
                 "--oracle", "union", "--union-with", model, "--top-k", "1", "--top-k", "2",
                 "--output", tmp_path / "rerank.json")
    assert result.exit_code == 0, result.output
    _reads_on_a_terminal(result.output, "re-ranked", "union")
    output = json.loads((tmp_path / "rerank.json").read_text())
    runs = {(r["oracle"], r["top_k"]): r for r in output["runs"]}
    assert set(runs) == {(o, k) for o in ("none", "self", "union") for k in (1, 2)}
    assert runs["self", 2]["cross_encoder"]["candidate_recall"] == 1.0
    assert runs["none", 2]["n_in_kb"] == 11
    assert runs["none", 1]["cross_encoder"]["mean_candidates"] == 1.0
    # with one candidate the re-ranker can only agree with the bi-encoder
    assert (runs["none", 1]["cross_encoder"]["accuracy"]
            == runs["none", 1]["bi_encoder"]["accuracy"])
    # the oracle changes what the cross-encoder sees, never the bi-encoder's own top 1
    assert (runs["self", 2]["bi_encoder"]["accuracy"]
            == runs["none", 2]["bi_encoder"]["accuracy"])
    # each distinct pair is scored once; the union run at K=2 holds every other run's pairs
    union = runs["union", 2]["cross_encoder"]["mean_candidates"] * 11
    assert output["timings"]["pairs"] == round(union)


def test_evaluate_rerank_refuses_an_unknown_oracle(tmp_path, cli):
    """The oracles are a typed choice: another is refused before anything is loaded."""
    result = cli("evaluate-rerank", tmp_path, tmp_path, "--oracle", "gold")
    assert result.exit_code == 2
    assert "'gold' is not one of 'none', 'self', 'union'" in " ".join(
        result.output.replace("│", " ").split())
