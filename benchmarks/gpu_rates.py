"""The rates of the GPU path besides linking (issue 64): a trained linker's KB embedded at a
refresh (rows/s), where its index searches (faiss-gpu, torch on the GPU, or FAISS on the
CPU), and its training steps per second at a fixed batch, on the GPU or on the CPU.

Not a test. Run by ``benchmarks/gpu_check.sh`` once on the GPU and once on the CPU, with the
same model and batches; alone::

    python benchmarks/gpu_rates.py MODEL corpus/bc5cdr/train.spacy OUT.json --gpu-id 0

The KB is embedded twice and the second pass is timed (the first warms the device up). The
training steps are ``arbo_entity_linker.update`` and ``finish_update`` on the first
``--steps`` batches of ``--batch-docs`` training docs, after two untimed steps; an index
refresh that falls among them is timed with them (the rate a training run sees).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from _common import run_stamp


def synchronize(gpu_id: int) -> None:
    """Wait for the GPU's queued work, so that a timing ends when it is done."""
    if gpu_id >= 0:
        import torch

        torch.cuda.synchronize()


def kb_embedding(pipe, gpu_id: int) -> dict:
    """Seconds and rows/s of a full refresh of the linker's index (the second of two)."""
    entities = pipe.retriever.entities
    timings = []
    for _ in range(2):
        entities.changed()
        start = time.perf_counter()
        entities.refresh(desc=None)
        synchronize(gpu_id)
        timings.append(time.perf_counter() - start)
    rows = len(entities.index.owners)
    return {"rows": rows, "seconds": round(timings[-1], 3),
            "rows_per_s": round(rows / timings[-1], 1), "search_engine": entities.index.engine}


def training(nlp, pipe, train: Path, steps: int, batch_docs: int, gpu_id: int) -> dict:
    """Steps/s of the linker's update on fixed batches of training docs."""
    from spacy.tokens import DocBin
    from spacy.training import Example

    docs = list(DocBin().from_disk(train).get_docs(nlp.vocab))
    examples = [Example(nlp.make_doc(d.text), d) for d in docs]
    need = (steps + 2) * batch_docs
    examples = (examples * (need // max(len(examples), 1) + 1))[:need]
    optimizer = nlp.resume_training()
    batches = [examples[i:i + batch_docs] for i in range(0, need, batch_docs)]
    for batch in batches[:2]:  # untimed: the first steps of a process are slower
        pipe.update(batch, sgd=optimizer)
    synchronize(gpu_id)
    start = time.perf_counter()
    for batch in batches[2:]:
        pipe.update(batch, sgd=optimizer)
    synchronize(gpu_id)
    seconds = time.perf_counter() - start
    return {"steps": steps, "docs_per_step": batch_docs, "seconds": round(seconds, 3),
            "steps_per_s": round(steps / seconds, 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", type=Path, help="a pipeline with arbo_entity_linker")
    parser.add_argument("train", type=Path, help="training docs (.spacy, gold ents)")
    parser.add_argument("output", type=Path)
    parser.add_argument("--gpu-id", type=int, default=-1)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--batch-docs", type=int, default=16)
    args = parser.parse_args()
    import spacy

    if args.gpu_id >= 0:
        spacy.require_gpu(args.gpu_id)
    nlp = spacy.load(args.model)
    pipe = nlp.get_pipe("arbo_entity_linker")
    pipe.ensure_ready()
    result = {
        "device": f"cuda:{args.gpu_id}" if args.gpu_id >= 0 else "cpu",
        "kb_embedding": kb_embedding(pipe, args.gpu_id),
        "training": training(nlp, pipe, args.train, args.steps, args.batch_docs,
                             args.gpu_id),
        **run_stamp(),
    }
    args.output.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
