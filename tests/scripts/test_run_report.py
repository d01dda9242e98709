"""`report`: the Markdown report of a run's metrics folder, its plots and headline table."""

import json

import pytest

from project import app as project
from run_report import build_report, write_report

GROUP = {"n": 10, "recall@1": 0.9, "recall@8": 0.95, "recall@64": 0.98, "accuracy": 0.9}
FILES = {
    "linker_knn_negatives.json": {
        "name": "toy-knn", "all": GROUP, "in_kb": {**GROUP, "recall@1": 0.912},
        "seen": GROUP, "unseen": {**GROUP, "n": 2, "accuracy": 0.5},
        "per_type": {"Chemical": {**GROUP, "accuracy": 0.97}}, "timings": {
            "linking_mentions_per_s": 310.0}},
    "pipeline_knn_negatives.json": {
        "ents_p": 0.8, "ents_r": 0.9, "ents_f": 0.847, "ents_per_type": {
            "Disease": {"p": 0.7, "r": 0.8, "f": 0.746}}, "nel_inkb_acc": 0.9, "speed": 1234.5},
    "e2e.json": {"pipeline": ["arbo_linker"], "in_kb": {
        "precision": 0.839, "recall": 0.797, "f1": 0.818, "n_gold": 100},
        "timings": {"docs_per_s": 13.61}},
    "e2e_ner_linker.json": {"pipeline": ["ner", "arbo_entity_linker"], "in_kb": {
        "precision": 0.7, "recall": 0.78, "f1": 0.74, "n_gold": 100}},
    "coref_knn_negatives.json": {"coref": {
        "nmi": 0.99, "ari": 0.8, "muc": {"f": 0.81}, "b3": {"f": 0.97}, "ceafe": {"f": 0.96},
        "conll_f1": 0.913}, "clustering": {"all": {"accuracy": 0.96}},
        "independent": {"all": {"accuracy": 0.95}}, "timings": {"mentions_per_s": 142.7}},
    "coref_tuning.json": {"best": {"k": 1}},
    "rerank.json": {"runs": [{"oracle": "none", "top_k": 4, "bi_encoder": {"accuracy": 1.0},
                              "cross_encoder": {"accuracy": 0.458, "candidate_recall": 1.0}}]},
    "nil_knn_negatives.json": {"threshold": 0.4321, "test": {"nil": {
        "precision": 0.5, "recall": 0.6, "f1": 0.545, "au_pr": 0.51}, "accuracy_with_nil": 0.8}},
}


@pytest.fixture
def metrics(tmp_path):
    folder = tmp_path / "metrics" / "toy"
    folder.mkdir(parents=True)
    for name, data in FILES.items():
        (folder / name).write_text(json.dumps(data))
    (folder / "nil_pr_knn_negatives.png").write_bytes(b"\x89PNG\r\n\x1a\nfake")
    return folder


def test_the_report_has_every_section_and_the_headline(metrics):
    report = write_report(metrics)
    text = (metrics / "report.md").read_text()
    assert text == report.markdown
    for heading in ("At a glance", "assembled pipeline", "gold test mentions",
                    "End-to-end", "Clustering", "Re-ranking", "NIL detection"):
        assert heading in text
    headline = dict(report.headline)
    # rows are named for what they are: a run's own name, else what its file holds
    pipeline = "ner + arbo_entity_linker + arbo_coref, the knn_negatives objective"
    assert headline[f"{pipeline}: NER F"] == "0.847"
    assert headline["toy-knn: in-KB R@1 / R@64"] == "0.912 / 0.980"
    assert headline["arbo_linker (raw text, no ner): InKB F1 (%)"] == "81.8"
    assert headline["ner + arbo_entity_linker (raw text): InKB F1 (%)"] == "74.0"
    assert headline["toy-knn: mentions/s"] == "310.0"
    coref = "arbo_coref over the linker of the knn_negatives objective"
    assert headline[f"{coref}: CoNLL F1"] == "0.913"
    reranker = "arbo_reranker over the linker's candidates"
    assert headline[f"{reranker}: cross-encoder accuracy (bi-encoder)"] == "0.458 (1.000)"
    assert "| type Chemical | 10 | 0.900 | 0.950 | 0.980 | 0.970 |" in text
    assert "| Disease | 0.700 | 0.800 | 0.746 |" in text
    assert "| arbo_linker (raw text, no ner) | 83.9 | 79.7 | 81.8 | 100 | 13.61 |" in text
    assert ("| NIL threshold of the linker of the knn_negatives objective | 0.4321 | 0.500 "
            "| 0.600 | 0.545 | 0.510 | 0.800 |") in text
    assert "coref_tuning" not in text
    assert report.plots == ["recall_at_k.png", "reliability.png", "nil_pr_knn_negatives.png"]
    assert (metrics / "recall_at_k.png").read_bytes()[:4] == b"\x89PNG"
    assert (metrics / "reliability.png").read_bytes()[:4] == b"\x89PNG"


def test_a_report_elsewhere_takes_its_plots_along(metrics, tmp_path):
    write_report(metrics, tmp_path / "out" / "r.md")
    assert {p.name for p in (tmp_path / "out").iterdir()} == {
        "r.md", "recall_at_k.png", "reliability.png", "nil_pr_knn_negatives.png"}


def test_a_partial_run_reports_what_it_has(tmp_path):
    (tmp_path / "e2e.json").write_text(json.dumps(FILES["e2e.json"]))
    report = build_report(tmp_path)
    assert "End-to-end" in report.markdown and "Clustering" not in report.markdown
    assert report.plots == []


def test_the_end_to_end_section_says_which_thresholds_were_tuned(tmp_path):
    (tmp_path / "e2e.json").write_text(json.dumps(FILES["e2e.json"]))
    (tmp_path / "threshold_tuning_arbo_linker.json").write_text(json.dumps(
        {"model": "training/x/e2e_untuned/model-best", "dev": "corpus/x/dev.spacy",
         "best": {"threshold": 0.62, "precision": 0.8, "recall": 0.7, "f1": 0.755},
         "rows": []}))
    markdown = build_report(tmp_path).markdown
    assert "arbo_linker's link threshold: threshold 0.6200 (dev InKB F1 0.755" in markdown
    assert "corpus/x/dev.spacy" in markdown


def test_the_wrong_and_missed_links_of_the_page_are_listed(tmp_path):
    (tmp_path / "link_errors.json").write_text(json.dumps({"gold_links": 41, "errors": [
        {"doc": "92000011", "text": "fits", "kind": "wrong", "predicted": "D004827",
         "predicted_name": "Epilepsy", "gold": "D012640", "gold_name": "Seizures"},
        {"doc": "92000012", "text": "slow pulse", "kind": "missed", "predicted": "",
         "predicted_name": "", "gold": "D001919", "gold_name": "Bradycardia"}]}))
    report = build_report(tmp_path)
    assert "| 92000011 | fits | wrong | D004827 Epilepsy | D012640 Seizures |" in report.markdown
    assert "| 92000012 | slow pulse | missed | – | D001919 Bradycardia |" in report.markdown
    assert "39 of 41 gold links right" in report.markdown
    assert dict(report.headline)["rendered gold links wrong / missed"] == "1 / 1 of 41"


def test_the_warnings_of_the_corpora_head_the_report(tmp_path):
    warning = "[W020] NCBI-disease's official test file ... is not in data/ncbi_disease"
    for name in ("e2e.json", "linker_knn_negatives.json"):
        (tmp_path / name).write_text(json.dumps({**FILES[name], "corpus_warnings": [warning]}))
    markdown = build_report(tmp_path).markdown
    assert markdown.count(warning) == 1  # once, however many files carry it
    assert markdown.index(warning) < markdown.index("## At a glance")
    (tmp_path / "linker_knn_negatives.json").unlink()
    (tmp_path / "e2e.json").write_text(json.dumps(FILES["e2e.json"]))
    assert "Warning" not in build_report(tmp_path).markdown


def test_bad_folders_and_files_are_coded_errors(tmp_path):
    with pytest.raises(ValueError, match="E116"):
        build_report(tmp_path)
    (tmp_path / "e2e.json").write_text("{not json")
    with pytest.raises(ValueError, match="E111"):
        build_report(tmp_path)
    (tmp_path / "e2e.json").write_text("[1, 2]")
    with pytest.raises(ValueError, match="E112"):
        build_report(tmp_path)


def test_report_command_prints_the_headline(metrics, tmp_path, cli):
    result = cli("report", metrics, "--title", "Toy run", app=project)
    assert result.exit_code == 0, result.output
    assert "InKB F1 (%)" in result.output and "81.8" in result.output
    assert (metrics / "report.md").read_text().startswith("# Toy run: results")
    empty = tmp_path / "empty"
    empty.mkdir()
    result = cli("report", empty, app=project)
    assert result.exit_code == 1 and "E116" in result.output


def test_report_command_with_no_headline_and_an_output_over_an_input(tmp_path, cli):
    (tmp_path / "nil_x.json").write_text(json.dumps(FILES["nil_knn_negatives.json"]))
    result = cli("report", tmp_path, app=project)
    assert result.exit_code == 0, result.output
    assert "NIL detection" in (tmp_path / "report.md").read_text()
    before = (tmp_path / "nil_x.json").read_text()
    result = cli("report", tmp_path, "--output", tmp_path / "nil_x.json", app=project)
    assert result.exit_code == 1 and "E040" in result.output
    assert (tmp_path / "nil_x.json").read_text() == before
