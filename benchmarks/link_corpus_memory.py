"""Peak memory of ``link-corpus --vectors`` on one large shard (issue 29, item 9): the
code of this checkout against that of another (``--baseline``, e.g. a worktree of the
commit before the shard writer spilled to disk), each in a fresh process, one after the
other.

The shard: ``--docs`` documents cycled from the raw texts of the ``.spacy`` splits of
``--corpus`` (BC5CDR: title and abstract, about 22 entities each with the ruler below).
The pipeline, built once into ``--work``: an ``entity_ruler`` with a lower-case phrase
pattern for every gold mention text of the corpus (so about as many entities as the gold
annotation), then an untrained ``arbo_entity_linker`` over the KB entities those mentions
name (the default encoder, int8, a 24-wordpiece mention window: the fast CPU setting's
speed; the linking quality is not what is measured). Peak RSS is the child's maximum
resident set (``/usr/bin/time``'s %M).

Usage::

    python benchmarks/link_corpus_memory.py --corpus corpus/bc5cdr --docs 8000 \\
        --baseline ../baseline

Writes ``benchmarks/results/link-corpus-memory-<docs>.json``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from _common import (
    ROOT,
    command_line,
    machine,
    recorded_result,
    relative_path,
    write_result,
)


def build_pipeline(corpus: Path, folder: Path) -> None:
    import spacy
    from spacy.tokens import DocBin

    from spacy_arboel.kb.knowledge_base import KnowledgeBase

    nlp = spacy.blank("en")
    texts, ids = set(), set()
    for split in ("train", "dev", "test"):
        for doc in DocBin().from_disk(corpus / f"{split}.spacy").get_docs(nlp.vocab):
            for ent in doc.ents:
                texts.add((ent.label_, ent.text.lower()))
                ids.update(i for i in ent.kb_id_.split("|") if i)
    kb = KnowledgeBase.from_jsonl(corpus / "kb.jsonl")
    folder.parent.mkdir(parents=True, exist_ok=True)
    small = folder.parent / "kb-small.jsonl"
    small.write_text("".join(json.dumps({"id": e.id, "name": e.name,
                                         "aliases": list(e.aliases)}) + "\n"
                             for e in kb if e.id in ids))
    ruler = nlp.add_pipe("entity_ruler", config={"phrase_matcher_attr": "LOWER"})
    ruler.add_patterns([{"label": label, "pattern": text} for label, text in sorted(texts)])
    linker = nlp.add_pipe("arbo_entity_linker", config={
        "kb_path": str(small), "quantize": True, "mention_max_length": 24,
        "model": {"pooling": "mention"}})
    linker.ensure_ready()
    nlp.to_disk(folder)


def write_shard(corpus: Path, path: Path, n_docs: int) -> None:
    import spacy
    from spacy.tokens import DocBin

    texts = [doc.text for split in ("train", "dev", "test")
             for doc in DocBin().from_disk(corpus / f"{split}.spacy").get_docs(
                 spacy.blank("en").vocab)]
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as out:
        for i in range(n_docs):
            out.write(json.dumps({"id": f"d{i}", "text": texts[i % len(texts)]}) + "\n")


def link(code: Path, model: Path, shard: Path, output: Path) -> dict:
    """``link-corpus`` of this checkout's or ``code``'s package, in a fresh process."""
    shutil.rmtree(output, ignore_errors=True)
    cmd = [sys.executable, "-m", "spacy_arboel", "link-corpus", str(model), str(shard),
           str(output), "--vectors", "--batch-size", "64"]
    start = time.perf_counter()
    done = subprocess.run(["/usr/bin/time", "-f", "maxrss_kb=%M", *cmd], check=True,
                          cwd=code, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          text=True)
    peak = int(done.stderr.rsplit("maxrss_kb=", 1)[1].split()[0])
    manifest = json.loads((output / "manifest.json").read_text())
    counts = next(iter(manifest["shards"].values()))
    return {"peak_rss_mb": round(peak / 1024),
            "seconds": round(time.perf_counter() - start, 1), "docs": counts["docs"],
            "mentions": counts["mentions"],
            "output_mb": round(sum(p.stat().st_size for p in output.iterdir()) / 2**20, 1)}


def _named(command: str, args: argparse.Namespace) -> str:
    """``command`` with the corpus and baseline paths given by their names, where given
    (a result file keeps no path of the machine it ran on)."""
    for path, name in ((args.corpus, args.corpus_name), (args.baseline, args.baseline_name)):
        if path is not None and name:
            command = command.replace(str(path), name)
    return command


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, required=True,
                        help="a prepare output: train/dev/test.spacy and kb.jsonl")
    parser.add_argument("--docs", type=int, default=50_000)
    parser.add_argument("--baseline", type=Path, help="another checkout to compare with")
    parser.add_argument("--work", type=Path, default=ROOT / "bench_runs" / "corpus-memory")
    parser.add_argument("--only", choices=["this", "baseline"], help="run one side only "
                        "(the result file keeps the other side's earlier run)")
    parser.add_argument("--corpus-name", help="how the result file names --corpus")
    parser.add_argument("--baseline-name", help="how the result file names --baseline")
    parser.add_argument("--build-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    model = args.work / "pipeline"
    if args.build_only:
        build_pipeline(args.corpus, model)
        return
    if not model.exists():  # saved by the oldest code, so that both load it
        env = {**os.environ, "PYTHONPATH": str((args.baseline or ROOT).resolve())}
        subprocess.run([sys.executable, __file__, "--corpus", str(args.corpus), "--work",
                        str(args.work), "--build-only"], check=True, env=env)
    shard = args.work / f"input{args.docs}" / "shard.jsonl"
    if not shard.exists():
        write_shard(args.corpus, shard, args.docs)
    name = f"link-corpus-memory-{args.docs}"
    earlier = recorded_result(name) or {}
    runs = dict(earlier.get("runs", {}))
    commands = dict(earlier.get("commands", {}))
    for run_name, code in (("this checkout", ROOT), ("baseline", args.baseline)):
        if code is None or (args.only and not run_name.startswith(args.only)):
            continue
        runs[run_name] = link(code.resolve(), model.resolve(), shard.resolve(),
                              (args.work / f"out-{run_name.split()[0]}").resolve())
        runs[run_name]["code"] = ("this checkout" if code == ROOT
                                  else args.baseline_name or relative_path(code))
        commands[run_name] = _named(command_line([sys.executable, *sys.argv]), args)
        print(run_name, runs[run_name], flush=True)
        result = {"name": name, "date": datetime.date.today().isoformat(),
                  "machine": machine(), "commands": commands,
                  "corpus": args.corpus_name or relative_path(args.corpus),
                  "docs": args.docs, "runs": runs}
        print(f"Wrote {write_result(result)}")


if __name__ == "__main__":
    main()
