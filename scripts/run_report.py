"""The report of a project run: ``report.md`` from the metric files a workflow wrote into one
folder (linking of gold mentions, the pipeline's NER and linking, end-to-end linking, coref,
the re-ranker, NIL), with the recall@k plot and the NIL PR curve, and a headline table."""

import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import typer

from project_app import app
from project_errors import ProjectErrors
from spacy_arboel.atomic import atomic_file, write_text_atomic
from spacy_arboel.evaluation.report import (
    DASH,
    markdown_table,
    plot_recall_at_k,
    plot_reliability,
    read_metrics,
    table,
)
from spacy_arboel.outputs import check_outputs, require_plots

RECALL_KS = (1, 8, 64)
RECALL_PLOT = "recall_at_k.png"
RELIABILITY_PLOT = "reliability.png"
TUNING_FILES = "threshold_tuning_*.json"
TUNED = {"threshold_tuning_e2e": "the shipped pipeline's NIL threshold (ner + arbo_entity_linker)",
         "threshold_tuning_arbo_linker": "arbo_linker's link threshold"}


@dataclass
class RunReport:
    """``headline``: (what, value) rows; ``markdown``: the whole report; ``plots``: the
    images it shows (file names in its folder)."""

    headline: list[tuple[str, str]] = field(default_factory=list)
    markdown: str = ""
    plots: list[str] = field(default_factory=list)


def _num(value: Any, scale: float = 1.0, digits: int = 3) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return DASH if value is None else str(value)
    return f"{value * scale:.{digits}f}"


# what the workflow's metric files hold, by file name: the rows' names in the report
RUN_NAMES = (
    ("linker_", "arbo_entity_linker, {} (gold mentions)"),
    ("pipeline_", "ner + arbo_entity_linker + arbo_coref, {}"),
    ("coref_", "arbo_coref over the linker of {}"),
    ("nil_", "NIL threshold of the linker of {}"),
)
FILE_KEY = "_file"  # the metric file's name, kept with its metrics for the section's plots
FILE_NAMES = {"e2e": "arbo_linker (raw text, no ner)",
              "e2e_ner_linker": "ner + arbo_entity_linker (raw text)",
              "rerank": "arbo_reranker over the linker's candidates"}


def run_name(stem: str, name: str | None = None) -> str:
    """A metric file's row name: its own ``name``, else what the workflow's file of that
    name holds ("linker_default": "arbo_entity_linker, the dataset's objective (gold
    mentions)"), else the file name."""
    if name:
        return name
    if stem in FILE_NAMES:
        return FILE_NAMES[stem]
    for prefix, text in RUN_NAMES:
        if stem.startswith(prefix):
            objective = stem[len(prefix):]
            return text.format("the dataset's objective" if objective == "default"
                               else f"the {objective} objective")
    return stem


def _files(folder: Path, pattern: str, skip: tuple[str, ...] = ()) -> dict[str, dict]:
    runs = {}
    for path in sorted(folder.glob(pattern)):
        if path.stem not in skip:
            name, metrics = read_metrics(path)
            runs[run_name(path.stem, name)] = {**metrics, FILE_KEY: path.stem}
    return runs


def _linking(runs: dict[str, dict], report: RunReport, folder: Path,
             plots: Path) -> str:
    text = "## Linking of the gold test mentions (`evaluate`)\n\n" + markdown_table(runs)
    for name, m in runs.items():
        report.headline.append((f"{name}: in-KB R@1 / R@64", " / ".join(
            _num(m.get("in_kb", {}).get(f"recall@{k}")) for k in (1, 64))))
        groups = [(g, m.get(g, {})) for g in ("all", "in_kb", "seen", "unseen")]
        groups += [(f"type {t}", v) for t, v in sorted(m.get("per_type", {}).items())]
        rows = [[g, str(v.get("n", DASH)), *(_num(v.get(f"recall@{k}")) for k in RECALL_KS),
                 _num(v.get("accuracy"))] for g, v in groups if v]
        text += f"\n{name}, by group:\n\n" + table(
            ["group", "n", *(f"R@{k}" for k in RECALL_KS), "accuracy"], rows)
        timings = m.get("timings", {})
        if timings.get("linking_mentions_per_s"):
            report.headline.append((f"{name}: mentions/s",
                                    _num(timings["linking_mentions_per_s"], 1, 1)))
    plot_recall_at_k(runs, plots / RECALL_PLOT)
    plot_reliability(runs, plots / RELIABILITY_PLOT)
    report.plots.extend((RECALL_PLOT, RELIABILITY_PLOT))
    return (text + f"\n![in-KB recall@k]({RECALL_PLOT})\n"
            f"\n![reliability of the first candidate's score]({RELIABILITY_PLOT})\n")


def _pipeline(runs: dict[str, dict], report: RunReport, folder: Path,
              plots: Path) -> str:
    text = "## The assembled pipeline on the test corpus (`spacy evaluate`)\n\n"
    for name, m in runs.items():
        report.headline.append((f"{name}: NER F", _num(m.get("ents_f"))))
        rows = [["all", _num(m.get("ents_p")), _num(m.get("ents_r")), _num(m.get("ents_f"))]]
        rows += [[t, _num(v.get("p")), _num(v.get("r")), _num(v.get("f"))]
                 for t, v in sorted((m.get("ents_per_type") or {}).items())]
        text += f"{name}, NER by type:\n\n" + table(["type", "P", "R", "F"], rows)
        text += "\nLinking of the predicted ents: " + ", ".join(
            f"{k} {_num(m.get(k))}" for k in ("nel_inkb_acc", "nel_acc", "nel_seen_acc",
                                              "nel_unseen_acc") if k in m)
        if m.get("speed"):
            text += f"; {m['speed']:.0f} words/s"
        text += "\n\n"
    return text


def _end_to_end(runs: dict[str, dict], report: RunReport, folder: Path,
                plots: Path) -> str:
    rows = []
    for name, m in runs.items():
        in_kb, timings = m.get("in_kb", {}), m.get("timings", {})
        report.headline.append((f"{name}: InKB F1 (%)", _num(in_kb.get("f1"), 100, 1)))
        rows.append([name, _num(in_kb.get("precision"), 100, 1),
                     _num(in_kb.get("recall"), 100, 1), _num(in_kb.get("f1"), 100, 1),
                     str(in_kb.get("n_gold", DASH)), _num(timings.get("docs_per_s"), 1, 2)])
    return ("## End-to-end linking of the raw test text (`evaluate-e2e`; InKB micro, strong "
            "matching)\n\n" + table(["run", "P", "R", "F1", "gold", "docs/s"], rows) + "\n"
            + _tuned_thresholds(folder))


def _tuned_thresholds(folder: Path) -> str:
    """What ``tune-e2e`` chose for the evaluated pipelines (``threshold_tuning_*.json``)."""
    lines = []
    for path in sorted(folder.glob(TUNING_FILES)):
        tuned = read_metrics(path)[1]
        best = tuned.get("best") or {}
        if "threshold" in best:
            lines.append(f"- {TUNED.get(path.stem, path.stem)}: threshold "
                         f"{_num(best['threshold'], 1, 4)} (dev InKB F1 {_num(best.get('f1'))}, "
                         f"chosen by `tune-e2e` on {tuned.get('dev', 'dev')})")
    return ("\nThresholds tuned on the dev split, as the pipelines above were saved:\n\n"
            + "\n".join(lines) + "\n") if lines else ""


def _coref(runs: dict[str, dict], report: RunReport, folder: Path,
           plots: Path) -> str:
    rows = []
    for name, m in runs.items():
        c = m.get("coref", {})
        report.headline.append((f"{name}: CoNLL F1", _num(c.get("conll_f1"))))
        acc = [_num(m.get(k, {}).get("all", {}).get("accuracy"))
               for k in ("clustering", "independent")]
        rows.append([name, _num(c.get("nmi")), _num(c.get("ari")),
                     *(_num(c.get(k, {}).get("f")) for k in ("muc", "b3", "ceafe")),
                     _num(c.get("conll_f1")), *acc,
                     _num(m.get("timings", {}).get("mentions_per_s"), 1, 1)])
    return ("## Clustering mentions across documents (`evaluate-coref`)\n\n" + table(
        ["run", "NMI", "ARI", "MUC F", "B3 F", "CEAF-e F", "CoNLL F1", "acc with clustering",
         "acc alone", "mentions/s"], rows) + "\n")


def _rerank(runs: dict[str, dict], report: RunReport, folder: Path,
            plots: Path) -> str:
    rows = []
    for name, m in runs.items():
        for run in m.get("runs", []):
            cross = run.get("cross_encoder", {})
            if run.get("oracle") == "none":
                report.headline.append((f"{name}: cross-encoder accuracy (bi-encoder)",
                                        f"{_num(cross.get('accuracy'))} "
                                        f"({_num(run.get('bi_encoder', {}).get('accuracy'))})"))
            rows.append([name, str(run.get("oracle")), str(run.get("top_k")),
                         _num(run.get("bi_encoder", {}).get("accuracy")),
                         _num(cross.get("accuracy")), _num(cross.get("candidate_recall")),
                         _num(run.get("timings", {}).get("mentions_per_s"), 1, 1)])
    return ("## Re-ranking the linker's candidates (`evaluate-rerank`)\n\n" + table(
        ["run", "oracle", "top k", "bi-encoder acc", "cross-encoder acc", "gold in top k",
         "mentions/s"], rows) + "\n")


def _nil(runs: dict[str, dict], report: RunReport, folder: Path,
         plots: Path) -> str:
    text = "## NIL detection (`tune-nil`)\n\n"
    rows = []
    for name, m in runs.items():
        test = m.get("test") or m.get("dev") or {}
        nil = test.get("nil", {})
        rows.append([name, _num(m.get("threshold"), 1, 4), _num(nil.get("precision")),
                     _num(nil.get("recall")), _num(nil.get("f1")), _num(nil.get("au_pr")),
                     _num(test.get("accuracy_with_nil"))])
        plot = f"nil_pr_{m[FILE_KEY].removeprefix('nil_')}.png"
        if (folder / plot).exists():  # tune-nil --plot writes it beside its metrics
            if plots.resolve() != folder.resolve():
                with atomic_file(plots / plot) as temp:
                    shutil.copyfile(folder / plot, temp)
            report.plots.append(plot)
            text += f"![NIL PR curve]({plot})\n\n"
    return text + table(["run", "threshold", "NIL P", "NIL R", "NIL F1", "auPR",
                          "accuracy incl. NIL"], rows) + "\n"


def _link_errors(runs: dict[str, dict], report: RunReport, folder: Path,
                 plots: Path) -> str:
    text = "## Wrong and missed links of the rendered test documents (`render`)\n\n"
    for m in runs.values():
        errors = m.get("errors") or []
        n = m.get("gold_links", 0)
        wrong = sum(e.get("kind") == "wrong" for e in errors)
        report.headline.append(("rendered gold links wrong / missed",
                                f"{wrong} / {len(errors) - wrong} of {n}"))
        rows = [[e.get("doc", ""), e.get("text", ""), e.get("kind", ""),
                 f"{e.get('predicted', '')} {e.get('predicted_name', '')}".strip() or DASH,
                 f"{e.get('gold', '')} {e.get('gold_name', '')}".strip()] for e in errors]
        text += (f"{n - len(errors)} of {n} gold links right on the page.\n\n"
                 + (table(["doc", "mention", "", "linked", "gold"], rows) if rows else ""))
    return text + "\n"


# (file pattern, stems to skip, section), in the report's order
SECTIONS: tuple[tuple[str, tuple[str, ...], Callable[..., str]], ...] = (
    ("pipeline_*.json", (), _pipeline), ("linker_*.json", (), _linking),
    ("e2e*.json", (), _end_to_end), ("coref_*.json", ("coref_tuning",), _coref),
    ("rerank*.json", (), _rerank), ("nil_*.json", (), _nil),
    ("link_errors.json", (), _link_errors))


def metric_files(folder: str | Path) -> list[Path]:
    """The metric files of ``folder`` that the report reads."""
    return sorted({p for pattern, skip, _ in SECTIONS for p in Path(folder).glob(pattern)
                   if p.stem not in skip})


def build_report(folder: str | Path, title: str = "", plots: str | Path | None = None
                 ) -> RunReport:
    """The report of the metric files in ``folder`` (a section for each kind found, after the
    warnings their corpora carry, e.g. W020), its plots written to ``plots`` (default:
    ``folder``) where it links them. A ValueError
    (E116) when there is no metric file."""
    folder = Path(folder)
    plots = folder if plots is None else Path(plots)
    report = RunReport()
    sections = []
    for pattern, skip, section in SECTIONS:
        runs = _files(folder, pattern, skip)
        if runs:
            sections.append(section(runs, report, folder, plots))
    if not sections:
        raise ValueError(ProjectErrors.E116.format(path=folder))
    head = table(["what", "value"], [list(r) for r in report.headline])
    warnings = dict.fromkeys(w for path in metric_files(folder)
                             for w in read_metrics(path)[1].get("corpus_warnings", []))
    caveats = "".join(f"> **Warning**: {w}\n\n" for w in warnings)
    report.markdown = (f"# {title or folder.name}: results\n\nFrom the metric files in "
                       f"`{folder.name}/`.\n\n{caveats}## At a glance\n\n{head}\n"
                       + "\n".join(sections))
    return report


def write_report(folder: str | Path, output: str | Path | None = None,
                 title: str = "") -> RunReport:
    """Build the report of ``folder`` and write it to ``output`` (default:
    ``folder/report.md``), atomically, its plots beside it."""
    output = Path(output) if output else Path(folder) / "report.md"
    output.parent.mkdir(parents=True, exist_ok=True)
    report = build_report(folder, title, output.parent)
    write_text_atomic(output, report.markdown)
    return report


@app.command("report")
def report_command(
    metrics_dir: Annotated[Path, typer.Argument(
        help="The metrics folder of a run, e.g. metrics/bc5cdr", exists=True, file_okay=False)],
    output: Annotated[Path | None, typer.Option(
        help="The Markdown report (default: METRICS_DIR/report.md); its plots are written "
             "beside it")] = None,
    title: Annotated[str, typer.Option(help="The report's title (default: the folder)")] = "",
) -> None:
    """Write the report of a run (tables of linking, NER, end-to-end, coref, re-ranking and
    NIL metrics with the recall@k and NIL PR plots) and print its headline table."""
    from wasabi import msg

    output = output or metrics_dir / "report.md"
    require_plots("report")  # its recall@k plot
    check_outputs({"METRICS_DIR": metric_files(metrics_dir)}, {"--output": output})
    written = write_report(metrics_dir, output, title)
    if written.headline:
        width = max(len(what) for what, _ in written.headline)
        msg.table(written.headline, header=("what", "value"), divider=True, widths=(width, 14))
    msg.good(f"Wrote {output}" + (f" and {', '.join(written.plots)} beside it"
                                  if written.plots else ""))
