"""`init-config`: the components' training configs from the installed package, and the
recipe a user follows with it (KB JSONL + annotated docs -> trained linker -> spacy.load)."""

import json
import subprocess
import sys
import zipfile

import pytest
import spacy
from spacy.util import load_config

from spacy_arboel.configs import COMPONENT_CONFIGS, packaged_config
from spacy_arboel.pipeline.configs import fill_components, init_config


@pytest.mark.parametrize("component", list(COMPONENT_CONFIGS))
def test_init_config_writes_the_packaged_config_with_the_paths(tmp_path, component, cli):
    out = tmp_path / "cfg" / f"{component}.cfg"
    extra = (["--linker", tmp_path / "linker"] if component != "arbo_entity_linker" else
             ["--kb", tmp_path / "kb.jsonl"])
    result = cli("init-config", out, "--component", component, "--train", tmp_path / "train.spacy",
                 "--encoder", "my-encoder", "--lang", "xx", *extra)
    assert result.exit_code == 0, result.output
    written = load_config(out, interpolate=False)
    packaged = load_config(packaged_config(component), interpolate=False)
    assert written["paths"]["train"] == str(tmp_path / "train.spacy")
    assert written["paths"]["encoder"] == "my-encoder" and written["nlp"]["lang"] == "xx"
    assert written["paths"]["dev"] is None  # not given: `spacy train --paths.dev` gives it
    # everything else as the package's config, its settings filled in from the factories
    assert written["components"] == fill_components(packaged)["components"]
    assert "top_k" in written["components"][component]
    assert written["training"] == packaged["training"]
    assert "--paths.dev" in result.output


def test_init_config_refuses_what_does_not_apply(tmp_path, cli):
    result = cli("init-config", tmp_path / "x.cfg", "--component", "ner")
    assert result.exit_code == 2 and "'ner' is not one of 'arbo_entity_linker'" in " ".join(
        result.output.replace("│", " ").split())
    with pytest.raises(ValueError, match=r"\[E007\].*--component 'ner'"):
        init_config("ner")
    result = cli("init-config", tmp_path / "x.cfg", "--component", "arbo_reranker",
                 "--kb", tmp_path / "kb.jsonl")
    assert result.exit_code != 0 and "--kb does not apply to arbo_reranker" in result.output
    with pytest.raises(ValueError, match=r"\[E205\].*arbo_entity_linker"):
        packaged_config("no_such_config")


def test_the_recipe_kb_and_jsonl_docs_to_a_trained_linker(tmp_path, tiny_encoder, toy_kb_path, cli):
    """What docs/usage.md shows a user with their own KB and annotated texts."""
    from conftest import TOY_SENTENCES

    docs = tmp_path / "docs.jsonl"
    docs.write_text("".join(json.dumps({"text": text, "spans": [
        {"start": s, "end": e, "label": label, "kb_id": kb} for s, e, label, kb in ents]})
        + "\n" for text, ents in TOY_SENTENCES))
    for split in ("train", "dev"):
        result = cli("convert", docs, tmp_path / f"{split}.spacy")
        assert result.exit_code == 0, result.output
    result = cli("init-config", tmp_path / "linker.cfg", "--train", tmp_path / "train.spacy",
                 "--dev", tmp_path / "dev.spacy", "--kb", toy_kb_path, "--encoder", tiny_encoder)
    assert result.exit_code == 0, result.output
    from spacy.cli.train import train

    train(tmp_path / "linker.cfg", tmp_path / "training", overrides={
        "training.max_steps": 4, "training.eval_frequency": 2, "training.max_epochs": 0})
    nlp = spacy.load(tmp_path / "training" / "model-best")
    doc = nlp.make_doc("Aspirin induced cough.")
    doc.ents = [doc.char_span(0, 7, label="Chemical"), doc.char_span(16, 21, label="Disease")]
    doc = nlp.get_pipe("arbo_entity_linker")(doc)
    assert all(e.kb_id_ in {"D001241", "D003371", "D005334", "D006333", "D010146"}
               for e in doc.ents)


@pytest.mark.slow
def test_the_wheel_ships_the_configs(tmp_path):
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                    "-q", "-w", str(tmp_path), str(root)], check=True, capture_output=True,
                   timeout=600)
    (wheel,) = tmp_path.glob("spacy_arboel-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    for component in COMPONENT_CONFIGS:
        assert f"spacy_arboel/configs/{component}.cfg" in names


def test_init_config_keeps_an_existing_file_unless_forced(tmp_path, cli):
    """Issue 40, items 3 and 6: an edited config was overwritten silently, and a folder
    as OUTPUT gave a traceback."""
    out = tmp_path / "linker.cfg"
    out.write_text("[paths]\n# my edits\n")
    result = cli("init-config", out)
    assert result.exit_code == 1 and "[E242]" in result.output and "--force" in result.output
    assert out.read_text() == "[paths]\n# my edits\n"
    result = cli("init-config", out, "--force")
    assert result.exit_code == 0, result.output
    assert load_config(out, interpolate=False)["nlp"]["lang"] == "en"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["linker.cfg"]  # no temporary file
    (tmp_path / "folder").mkdir()
    result = cli("init-config", tmp_path / "folder", "--force")
    assert result.exit_code == 1 and "[E241]" in result.output, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
