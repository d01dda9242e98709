"""The linking rate with and without the type rule, one linker set up once (issue 41).

Not a test. The README's untrained linker over the typed MeSH KB (``zero_shot.py``'s
``ontologies-mesh-terms`` KB) links BC5CDR test's gold mentions in alternating rounds, with
``get_candidates.label_types`` (``restrict``) and without: the same process, index and
encoder, so that only the rule differs. Usage::

    python benchmarks/type_rule_rate.py --rounds 3
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
    args = parser.parse_args()

    import spacy

    from spacy_arboel.evaluation.pipeline_eval import evaluate_linker

    kb = Path(args.work) / KBS["ontologies-mesh-terms"][0]
    if not kb.exists():
        sys.exit(f"{kb} is missing: run benchmarks/zero_shot.py --dataset bc5cdr --rows "
                 "base-names-synonyms-ontologies-mesh-terms-typed first")
    nlp = spacy.blank("en")
    linker = nlp.add_pipe("arbo_entity_linker", config={
        "kb_path": str(kb), "get_candidates": {"@misc": "spacy_arboel.candidates.v1",
                                               "label_types": LABEL_TYPES},
        "model": {"@architectures": "spacy_arboel.BiEncoder.v1", "encoder_name": BASE,
                  "pooling": "mention", "share_weights": False, "mixed_precision": False}})
    nlp.initialize()
    typed = linker.get_candidates
    untyped = replace(typed, label_types=None)
    test = Path(args.corpus) / "test.spacy"
    rates: dict[str, list[float]] = {"no rule": [], "restrict": []}
    recall: dict[str, float] = {}
    for _ in range(args.rounds):
        for name, policy in (("no rule", untyped), ("restrict", typed)):
            linker.get_candidates = policy
            metrics = evaluate_linker(nlp, gold_docs(test, nlp.vocab))
            rates[name].append(metrics["timings"]["linking_mentions_per_s"])
            recall[name] = metrics["in_kb"]["recall@1"]
    medians = {name: statistics.median(found) for name, found in rates.items()}
    ratio = medians["restrict"] / medians["no rule"]
    for name in rates:
        print(f"{name}: in-KB R@1 {recall[name]:.4f}, mentions/s {rates[name]} "
              f"(median {medians[name]:.0f})")
    print(f"restrict / no rule: {ratio:.2f}x")
    write_result({
        "name": "bc5cdr-type-rule-rate",
        "dataset": "bc5cdr",
        "split": "test",
        "component": "arbo_entity_linker",
        "settings": {"kb": relative_path(kb), "label_types": LABEL_TYPES,
                     "rounds": args.rounds, "mentions": "gold spans"},
        "metrics": {"in_kb_recall@1": recall, "mentions_per_s": rates,
                    "median_mentions_per_s": medians, "restrict_vs_no_rule": round(ratio, 3)},
        "commands": [f"python benchmarks/type_rule_rate.py --rounds {args.rounds}"],
        "machine": machine(),
        "date": datetime.date.today().isoformat(),
    })


if __name__ == "__main__":
    main()
