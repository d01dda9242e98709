"""Zero-shot linking of raw text (issue 30): ``arbo_linker`` from a KB alone, and a plain
dictionary match linked by scispaCy's TF-IDF linker.

Not a test: a KB-alone row embeds the whole KB twice (entity rows for the span reader, name
rows for the dictionary linker: minutes on a 2-core CPU). All 500 test abstracts, InKB micro
P/R/F1 with strong matching (``evaluate_end_to_end``) and abstracts/s. Usage::

    python benchmarks/zero_shot_raw_text.py --rows arbo-linker-kb-only dictionary-scispacy
    python benchmarks/zero_shot_raw_text.py --rows arbo-linker-kb-only-self-aligned \
        --self-aligned bench_runs/zero_shot/sapbert-syn

Rows (KB: the MeSH files alone, ``zero_shot.py``'s ``mesh_kb.jsonl``; no corpus training):

* ``arbo-linker-kb-only``: ``nlp.add_pipe("arbo_linker", config={"kb_path": KB})`` and
  ``nlp.initialize()``, nothing else: dictionary spans linked by the base encoder.
* ``arbo-linker-kb-only-self-aligned``: the same with ``pretrain-kb``'s encoder
  (``model.encoder_name``).
* ``dictionary-scispacy``: the same dictionary spans (``DictionarySpans``, the matcher
  ``arbo_linker`` uses), each linked to the first concept of scispaCy's TF-IDF candidate
  generator (``scispacy_linker.py`` in its own environment, k = 30 alias neighbours as in
  scispaCy's ``EntityLinker``, a match without candidates left unlinked). Abstracts/s counts
  the matching and scispaCy's linking, not its index loading.

Each row writes ``benchmarks/results/bc5cdr-raw-text-<row>.json`` with ``"corpus_training":
false``. The corpus-trained ``arbo_linker`` rows come from ``bc5cdr_e2e.py`` (``--linker``: a
trained ``arbo_entity_linker``, e.g. one trained from ``pretrain-kb``'s encoder).
"""

from __future__ import annotations

import argparse
import datetime
import json
import time
from pathlib import Path

from _common import RESULTS, ROOT, fmt, machine, relative_path, write_result
from zero_shot import DEFAULT_WORK, KBS, gold_docs, prepare
from zero_shot_scispacy import scispacy_candidates

ROWS = ("arbo-linker-kb-only", "arbo-linker-kb-only-self-aligned", "dictionary-scispacy")


def arbo_linker_row(row: str, args: argparse.Namespace) -> dict:
    """The untrained ``arbo_linker`` over the MeSH KB alone, as a user adds it."""
    import spacy

    from spacy_arboel.evaluation.end_to_end_eval import evaluate_end_to_end

    corpus, kb = prepare(args, args.kb)
    config: dict = {"kb_path": str(kb)}
    if row.endswith("self-aligned"):
        config["model"] = {"encoder_name": str(Path(args.self_aligned) / "encoder")}
    nlp = spacy.blank("en")
    nlp.add_pipe("arbo_linker", config=config)
    start = time.perf_counter()
    nlp.initialize()
    setup = time.perf_counter() - start
    linker = nlp.get_pipe("arbo_linker")
    spans = linker.dictionary.spans
    metrics = evaluate_end_to_end(nlp, gold_docs(corpus / "test.spacy", nlp.vocab))
    timings = metrics.pop("timings")
    timings.update(setup_seconds=round(setup, 1), training_seconds=None)
    recorded: dict = {"kb_path": relative_path(kb)}
    command = f"python benchmarks/zero_shot_raw_text.py --rows {row}" + _options(args)
    if "model" in config:
        recorded["model"] = {"encoder_name": relative_path(Path(config["model"]["encoder_name"]))}
        command += f" --self-aligned {relative_path(Path(args.self_aligned))}"
    return result_file(_named(row, args), "arbo_linker (untrained: dictionary spans, "
                       "zero-shot encoder)",
                       {"config": recorded, "kb": KBS[args.kb][2], "names_matched": spans.n_names,
                        "dictionary_spans": linker.settings.dictionary_spans},
                       metrics, timings, [command])


def dictionary_scispacy_row(args: argparse.Namespace) -> dict:
    """The dictionary matches of ``arbo_linker`` linked by scispaCy's TF-IDF linker."""
    import spacy
    from spacy.training import Example

    from spacy_arboel.components.dictionary_spans import DictionarySpans
    from spacy_arboel.evaluation.end_to_end import score_end_to_end
    from spacy_arboel.kb.knowledge_base import KnowledgeBase

    corpus, kb_path = prepare(args, args.kb)
    kb = KnowledgeBase.from_jsonl(kb_path)
    nlp = spacy.blank("en")
    gold = gold_docs(corpus / "test.spacy", nlp.vocab)
    start = time.perf_counter()
    matcher = DictionarySpans(nlp.tokenizer.pipe, kb, args.max_span_length,
                              stop_words=nlp.Defaults.stop_words, language=nlp.lang)
    setup = time.perf_counter() - start
    start = time.perf_counter()
    docs = [nlp.make_doc(g.text) for g in gold]
    matches = [matcher(doc) for doc in docs]
    match_seconds = time.perf_counter() - start
    texts = [[m.text for m in found] for found in matches]
    commands = ["python benchmarks/zero_shot_raw_text.py --rows dictionary-scispacy"
                + _options(args)]
    args.keep = 1
    result, built = scispacy_candidates(args, kb_path, texts, commands)
    run = result["runs"][0]
    candidates = iter(run.pop("candidates"))
    examples = []
    for doc, found, reference in zip(docs, matches, gold, strict=True):
        ents = []
        for match in found:
            ids = next(candidates)
            if ids:
                span = doc.char_span(match.start_char, match.end_char, label="ENTITY",
                                     kb_id=ids[0])
                ents.append(span)
        doc.ents = ents
        examples.append(Example(doc, reference))
    scores = score_end_to_end(examples, kb_ids=kb)
    metrics = {"in_kb": {"precision": scores["e2e_inkb_p"], "recall": scores["e2e_inkb_r"],
                         "f1": scores["e2e_inkb_f"], "n_gold": scores["e2e_n_gold"],
                         "n_predicted": scores["e2e_n_predicted"], "tp": scores["e2e_tp"]}}
    seconds = match_seconds + run["link_seconds"]
    timings = {"docs": len(gold), "seconds": round(seconds, 2),
               "docs_per_s": round(len(gold) / seconds, 2),
               "match_seconds": round(match_seconds, 2), "link_seconds": run["link_seconds"],
               "matches": sum(len(f) for f in matches),
               "setup_seconds": round(setup + built["build_seconds"], 1),
               "scispacy_load_seconds": result["load_seconds"], "training_seconds": None}
    return result_file(_named("dictionary-scispacy", args),
                       "dictionary match (arbo_linker's DictionarySpans) + scispacy TF-IDF "
                       "linker (scispacy==0.6.2)",
                       {"kb": KBS[args.kb][2], "kb_path": relative_path(kb_path), "k": args.k,
                        "linked": "first concept of the k nearest aliases; a match without "
                                  "candidates is left unlinked",
                        "threads": "nmslib default (all cores)"},
                       metrics, timings, commands)


def _options(args: argparse.Namespace) -> str:
    """The command line's ``--kb`` and ``--work`` where they are not the defaults."""
    options = f" --kb {args.kb}" if args.kb != "mesh" else ""
    if Path(args.work).resolve() != DEFAULT_WORK.resolve():
        options += f" --work {relative_path(Path(args.work))}"
    return options


def _named(row: str, args: argparse.Namespace) -> str:
    """A row's result name: the row, and the KB where it is not the MeSH files alone."""
    return row if args.kb == "mesh" else f"{row}-{args.kb}"


def result_file(row: str, component: str, settings: dict, metrics: dict, timings: dict,
                commands: list[str]) -> dict:
    return {"name": f"bc5cdr-raw-text-{row}", "dataset": "bc5cdr", "split": "test",
            "component": component, "corpus_training": False,
            "settings": settings, "metrics": metrics, "timings": timings,
            "commands": commands, "machine": machine(),
            "date": datetime.date.today().isoformat()}


def table() -> str:
    """The BENCHMARKS.md table of the raw-text rows."""
    lines = ["| run | corpus training | InKB P | InKB R | InKB F1 | abstracts/s | set-up s "
             "| date |", "|---|---|---:|---:|---:|---:|---:|---|"]
    for path in sorted(RESULTS.glob("bc5cdr-raw-text-*.json")):
        r = json.loads(path.read_text())
        m, t = r["metrics"]["in_kb"], r["timings"]
        lines.append(f"| {r['name']} | no "
                     f"| {fmt(m['precision'])} | {fmt(m['recall'])} | {fmt(m['f1'])} "
                     f"| {t['docs_per_s']:.1f} | {t.get('setup_seconds') or '–'} "
                     f"| {r['date']} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", nargs="*", default=[], choices=ROWS)
    parser.add_argument("--self-aligned", help="pretrain-kb's output folder")
    parser.add_argument("--data-dir", default=str(ROOT.parent / "shared" / "data"))
    parser.add_argument("--corpus", default=str(ROOT / "corpus" / "bc5cdr"))
    parser.add_argument("--work", default=str(DEFAULT_WORK))
    parser.add_argument("--scispacy", default=str(ROOT / ".venv-scispacy" / "bin" / "python"),
                        help="the python of scispaCy's environment")
    parser.add_argument("--index", default=str(ROOT / "bench_runs" / "zero_shot" /
                                                "scispacy_index"))
    parser.add_argument("--k", type=int, default=30, help="scispaCy's alias neighbours")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--max-span-length", type=int, default=24,
                        help="dictionary-scispacy: the longest name matched, in tokens "
                             "(arbo_linker's max_span_length)")
    parser.add_argument("--kb", default="mesh", choices=sorted(KBS),
                        help="The KB (zero_shot.py's KBS): the MeSH files alone by default")
    parser.add_argument("--table-only", action="store_true")
    args = parser.parse_args()
    args.dataset = "bc5cdr"
    if not args.table_only:
        Path(args.work).mkdir(parents=True, exist_ok=True)
        for row in args.rows:
            if row.endswith("self-aligned") and not args.self_aligned:
                parser.error(f"--rows {row} needs --self-aligned")
            result = (dictionary_scispacy_row(args) if row == "dictionary-scispacy"
                      else arbo_linker_row(row, args))
            print(f"wrote {write_result(result)}", flush=True)
    print(table())


if __name__ == "__main__":
    main()
