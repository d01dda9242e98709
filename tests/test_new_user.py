"""Issue 62's "done when": a new user follows the README with their own ontology file and
their own text, with the defaults (the default encoder, nothing substituted), saves the
pipeline, packages it as docs/usage.md says (`spacy package` beside spacy-arboel's wheel)
and installs the two files in a fresh virtual environment, where it links the same text
alike. The fresh environment installs the dependencies from the package index (as `.ci/run`
does), so the test takes a few minutes: `slow`."""

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_readme_examples import USAGE, _bash_block, _python_block, _run

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = Path(__file__).parent / "fixtures" / "phenotypes.obo"
HEADING = "### Your ontology, your text"
SHIP = "### Ship a pipeline: `spacy package` beside the wheel"


def _shell(*args, cwd: Path, timeout: int = 900) -> str:
    result = subprocess.run([str(a) for a in args], capture_output=True, text=True, cwd=cwd,
                            timeout=timeout)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result.stdout


@pytest.mark.slow
def test_a_new_user_links_their_ontology_and_ships_the_pipeline(tmp_path, monkeypatch):
    pytest.importorskip("pronto")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "hp.obo").write_bytes(FIXTURE.read_bytes())  # "their own" ontology file
    # the README's command and code, as written
    command, = _bash_block(HEADING)
    assert command.startswith("python -m spacy_arboel build-kb hpo.jsonl --obo hp.obo")
    _shell(sys.executable, *command.split()[1:], cwd=tmp_path)
    namespace: dict = {}
    printed = _run(_python_block(HEADING), namespace).splitlines()
    nlp, text = namespace["nlp"], namespace["doc"].text
    ents, concepts = ([list(pair) for pair in ast.literal_eval(line)] for line in printed)
    assert ["renal cysts", "HP:0000107"] in ents
    assert {kb_id for _, kb_id in concepts} >= {"HP:0000107", "HP:0001798", "HP:0001792"}
    # shipped as docs/usage.md says: the package, spacy-arboel's wheel beside it
    nlp.to_disk("my_pipeline")
    package, wheel, install = _bash_block(SHIP, USAGE)
    assert package == ("python -m spacy package my_pipeline packages --name my_hpo "
                       "--version 0.1.0")
    assert wheel.startswith("python -m pip wheel --no-deps . --wheel-dir ")
    assert install == "pip install torch==2.13.0 packages/en_my_hpo-0.1.0/dist/*"
    (tmp_path / "packages").mkdir()
    _shell(sys.executable, *package.split()[1:], cwd=tmp_path)
    dist = tmp_path / "packages" / "en_my_hpo-0.1.0" / "dist"
    # offline here: this environment's setuptools builds the wheel, in the checkout
    _shell(sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", ".",
           "--wheel-dir", dist, cwd=ROOT)
    assert sorted(p.name for p in dist.iterdir()) == [
        "en_my_hpo-0.1.0.tar.gz", "spacy_arboel-0.1.0-py3-none-any.whl"]
    env = tmp_path / "fresh"
    _shell(sys.executable, "-m", "venv", env, cwd=tmp_path)
    _shell(env / "bin" / "pip", "install", "-q", "torch==2.13.0", *sorted(dist.iterdir()),
           cwd=tmp_path)
    out = _shell(env / "bin" / "python", "-c", (
        "import json, spacy, spacy_arboel\n"
        "nlp = spacy.load('en_my_hpo')\n"
        f"doc = nlp({text!r})\n"
        "print(json.dumps({'where': spacy_arboel.__file__,\n"
        "    'ents': [[e.text, e.kb_id_] for e in doc.ents],\n"
        "    'concepts': [[s.text, s.kb_id_] for s in doc.spans['arbo_concepts']]}))"),
        cwd=tmp_path)
    there = json.loads(out.strip().splitlines()[-1])
    assert there["where"].startswith(str(env))  # the wheel's copy, not this checkout
    assert there["ents"] == ents and there["concepts"] == concepts
