"""What the cross re-read costs on this CPU, against the span reader it starts from: seconds per
training step (the same batches of BC5CDR training abstracts) and abstracts/s of linking the
first test abstracts (``nlp.pipe``). Speed does not depend on how far the cross reader is
trained (the spans it re-reads are those of the trained span reader whose p(m) exceeds the
threshold), so this measures a cross reader with fresh heads; its accuracy is not measured.

    python benchmarks/cross_reread_cost.py --span-model training/bench-e2e/e2e_span/model-last
"""

from __future__ import annotations

import argparse
import datetime
import sys
import time
from pathlib import Path

from _common import ROOT, command_line, machine, write_result


def _pipeline(args: argparse.Namespace, cross: int):
    """The span reader, or one with a new cross reader started from it (``reader_path``)."""
    import spacy
    from spacy.util import load_config, load_model_from_config

    if not cross:
        return spacy.load(args.span_model, config={"components.arbo_linker.threshold":
                                                   args.threshold})
    config = load_config(ROOT / "configs" / "arbo_linker.cfg", overrides={
        "components.arbo_linker.model.cross_reread": cross,
        "components.arbo_linker.threshold": args.threshold,
        "paths.train": str(Path(args.corpus) / "train.spacy"),
        "paths.dev": str(Path(args.corpus) / "dev.spacy")}, interpolate=True)
    nlp = load_model_from_config(config, auto_fill=True)
    nlp.get_pipe("arbo_linker").initialize(lambda: [], nlp=nlp, reader_path=args.span_model)
    return nlp


def _step_seconds(nlp, batches) -> float:
    from thinc.api import Adam

    optimizer = Adam(1e-5)
    nlp.update(batches[0], sgd=optimizer)  # warm-up
    start = time.perf_counter()
    for batch in batches[1:]:
        nlp.update(batch, sgd=optimizer)
    return (time.perf_counter() - start) / (len(batches) - 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--span-model", required=True, help="a trained span-reader pipeline")
    parser.add_argument("--corpus", default="corpus/bc5cdr")
    parser.add_argument("--cross-reread", type=int, default=4)
    parser.add_argument("--threshold", type=float, default=0.9)
    parser.add_argument("--steps", type=int, default=4, help="timed steps (after one warm-up)")
    parser.add_argument("--docs", type=int, default=50, help="test abstracts linked")
    args = parser.parse_args()

    from spacy.tokens import DocBin
    from spacy.training import Example

    result = {"name": "bc5cdr-e2e-cross-reread-cost", "dataset": "bc5cdr",
              "settings": {"span_model": args.span_model, "cross_reread": args.cross_reread,
                           "threshold": args.threshold, "batch": "4 abstracts",
                           "test_docs": args.docs},
              "rows": {}, "commands": [command_line([sys.executable, *sys.argv])]}
    for name, cross in (("span reader", 0), ("cross re-read", args.cross_reread)):
        nlp = _pipeline(args, cross)
        docs = list(DocBin().from_disk(Path(args.corpus) / "train.spacy").get_docs(nlp.vocab))
        examples = [Example(nlp.make_doc(d.text), d) for d in docs[: 4 * (args.steps + 1)]]
        batches = [examples[i : i + 4] for i in range(0, len(examples), 4)]
        seconds = _step_seconds(nlp, batches)
        test = list(DocBin().from_disk(Path(args.corpus) / "test.spacy").get_docs(nlp.vocab))
        texts = [d.text for d in test[: args.docs]]
        list(nlp.pipe(texts[:2]))  # warm-up
        start = time.perf_counter()
        n_ents = sum(len(doc.ents) for doc in nlp.pipe(texts))
        result["rows"][name] = {"seconds_per_training_step": round(seconds, 2),
                                "abstracts_per_s": round(len(texts) / (time.perf_counter()
                                                                       - start), 2),
                                "ents": n_ents}
        print(name, result["rows"][name], flush=True)
    result.update(machine=machine(), date=datetime.date.today().isoformat())
    write_result(result)


if __name__ == "__main__":
    main()
