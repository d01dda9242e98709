"""Zero-shot linking (issue 30), the no-training baseline: scispaCy's TF-IDF linker over the
KB of the MeSH files alone, on the test split's gold mentions.

scispaCy's char-3-gram TF-IDF + nmslib HNSW candidate generator (``scispacy_linker.py``, run
in its own environment since scispaCy pins numpy < 2: ``python -m venv .venv-scispacy &&
.venv-scispacy/bin/pip install scispacy==0.6.2``) is built over ``mesh_kb.jsonl`` (the KB of
``zero_shot.py``: MeSH descriptors + disease synonyms, no aliases harvested from train/dev),
then loaded and run in a fresh process. Each mention's candidates are its concepts ranked by
their best alias similarity among ``--k`` alias neighbours (256: several aliases may map to
one concept, and recall@64 needs 64 concepts); the prediction is the first candidate ("NIL"
when there is none). The metrics are ours (``linking_metrics``), seen/unseen split by the gold
ids of the dataset's training corpus, as for ``zero_shot.py``'s rows. Usage::

    python benchmarks/zero_shot_scispacy.py --dataset bc5cdr
    python benchmarks/zero_shot_scispacy.py --dataset ncbi

The index is built once (``--index``, set-up time recorded in its ``build.json``) and reused
by both datasets. Writes ``benchmarks/results/<dataset>-zero-shot-scispacy.json`` with
``"corpus_training": false`` (``zero_shot.py --table-only`` lists it with the other rows).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import tempfile
from pathlib import Path

from _common import ROOT, command_line, fmt, machine, relative_path, write_result
from zero_shot import KBS, PREPARE, corpus_ids, gold_docs, prepare

WORKER = ROOT / "benchmarks" / "scispacy_linker.py"
VERSION = "0.6.2"


def run_worker(cmd: list[str], threads: int) -> None:
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads),
           "OPENBLAS_NUM_THREADS": str(threads)}
    print("$", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, env=env)


def recorded(cmd: list[str]) -> str:
    """A worker's command line as the result file records it: scispaCy's python as
    ``SCISPACY_PYTHON``, paths inside the repository relative to it."""
    return command_line(["SCISPACY_PYTHON", *cmd[1:]])


def scispacy_candidates(args: argparse.Namespace, kb: Path, texts: list[list[str]],
                        commands: list[str]) -> tuple[dict, dict]:
    """Build the index (once) and link every doc's mention texts: the worker's link result
    (one run, ``args.k``) and its ``build.json``."""
    index = Path(args.index)
    build = [args.scispacy, str(WORKER), "build", str(kb), str(index),
             "--threads", str(args.threads)]
    if not (index / "build.json").exists():  # built once, as scispaCy caches its index
        run_worker(build, args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        mentions, out = Path(tmp) / "mentions.json", Path(tmp) / "scispacy.json"
        mentions.write_text(json.dumps({"docs": texts}))
        link = [args.scispacy, str(WORKER), "link", str(kb), str(index), "--mentions",
                str(mentions), "--output", str(out), "--k", str(args.k),
                "--keep", str(args.keep)]
        run_worker(link, args.threads)
        result = json.loads(out.read_text())
    commands += [recorded(build),
                 recorded(link[:6] + ["MENTIONS.json", "--output", "OUT.json", *link[9:]])]
    return result, json.loads((index / "build.json").read_text())


def scispacy_row(args: argparse.Namespace) -> dict:
    """Link the test split's gold mentions with scispaCy's TF-IDF linker over the MeSH KB."""
    import spacy

    from spacy_arboel.data.ids import gold_ids
    from spacy_arboel.evaluation.metrics import MentionOutcome, linking_metrics

    corpus, kb = prepare(args, args.kb)
    kb_ids = {json.loads(line)["id"] for line in kb.read_text().splitlines() if line.strip()}
    vocab = spacy.blank("en").vocab
    test = gold_docs(corpus / "test.spacy", vocab)
    seen = corpus_ids(gold_docs(corpus / "train.spacy", vocab))
    texts = [[ent.text for ent in doc.ents] for doc in test]
    suffix = "" if args.kb == "mesh" else f"-{args.kb}"
    commands = [f"python benchmarks/zero_shot_scispacy.py --dataset {args.dataset}"
                + (f" --kb {args.kb}" if suffix else "")]
    result, built = scispacy_candidates(args, kb, texts, commands)
    run = result["runs"][0]
    candidates = run.pop("candidates")
    ents = [ent for doc in test for ent in doc.ents]
    if len(candidates) != len(ents):
        raise ValueError(f"{len(candidates)} candidate lists for {len(ents)} mentions")
    outcomes = []
    for ent, found in zip(ents, candidates, strict=True):
        ids = gold_ids(ent.kb_id_)
        outcomes.append(MentionOutcome(
            gold_ids=ids, candidates=found, predicted=found[0] if found else "NIL",
            label=ent.label_, in_kb=any(i in kb_ids for i in ids),
            seen=any(i in seen for i in ids)))
    metrics = linking_metrics(outcomes, nil_id="NIL")
    short = sum(1 for found in candidates if len(found) < args.keep)
    return {
        "name": f"{args.dataset}-zero-shot-scispacy{suffix}",
        "dataset": args.dataset,
        "split": "test",
        "component": f"scispacy TF-IDF linker (scispacy=={VERSION})",
        "corpus_training": False,
        "settings": {
            "kb": KBS[args.kb][2],
            "kb_path": relative_path(kb),
            "k": args.k,
            "keep": args.keep,
            "candidates": "concepts of the k nearest aliases (char-3-gram TF-IDF, nmslib "
                          "HNSW M=100 efConstruction=2000 efSearch=200), ranked by best "
                          "alias similarity; predicted = first candidate",
            "mentions_with_fewer_than_keep_candidates": short,
            "mentions": "gold spans",
            "seen": "gold ids of the training split",
            "threads": {"build": args.threads,
                        "link": "nmslib default (all cores; knnQueryBatch without "
                                "num_threads)"},
        },
        "metrics": metrics,
        "timings": {
            "mentions": result["mentions"],
            "docs": len(test),
            "linking_seconds": run["link_seconds"],
            "linking_mentions_per_s": run["mentions_per_s"],
            "import_seconds": result["import_seconds"],
            "load_seconds": result["load_seconds"],
            "peak_rss_mb": result["peak_rss_mb"],
            "setup_seconds": built["build_seconds"],
            "build_peak_rss_mb": built["peak_rss_mb"],
            "training_seconds": None,
        },
        "commands": commands,
        "machine": machine(),
        "date": datetime.date.today().isoformat(),
    }


def summary(row: dict) -> str:
    """The row's scores as in ``zero_shot.py``'s table."""
    m, t = row["metrics"], row["timings"]
    types = " ".join(f"{label} R@1 {fmt(g['recall@1'])}" for label, g in m["per_type"].items())
    return (f"{row['name']}: in-KB R@1 {fmt(m['in_kb']['recall@1'])} "
            f"R@64 {fmt(m['in_kb']['recall@64'])}, seen R@1 {fmt(m['seen']['recall@1'])}, "
            f"unseen R@1 {fmt(m['unseen']['recall@1'])}, {types}; "
            f"{t['linking_mentions_per_s']:.0f} mentions/s, set-up {t['setup_seconds']} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dataset", choices=sorted(PREPARE), default="bc5cdr")
    parser.add_argument("--scispacy", default=str(ROOT / ".venv-scispacy" / "bin" / "python"),
                        help="python of an environment with scispaCy")
    parser.add_argument("--kb", choices=sorted(KBS), default="mesh",
                        help="the KB: the MeSH files alone, or with installed synonyms")
    parser.add_argument("--index", help="where scispaCy's built index goes (reused when "
                                         "built; default bench_runs/zero_shot/"
                                         "scispacy_index[-<kb>])")
    parser.add_argument("--k", type=int, default=256, help="alias neighbours per mention")
    parser.add_argument("--keep", type=int, default=64, help="concepts kept per mention")
    parser.add_argument("--threads", type=int, default=1,
                        help="index-building threads (and OMP/MKL threads of the worker)")
    parser.add_argument("--data-dir", default=str(ROOT.parent / "shared" / "data"))
    parser.add_argument("--corpus", help="prepare's folder (default corpus/<dataset>)")
    parser.add_argument("--work", default=str(ROOT / "bench_runs" / "zero_shot"))
    args = parser.parse_args()
    args.corpus = args.corpus or str(ROOT / "corpus" / args.dataset)
    args.index = args.index or str(ROOT / "bench_runs" / "zero_shot" / (
        "scispacy_index" + ("" if args.kb == "mesh" else f"-{args.kb}")))
    if not Path(args.scispacy).exists():
        parser.error(f"no scispaCy python at {args.scispacy} (see scispacy_linker.py)")
    Path(args.work).mkdir(parents=True, exist_ok=True)
    row = scispacy_row(args)
    print(f"wrote {write_result(row)}", flush=True)
    print(summary(row))


if __name__ == "__main__":
    main()
