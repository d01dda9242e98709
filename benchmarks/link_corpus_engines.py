"""``link-corpus`` with ``--engine local`` and ``--engine ray`` (1 and 2 workers) on the same
BC5CDR-sized corpus, one after the other, each in a fresh process (issue 19's benchmark: the
ratio is what counts on one 2-core machine).

The corpus is the raw text of a ``.spacy`` split (default: BC5CDR test, 500 abstracts) cut
into ``--shards`` JSONL shards. Each run's wall time counts loading the pipeline (once per
process or actor) and starting Ray; ``docs/s`` is docs over wall time. The outputs of every
run are checked to hold the same documents and entities as the local run's.

Usage::

    python benchmarks/link_corpus_engines.py --model training/bench-e2e-trf/ner_trf_linker_nil

Writes ``benchmarks/results/bc5cdr-link-corpus-engines.json`` and prints the table.
"""

from __future__ import annotations

import argparse
import datetime
import json
import shutil
import sys
import time
from pathlib import Path

from _common import ROOT, command_line, machine, relative_path, write_result


def write_shards(corpus: Path, folder: Path, n_shards: int) -> int:
    """The raw texts of ``corpus`` as ``n_shards`` JSONL shards in ``folder``."""
    import spacy
    from spacy.tokens import DocBin

    docs = list(DocBin().from_disk(corpus).get_docs(spacy.blank("en").vocab))
    folder.mkdir(parents=True, exist_ok=True)
    for shard in range(n_shards):
        rows = [{"id": f"doc{i}", "text": d.text} for i, d in enumerate(docs)
                if i % n_shards == shard]
        (folder / f"shard{shard:02d}.jsonl").write_text(
            "".join(json.dumps(r) + "\n" for r in rows))
    return len(docs)


def linked(folder: Path) -> dict[str, list]:
    """Every document's entities (offsets, label, kb_id) in a run's output."""
    out = {}
    for path in sorted(folder.glob("*.jsonl")):
        if path.name.endswith(".errors.jsonl"):
            continue
        for line in path.read_text().splitlines():
            record = json.loads(line)
            out[record["id"]] = [(e["start"], e["end"], e["label"], e["kb_id"])
                                 for e in record["entities"]]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="a pipeline that links raw text")
    parser.add_argument("--corpus", default="corpus/bc5cdr/test.spacy")
    parser.add_argument("--shards", type=int, default=8)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--work", default="training/bench-link-corpus")
    parser.add_argument("--runs", nargs="*", default=["local", "ray-1", "ray-2"],
                        help="local, ray-N (N workers)")
    args = parser.parse_args()
    import subprocess

    work = Path(args.work)
    shutil.rmtree(work, ignore_errors=True)
    n_docs = write_shards(Path(args.corpus), work / "input", args.shards)
    rows, commands, outputs = [], [], {}
    for run in args.runs:
        out = work / f"out-{run}"
        cmd = [sys.executable, "-m", "spacy_arboel", "link-corpus", args.model,
               str(work / "input"), str(out), "--batch-size", str(args.batch_size)]
        if run.startswith("ray"):
            cmd += ["--engine", "ray", "--num-workers", run.split("-")[1]]
        print("$", " ".join(cmd), flush=True)
        start = time.perf_counter()
        subprocess.run(cmd, check=True)
        seconds = time.perf_counter() - start
        outputs[run] = linked(out)
        manifest = json.loads((out / "manifest.json").read_text())
        docs = sum(s["docs"] for s in manifest["shards"].values())
        rows.append({"run": run, "docs": docs,
                     "mentions": sum(s["mentions"] for s in manifest["shards"].values()),
                     "errors": sum(s["errors"] for s in manifest["shards"].values()),
                     "seconds": round(seconds, 1), "docs_per_s": round(docs / seconds, 2)})
        commands.append(command_line(cmd))
    first = args.runs[0]
    for row in rows:
        row["same_entities_as_" + first] = outputs[row["run"]] == outputs[first]
    result = {"name": "bc5cdr-link-corpus-engines", "corpus": relative_path(ROOT / args.corpus),
              "docs": n_docs, "shards": args.shards, "model": args.model, "rows": rows,
              "commands": [command_line([sys.executable, *sys.argv]), *commands],
              "machine": machine(), "date": datetime.date.today().isoformat()}
    write_result(result)
    print("| run | docs | mentions | seconds (wall, incl. loading) | docs/s | same entities |")
    print("|---|---:|---:|---:|---:|---|")
    for row in rows:
        print(f"| {row['run']} | {row['docs']} | {row['mentions']} | {row['seconds']} "
              f"| {row['docs_per_s']} | {row['same_entities_as_' + first]} |")


if __name__ == "__main__":
    main()
