"""List the in-KB gold mentions a trained linker misses at k: counts by type, commonest texts.

Not a test. Usage::

    python benchmarks/misses.py /tmp/bench2/knn_negatives/model-last corpus/bc5cdr/test.spacy --k 64
"""

from __future__ import annotations

import argparse
import warnings
from collections import Counter


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("corpus")
    parser.add_argument("--k", type=int, default=64)
    parser.add_argument("--top", type=int, default=40)
    args = parser.parse_args()

    import spacy
    from spacy.tokens import DocBin

    from spacy_arboel.spacy_data.gold_ids import resolved_gold_ids
    from spacy_arboel.spacy_data.readers import with_gold_mentions

    warnings.filterwarnings("ignore")
    nlp = spacy.load(args.model)
    linker = nlp.get_pipe("arbo_entity_linker")
    gold = list(DocBin().from_disk(args.corpus).get_docs(nlp.vocab))
    docs = [with_gold_mentions(nlp.make_doc(g.text), g) for g in gold]
    n_in_kb, misses = 0, []
    for doc, reference in zip(nlp.pipe(docs), gold, strict=True):
        for ent, gold_ent in zip(doc.ents, reference.ents, strict=True):
            ids = [i for i in resolved_gold_ids(gold_ent.kb_id_, linker.kb) if i in linker.kb]
            if not ids:
                continue
            n_in_kb += 1
            found = [c for c, _ in ent._.kb_candidates[: args.k]]
            if not set(ids) & set(found):
                misses.append((gold_ent.label_, ent.text, linker.kb[ids[0]].name))
    print(f"{len(misses)} of {n_in_kb} in-KB mentions missed at {args.k}: "
          f"{dict(Counter(label for label, _, _ in misses))}; "
          f"{sum(len(text) <= 5 for _, text, _ in misses)} of at most 5 characters")
    for (text, name), n in Counter((t.lower(), g) for _, t, g in misses).most_common(args.top):
        print(f"{n:4d}  {text!r} -> {name}")


if __name__ == "__main__":
    main()
