"""Write linking metrics (from :func:`~.metrics.linking_metrics`) as JSON, Markdown and plots."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..atomic import atomic_file, write_text_atomic
from ..errors import Errors
from ..parsing import parse_json

_DASH = "–"

# (header, group, metric key)
_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("in-KB R@1", "in_kb", "recall@1"),
    ("in-KB R@64", "in_kb", "recall@64"),
    ("in-KB acc", "in_kb", "accuracy"),
    ("acc seen", "seen", "accuracy"),
    ("acc unseen", "unseen", "accuracy"),
    ("all R@1", "all", "recall@1"),
    ("all R@64", "all", "recall@64"),
)


def write_json(metrics: Mapping[str, Any], path: str | Path) -> Path:
    """Write ``metrics`` as indented JSON, atomically (creating parent folders); return the
    path."""
    return write_text_atomic(path, json.dumps(metrics, indent=2, ensure_ascii=False) + "\n")


def read_metrics(path: str | Path) -> tuple[str | None, dict[str, Any]]:
    """A metric JSON file's run name (its "name" key, if any) and metrics (its "metrics"
    object where it has one, else the whole object); E111 unreadable, E112 not an object."""
    try:
        data = parse_json(Path(path).read_bytes())
    except (OSError, ValueError) as err:
        raise ValueError(Errors.E111.format(path=path, error=err)) from None
    if not isinstance(data, dict):
        raise ValueError(Errors.E112.format(path=path, found=type(data).__name__))
    name = data.get("name")
    metrics = data["metrics"] if isinstance(data.get("metrics"), dict) else data
    return (str(name) if name else None), metrics


def _fmt(value: Any) -> str:
    return _DASH if value is None else f"{value:.3f}"


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """A Markdown table (wasabi's), the first column left-aligned and the others right;
    ``|`` inside a cell is escaped."""
    from wasabi import MarkdownRenderer

    cells = [[str(c).replace("|", "\\|") for c in row] for row in rows]
    aligns = ("l", *("r" for _ in headers[1:]))
    return MarkdownRenderer().table(cells, list(headers), aligns=aligns) + "\n"


def markdown_table(runs: Mapping[str, Mapping[str, Any]]) -> str:
    """A Markdown table with one row per run (name -> linking metrics); "–" marks no value."""
    headers = ["run", *(header for header, _, _ in _COLUMNS), "n"]
    rows = []
    for name, metrics in runs.items():
        n = metrics.get("all", {}).get("n")
        rows.append([name, *(_fmt(metrics.get(group, {}).get(key)) for _, group, key in _COLUMNS),
                     _DASH if n is None else n])
    return table(headers, rows)


def _recall_curve(metrics: Mapping[str, Any]) -> list[tuple[int, float]]:
    in_kb = metrics.get("in_kb", {})
    points = [
        (int(key.split("@", 1)[1]), value)
        for key, value in in_kb.items()
        if key.startswith("recall@") and value is not None
    ]
    return sorted(points)


def plot_recall_at_k(runs: Mapping[str, Mapping[str, Any]], path: str | Path) -> Path:
    """Plot in-KB recall@k against k (log2 axis), one line per run, and save it as a PNG
    (atomically)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    path = Path(path)
    fig = Figure(figsize=(6, 4), dpi=120)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    all_ks: set[int] = set()
    for name, metrics in runs.items():
        points = _recall_curve(metrics)
        if not points:
            continue
        ks, values = zip(*points, strict=True)
        all_ks.update(ks)
        ax.plot(ks, values, marker="o", label=str(name))
    ax.set_xscale("log", base=2)
    if all_ks:
        ticks = sorted(all_ks)
        ax.minorticks_off()
        ax.set_xticks(ticks)
        ax.set_xticklabels([str(k) for k in ticks])
        ax.legend(loc="lower right")
    ax.set_xlabel("k (candidates)")
    ax.set_ylabel("in-KB recall@k")
    ax.set_ylim(0.0, 1.02)
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    with atomic_file(path) as temp:
        fig.savefig(temp, format="png")
    return path
