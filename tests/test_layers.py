"""The package map of docs/architecture.md, checked: imports go down the layers, the core
packages import neither spaCy nor thinc, and the package imports nothing of the project's
scripts."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "spacy_arboel"
SCRIPTS = PACKAGE.parent / "scripts"
# top to bottom (docs/architecture.md): a package imports only packages of lower layers
LAYERS = (
    ("__main__",),
    ("cli",),
    ("pipeline",),
    ("components", "corpus", "evaluation", "render"),
    ("ml", "artefacts", "spacy_data"),
    ("jobs",),
    ("linking", "coref", "biomedical"),
    ("objectives", "encoders"),
    ("kb", "data", "outputs"),
    ("atomic", "parsing", "settings", "factories", "extensions", "configs", "__init__"),
    ("errors",),
)
LAYER = {name: depth for depth, names in enumerate(LAYERS) for name in names}
# no spaCy or thinc in these packages, in the algorithms of corpus/ (corpus/worker.py loads
# a pipeline in each worker, inside its functions) and in the lowest modules
SPACY_FREE = ("kb", "biomedical", "linking", "coref", "objectives", "encoders", "jobs", "data",
              "corpus.link_corpus", "corpus.linked_clusters", "corpus.shards",
              "atomic", "outputs", "parsing", "settings", "configs", "errors", "factories")


def spacy_free_modules() -> list[str]:
    """Every module of ``SPACY_FREE``: each file of a package, not only its ``__init__``."""
    modules = []
    for name in SPACY_FREE:
        path = PACKAGE.joinpath(*name.split("."))
        if path.is_dir():
            modules += [f"spacy_arboel.{'.'.join(f.relative_to(PACKAGE).with_suffix('').parts)}"
                        .removesuffix(".__init__") for f in sorted(path.rglob("*.py"))]
        else:
            modules.append(f"spacy_arboel.{name}")
    return modules


def _package(path: Path) -> str:
    parts = path.relative_to(PACKAGE).parts
    return parts[0].removesuffix(".py")


def _imported_packages(path: Path) -> set[str]:
    """The spacy_arboel packages a module imports (relative or absolute, anywhere in it)."""
    found = set()
    inside = path.relative_to(PACKAGE).parts[:-1]
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.ImportFrom):
            continue
        if node.level == 0:
            if (node.module or "").startswith("spacy_arboel."):
                found.add(node.module.split(".")[1])
            continue
        base = list(inside[: len(inside) - (node.level - 1)])
        parts = base + [p for p in (node.module or "").split(".") if p]
        found.update([parts[0]] if parts else [alias.name for alias in node.names])
    return found


def test_imports_go_down_the_layers():
    assert {_package(p) for p in PACKAGE.rglob("*.py")} <= set(LAYER), "a package not mapped"
    upward = []
    for path in sorted(PACKAGE.rglob("*.py")):
        source = _package(path)
        for target in _imported_packages(path) - {source}:
            if LAYER[target] <= LAYER[source]:
                upward.append(f"{path.relative_to(PACKAGE)} imports {target}")
    assert not upward, upward


def test_the_package_imports_nothing_of_the_projects_scripts():
    """``scripts/`` is the project's (not installed with the package): no module of the
    package imports one of its modules, and each script imports the package absolutely."""
    scripts = {path.stem for path in SCRIPTS.glob("*.py")}
    assert {"project", "dataset_files", "train_to_best"} <= scripts
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([alias.name for alias in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom)
                     and node.level == 0 else [])
            found += [f"{path.relative_to(PACKAGE)} imports {name}" for name in names
                      if name.split(".")[0] in scripts]
    assert not found, found
    relative = [path.name for path in SCRIPTS.glob("*.py")
                for node in ast.walk(ast.parse(path.read_text()))
                if isinstance(node, ast.ImportFrom) and node.level]
    assert not relative, relative


def test_the_core_modules_import_neither_spacy_nor_thinc():
    """Each module of the spaCy-free packages, imported in a fresh interpreter, loads
    neither spaCy nor thinc (importing the packages' ``__init__`` alone would miss a module
    that nothing there imports)."""
    modules = spacy_free_modules()
    assert "spacy_arboel.biomedical.mesh" in modules and "spacy_arboel.data.inputs" in modules
    code = ("import importlib, sys\n"
            f"for name in {modules!r}:\n"
            "    importlib.import_module(name)\n"
            "    found = {'spacy', 'thinc'} & set(sys.modules)\n"
            "    assert not found, f'{name} imports {sorted(found)}'\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]


@pytest.mark.slow  # a fresh interpreter that imports torch and trains
def test_the_core_imports_neither_spacy_nor_thinc(tiny_encoder, toy_kb_path, tmp_path):
    """Importing every spaCy-free package, and training, scoring, saving and loading a core
    (the cross-encoder) with it, loads neither spaCy nor thinc."""
    imports = "\n".join(f"import {name}" for name in spacy_free_modules())
    code = (
        "import sys\n"
        f"{imports}\n"
        "assert not {'spacy', 'thinc'} & set(sys.modules), 'imported by the core'\n"
        "from spacy_arboel.encoders.inputs import MentionSpan\n"
        "from spacy_arboel.kb import KnowledgeBase\n"
        "from spacy_arboel.linking import CrossEncoderReranker\n"
        f"kb = KnowledgeBase.from_jsonl({str(toy_kb_path)!r})\n"
        f"r = CrossEncoderReranker.from_pretrained(kb, {tiny_encoder!r})\n"
        "spans = [MentionSpan(0, 0, 7)]\n"
        "r.step(['Aspirin.'], spans, [['D001241', 'D003371']], ['D001241'])\n"
        "r.score(['Aspirin.'], spans, [['D001241', 'D003371']])\n"
        f"r.save({str(tmp_path / 'r')!r})\n"
        f"CrossEncoderReranker.load({str(tmp_path / 'r')!r})\n"
        "print(sorted(m for m in ('spacy', 'thinc') if m in sys.modules))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().splitlines()[-1] == "[]"


def test_every_component_file_is_at_most_300_lines():
    """The components are thin adapters (issue 63): a file past the cap holds work that
    belongs in a core or the pipeline layer."""
    long = {path.name: n for path in sorted((PACKAGE / "components").glob("*.py"))
            if (n := len(path.read_text().splitlines())) > 300}
    assert not long, long
