"""Side by side on the BC5CDR test mentions (gold spans): our linker's settings against
scispaCy's TF-IDF candidate generator over the same KB, in one run.

For each ``--run NAME=MODEL [--components.x.y value ...]`` a fresh process loads the pipeline
(``spacy.load``: seconds, peak RSS) and links every test mention with the linker alone
(mentions/s; with ``--rounds N``, N times round-robin over the runs, the median kept; with
``--code NAME=DIR``, run NAME imports the ``spacy_arboel`` of the checkout DIR); in-KB
recall@1/@64 is computed here from each run's candidate lists, with the same function for
every run (``spacy_arboel.evaluation.metrics.linking_metrics``). With
``--scispacy PYTHON`` (an environment with scispaCy, see ``benchmarks/scispacy_linker.py``)
scispaCy's index is built from the linker's KB and timed, then loaded and run in a fresh
process. ``--load NAME=MODEL`` times ``spacy.load`` of whole pipelines (e.g. ner + linker +
coref) and their first doc. Runs go one at a time; nothing else should share the machine.

Usage::

    python benchmarks/fast_linking.py --corpus corpus/bc5cdr \\
        --run fp32=training/bench3/knn_negatives-refactor/model-last \\
        --run "int8=training/bench3/knn_negatives-refactor/model-last \\
               --components.arbo_entity_linker.quantize true" \\
        --run fast=training/bench-fast/distilled --scispacy .venv-scispacy/bin/python

Writes ``benchmarks/results/bc5cdr-fast-linking[-TAG].json`` and prints the table.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import RESULTS, command_line, machine, relative_path

ROOT = Path(__file__).resolve().parents[1]


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def worker(model: str, corpus: str, output: str, overrides: list[str], load_only: bool,
           component: str) -> None:
    """In a fresh process: load ``model`` (timed), then link the corpus's gold mentions
    with ``component`` alone, or (``load_only``) run one raw text through the pipeline."""
    start = time.perf_counter()
    import spacy
    from spacy.tokens import DocBin

    from spacy_arboel.cli.overrides import parse_overrides
    from spacy_arboel.spacy_data.readers import with_gold_mentions

    imported = time.perf_counter()
    nlp = spacy.load(model, config=parse_overrides(overrides))
    loaded = time.perf_counter()
    result = {"import_seconds": round(imported - start, 2),
              "load_seconds": round(loaded - imported, 2), "rss_after_load_mb":
              round(peak_rss_mb()), "pipeline": nlp.pipe_names}
    gold = list(DocBin().from_disk(Path(corpus) / "test.spacy").get_docs(nlp.vocab))
    if load_only:
        start = time.perf_counter()
        nlp(gold[0].text)
        result["first_doc_seconds"] = round(time.perf_counter() - start, 2)
    else:
        linker = nlp.get_pipe(component)
        docs = [with_gold_mentions(nlp.make_doc(g.text), g) for g in gold]
        start = time.perf_counter()
        docs = list(linker.pipe(docs))
        seconds = time.perf_counter() - start
        n = sum(len(d.ents) for d in docs)
        result.update({"mentions": n, "link_seconds": round(seconds, 2),
                       "mentions_per_s": round(n / seconds, 1),
                       "candidates": [[kb_id for kb_id, _ in ent._.kb_candidates]
                                      for d in docs for ent in d.ents]})
    result["peak_rss_mb"] = round(peak_rss_mb())
    Path(output).write_text(json.dumps(result))


def gold_mentions(corpus: Path) -> tuple[list[list[str]], list[tuple[tuple[str, ...], str]]]:
    """The test docs' mention texts (per doc) and each mention's gold ids and label."""
    import spacy
    from spacy.tokens import DocBin

    from spacy_arboel.data.ids import gold_ids

    nlp = spacy.blank("en")
    texts, gold = [], []
    for doc in DocBin().from_disk(corpus / "test.spacy").get_docs(nlp.vocab):
        texts.append([ent.text for ent in doc.ents])
        gold.extend((tuple(gold_ids(ent.kb_id_)), ent.label_) for ent in doc.ents)
    return texts, gold


def recall(candidates: list[list[str]], gold: list[tuple[tuple[str, ...], str]],
           kb_ids: set[str]) -> dict:
    """In-KB recall@1/@64 and accuracy over the mentions with a gold id in the KB."""
    from spacy_arboel.evaluation.metrics import MentionOutcome, linking_metrics

    if len(candidates) != len(gold):
        raise ValueError(f"{len(candidates)} candidate lists for {len(gold)} mentions")
    outcomes = [MentionOutcome(ids, found, found[0] if found else "", label,
                               in_kb=any(i in kb_ids for i in ids))
                for found, (ids, label) in zip(candidates, gold, strict=True) if ids]
    in_kb = linking_metrics(outcomes, ks=(1, 64))["in_kb"]
    return {"n": in_kb["n"], "recall@1": in_kb["recall@1"], "recall@64": in_kb["recall@64"]}


def run_process(cmd: list[str], threads: int, code: str | None = None) -> float:
    """Run ``cmd`` on ``threads`` threads; ``code``: a checkout whose ``spacy_arboel`` the
    process imports instead of this one's (another commit's, measured in the same run)."""
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
    if code:
        env["PYTHONPATH"] = os.pathsep.join([str(Path(code).resolve()),
                                             env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    print("$", " ".join(cmd), flush=True)
    start = time.perf_counter()
    subprocess.run(cmd, check=True, env=env)
    return time.perf_counter() - start


def named(value: str) -> tuple[str, str, list[str]]:
    """``NAME=MODEL [overrides]`` as (name, model, overrides)."""
    words = shlex.split(value)
    name, _, model = words[0].partition("=")
    if not name or not model:
        raise SystemExit(f"--run/--load take NAME=MODEL [overrides], got {value!r}")
    return name, model, words[1:]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", default="corpus/bc5cdr")
    parser.add_argument("--run", action="append", default=[], help="NAME=MODEL [overrides]")
    parser.add_argument("--load", action="append", default=[], help="NAME=MODEL [overrides]")
    parser.add_argument("--scispacy", help="python of an environment with scispaCy")
    parser.add_argument("--scispacy-k", type=int, action="append", default=[],
                        help="scispaCy alias neighbours per mention (repeatable; default 30 "
                             "and 256)")
    parser.add_argument("--scispacy-index", default="training/bench-fast/scispacy_index",
                        help="where scispaCy's built index goes")
    parser.add_argument("--kb", help="KB JSONL (default: the first run's linker KB)")
    parser.add_argument("--component", default="arbo_entity_linker")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--tag", default="")
    parser.add_argument("--rounds", type=int, default=1,
                        help="times each run links the corpus (round-robin); mentions/s is "
                             "the median")
    parser.add_argument("--code", action="append", default=[],
                        help="NAME=DIR: run NAME with the spacy_arboel of the checkout DIR "
                             "(e.g. a git worktree of an earlier commit)")
    parser.add_argument("--worker", nargs=3, metavar=("MODEL", "CORPUS", "OUTPUT"),
                        help=argparse.SUPPRESS)
    parser.add_argument("--load-only", action="store_true", help=argparse.SUPPRESS)
    args, rest = parser.parse_known_args()
    args.scispacy_k = args.scispacy_k or [30, 256]
    if args.worker:
        worker(*args.worker, rest, args.load_only, args.component)
        return
    runs = [named(v) for v in args.run]
    corpus = Path(args.corpus)
    kb_path = Path(args.kb) if args.kb else Path(runs[0][1]) / args.component / "kb.jsonl"
    kb_ids = {json.loads(line)["id"] for line in kb_path.read_text().splitlines() if line}
    texts, gold = gold_mentions(corpus)
    code = dict(value.split("=", 1) for value in args.code)
    rows, commands = [], []
    with tempfile.TemporaryDirectory() as tmp:
        rates: dict[str, list[float]] = {name: [] for name, _, _ in runs}
        for round_ in range(args.rounds):  # round-robin: a drift of the machine hits all
            for name, model, overrides in runs:
                out = Path(tmp) / f"{name}.json"
                cmd = [sys.executable, __file__, "--worker", model, str(corpus), str(out),
                       "--component", args.component, *overrides]
                run_process(cmd, args.threads, code.get(name))
                result = json.loads(out.read_text())
                rates[name].append(result["mentions_per_s"])
                if round_:
                    continue
                commands.append((f"PYTHONPATH={code[name]} " if name in code else "")
                                + command_line(cmd[:5] + ["OUT.json"] + cmd[6:]))
                rows.append({"name": name, "model": relative_path(Path(model)),
                             "overrides": overrides, **({"code": code[name]} if name in code
                                                        else {}),
                             **recall(result.pop("candidates"), gold, kb_ids), **result})
        for row in rows[:len(runs)]:  # the median of the rounds, each round's kept
            row["mentions_per_s_rounds"] = rates[row["name"]]
            row["mentions_per_s"] = float(statistics.median(rates[row["name"]]))
        for name, model, overrides in map(named, args.load):
            out = Path(tmp) / f"load-{name}.json"
            cmd = [sys.executable, __file__, "--worker", model, str(corpus), str(out),
                   "--load-only", *overrides]
            run_process(cmd, args.threads)
            commands.append(command_line(cmd[:5] + ["OUT.json"] + cmd[6:]))
            rows.append({"name": f"load: {name}", "model": relative_path(Path(model)),
                         "overrides": overrides,
                         **json.loads(out.read_text())})
        if args.scispacy:
            rows += scispacy_rows(args, kb_path, texts, gold, kb_ids, Path(tmp), commands)
    name = "-".join(["bc5cdr-fast-linking", *([args.tag] if args.tag else [])])
    record = {"name": name, "dataset": corpus.name, "split": "test", "rows": rows,
              "threads": args.threads, "commands": commands, "machine": machine(),
              "date": datetime.date.today().isoformat()}
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{name}.json").write_text(json.dumps(record, indent=2) + "\n")
    print(table(record))


def scispacy_rows(args, kb_path: Path, texts, gold, kb_ids, tmp: Path, commands) -> list:
    """Build scispaCy's index from the KB (timed), then load and link in a fresh process,
    once per ``--scispacy-k``: one row each."""
    script = str(ROOT / "benchmarks" / "scispacy_linker.py")
    index = Path(args.scispacy_index)
    build = [args.scispacy, script, "build", str(kb_path), str(index),
             "--threads", str(args.threads)]
    if not (index / "build.json").exists():  # built once (tens of minutes), as scispaCy caches
        run_process(build, args.threads)
    mentions = tmp / "mentions.json"
    mentions.write_text(json.dumps({"docs": texts}))
    out = tmp / "scispacy.json"
    link = [args.scispacy, script, "link", str(kb_path), str(index), "--mentions",
            str(mentions), "--output", str(out)]
    for k in args.scispacy_k:
        link += ["--k", str(k)]
    run_process(link, args.threads)
    commands += [command_line(build).replace(args.scispacy, "SCISPACY_PYTHON"),
                 command_line(link[:6] + ["MENTIONS.json", "--output", "OUT.json", *link[9:]])
                 .replace(args.scispacy, "SCISPACY_PYTHON")]
    result = json.loads(out.read_text())
    built = json.loads((index / "build.json").read_text())
    shared = {k: v for k, v in result.items() if k != "runs"}
    return [{"name": f"scispacy-tfidf-k{run['k']}",
             "model": "scispacy 0.6.2 TF-IDF + nmslib HNSW (k alias neighbours)",
             **recall(run.pop("candidates"), gold, kb_ids), **shared, **run,
             "build_seconds": built["build_seconds"], "build_peak_rss_mb": built["peak_rss_mb"]}
            for run in result["runs"]]


def table(record: dict) -> str:
    def cell(row, key, fmt="{}"):
        return "–" if row.get(key) is None else fmt.format(row[key])

    lines = ["| run | in-KB R@1 | R@64 | mentions/s | load s (imports + load) | peak RSS MB |",
             "|---|---:|---:|---:|---:|---:|"]
    for row in record["rows"]:
        load = row["import_seconds"] + row["load_seconds"]
        lines.append(f"| {row['name']} | {cell(row, 'recall@1', '{:.3f}')} "
                     f"| {cell(row, 'recall@64', '{:.3f}')} | {cell(row, 'mentions_per_s')} "
                     f"| {load:.2f} ({row['import_seconds']} + {row['load_seconds']}) "
                     f"| {cell(row, 'peak_rss_mb')} |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
