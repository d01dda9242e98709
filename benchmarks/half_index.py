"""Whether an index on float16's grid links as the float32 index it rounds (issue 62, item
4: an index saved in half the bytes).

Not a test. A saved untrained pipeline whose index holds float32 vectors (saved before the
index was rounded, e.g. ``training/hpo-untrained``) links the gold mentions of ``--corpus``;
then its index vectors are rounded to float16 (``kb.index.half_grid``), the KB's NIL
threshold set again, and the same mentions linked. Records in-KB R@1 both ways, the NIL
thresholds, and how many links and candidate rankings changed. Writes
``benchmarks/results/half-index-<name>.json``. Usage::

    OMP_NUM_THREADS=2 python benchmarks/half_index.py --pipeline training/hpo-untrained \\
        --corpus training/gsc_test.spacy --name hpo-gsc-test
"""

from __future__ import annotations

import argparse
from pathlib import Path

from _common import run_stamp, write_result
from pipeline_size import links

LINKER = "arbo_entity_linker"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pipeline", type=Path, required=True)
    parser.add_argument("--corpus", type=Path, required=True)
    parser.add_argument("--name", required=True)
    args = parser.parse_args()
    import numpy as np
    import spacy
    from spacy.tokens import DocBin

    from spacy_arboel.data.ids import gold_ids
    from spacy_arboel.kb.index import DenseIndex, half_grid

    nlp = spacy.load(args.pipeline)
    pipe = nlp.get_pipe(LINKER)
    pipe.ensure_ready()
    gold = list(DocBin().from_disk(args.corpus).get_docs(nlp.vocab))
    gold_of = [gold_ids(e.kb_id_) for doc in gold for e in doc.ents]
    index = pipe.retriever.entities.index
    assert index.embeddings.dtype == np.float32
    rounded = half_grid(index.embeddings)
    assert not np.array_equal(rounded, index.embeddings), "this index is rounded already"
    before = links(nlp, gold)
    threshold_before = pipe.nil_threshold()
    pipe.retriever.entities.set_index(DenseIndex(rounded, index.owners, index.meta,
                                                 rows=index.rows))
    after = links(nlp, gold)
    threshold_after = pipe.nil_threshold()

    def recall(found) -> float:
        in_kb = [(ids, f) for ids, f in zip(gold_of, found, strict=True)
                 if any(i in pipe.kb for i in ids)]
        return round(sum(f[0] in ids for ids, f in in_kb) / len(in_kb), 4)

    result = {
        "name": f"half-index-{args.name}", "pipeline": str(args.pipeline),
        "corpus": str(args.corpus), "rows": int(len(index.owners)),
        "mentions": len(before),
        "in_kb_recall@1": {"float32": recall(before), "float16_grid": recall(after)},
        "nil_threshold": {"float32": threshold_before, "float16_grid": threshold_after},
        "changed_links": sum(a[0] != b[0] for a, b in zip(before, after, strict=True)),
        "changed_rankings": sum([i for i, _ in a[1]] != [i for i, _ in b[1]]
                                for a, b in zip(before, after, strict=True)),
        "max_vector_change": float(np.abs(rounded - index.embeddings).max()),
        **run_stamp(),
    }
    print(result)
    write_result(result)


if __name__ == "__main__":
    main()
