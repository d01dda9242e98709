"""How far a KB's names alone reach on a corpus: each in-KB gold mention by whether its text is
(case-insensitively) a name or alias of its gold entity only, of it and another entity, of
another entity only, or of none; with the commonest texts of the last two classes.

Not a test, and no encoder: it says which mentions no KB-only linker can resolve from names
(dataset conventions, aliases on another descriptor). Usage::

    python benchmarks/kb_name_coverage.py bench_runs/zero_shot/mesh_syn_kb.jsonl \\
        corpus/bc5cdr/test.spacy
"""

from __future__ import annotations

import argparse
from collections import Counter, defaultdict

CLASSES = ("gold entity only", "gold and another", "another entity only", "no name")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kb")
    parser.add_argument("corpus")
    parser.add_argument("--top", type=int, default=20)
    args = parser.parse_args()

    import spacy
    from spacy.tokens import DocBin

    from spacy_arboel.kb import KnowledgeBase
    from spacy_arboel.spacy_data.gold_ids import resolved_gold_ids

    kb = KnowledgeBase.from_jsonl(args.kb)
    owners: dict[str, set[str]] = defaultdict(set)
    for entity in kb:
        for name in entity.names:
            owners[name.casefold()].add(entity.id)
    counts: Counter = Counter()
    examples: dict[str, Counter] = {name: Counter() for name in CLASSES[2:]}
    for doc in DocBin().from_disk(args.corpus).get_docs(spacy.blank("en").vocab):
        for ent in doc.ents:
            gold = {i for i in resolved_gold_ids(ent.kb_id_, kb) if i in kb}
            if not gold:
                continue
            named = owners.get(ent.text.casefold(), set())
            kind = (CLASSES[0] if named and named <= gold else CLASSES[1] if named & gold
                    else CLASSES[2] if named else CLASSES[3])
            counts[ent.label_, kind] += 1
            if kind in examples:
                first = kb[sorted(gold)[0]].name
                examples[kind][f"{ent.text.lower()} -> {first}"] += 1
    labels = sorted({label for label, _ in counts})
    print("| mention text is a name of | " + " | ".join(labels) + " |")
    print("|---|" + "---:|" * len(labels))
    for kind in CLASSES:
        print(f"| {kind} | " + " | ".join(str(counts[label, kind]) for label in labels) + " |")
    for kind, texts in examples.items():
        print(f"\n{kind}: " + "; ".join(f"{t} ({n})" for t, n in texts.most_common(args.top)))


if __name__ == "__main__":
    main()
