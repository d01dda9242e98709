"""FAISS indexes by size (issue 19, item 4): for each kind, build time, size on disk, memory
after loading (anonymous vs file-backed: memory-mapped pages are shared between processes and
reclaimable), search time per query and recall@1/@64 against exact search on the same vectors.

Vectors: ``--vectors FILE.npy`` (e.g. embedded KB rows), else synthetic unit vectors drawn
around random centres (``--rows``, ``--dim``): they show build and search costs and what
memory-mapping saves, not the recall of a real KB's embeddings. Each load is measured in a
fresh process.

Usage::

    python benchmarks/index_scaling.py --rows 200000 --kinds flat hnsw ivfpq

Writes ``benchmarks/results/index-scaling-<rows>.json`` and prints the table.
"""

from __future__ import annotations

import argparse
import datetime
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from _common import command_line, machine, write_result

LOAD = """
import json, sys, time, numpy as np
from spacy_arboel.kb.index_builder import load_index
def rss(key):
    return int([l for l in open("/proc/self/status") if l.startswith(key)][0].split()[1]) / 1024
anon, file_ = rss("RssAnon"), rss("RssFile")
start = time.perf_counter()
index = load_index(sys.argv[1], mmap=sys.argv[2] == "1")
loaded = time.perf_counter() - start
print(json.dumps({"load_seconds": round(loaded, 3), "anon_mb": round(rss("RssAnon") - anon),
                  "file_mb": round(rss("RssFile") - file_)}))
"""


def synthetic(rows: int, dim: int, seed: int = 0, centres: int = 10_000) -> np.ndarray:
    rng = np.random.default_rng(seed)
    means = rng.standard_normal((centres, dim)).astype("float32")
    x = means[rng.integers(0, centres, rows)]
    x += 0.5 * rng.standard_normal((rows, dim)).astype("float32")
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return x


def main() -> None:
    from spacy_arboel.kb.index_builder import (
        build_index,
        choose_factory,
        exact_top,
        recall_against_exact,
        save_index,
    )

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vectors", help=".npy matrix of row vectors (memory-mapped)")
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--kinds", nargs="*", default=["flat", "hnsw", "ivfpq"])
    parser.add_argument("--factories", nargs="*", default=[],
                        help="FAISS factory strings measured too (e.g. other PQ sizes)")
    parser.add_argument("--tag", default="", help="appended to the result's name")
    parser.add_argument("--queries", type=int, default=1_000)
    parser.add_argument("--query-vectors", help=".npy of query vectors (default: rows of "
                        "--vectors with noise)")
    parser.add_argument("--work", default="training/bench-index")
    args = parser.parse_args()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    if args.vectors:
        vectors = np.load(args.vectors, mmap_mode="r")
    else:
        np.save(work / "vectors.npy", synthetic(args.rows, args.dim))
        vectors = np.load(work / "vectors.npy", mmap_mode="r")
    rng = np.random.default_rng(1)
    if args.query_vectors:
        queries = np.load(args.query_vectors)[:args.queries]
    else:
        queries = np.array(vectors[np.sort(rng.choice(len(vectors), args.queries,
                                                      replace=False))])
        queries += 0.05 * rng.standard_normal(queries.shape).astype("float32")  # near
    start = time.perf_counter()
    exact = exact_top(vectors, queries, 1)[:, 0]
    exact_ms = (time.perf_counter() - start) / len(queries) * 1000
    print(f"exact scan of the memory-mapped vectors: {exact_ms:.2f} ms/query", flush=True)
    rows = []
    runs = [(kind, choose_factory(len(vectors), vectors.shape[1], kind))
            for kind in args.kinds] + [("custom", factory) for factory in args.factories]
    for number, (kind, factory) in enumerate(runs):
        start = time.perf_counter()
        index = build_index(vectors, factory)
        build = time.perf_counter() - start
        path = work / f"{kind}-{number}.faiss"
        save_index(index, path)
        start = time.perf_counter()
        index.search(queries, 64)
        search_ms = (time.perf_counter() - start) / len(queries) * 1000
        row = {"kind": kind, "factory": factory, "build_seconds": round(build, 1),
               "disk_mb": round(path.stat().st_size / 2**20, 1),
               "search_ms_per_query": round(search_ms, 3),
               **recall_against_exact(index, vectors, queries, exact=exact)}
        for mmap in ("0", "1"):
            out = subprocess.run([sys.executable, "-c", LOAD, str(path), mmap], check=True,
                                 capture_output=True, text=True).stdout
            row["mmap" if mmap == "1" else "read"] = json.loads(out.strip().splitlines()[-1])
        rows.append(row)
        print(row, flush=True)
    described = Path(args.vectors).with_suffix(".json") if args.vectors else None
    result = {"name": f"index-scaling-{len(vectors)}{args.tag}", "rows": len(vectors),
              "dim": int(vectors.shape[1]),
              "vectors": (json.loads(described.read_text())["description"]
                          if described and described.exists() else args.vectors or "synthetic"),
              "queries": len(queries),
              "query_vectors": "BC5CDR test mentions" if args.query_vectors else
              "rows with noise", "exact_scan_ms_per_query": round(exact_ms, 2),
              "results": rows,
              "commands": [command_line([sys.executable, *sys.argv])], "machine": machine(),
              "date": datetime.date.today().isoformat()}
    write_result(result)
    print("| kind | factory | build s | disk MB | ms/query (k=64) | R@1 | R@64 "
          "| loaded: anon MB read / mmap |")
    print("|---|---|---:|---:|---:|---:|---:|---|")
    for r in rows:
        print(f"| {r['kind']} | `{r['factory']}` | {r['build_seconds']} | {r['disk_mb']} "
              f"| {r['search_ms_per_query']} | {r['recall@1']:.3f} | {r['recall@64']:.3f} "
              f"| {r['read']['anon_mb']} / {r['mmap']['anon_mb']} |")


if __name__ == "__main__":
    main()
