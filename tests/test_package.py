"""The shipped package, as the real-data workflow builds it (a transformer `ner`, sourced with
`arbo_entity_linker` by configs/assemble.cfg, then `arbo_coref`), on the toy data: `spacy
package` with the measured metrics and the KB in meta.json, installed into a fresh virtual
environment, where `spacy.load` links text."""

import json
import site
import subprocess
import sys
from pathlib import Path

import pytest
from spacy.util import load_config, load_model_from_config
from thinc.api import Adam

ROOT = Path(__file__).parent.parent


def _run(*args, cwd=None):
    result = subprocess.run([str(a) for a in args], capture_output=True, text=True, cwd=cwd,
                            timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


@pytest.fixture
def shipped(saved_english_linker, tiny_encoder, toy_examples, tmp_path, cli):
    """training/model-best as `spacy project run train` leaves it, and its metrics."""
    config = load_config(ROOT / "configs" / "ner_trf.cfg",
                         overrides={"paths.encoder": tiny_encoder}, interpolate=True)
    ner = load_model_from_config(config, auto_fill=True)
    ner.initialize(lambda: toy_examples)
    optimizer = Adam(0.001)
    for _ in range(3):
        ner.update(toy_examples, sgd=optimizer)
    ner.to_disk(tmp_path / "ner")
    model = tmp_path / "model-best"
    _run(sys.executable, "-m", "spacy", "assemble", ROOT / "configs" / "assemble.cfg", model,
         "--paths.ner", tmp_path / "ner", "--paths.linker", saved_english_linker / "pipeline")
    result = cli("add-coref", model)
    assert result.exit_code == 0, result.output
    metrics = tmp_path / "metrics"
    metrics.mkdir()
    (metrics / "pipeline_knn_negatives.json").write_text(json.dumps(
        {"ents_f": 0.8512, "nel_inkb_acc": 0.9}))
    (metrics / "linker_knn_negatives.json").write_text(json.dumps(
        {"in_kb": {"recall@1": 0.911, "recall@64": 0.976}}))
    (metrics / "e2e_ner_linker.json").write_text(json.dumps({"in_kb": {"f1": 0.79}}))
    return model, metrics


@pytest.mark.slow
def test_the_package_installs_and_links_in_a_fresh_environment(shipped, tmp_path, cli):
    model, metrics = shipped
    meta = tmp_path / "package_meta.json"
    from project import app as project

    result = cli("package-meta", model, metrics, "--output", meta, "--dataset", "toy",
                 "--objective", "knn_negatives", "--settings", ROOT / "configs" / "datasets.yml",
                 app=project)
    assert result.exit_code == 0, result.output
    written = json.loads(meta.read_text())
    assert written["performance"] == {"ents_f": 0.8512, "nel_inkb_acc": 0.9,
                                      "linker_inkb_recall@1": 0.911,
                                      "linker_inkb_recall@64": 0.976, "e2e_inkb_f": 0.79}
    assert written["kb"]["entities"] > 0 and written["kb"]["description"].startswith("Toy KB")
    (tmp_path / "packages").mkdir()
    _run(sys.executable, "-m", "spacy", "package", model, tmp_path / "packages", "--name",
         "arboel_test", "--version", "0.0.1", "--meta-path", meta, "--force")
    tarball = tmp_path / "packages" / "en_arboel_test-0.0.1" / "dist" / \
        "en_arboel_test-0.0.1.tar.gz"
    assert tarball.exists()
    # a fresh environment; its dependencies (spacy, torch, spacy-arboel) are this one's,
    # offline, so only the package itself is installed there
    env = tmp_path / "env"
    _run(sys.executable, "-m", "venv", env)
    env_site = Path(_run(env / "bin" / "python", "-c",
                         "import sysconfig; print(sysconfig.get_paths()['purelib'])").strip())
    # addsitedir also reads that environment's .pth files (spacy-arboel may be editable)
    (env_site / "outer.pth").write_text("".join(
        f"import site; site.addsitedir({path!r})\n" for path in site.getsitepackages()))
    # the wheel is built here (offline: this environment's setuptools), installed there
    _run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w",
         tmp_path / "wheels", tarball)
    wheel = next((tmp_path / "wheels").glob("en_arboel_test-0.0.1-*.whl"))
    _run(env / "bin" / "python", "-m", "pip", "install", "--no-deps", "--no-index", wheel)
    out = _run(env / "bin" / "python", "-c", (
        "import json, spacy\n"
        "nlp = spacy.load('en_arboel_test')\n"
        "doc = nlp('Aspirin induced cough in patients with heart failure.')\n"
        "print(json.dumps({'pipeline': nlp.pipe_names, 'meta': nlp.meta,\n"
        "    'file': spacy.util.get_package_path('en_arboel_test').as_posix(),\n"
        "    'ents': [(e.text, e.label_, e.kb_id_) for e in doc.ents]}))"), cwd=tmp_path)
    loaded = json.loads(out.strip().splitlines()[-1])
    assert loaded["file"].startswith(env.as_posix())  # installed there, not found elsewhere
    assert loaded["pipeline"] == ["ner", "arbo_entity_linker", "arbo_coref"]
    assert loaded["meta"]["performance"]["linker_inkb_recall@1"] == 0.911
    assert loaded["meta"]["kb"]["fingerprint"] == written["kb"]["fingerprint"]
    kb_ids = {json.loads(line)["id"] for line in
              (model / "arbo_entity_linker" / "kb.jsonl").read_text().splitlines()}
    assert all(kb_id in kb_ids for _, _, kb_id in loaded["ents"])


def test_every_install_hint_names_a_command_that_works():
    """spacy-arboel has no release on a package index, so a message, a help text or a
    docstring that tells a user to ``pip install "spacy-arboel[...]"`` names a command
    that fails: name the package the extra holds (issue 62, item 3)."""
    import re

    root = Path(__file__).resolve().parents[1] / "spacy_arboel"
    hint = re.compile(r"pip install\s+\\?[\"']?spacy-arboel\\?\[")
    found = [f"{path.relative_to(root)}:{n}" for path in sorted(root.rglob("*.py"))
             for n, line in enumerate(path.read_text().splitlines(), 1) if hint.search(line)]
    assert not found, found
