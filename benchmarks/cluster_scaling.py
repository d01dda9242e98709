"""Clustering a linked corpus of a million mentions (issue 19, item 3): time, peak memory and
the k-NN graph's edge recall against exact search on a sample.

Linking enough abstracts for 1M mentions takes ~50 hours on this CPU, so the linked corpus
is built from real linked mentions plus generated ones: the BC5CDR test mentions are linked
by a trained pipeline (vector, best candidate and score), and each generated mention is a
real one plus Gaussian noise scaled so that its cosine to it is the median cosine between a
real mention and its nearest other mention of the same gold entity, keeping its best
candidate with the score scaled by that cosine. They are written as ``link-corpus
--vectors`` writes its output (JSONL shards, float16 vectors, a manifest), and ``cluster``
runs on them in a fresh process, alone.

What this shows: the time and memory of every stage at 1M mentions and how many exact
neighbour edges the IVF graph keeps. What it cannot: clustering quality on real text at that
scale (the generated mentions copy real ones).

Usage::

    python benchmarks/cluster_scaling.py --model training/bench-e2e-trf/ner_trf_linker_nil

Writes ``benchmarks/results/cluster-scaling-<mentions>.json``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from _common import command_line, machine, write_result


def real_mentions(model: str, corpus: Path):
    """Vectors, best candidate ids and scores, and gold ids of the corpus's mentions."""
    import spacy
    from spacy.tokens import DocBin

    from spacy_arboel.components.common import gold_mentions

    nlp = spacy.load(model)
    retriever = nlp.get_pipe("arbo_entity_linker").retriever
    texts, spans, gold = gold_mentions(list(DocBin().from_disk(corpus).get_docs(nlp.vocab)))
    scores, positions, vectors = retriever.link(texts, spans, k=1)
    ids = [retriever.kb.entity_at(int(p)).id if p >= 0 else None for p in positions[:, 0]]
    return vectors, ids, scores[:, 0], [g[0] if g else None for g in gold]


def same_entity_cosine(vectors: np.ndarray, gold: list) -> float:
    unit = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    sims = unit @ unit.T
    np.fill_diagonal(sims, -np.inf)
    gold = np.asarray([g or "" for g in gold])
    same = (gold[:, None] == gold[None, :]) & (gold[:, None] != "")
    best = np.where(same, sims, -np.inf).max(1)
    return float(np.median(best[np.isfinite(best)]))


def write_linked(folder: Path, n: int, vectors, ids, scores, cosine: float,
                 shards: int = 100, per_doc: int = 10, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    dim = vectors.shape[1]
    sigma = np.sqrt((1 / cosine**2 - 1) / dim)
    norms = np.linalg.norm(vectors, axis=1)
    keep = np.flatnonzero(np.array([i is not None for i in ids]) & (norms > 0))
    folder.mkdir(parents=True, exist_ok=True)
    manifest = {}
    per_shard = n // shards
    for s in range(shards):
        pick = keep[rng.integers(0, len(keep), per_shard)]
        unit = vectors[pick] / norms[pick, None]
        noisy = unit + sigma * rng.standard_normal(unit.shape).astype("float32")
        cos = np.einsum("nd,nd->n", noisy, unit) / np.linalg.norm(noisy, axis=1)
        noisy *= (norms[pick] / np.linalg.norm(noisy, axis=1))[:, None]
        name = f"shard{s:03d}"
        np.save(folder / f"{name}.vectors.npy", noisy.astype("float16"))
        lines = []
        for d in range(0, per_shard, per_doc):
            entities = [{"start": 10 * j, "end": 10 * j + 6, "text": "x", "label": "Entity",
                         "kb_id": ids[pick[d + j]],
                         "score": round(float(scores[pick[d + j]] * cos[d + j]), 4),
                         "candidates": [[ids[pick[d + j]],
                                         round(float(scores[pick[d + j]] * cos[d + j]), 4)]]}
                        for j in range(min(per_doc, per_shard - d))]
            lines.append(json.dumps({"id": f"{name}-{d // per_doc}", "entities": entities}))
        (folder / f"{name}.jsonl").write_text("\n".join(lines) + "\n")
        manifest[f"{name}.jsonl"] = {"docs": len(lines), "mentions": per_shard}
    (folder / "manifest.json").write_text(json.dumps({
        "settings": {"model": "generated", "format": "jsonl", "vectors": True},
        "shards": manifest}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--corpus", default="corpus/bc5cdr/test.spacy")
    parser.add_argument("--mentions", type=int, default=1_000_000)
    parser.add_argument("--k", type=int, default=8)
    parser.add_argument("--recall-sample", type=int, default=1_000)
    parser.add_argument("--work", default="training/bench-cluster")
    args = parser.parse_args()
    work = Path(args.work)
    linked, out = work / f"linked-{args.mentions}", work / f"clustered-{args.mentions}"
    vectors, ids, scores, gold = real_mentions(args.model, Path(args.corpus))
    cosine = same_entity_cosine(vectors, gold)
    print(f"{len(ids)} real mentions; same-entity cosine {cosine:.3f}", flush=True)
    write_linked(linked, args.mentions, vectors, ids, scores, cosine)
    cmd = ["/usr/bin/time", "-v", sys.executable, "-m", "spacy_arboel", "cluster", str(linked),
           str(out), "--model", args.model, "--recall-sample", str(args.recall_sample),
           f"--components.arbo_coref.k={args.k}"]
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    print(done.stdout, done.stderr[-3000:], flush=True)
    done.check_returncode()
    peak = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", done.stderr)[1])
    stages = dict(re.findall(r"seconds: (\w+)\s+([\d.]+)", done.stdout))
    recall = re.search(r"edge recall \(\d+ mentions\)\s+([\d.]+)", done.stdout)
    clusters = re.search(r"clusters\s+(\d+)", done.stdout)
    result = {"name": f"cluster-scaling-{args.mentions}", "mentions": args.mentions,
              "real_mentions": len(ids), "same_entity_cosine": round(cosine, 4), "k": args.k,
              "seconds": round(seconds, 1), "stage_seconds": {k: float(v)
                                                              for k, v in stages.items()},
              "peak_rss_mb": round(peak / 1024), "clusters": int(clusters[1]) if clusters
              else None, "edge_recall": float(recall[1]) if recall else None,
              "recall_sample": args.recall_sample,
              "vector_disk_mb": round(sum(p.stat().st_size for p in linked.glob("*.npy"))
                                      / 2**20),
              "commands": [command_line([sys.executable, *sys.argv])], "machine": machine(),
              "date": datetime.date.today().isoformat()}
    write_result(result)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
