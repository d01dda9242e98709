"""The README's examples run as written (with the tiny encoder and the toy KB substituted)."""

import contextlib
import io
import json
import re
from pathlib import Path

import pytest
import spacy

from tests.conftest import TOY_ENTITIES

README = Path(__file__).resolve().parents[1] / "README.md"
DOCS = README.parent / "docs"


def _python_block(heading: str, page: Path = README) -> str:
    """The first python block of ``page`` (the README) after ``heading``."""
    text = page.read_text()
    return re.search(r"```python\n(.*?)```", text[text.index(heading):], re.S)[1]


def test_the_own_pipeline_example_links(tiny_encoder, toy_kb_path):
    code = _python_block("### Use it in your own pipeline")
    given = 'linker = nlp.add_pipe("arbo_entity_linker", config={"kb_path": "kb.jsonl"})'
    assert given in code.splitlines()  # run, not commented out
    config = {"kb_path": str(toy_kb_path), "model": {"encoder_name": tiny_encoder}}
    code = code.replace(given, f'linker = nlp.add_pipe("arbo_entity_linker", config={config!r})')
    printed = io.StringIO()
    namespace: dict = {}
    with contextlib.redirect_stdout(printed):
        exec(code, namespace)
    doc = namespace["doc"]
    ids = {entity["id"] for entity in TOY_ENTITIES}
    assert [ent.text for ent in doc.ents] == ["Pepcid", "delirious", "lignocaine"]
    assert all(ent.kb_id_ in ids and ent._.kb_candidates for ent in doc.ents)
    assert len(printed.getvalue().splitlines()) == 3


def test_an_untrained_linker_not_set_up_says_what_to_call(tiny_encoder, toy_kb_path):
    """What the README says happens without ensure_ready() or nlp.initialize()."""
    nlp = spacy.blank("en")
    nlp.add_pipe("arbo_entity_linker", config={"kb_path": str(toy_kb_path),
                                               "model": {"encoder_name": tiny_encoder}})
    doc = nlp.make_doc("Daily aspirin.")
    doc.ents = [doc.char_span(6, 13, label="Chemical")]
    with pytest.raises(ValueError, match=r"E051.*nlp\.initialize\(\).*ensure_ready\(\)"):
        nlp(doc)


def test_the_pipeline_api_example_swaps_the_kb(saved_linker, tmp_path, monkeypatch):
    """The "From Python" example, run in a folder holding its paths: a pipeline saved with
    a smaller KB that links only with it."""
    code = _python_block("## From Python: `spacy_arboel.pipeline`", DOCS / "cli.md")
    (tmp_path / "training").mkdir()
    (saved_linker / "pipeline").rename(tmp_path / "training" / "model-best")
    smaller = TOY_ENTITIES[:3]
    (tmp_path / "my_kb.jsonl").write_text("".join(json.dumps(e) + "\n" for e in smaller))
    monkeypatch.chdir(tmp_path)
    exec(code, {})
    nlp = spacy.load(tmp_path / "my-pipeline")
    linker = nlp.get_pipe("arbo_entity_linker")
    assert linker.kb.ids == [e["id"] for e in smaller] and linker.cfg["top_k"] == 8
    doc = nlp.make_doc("Daily aspirin.")
    doc.ents = [doc.char_span(6, 13, label="Chemical")]
    assert nlp(doc).ents[0].kb_id_ in {e["id"] for e in smaller}


def test_a_sourced_linker_takes_another_kb_the_way_the_readme_says(saved_english_linker,
                                                                   tmp_path, monkeypatch):
    """The README's way round spaCy ignoring `config=` when sourcing: load with the KB,
    then source from what was loaded."""
    code = _python_block("spaCy ignores `config=` when it sources a component")
    (tmp_path / "training").mkdir()
    (saved_english_linker / "pipeline").rename(tmp_path / "training" / "model-best")
    smaller = TOY_ENTITIES[:3]
    (tmp_path / "my_kb.jsonl").write_text("".join(json.dumps(e) + "\n" for e in smaller))
    monkeypatch.chdir(tmp_path)
    namespace = {"nlp": spacy.blank("en"), "spacy": spacy}
    exec(code, namespace)
    linker = namespace["nlp"].get_pipe("arbo_entity_linker")
    assert sorted(linker.kb.ids) == sorted(e["id"] for e in smaller)
    # a path that names no file is an error, never ignored
    with pytest.raises(ValueError, match="E221"):
        spacy.load("training/model-best",
                   config={"components.arbo_entity_linker.kb_path": "no_such_kb.jsonl"})
