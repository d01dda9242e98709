"""Write linking metrics (from :func:`~.metrics.linking_metrics`) as JSON, Markdown and plots."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..atomic import atomic_file, write_text_atomic
from ..errors import Errors
from ..parsing import parse_json

DASH = "–"  # a table's cell without a value
# a corpus folder's record of how it was made (the project's `prepare` writes one): its
# "warnings" (e.g. W020, NCBI-disease without its test file) travel with the metrics
PREPARED_FILE = "prepared.json"

# (header, group, metric key)
_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("in-KB R@1", "in_kb", "recall@1"),
    ("in-KB R@64", "in_kb", "recall@64"),
    ("in-KB acc", "in_kb", "accuracy"),
    ("acc seen", "seen", "accuracy"),
    ("acc unseen", "unseen", "accuracy"),
    ("all R@1", "all", "recall@1"),
    ("all R@64", "all", "recall@64"),
    ("ECE", "calibration", "ece"),
)


def write_json(metrics: Mapping[str, Any], path: str | Path) -> Path:
    """Write ``metrics`` as indented JSON, atomically (creating parent folders); return the
    path."""
    return write_text_atomic(path, json.dumps(metrics, indent=2, ensure_ascii=False) + "\n")


def corpus_warnings(corpus: str | Path) -> list[str]:
    """The warnings recorded beside the ``.spacy`` file ``corpus`` (its folder's
    ``PREPARED_FILE``; none where it has no readable one)."""
    try:
        data = json.loads((Path(corpus).parent / PREPARED_FILE).read_text(encoding="utf8"))
    except (OSError, ValueError):
        return []
    warnings = data.get("warnings") if isinstance(data, dict) else None
    return [str(w) for w in warnings] if isinstance(warnings, list) else []


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
    return DASH if value is None else f"{value:.3f}"


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
                     DASH if n is None else n])
    return table(headers, rows)


# the groups of :func:`linking_rows`, as they are named on a terminal
_GROUPS = (("in-KB", "in_kb"), ("all", "all"), ("seen", "seen"), ("unseen", "unseen"))
_LINKING_KS = (1, 8, 64)


def linking_rows(metrics: Mapping[str, Any]) -> tuple[list[str], list[list[Any]]]:
    """The header and rows of a terminal table of linking metrics: one row per group of
    mentions (in-KB, all, seen, unseen) with its count, R@1, R@8, R@64 (of the candidates,
    whatever was linked), accuracy (of the links) and the share put in NIL, a row
    for the out-of-KB mentions put in NIL, and one for the expected calibration error of
    the first candidate's score (``metrics.calibration``)."""
    header = ["mentions", "n", *(f"R@{k}" for k in _LINKING_KS), "accuracy", "NIL"]
    rows = []
    for label, group in _GROUPS:
        values = metrics.get(group, {})
        if values.get("n"):
            rows.append([label, values["n"],
                         *(_fmt(values.get(f"recall@{k}")) for k in _LINKING_KS),
                         _fmt(values.get("accuracy")), _fmt(values.get("abstained"))])
    out_of_kb = metrics.get("out_of_kb", {})
    if out_of_kb.get("n"):
        rows.append(["out-of-KB (put in NIL)", out_of_kb["n"], *(DASH for _ in _LINKING_KS),
                     DASH, _fmt(out_of_kb.get("nil_accuracy"))])
    calibration = metrics.get("calibration", {})
    if calibration.get("ece") is not None:
        rows.append(["ECE of the first score", calibration["n"], *(DASH for _ in _LINKING_KS),
                     _fmt(calibration["ece"]), DASH])
    return header, rows


def rerank_rows(metrics: Mapping[str, Any]) -> tuple[list[str], list[list[Any]]]:
    """The header and rows of a terminal table of ``evaluate-rerank``'s runs: one per oracle
    and K, with the in-KB accuracy of the bi-encoder, of the re-ranker and of the re-ranker
    where the gold is among the K (normalized), and the K candidates' recall."""
    header = ["oracle", "K", "in-KB n", "bi-encoder", "re-ranked", "normalized", "recall@K",
              "ment/s"]
    rows = [[run["oracle"], run["top_k"], run["n_in_kb"], _fmt(run["bi_encoder"]["accuracy"]),
             _fmt(run["cross_encoder"]["accuracy"]),
             _fmt(run["cross_encoder"]["normalized_accuracy"]),
             _fmt(run["cross_encoder"]["candidate_recall"]),
             f"{run['timings']['mentions_per_s']:.1f}"]
            for run in metrics.get("runs", [])]
    return header, rows


def flat_rows(metrics: Mapping[str, Any], prefix: str = "") -> list[tuple[str, str]]:
    """(name, value) rows of every number, string and short list in ``metrics``, nested
    keys joined by spaces ("in_kb precision"): a terminal table of any metrics object."""
    rows: list[tuple[str, str]] = []
    for key, value in metrics.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            rows.extend(flat_rows(value, f"{name} "))
        elif isinstance(value, bool) or value is None or isinstance(value, str):
            rows.append((name, DASH if value is None else str(value)))
        elif isinstance(value, float):
            rows.append((name, f"{value:.3f}" if abs(value) < 10 else
                         f"{value:.1f}" if abs(value) < 1e4 else f"{value:,.0f}"))
        elif isinstance(value, int):
            rows.append((name, str(value)))
        elif (isinstance(value, list | tuple) and len(value) <= 8
              and all(isinstance(v, str | int | float) for v in value)):
            rows.append((name, ", ".join(map(str, value))))
    return rows


def _recall_curve(metrics: Mapping[str, Any]) -> list[tuple[int, float]]:
    in_kb = metrics.get("in_kb", {})
    points = [
        (int(key.split("@", 1)[1]), value)
        for key, value in in_kb.items()
        if key.startswith("recall@") and value is not None
    ]
    return sorted(points)


def _axes(size: tuple[float, float]) -> Any:
    """The axes of a new figure of ``size`` inches at 120 dpi (no pyplot state)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    fig = Figure(figsize=size, dpi=120)
    FigureCanvasAgg(fig)
    return fig.add_subplot()


def _save_png(ax: Any, path: str | Path) -> Path:
    """Save the figure of ``ax`` as a PNG at ``path`` (atomically), laid out tight."""
    path = Path(path)
    ax.figure.tight_layout()
    with atomic_file(path) as temp:
        ax.figure.savefig(temp, format="png")
    return path


def plot_recall_at_k(runs: Mapping[str, Mapping[str, Any]], path: str | Path) -> Path:
    """Plot in-KB recall@k against k (log2 axis), one line per run, and save it as a PNG
    (atomically)."""
    ax = _axes((6, 4))
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
    return _save_png(ax, path)


def plot_reliability(runs: Mapping[str, Mapping[str, Any]], path: str | Path) -> Path:
    """The reliability diagram of each run's first-candidate scores (``metrics.calibration``'s
    bins: share right against mean score, the diagonal where they would be calibrated, ECE
    in the legend), saved as a PNG (atomically)."""
    ax = _axes((5, 5))
    ax.plot([0, 1], [0, 1], color="grey", linestyle="--", linewidth=1, label="calibrated")
    for name, metrics in runs.items():
        calibration = metrics.get("calibration", {})
        bins = calibration.get("bins") or []
        if not bins:
            continue
        ax.plot([b["confidence"] for b in bins], [b["accuracy"] for b in bins], marker="o",
                label=f"{name} (ECE {calibration['ece']:.3f})")
    ax.set_xlabel("first candidate's score (mean of its bin)")
    ax.set_ylabel("share linked right")
    ax.set_xlim(0.0, 1.0)
    ax.set_ylim(0.0, 1.02)
    ax.grid(True, alpha=0.3)
    ax.legend(loc="upper left", fontsize="small")
    return _save_png(ax, path)
