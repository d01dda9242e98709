"""The linking rate with and without the type rule, one linker set up once (issue 41).

Not a test. The README's untrained linker over the typed MeSH KB (``zero_shot.py``'s
``ontologies-mesh-terms`` KB) links BC5CDR test's gold mentions in alternating rounds, with
``get_candidates.label_types`` (``restrict``) and without: the same process, index and
encoder, so that only the rule differs. ``--compare reading``: with the type rule, the
mention read as written against read by ``expand_abbreviations`` and the dataset's mention
normalisers (a defined abbreviation's long form, American spelling, an element's name).
Usage::

    python benchmarks/type_rule_rate.py --rounds 3 [--compare reading]
"""

from __future__ import annotations

import argparse
import datetime
import statistics
import sys
from dataclasses import replace
from pathlib import Path

from _common import ROOT, machine, relative_path, write_result
from zero_shot import BASE, DEFAULT_WORK, KBS, LABEL_TYPES, gold_docs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--corpus", default=str(ROOT / "corpus" / "bc5cdr"))
    parser.add_argument("--work", default=str(DEFAULT_WORK))
    parser.add_argument("--compare", choices=("type-rule", "reading"), default="type-rule")
    args = parser.parse_args()

    import spacy

    from spacy_arboel.evaluation.pipeline_eval import evaluate_linker

    kb = Path(args.work) / KBS["ontologies-mesh-terms"][0]
    if not kb.exists():
        sys.exit(f"{kb} is missing: run benchmarks/zero_shot.py --dataset bc5cdr --rows "
                 "base-names-synonyms-ontologies-mesh-terms-typed first")
    import srsly

    normalisers = srsly.read_yaml(ROOT / "configs" / "datasets.yml")["bc5cdr"]["normalisers"]
    nlp = spacy.blank("en")
    linker = nlp.add_pipe("arbo_entity_linker", config={
        "kb_path": str(kb), "normalisers": normalisers,
        "get_candidates": {"@misc": "spacy_arboel.candidates.v1", "label_types": LABEL_TYPES},
        "model": {"@architectures": "spacy_arboel.BiEncoder.v1", "encoder_name": BASE,
                  "pooling": "mention", "share_weights": False, "mixed_precision": False}})
    nlp.initialize()
    typed = linker.get_candidates
    reading = linker.retriever.settings
    # (name, candidate policy, retriever settings) of each round's two runs: the first is
    # the baseline
    if args.compare == "type-rule":
        runs = [("no rule", replace(typed, label_types=None), reading),
                ("restrict", typed, reading)]
    else:
        runs = [("as written", typed, replace(reading, expand_abbreviations=False,
                                              normalisers=())),
                ("read", typed, reading)]
    test = Path(args.corpus) / "test.spacy"
    rates: dict[str, list[float]] = {name: [] for name, _, _ in runs}
    recall: dict[str, float] = {}
    for _ in range(args.rounds):
        for name, policy, settings in runs:
            linker.get_candidates = policy
            linker.retriever.use_settings(settings)
            metrics = evaluate_linker(nlp, gold_docs(test, nlp.vocab))
            rates[name].append(metrics["timings"]["linking_mentions_per_s"])
            recall[name] = metrics["in_kb"]["recall@1"]
    medians = {name: statistics.median(found) for name, found in rates.items()}
    (base, _, _), (other, _, _) = runs
    ratio = medians[other] / medians[base]
    for name in rates:
        print(f"{name}: in-KB R@1 {recall[name]:.4f}, mentions/s {rates[name]} "
              f"(median {medians[name]:.0f})")
    print(f"{other} / {base}: {ratio:.2f}x")
    write_result({
        "name": "bc5cdr-type-rule-rate" + ("" if args.compare == "type-rule"
                                           else "-reading"),
        "dataset": "bc5cdr",
        "split": "test",
        "component": "arbo_entity_linker",
        "settings": {"kb": relative_path(kb), "label_types": LABEL_TYPES,
                     "rounds": args.rounds, "mentions": "gold spans", "compare": args.compare},
        "metrics": {"in_kb_recall@1": recall, "mentions_per_s": rates,
                    "median_mentions_per_s": medians,
                    f"{other}_vs_{base}".replace(" ", "_"): round(ratio, 3)},
        "commands": [f"python benchmarks/type_rule_rate.py --rounds {args.rounds}"
                     + ("" if args.compare == "type-rule" else f" --compare {args.compare}")],
        "machine": machine(),
        "date": datetime.date.today().isoformat(),
    })


if __name__ == "__main__":
    main()
