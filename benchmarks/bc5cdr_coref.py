"""Benchmark arbo_coref on BC5CDR: tune on dev, evaluate on test, for trained linkers.

Not a test. For each ``--model NAME=PATH`` (a pipeline with a trained arbo_entity_linker,
e.g. the outputs of ``benchmarks/bc5cdr_linker.py``) it runs ``tune-coref`` on dev and
``evaluate-coref`` on test with the tuned settings, and writes
``benchmarks/results/bc5cdr-coref-<NAME>.json``; the string-match baseline and the speed of
the partition on a 100,000-mention graph are written too. Usage::

    python benchmarks/bc5cdr_coref.py --model knn_negatives=/tmp/bench2/knn_negatives/model-last \\
        --model arborescence=/tmp/bench2/arborescence/model-last

``--corpus`` may point at a discovery-setting corpus (``prepare bc5cdr DIR --holdout 0.1``),
with models trained on it and ``--tag=-discovery``; ``--table-only`` prints the table of
the committed results.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"

from _common import (  # noqa: E402
    command_line,
    machine,
    relative_path,  # noqa: E402
    run,
)


def _write(name: str, body: dict) -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    result = {"name": name, "dataset": "bc5cdr", **body, "machine": machine(),
              "date": datetime.date.today().isoformat()}
    (RESULTS / f"{name}.json").write_text(json.dumps(result, indent=2) + "\n")


def coref_run(name: str, model: Path, corpus: Path, work: Path, metric: str, tag: str,
              overrides: list[str] = ()) -> None:
    work.mkdir(parents=True, exist_ok=True)
    tuning, metrics = work / f"{name}{tag}_tuning.json", work / f"{name}{tag}_test.json"
    tune_cmd = [sys.executable, "-m", "spacy_arboel", "tune-coref", str(model),
                str(corpus / "dev.spacy"), "--output", str(tuning), "--metric", metric,
                *overrides]
    tune_seconds = run(tune_cmd)
    eval_cmd = [sys.executable, "-m", "spacy_arboel", "evaluate-coref", str(model),
                str(corpus / "test.spacy"), "--settings", str(tuning), "--output", str(metrics),
                *overrides]
    if (corpus / "heldout_ids.json").exists():  # the discovery setting
        eval_cmd += ["--heldout", str(corpus / "heldout_ids.json")]
    run(eval_cmd)
    result = json.loads(metrics.read_text())
    _write(f"bc5cdr-coref-{name}{tag}", {
        "split": "test", "component": "arbo_coref",
        "settings": {**result.pop("settings"), "linker_model": relative_path(model),
                     "tuned_on": "dev", "tuning_metric": metric, "corpus": relative_path(corpus)},
        "metrics": result, "timings": {**result.pop("timings"),
                                       "tuning_seconds": round(tune_seconds, 1)},
        "commands": [command_line(tune_cmd), command_line(eval_cmd)],
    })


def string_baseline(corpus: Path, tag: str) -> None:
    import spacy
    from spacy.tokens import DocBin
    from spacy.training import Example

    from spacy_arboel.evaluation.coref_eval import string_baseline as baseline

    nlp = spacy.blank("en")
    docs = DocBin().from_disk(corpus / "test.spacy").get_docs(nlp.vocab)
    examples = [Example(doc, doc) for doc in docs]
    _write(f"bc5cdr-coref-string-match{tag}", {
        "split": "test", "component": "baseline: exact normalised-string clustering",
        "settings": {"corpus": relative_path(corpus)}, "metrics": {"coref": baseline(examples)},
        "commands": [f"python benchmarks/bc5cdr_coref.py --corpus {corpus} (string baseline)"],
    })


def partition_speed(n_mentions: int = 100_000, k: int = 8, dim: int = 384) -> None:
    """The k-NN graph (exact FAISS) and the partition of ``n_mentions`` random mentions."""
    from spacy_arboel.coref.graph import build_graph, knn_graph
    from spacy_arboel.coref.partition import partition_graph

    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((n_mentions, dim)).astype("float32")
    n_entities = n_mentions // 5
    start = time.perf_counter()
    neighbours, scores = knn_graph(vectors, k)
    knn_seconds = time.perf_counter() - start
    entities = rng.integers(0, n_entities, size=n_mentions)
    graph = build_graph(neighbours, scores, entities, rng.standard_normal(n_mentions))
    timings = {"knn_graph_seconds": round(knn_seconds, 2)}
    for directed in (True, False):
        start = time.perf_counter()
        partition_graph(graph.n_nodes, np.arange(graph.n_entities), graph.sources,
                        graph.targets, graph.weights, directed=directed)
        timings[f"partition_seconds_{'directed' if directed else 'undirected'}"] = round(
            time.perf_counter() - start, 2)
    _write("coref-partition-speed", {
        "split": None, "component": "arbo_coref partition",
        "settings": {"mentions": n_mentions, "k": k, "dim": dim, "edges": len(graph.sources),
                     "entity_nodes": graph.n_entities},
        "timings": timings,
        "commands": ["python benchmarks/bc5cdr_coref.py --speed-only"],
    })
    print(json.dumps(timings))


def fmt(value) -> str:
    return "–" if value is None else f"{value:.3f}"


def results_table() -> str:
    header = ("| run | acc clustering | acc independent | acc seen / unseen | NMI | ARI | B³ F1 "
              "| CoNLL F1 | out-of-KB NMI / ARI | held-out NMI / ARI / in NIL | mention R@64 "
              "| k | λ | directed | date |\n"
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|\n")
    rows = []
    for path in sorted(RESULTS.glob("bc5cdr-coref-*.json")):
        r = json.loads(path.read_text())
        m, s = r["metrics"], r["settings"]
        co = m["coref"]
        if "clustering" in m:
            c, i, oo = m["clustering"], m["independent"], m["coref_out_of_kb"]
            linking = (f"{fmt(c['all']['accuracy'])} | {fmt(i['all']['accuracy'])} | "
                       f"{fmt(c['seen']['accuracy'])} / {fmt(c['unseen']['accuracy'])}")
            held = m.get("coref_heldout", {})
            held_text = (f"{fmt(held.get('nmi'))} / {fmt(held.get('ari'))} / "
                         f"{fmt(m.get('heldout_nil_rate'))}" if held else "–")
            extra = (f"{fmt(oo.get('nmi'))} / {fmt(oo.get('ari'))} | {held_text} | "
                     f"{fmt(m.get('mention_recall@64'))} | {s['k']} | {s['threshold']} | "
                     f"{s['directed']}")
        else:
            linking, extra = "– | – | –", "– | – | – | – | – | –"
        rows.append(f"| {r['name']} | {linking} | {fmt(co['nmi'])} | {fmt(co['ari'])} | "
                    f"{fmt(co['b3']['f'])} | {fmt(co['conll_f1'])} | {extra} | {r['date']} |")
    return header + "\n".join(rows) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", action="append", default=[], help="NAME=PATH (repeatable)")
    parser.add_argument("--corpus", default=str(ROOT / "corpus" / "bc5cdr"))
    parser.add_argument("--work", default=str(ROOT / "training" / "bench-coref"))
    parser.add_argument("--metric", default="conll_f1")
    parser.add_argument("--tag", default="",
                        help="suffix of the result names, e.g. --tag=-discovery")
    parser.add_argument("--overrides", nargs="*", default=[],
                        help="arbo_coref settings for tuning and test, e.g. "
                        "--components.arbo_coref.same_doc_only true")
    parser.add_argument("--no-baseline", action="store_true",
                        help="skip the string-match baseline")
    parser.add_argument("--speed-only", action="store_true")
    parser.add_argument("--no-speed", action="store_true", help="skip the partition timing")
    parser.add_argument("--table-only", action="store_true")
    args = parser.parse_args()
    if args.table_only:
        print(results_table())
        return
    if not args.speed_only:
        corpus = Path(args.corpus)
        if not args.no_baseline:
            string_baseline(corpus, args.tag)
        for spec in args.model:
            name, _, path = spec.partition("=")
            coref_run(name, Path(path), corpus, Path(args.work), args.metric, args.tag,
                      args.overrides)
    if not args.no_speed:
        partition_speed()


if __name__ == "__main__":
    main()
