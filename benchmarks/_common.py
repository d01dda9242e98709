"""What the benchmark scripts share: where results go, how a run and its machine are recorded,
and how the tables format numbers.

Each script is run as ``python benchmarks/<script>.py``, so this folder is on ``sys.path`` and
``from _common import ...`` finds this module.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"


def machine() -> str:
    """The machine a result file records: architecture, cores, Python version."""
    return f"{platform.machine()} {os.cpu_count()} cores, {platform.python_version()}, CPU"


def run_stamp() -> dict[str, str]:
    """What a result file records of the run that wrote it: the command as it was typed
    (``python benchmarks/<script>.py`` and its arguments), the machine and the date."""
    script = relative_path(Path(sys.argv[0]))
    return {"command": " ".join(["python", script, *sys.argv[1:]]), "machine": machine(),
            "date": datetime.date.today().isoformat()}


def command_line(cmd: list[str]) -> str:
    """``cmd`` as a result file records it: ``python`` for this interpreter and paths inside
    the repository relative to it, so that no path of this machine is kept."""
    words = ["python" if word == sys.executable else word for word in cmd]
    return shlex.join(w.replace(f"{ROOT}/", "") if w.startswith(f"{ROOT}/") else w
                      for w in words)


def run(cmd: list[str]) -> float:
    """Run ``cmd`` (printed first), fail if it fails, and return the seconds it took."""
    print("$", " ".join(cmd), flush=True)
    start = time.perf_counter()
    subprocess.run(cmd, check=True)
    return time.perf_counter() - start


def write_result(result: dict) -> Path:
    """Write ``result`` to ``benchmarks/results/<its name>.json`` and return the path."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{result['name']}.json"
    path.write_text(json.dumps(result, indent=2) + "\n")
    return path


def untrained_linker(kb, component: str = "arbo_entity_linker", **config
                     ) -> tuple[Any, float]:
    """A blank English pipeline with an untrained ``component`` (``arbo_entity_linker``,
    ``arbo_linker``) over ``kb`` (a ``KnowledgeBase``, written to a temporary file for
    ``kb_path``) and ``config``, set up (``ensure_ready``: the index), and the seconds that
    set-up took."""
    import tempfile

    import spacy

    with tempfile.TemporaryDirectory() as folder:
        kb_path = Path(folder) / "kb.jsonl"
        kb.to_jsonl(kb_path)
        nlp = spacy.blank("en")
        nlp.add_pipe(component, config={"kb_path": str(kb_path), **config})
        start = time.perf_counter()
        nlp.get_pipe(component).ensure_ready()
        return nlp, time.perf_counter() - start


def recorded_result(name: str) -> dict | None:
    """The committed result file of run ``name``, if any: what an ``--eval-only`` run keeps
    of the training run it evaluates again (its training time and command)."""
    path = RESULTS / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else None


def relative_path(path: Path) -> str:
    """``path`` relative to the repository if it lies inside it, else absolute."""
    path = path.resolve()
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def minutes(seconds) -> str:
    """Seconds as minutes for a table cell; "–" when there are none."""
    return "–" if not seconds else f"{seconds / 60:.1f}"


def fmt(value) -> str:
    """A score for a table cell, to three decimals; "–" when there is none."""
    return "–" if value is None else f"{value:.3f}"
