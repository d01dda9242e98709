"""KB ablation (issue 61): the entities of a seeded 20% of a test corpus's gold ids are removed
from the KB, so their mentions are out of it; what an untrained linker does with them.

Not a test. An untrained ``arbo_entity_linker`` (defaults, blank English pipeline, ``nil_id``
NIL) over the ablated KB links the corpus's gold mentions. Reported with no NIL at all
(``nil_recall`` None), at the default (the NIL threshold ``nil_recall`` takes from the
ablated KB's held-out names, and ties) and at each probability threshold of
``THRESHOLDS``:

* the share of out-of-KB mentions abstained (NIL);
* the precision of the links emitted (right links over the mentions not put in NIL);
* the in-KB R@1 kept (right first links over the in-KB mentions, NIL counting as wrong), and
  its drop from no threshold.

Writes ``benchmarks/results/kb-ablation-<name>.json``. Usage::

    OMP_NUM_THREADS=2 python benchmarks/kb_ablation.py --name bc5cdr \\
        --corpus corpus/bc5cdr/test.spacy --kb training/zero_shot/mesh_kb.jsonl
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path

from _common import run_stamp, untrained_linker, write_result

from spacy_arboel.kb.knowledge_base import NIL_ID as NIL

THRESHOLDS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)


def removed_ids(gold: list[tuple[str, ...]], kb, fraction: float, seed: int) -> set[str]:
    """A seeded ``fraction`` of the distinct gold ids that are entities of ``kb``."""
    ids = sorted({i for ids in gold for i in ids if i in kb})
    return set(random.Random(seed).sample(ids, round(fraction * len(ids))))


def operating_point(rows: list[tuple[bool, bool, float, bool]], threshold: float | None,
                    default: bool = False) -> dict[str, float]:
    """``rows``: (in the KB, first candidate right, its probability, linked by the default)
    per mention; the mentions linked are those at or above ``threshold`` (all for None),
    or with ``default`` those the default linked."""
    def linked(row: tuple[bool, bool, float, bool]) -> bool:
        return row[3] if default else threshold is None or row[2] >= threshold

    out = [row for row in rows if not row[0]]
    inside = [row for row in rows if row[0]]
    emitted = [(row[0] and row[1]) for row in rows if linked(row)]
    return {
        "threshold": threshold,
        "out_of_kb_abstained": round(sum(not linked(row) for row in out) / len(out), 4),
        "precision_of_links": round(sum(emitted) / len(emitted), 4) if emitted else None,
        "in_kb_r1": round(sum(row[1] and linked(row) for row in inside) / len(inside), 4),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--name", required=True, help="The result's name")
    parser.add_argument("--corpus", type=Path, required=True, help="Gold .spacy (test split)")
    parser.add_argument("--kb", type=Path, required=True, help="The KB JSONL to ablate")
    parser.add_argument("--fraction", type=float, default=0.2)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    import spacy
    import torch
    from spacy.tokens import DocBin

    from spacy_arboel.data.ids import gold_ids
    from spacy_arboel.kb import KnowledgeBase
    from spacy_arboel.kb.build import without_entities
    from spacy_arboel.spacy_data.readers import with_gold_mentions

    kb = KnowledgeBase.from_jsonl(args.kb)
    gold_docs = list(DocBin().from_disk(args.corpus).get_docs(spacy.blank("en").vocab))
    gold = [tuple(kb.resolve_ids(gold_ids(e.kb_id_))) for d in gold_docs for e in d.ents]
    removed = removed_ids(gold, kb, args.fraction, args.seed)
    nlp, setup = untrained_linker(without_entities(kb, removed), nil_id=NIL)
    docs = [with_gold_mentions(nlp.make_doc(g.text), g) for g in gold_docs]
    rows = []
    for doc, ids in zip((e for d in nlp.pipe(docs) for e in d.ents), gold, strict=True):
        if not ids or not any(i in kb for i in ids):  # no gold id, or never in the KB
            continue
        candidates = doc._.kb_candidates
        first, p = candidates[0] if candidates else (NIL, 0.0)
        rows.append((not set(ids) <= removed, first in ids, float(p), doc.kb_id_ != NIL))
    never = operating_point(rows, None)
    default = {**operating_point(rows, nlp.get_pipe("arbo_entity_linker").nil_threshold(),
                                 default=True)}
    default["in_kb_r1_drop"] = round(never["in_kb_r1"] - default["in_kb_r1"], 4)
    result = {
        "name": f"kb-ablation-{args.name}", "corpus": str(args.corpus), "kb": str(args.kb),
        "kb_entities": len(kb), "removed_entities": len(removed), "seed": args.seed,
        "mentions": len(rows), "out_of_kb_mentions": sum(not r[0] for r in rows),
        "no_nil": never, "default": default,
        "thresholds": [{**point, "in_kb_r1_drop": round(never["in_kb_r1"]
                                                        - point["in_kb_r1"], 4)}
                       for point in (operating_point(rows, t) for t in THRESHOLDS)],
        "setup_s": round(setup, 1), "torch_threads": torch.get_num_threads(),
        **run_stamp(),
    }
    print("no NIL", never, "default", default, result["mentions"],
          result["out_of_kb_mentions"])
    for point in result["thresholds"]:
        print(point)
    write_result(result)


if __name__ == "__main__":
    main()
