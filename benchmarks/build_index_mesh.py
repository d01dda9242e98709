"""``build-index`` on real data (issue 19, item 4): the trained BC5CDR linker's MeSH KB
embedded in shards and indexed flat, HNSW and IVF-PQ, each saved pipeline evaluated on the
BC5CDR test mentions (what an approximate index costs in accuracy on real queries), and the
embedding rate of the shards on 1 and 2 local processes and 1 and 2 Ray workers (a KB of the
first ``--rate-entities`` MeSH entities, fresh work folders).

Usage::

    python benchmarks/build_index_mesh.py --model training/bench3/knn_negatives-refactor/model-last

Writes ``benchmarks/results/bc5cdr-build-index.json``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from _common import command_line, machine, run, write_result

CLI = [sys.executable, "-m", "spacy_arboel"]


def timed(cmd: list[str], commands: list[str]) -> float:
    commands.append(command_line(cmd))
    return round(run(cmd), 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--corpus", default="corpus/bc5cdr/test.spacy")
    parser.add_argument("--work", default="training/bench-build-index")
    parser.add_argument("--rate-entities", type=int, default=8_000)
    parser.add_argument("--kinds", nargs="*", default=["flat", "hnsw", "ivfpq"])
    args = parser.parse_args()
    work = Path(args.work)
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    commands: list[str] = []
    rows = []
    for kind in args.kinds:  # the first embeds the KB; the others reuse its shards
        out = work / f"mesh-{kind}"
        seconds = timed([*CLI, "build-index", args.model, str(out), "--kind", kind,
                         "--work-dir", str(work / "mesh.shards")], commands)
        metrics = work / f"eval-{kind}.json"
        timed([*CLI, "evaluate", str(out), args.corpus, "--output", str(metrics),
               "--no-encoder-rate"], commands)
        found = json.loads(metrics.read_text())
        index = out / "arbo_entity_linker" / "index"
        rows.append({"kind": kind, "seconds": seconds,
                     "meta": json.loads((index / "meta.json").read_text()),
                     "index_mb": round(sum(p.stat().st_size for p in index.iterdir())
                                       / 2**20, 1),
                     "recall@1": found["in_kb"]["recall@1"],
                     "recall@64": found["in_kb"]["recall@64"],
                     "mentions_per_s": found["timings"]["linking_mentions_per_s"]})
        print(rows[-1], flush=True)
    kb = work / "kb-subset.jsonl"
    lines = (Path(args.model) / "arbo_entity_linker" / "kb.jsonl").read_text().splitlines()
    kb.write_text("\n".join(lines[:args.rate_entities]) + "\n")
    rates = []
    for engine, workers in (("local", 1), ("local", 2), ("ray", 1), ("ray", 2)):
        out = work / f"rate-{engine}-{workers}"
        cmd = [*CLI, "build-index", args.model, str(out), "--kb", str(kb), "--kind", "flat",
               "--engine", engine, "--num-workers", str(workers), "--shard-rows", "2000"]
        commands.append(command_line(cmd))
        print("$", " ".join(cmd), flush=True)
        start = time.perf_counter()
        said = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        seconds = time.perf_counter() - start
        embedded = re.search(r"Embedded (\d+) rows in ([\d.]+) s", said)
        rates.append({"engine": engine, "workers": workers, "rows": int(embedded[1]),
                      "command_seconds": round(seconds, 1),
                      "embedding_seconds": float(embedded[2]),
                      "rows_per_s": round(int(embedded[1]) / float(embedded[2]), 1)})
        print(rates[-1], flush=True)
    result = {"name": "bc5cdr-build-index", "model": args.model, "kinds": rows,
              "embedding_rates": rates,
              "commands": commands, "machine": machine(),
              "date": datetime.date.today().isoformat()}
    write_result(result)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
