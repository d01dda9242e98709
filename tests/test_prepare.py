"""The `prepare` command that builds the project's corpora and KB."""

from pathlib import Path

import spacy
from spacy.tokens import DocBin
from typer.testing import CliRunner

from spacy_arboel.cli import app
from spacy_arboel.kb import KnowledgeBase

ROOT = Path(__file__).resolve().parents[1]


def test_prepare_toy_writes_corpora_and_kb(tmp_path):
    result = CliRunner().invoke(
        app, ["prepare", "toy", str(tmp_path), "--assets-dir", str(ROOT / "assets")]
    )
    assert result.exit_code == 0, result.output
    kb = KnowledgeBase.from_jsonl(tmp_path / "kb.jsonl")
    assert len(kb) == len(KnowledgeBase.from_jsonl(ROOT / "assets" / "toy" / "kb.jsonl"))
    nlp = spacy.blank("en")
    for split in ("train", "dev", "test"):
        docs = list(DocBin().from_disk(tmp_path / f"{split}.spacy").get_docs(nlp.vocab))
        assert docs and all(e.kb_id_ for d in docs for e in d.ents)


def test_prepare_names_a_missing_data_dir(tmp_path):
    result = CliRunner().invoke(
        app, ["prepare", "bc5cdr", str(tmp_path / "out"), "--data-dir", str(tmp_path / "nope")]
    )
    assert result.exit_code != 0
    assert "nope" in result.output or "nope" in str(result.exception)


def test_prepare_discovery_setting_holds_entities_out(tmp_path):
    import json

    from spacy_arboel.data.ids import gold_ids

    result = CliRunner().invoke(app, [
        "prepare", "toy", str(tmp_path), "--assets-dir", str(ROOT / "assets"),
        "--holdout", "0.3", "--seed", "1"])
    assert result.exit_code == 0, result.output
    written = json.loads((tmp_path / "heldout_ids.json").read_text())
    heldout = set(written["ids"])
    assert heldout == set(written["test_ids"]) | set(written["dev_ids"])
    kb = KnowledgeBase.from_jsonl(tmp_path / "kb.jsonl")
    assert heldout and not heldout & set(kb.ids)
    nlp = spacy.blank("en")

    def ids(split):
        docs = DocBin().from_disk(tmp_path / f"{split}.spacy").get_docs(nlp.vocab)
        return {i for d in docs for e in d.ents for i in gold_ids(e.kb_id_)}

    assert not heldout & ids("train")
    # dev and test keep them: the mentions to discover, for tuning and for the benchmark
    assert set(written["test_ids"]) <= ids("test")
    assert set(written["dev_ids"]) <= ids("dev")


def test_prepare_nil_setting_removes_entity_types(tmp_path):
    import json

    from spacy_arboel.data.ids import gold_ids

    result = CliRunner().invoke(app, [
        "prepare", "toy", str(tmp_path), "--assets-dir", str(ROOT / "assets"),
        "--remove-types", "Chemical"])
    assert result.exit_code == 0, result.output
    removed = set(json.loads((tmp_path / "removed_ids.json").read_text())["ids"])
    full = KnowledgeBase.from_jsonl(ROOT / "assets" / "toy" / "kb.jsonl")
    assert removed == {e.id for e in full if "Chemical" in e.types}
    kb = KnowledgeBase.from_jsonl(tmp_path / "kb.jsonl")
    assert removed and not removed & set(kb.ids)
    nlp = spacy.blank("en")
    train = DocBin().from_disk(tmp_path / "train.spacy").get_docs(nlp.vocab)
    assert not removed & {i for d in train for e in d.ents for i in gold_ids(e.kb_id_)}
    test = DocBin().from_disk(tmp_path / "test.spacy").get_docs(nlp.vocab)
    assert removed & {i for d in test for e in d.ents for i in gold_ids(e.kb_id_)}
    bad = CliRunner().invoke(app, [
        "prepare", "toy", str(tmp_path / "b"), "--assets-dir", str(ROOT / "assets"),
        "--remove-types", "Planet"])
    assert bad.exit_code != 0 and "Planet" in bad.output and "Chemical" in bad.output
