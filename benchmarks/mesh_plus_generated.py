"""Row vectors of a KB of millions of entities for the index table (issue 19, item 4): the
MeSH KB as a trained linker embeds it, plus generated rows, and real mention queries.

No KB of millions of biomedical entities is available offline, and embedding 5M generated
names with MiniLM on 2 CPU cores would take hours (``build-index`` measures that rate), so:

- the first rows are the linker's own index rows (MeSH names and aliases, its trained entity
  encoder);
- each generated row is a random real row plus Gaussian noise, scaled so that its cosine to
  that row is the median cosine between a real row and its nearest row of another entity,
  with the real row's norm: generated entities sit as close to real ones as real neighbours
  sit to each other;
- the queries are BC5CDR test mentions embedded by the linker's mention encoder.

What this shows: build time, size on disk and in memory, and search time at 1M and 5M rows,
and recall of the approximate index against exact search on vectors whose norms and
neighbour distances match a real KB's. What it cannot: recall on a real KB of that size,
whose names form their own clusters and near-duplicates (UMLS synonyms).

Usage::

    python benchmarks/mesh_plus_generated.py --model training/bench-e2e-trf/ner_trf_linker_nil \
        --rows 1000000 5000000

Writes ``training/bench-index/vectors-<rows>.npy`` (+ ``.json``) and ``queries.npy``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np


def neighbour_cosine(vectors: np.ndarray, owners: np.ndarray, sample: int = 2_000,
                     seed: int = 0) -> float:
    """The median cosine between a real row and its nearest row of another entity."""
    import faiss

    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    rows = np.random.default_rng(seed).choice(len(unit), sample, replace=False)
    scores, found = faiss.knn(unit[rows], unit, 32, metric=faiss.METRIC_INNER_PRODUCT)
    other = owners[found] != owners[rows][:, None]
    return float(np.median([s[o][0] for s, o in zip(scores, other, strict=True) if o.any()]))


def generate(base: np.ndarray, path: Path, rows: int, cosine: float, seed: int = 0,
             chunk: int = 250_000) -> None:
    """``rows`` vectors into a new .npy at ``path``: ``base``, then generated rows."""
    dim = base.shape[1]
    sigma = np.sqrt((1 / cosine**2 - 1) / dim)  # E cos(u, u + g) for unit u, g ~ N(0, σ²I)
    norms = np.linalg.norm(base, axis=1)
    out = np.lib.format.open_memmap(path, mode="w+", dtype="float32", shape=(rows, dim))
    out[:len(base)] = base
    rng = np.random.default_rng(seed)
    for start in range(len(base), rows, chunk):
        stop = min(start + chunk, rows)
        pick = rng.integers(0, len(base), stop - start)
        unit = base[pick] / norms[pick, None]
        noisy = unit + sigma * rng.standard_normal(unit.shape).astype("float32")
        noisy *= (norms[pick] / np.linalg.norm(noisy, axis=1))[:, None]
        out[start:stop] = noisy
    out.flush()


def mention_queries(model: str, corpus: Path, n: int, seed: int = 0) -> np.ndarray:
    import spacy
    from spacy.tokens import DocBin

    from spacy_arboel.components.common import gold_mentions

    nlp = spacy.load(model)
    linker = nlp.get_pipe("arbo_entity_linker")
    docs = list(DocBin().from_disk(corpus).get_docs(nlp.vocab))
    texts, spans, _ = gold_mentions(docs)
    pick = np.sort(np.random.default_rng(seed).choice(len(spans), min(n, len(spans)),
                                                      replace=False))
    return linker.retriever.encode_mentions(texts, [spans[i] for i in pick])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="pipeline with a trained linker")
    parser.add_argument("--corpus", default="corpus/bc5cdr/test.spacy")
    parser.add_argument("--rows", type=int, nargs="+", default=[1_000_000, 5_000_000])
    parser.add_argument("--queries", type=int, default=1_000)
    parser.add_argument("--work", default="training/bench-index")
    args = parser.parse_args()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    index = Path(args.model) / "arbo_entity_linker" / "index"
    base = np.load(index / "embeddings.npy")
    owners = np.load(index / "owners.npy")
    cosine = neighbour_cosine(base, owners)
    for rows in args.rows:
        generate(base, work / f"vectors-{rows}.npy", rows, cosine)
        (work / f"vectors-{rows}.json").write_text(json.dumps({
            "description": f"{len(base)} MeSH rows embedded by the trained BC5CDR linker + "
                           f"{rows - len(base)} generated around them (cosine to their real "
                           f"row {cosine:.3f} = the median real nearest-other-entity cosine)",
            "real_rows": len(base), "neighbour_cosine": round(cosine, 4)}))
        print(f"vectors-{rows}.npy written (neighbour cosine {cosine:.3f})", flush=True)
    np.save(work / "queries.npy", mention_queries(args.model, Path(args.corpus),
                                                  args.queries))


if __name__ == "__main__":
    main()
