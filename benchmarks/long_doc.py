"""Benchmark one very long document through a pipeline (issue 14, item 9).

Not a test. Concatenates BC5CDR test abstracts into documents of the given lengths (in
characters), runs each through the pipeline (by default the toy ``ner`` + linker + coref
pipeline of ``spacy project run all``) and writes the seconds spent in each component, the
number of ents and the peak RSS to ``benchmarks/results/long-doc.json``. Usage::

    OMP_NUM_THREADS=2 python benchmarks/long_doc.py --model training/model-best \\
        --chars 50000 --chars 200000
    OMP_NUM_THREADS=2 python benchmarks/long_doc.py --untrained training/mesh.jsonl \\
        --chars 100000 --chars 400000 --output long-doc-arbo-linker
"""

from __future__ import annotations

import argparse
import json
import resource
import time
from pathlib import Path

from _common import RESULTS, run_stamp


def long_text(source: Path, n_chars: int) -> str:
    """BC5CDR abstracts (title and abstract) joined by blank lines up to ``n_chars``."""
    from spacy_arboel.data.inputs import read_documents

    parts, size = [], 0
    while size < n_chars:
        for document in read_documents(source, "pubtator"):
            parts.append(document.text)
            size += len(document.text) + 2
            if size >= n_chars:
                break
    return "\n\n".join(parts)[:n_chars]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, default=Path("training/model-best"))
    parser.add_argument("--untrained", metavar="KB", type=Path, default=None,
                        help="Instead of --model: a blank English pipeline with an untrained "
                        "arbo_linker over this KB JSONL, its defaults (the default encoder), as "
                        "a user starts from a KB alone")
    parser.add_argument("--data-dir", type=Path, default=Path("../shared/data"))
    parser.add_argument("--chars", type=int, action="append")
    parser.add_argument("--output", default="long-doc",
                        help="The result file's name in benchmarks/results/ (no suffix)")
    args = parser.parse_args()
    import spacy
    import torch

    if args.untrained is not None:
        nlp = spacy.blank("en")
        nlp.add_pipe("arbo_linker", config={"kb_path": str(args.untrained)})
        nlp.initialize()
    else:
        nlp = spacy.load(args.model)
    rows = []
    for n_chars in args.chars or [200_000]:
        text = long_text(args.data_dir / "bc5cdr" / "CDR_TestSet.PubTator.txt", n_chars)
        doc = nlp.make_doc(text)
        seconds = {}
        for name, proc in nlp.pipeline:
            start = time.perf_counter()
            doc = proc(doc)
            seconds[name] = round(time.perf_counter() - start, 2)
        rows.append({"chars": len(text), "tokens": len(doc), "ents": len(doc.ents),
                     "seconds": seconds, "total_seconds": round(sum(seconds.values()), 2)})
        print(json.dumps(rows[-1]), flush=True)
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    result = {
        "name": args.output, "pipeline": nlp.pipe_names,
        **({"untrained_arbo_linker_kb": str(args.untrained)} if args.untrained is not None
           else {"model": str(args.model)}),
        "source": "BC5CDR test abstracts, concatenated", "rows": rows,
        "peak_rss_mb": round(peak_mb), "torch_threads": torch.get_num_threads(),
        **run_stamp(),
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{args.output}.json").write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
