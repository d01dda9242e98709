"""What the index costs and keeps: recall and search time against the rows indexed.

Not a test. Encodes the in-KB gold test mentions once with a trained linker, then searches
the saved alias-row index (a) exactly with every row, (b) exactly after dropping
near-duplicate rows at several cosine thresholds (``row_dedupe_threshold``) and (c) with
HNSW. Usage::

    python benchmarks/index_rows.py MODEL corpus/bc5cdr/test.spacy

MODEL must have been saved with every alias row (``row_dedupe_threshold = null``).

Writes ``benchmarks/results/index-rows.json``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import time
import warnings
from dataclasses import replace

import numpy as np
from _common import RESULTS, machine


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("corpus")
    parser.add_argument("--thresholds", type=float, nargs="+",
                        default=[0.99, 0.98, 0.97, 0.95, 0.9])
    args = parser.parse_args()

    import spacy
    from spacy.tokens import DocBin

    from spacy_arboel.data.ids import gold_ids
    from spacy_arboel.encoders.inputs import MentionSpan
    from spacy_arboel.kb.index import DenseIndex, near_duplicate_rows

    # every saved row: the layout the index was trained with, before any de-duplication
    nlp = spacy.load(args.model, config={
        "components.arbo_entity_linker.row_dedupe_threshold": None})
    linker = nlp.get_pipe("arbo_entity_linker")
    texts, spans, golds = [], [], []
    for number, doc in enumerate(DocBin().from_disk(args.corpus).get_docs(nlp.vocab)):
        texts.append(doc.text)
        for ent in doc.ents:
            known = {linker.kb.position(i) for i in gold_ids(ent.kb_id_) if i in linker.kb}
            if known:
                spans.append(MentionSpan(number, ent.start_char, ent.end_char))
                golds.append(known)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        queries = linker.retriever.encode_mentions(texts, spans)
    full = linker.retriever.index
    rows: list[dict] = []

    def measure(name: str, index: DenseIndex, **extra) -> None:
        start = time.perf_counter()
        _, found = index.search(queries, 64)
        seconds = time.perf_counter() - start
        hits = [[p in gold for p in row] for row, gold in zip(found.tolist(), golds,
                                                                strict=True)]
        rows.append({"index": name, "rows": len(index.owners), **extra,
                     "recall@1": float(np.mean([h[0] for h in hits])),
                     "recall@64": float(np.mean([any(h) for h in hits])),
                     "search_seconds": round(seconds, 2), "queries": len(queries)})
        print(json.dumps(rows[-1]), flush=True)

    measure("flat, every row", full)
    for threshold in args.thresholds:
        keep = near_duplicate_rows(full.embeddings, full.owners, threshold)
        measure("flat, de-duplicated", DenseIndex(full.embeddings[keep], full.owners[keep],
                                                   full.meta), threshold=threshold)
    start = time.perf_counter()
    hnsw = DenseIndex(full.embeddings, full.owners, replace(full.meta, kind="hnsw"),
                      ef_search=256)
    measure("hnsw M=32 efSearch=256, every row", hnsw,
            build_seconds=round(time.perf_counter() - start, 1))
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "index-rows.json").write_text(json.dumps({
        "name": "index-rows", "dataset": "bc5cdr", "split": "test",
        "component": "arbo_entity_linker index", "settings": {"model": args.model},
        "rows": rows, "commands": [" ".join(["python", *sys.argv])],
        "machine": machine(), "date": datetime.date.today().isoformat(),
    }, indent=2) + "\n")


if __name__ == "__main__":
    main()
