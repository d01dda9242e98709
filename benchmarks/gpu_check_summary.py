"""gpu-check.json from what ``benchmarks/gpu_check.sh`` left in its output folder: the
machine (probe.json), each step's seconds (steps.tsv), training steps/s, and for each linking
pass (``link-*.json``: gold mentions; ``e2e-*.json``: ``arbo_linker`` on raw text) its device,
R@1 and rate; the KB's embedding, the search engine and training steps/s on each device
(``rates-*.json``); 1 process against 2 ranks (``ranks.json``); the GPU/CPU ratio of the
rates where both ran. Run by the script; alone::

    python benchmarks/gpu_check_summary.py benchmarks/results/gpu-check --mode gpu
"""

from __future__ import annotations

import argparse
import csv
import datetime
import json
from pathlib import Path


def read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def steps(folder: Path) -> dict[str, dict]:
    """steps.tsv: each step's seconds and status, in the order they ran."""
    path = folder / "steps.tsv"
    if not path.exists():
        return {}
    with path.open() as file_:
        return {row["step"]: {"seconds": float(row["seconds"]), "status": row["status"]}
                for row in csv.DictReader(file_, delimiter="\t")}


def linking(result: dict) -> dict:
    """One ``evaluate`` output: in-KB R@1/R@64, mentions and mentions/s."""
    in_kb, timings = result.get("in_kb", {}), result.get("timings", {})
    return {"recall@1": in_kb.get("recall@1"), "recall@64": in_kb.get("recall@64"),
            "in_kb_mentions": in_kb.get("n") or in_kb.get("n_mentions"),
            "mentions": timings.get("mentions"),
            "mentions_per_s": timings.get("linking_mentions_per_s"),
            "encoder_mentions_per_s": timings.get("encoder_mentions_per_s"),
            "search_engine": timings.get("search_engine"),
            "docs": timings.get("docs")}


def end_to_end(result: dict) -> dict:
    """One ``evaluate-e2e`` output: InKB P/R/F1 and docs/s."""
    in_kb, timings = result.get("in_kb", {}), result.get("timings", {})
    return {"precision": in_kb.get("precision"), "recall": in_kb.get("recall"),
            "f1": in_kb.get("f1"), "docs": timings.get("docs"),
            "docs_per_s": timings.get("docs_per_s")}


def ratio(fast, slow):
    return round(fast / slow, 2) if fast and slow else None


def command(args: argparse.Namespace) -> str:
    """The check's command with the sizes it ran at (no paths of the machine it ran on)."""
    words = ["benchmarks/gpu_check.sh"] + (["--cpu"] if args.mode == "cpu" else [])
    words += ["--dataset", args.dataset, "--steps", str(args.steps), "--limit",
              str(args.limit), "--cpu-limit", str(args.cpu_limit)]
    return " ".join(words + (["--e2e", "MODEL"] if args.e2e else []))


def summary(folder: Path, args: argparse.Namespace) -> dict:
    probe = read_json(folder / "probe.json")
    done = steps(folder)
    passes = {path.stem: linking(read_json(path)) for path in sorted(folder.glob("link-*.json"))}
    e2e = {path.stem: end_to_end(read_json(path)) for path in sorted(folder.glob("e2e-*.json"))}
    train = done.get("train", {})
    train_seconds = train.get("seconds") if train.get("status") == "ok" else None
    gpu, cpu = passes.get("link-gpu", {}), passes.get("link-cpu", {})
    rates = {name: read_json(folder / f"{name}.json") for name in ("rates-gpu", "rates-cpu")}
    rates = {name: {k: rate.get(k) for k in ("device", "kb_embedding", "training")}
             for name, rate in rates.items() if rate}
    same_docs = gpu.get("mentions") is not None and gpu.get("mentions") == cpu.get("mentions")
    return {
        "name": f"gpu-check-{args.mode}",
        "mode": args.mode,
        "dataset": args.dataset,
        "device": probe.get("device") or "CPU",
        "gpu_id": args.gpu_id,
        "versions": {key: probe.get(key) for key in (
            "python", "torch", "torch_cuda", "faiss", "cupy", "spacy", "thinc", "transformers",
            "spacy_transformers")},
        "cuda_available": probe.get("cuda_available"),
        "bf16": probe.get("bf16"),
        "faiss_gpu": probe.get("faiss_gpu"),
        "missing": probe.get("missing"),
        "warnings": args.warnings or [],
        "settings": {"steps": args.steps, "mixed_precision": True,
                     "limit_docs": args.limit, "cpu_limit_docs": args.cpu_limit,
                     "e2e_model": args.e2e},
        "steps": done,
        "training": {"steps": args.steps, "seconds": train_seconds,
                     "steps_per_s": round(args.steps / train_seconds, 2) if train_seconds
                     else None,
                     "note": "wall time of scripts/project.py train: the KB embedded at "
                             "initialisation, at each index refresh and at the dev "
                             "evaluations, and the steps"},
        "linking": passes,
        "end_to_end": e2e,
        "rates": rates,
        "ranks": {key: read_json(folder / "ranks.json").get(key) for key in (
            "settings", "runs", "metrics")},
        "gpu_over_cpu": {
            "linking_mentions_per_s": ratio(gpu.get("mentions_per_s"),
                                            cpu.get("mentions_per_s")),
            "encoder_mentions_per_s": ratio(gpu.get("encoder_mentions_per_s"),
                                            cpu.get("encoder_mentions_per_s")),
            "e2e_docs_per_s": ratio(e2e.get("e2e-gpu", {}).get("docs_per_s"),
                                    e2e.get("e2e-cpu", {}).get("docs_per_s")),
            "kb_embedding_rows_per_s": ratio(
                rates.get("rates-gpu", {}).get("kb_embedding", {}).get("rows_per_s"),
                rates.get("rates-cpu", {}).get("kb_embedding", {}).get("rows_per_s")),
            "training_steps_per_s": ratio(
                rates.get("rates-gpu", {}).get("training", {}).get("steps_per_s"),
                rates.get("rates-cpu", {}).get("training", {}).get("steps_per_s")),
            # the same links: R@1 on the GPU less R@1 on the CPU, where both linked the
            # same mentions (--cpu-limit 0)
            "recall@1_difference": round(gpu["recall@1"] - cpu["recall@1"], 4)
            if same_docs and gpu.get("recall@1") is not None
            and cpu.get("recall@1") is not None else None,
        },
        "commands": [command(args)],
        "date": datetime.date.today().isoformat(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--mode", choices=("gpu", "cpu"), default="gpu")
    parser.add_argument("--dataset", default="bc5cdr")
    parser.add_argument("--steps", type=int, default=0)
    parser.add_argument("--gpu-id", type=int, default=0)
    parser.add_argument("--limit", type=int, default=0)
    parser.add_argument("--cpu-limit", type=int, default=0)
    parser.add_argument("--e2e")
    parser.add_argument("--warnings", nargs="*", default=[])
    args = parser.parse_args()
    result = summary(args.folder, args)
    path = args.folder / "gpu-check.json"
    path.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({key: result[key] for key in (
        "device", "faiss_gpu", "training", "linking", "end_to_end", "rates", "ranks",
        "gpu_over_cpu")}, indent=2))


if __name__ == "__main__":
    main()
