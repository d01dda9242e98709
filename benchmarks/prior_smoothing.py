"""How much smoothing the mention prior takes (issue 62, item 5: a prior from very few
examples must not pin a probability at 1.0), chosen on a dev split.

Not a test. An untrained ``arbo_entity_linker`` over the workflow's KB (``prepare``: its
aliases and link counts from the training and dev mentions; ``--kb``), with the type rule on
the gold labels, never abstaining and without the prior, links the gold mentions of the dev
and test splits once; the prior is then joined to each mention's candidates as the linker
joins it (p + p_prior (1 - p), ``CandidatePolicy.rank``) with p_prior smoothed by each
``--pseudo-links`` value (``KnowledgeBase.mention_prior``), and in-KB R@1 is counted, with the
share of first candidates whose joined score is 0.999 or more (pinned). Writes
``benchmarks/results/prior-smoothing-<name>.json``. Usage::

    OMP_NUM_THREADS=2 python benchmarks/prior_smoothing.py --name bc5cdr
"""

from __future__ import annotations

import argparse
from pathlib import Path

from _common import run_stamp, untrained_linker, write_result
from pipeline_size import links


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--name", default="bc5cdr")
    parser.add_argument("--corpus", type=Path, default=Path("corpus/bc5cdr"))
    parser.add_argument("--labels", nargs="*", default=["Chemical", "Disease"])
    parser.add_argument("--pseudo-links", nargs="*", type=float,
                        default=[0.0, 0.01, 0.1, 0.25, 0.5, 1.0, 2.0])
    args = parser.parse_args()
    from spacy.tokens import DocBin

    from spacy_arboel.data.ids import gold_ids
    from spacy_arboel.kb import KnowledgeBase

    kb = KnowledgeBase.from_jsonl(args.corpus / "kb.jsonl")
    nlp, setup = untrained_linker(kb, nil_recall=None, get_candidates={
        "label_types": {label: [label] for label in args.labels}, "incl_prior": False})
    rows = {}
    for split in ("dev", "test"):
        gold = list(DocBin().from_disk(args.corpus / f"{split}.spacy").get_docs(nlp.vocab))
        mentions = [(e.text, gold_ids(e.kb_id_)) for doc in gold for e in doc.ents]
        found = links(nlp, gold)
        in_kb = [(text, ids, candidates) for (text, ids), (_, candidates)
                 in zip(mentions, found, strict=True) if any(i in kb for i in ids)]
        rows[split] = {"mentions": len(in_kb)}
        for alpha in args.pseudo_links:
            right = pinned = 0
            for text, ids, candidates in in_kb:
                prior = kb.mention_prior(text, pseudo_links=alpha)
                joined = sorted(((i, p + prior.get(i, 0.0) * (1.0 - p)) for i, p in candidates),
                                key=lambda c: -c[1])  # stable, as the linker's
                right += bool(joined) and joined[0][0] in {kb.resolve(i) for i in ids
                                                           if i in kb}
                pinned += bool(joined) and joined[0][1] >= 0.999
            rows[split][str(alpha)] = {"in_kb_recall@1": round(right / len(in_kb), 4),
                                       "pinned_first": round(pinned / len(in_kb), 4)}
        rows[split]["no prior"] = {"in_kb_recall@1": round(sum(
            bool(c) and c[0][0] in {kb.resolve(i) for i in ids if i in kb}
            for _, ids, c in in_kb) / len(in_kb), 4)}
    result = {
        "name": f"prior-smoothing-{args.name}", "kb": str(args.corpus / "kb.jsonl"),
        "splits": rows, "setup_s": round(setup, 1),
        **run_stamp(),
    }
    print(result)
    write_result(result)


if __name__ == "__main__":
    main()
