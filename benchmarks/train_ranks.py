"""Data-parallel training on one machine: 1 process against 2 ranks (issue 64), for
``train-ranks`` and for ``pretrain-kb --nproc-per-node``.

Not a test. `train-ranks` trains BC5CDR's linker (in-batch negatives, gathered across the
ranks) for a few steps twice on the same global batches: in one process (`--batch-size
2B`) and in 2 ranks started by torchrun (`--batch-size B` each). It records each run's
training steps per second (the step loop alone: `ranks.json`'s `train_seconds`, the
rank-0 evaluations and saves and the set-up left out) and the largest difference between
the two runs' trained parameters. On a 2-core machine the 2 ranks share the cores the one
process uses: a check that the run is correct, not a speed-up. The KB is the workflow's
cut to the entities BC5CDR's training and dev splits link and as many others (seeded), so
that the set-up stays short. Then ``pretrain-kb`` self-aligns the encoder on the same KB's
names for ``--pretrain-steps`` steps of ``--pretrain-batch`` pairs, in one process and in 2
ranks (each encodes half of every batch): its report's pairs/s (the step loop) and the
largest difference between the two encoders. Usage::

    python benchmarks/train_ranks.py --steps 20 --batch-size 4
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
from pathlib import Path

from _common import ROOT, relative_path, run_stamp, write_result

WORK = ROOT / "bench_runs" / "train_ranks"


def small_kb(corpus: Path, path: Path, seed: int = 0) -> int:
    """The workflow's KB cut to the gold entities of train and dev and as many others."""
    import spacy
    from spacy.tokens import DocBin

    from spacy_arboel.data.ids import gold_ids
    from spacy_arboel.kb import KnowledgeBase

    kb = KnowledgeBase.from_jsonl(corpus / "kb.jsonl")
    nlp = spacy.blank("en")
    gold = {i for split in ("train", "dev") for doc in DocBin().from_disk(
        corpus / f"{split}.spacy").get_docs(nlp.vocab) for ent in doc.ents
        for i in gold_ids(ent.kb_id_) if i in kb}
    others = sorted(e.id for e in kb if e.id not in gold)
    keep = gold | set(random.Random(seed).sample(others, min(len(gold), len(others))))
    KnowledgeBase(e for e in kb if e.id in keep).to_jsonl(path)
    return len(keep)


def train(output: Path, nproc: int, batch_size: int, args, kb: Path) -> dict:
    corpus = Path(args.corpus)
    command = [sys.executable, "-m", "spacy_arboel", "train-ranks",
               str(ROOT / "spacy_arboel" / "configs" / "arbo_entity_linker.cfg"), str(output),
               "--nproc-per-node", str(nproc), "--batch-size", str(batch_size),
               "--objective", "in_batch", "--paths.train", str(corpus / "train.spacy"),
               "--paths.dev", str(corpus / "dev.spacy"), "--paths.kb", str(kb),
               "--training.max_steps", str(args.steps),
               "--training.eval_frequency", str(args.steps), "--corpora.dev.limit", "20",
               "--components.arbo_entity_linker.cpu_bf16", "false"]
    subprocess.run(command, check=True)
    return json.loads((output / "ranks.json").read_text())


def pretrain(output: Path, nproc: int, args, kb: Path) -> dict:
    """``pretrain-kb`` on ``kb`` in ``nproc`` ranks; its report."""
    command = [sys.executable, "-m", "spacy_arboel", "pretrain-kb", str(kb), str(output),
               "--nproc-per-node", str(nproc), "--batch-size", str(args.pretrain_batch),
               "--max-steps", str(args.pretrain_steps), "--no-linker"]
    subprocess.run(command, check=True)
    return json.loads((output / "encoder" / "self_alignment.json").read_text())


def encoder_parameters(path: Path):
    """The self-aligned encoder's weights, flat."""
    import torch
    from safetensors.torch import load_file

    weights = load_file(str(path / "encoder" / "model.safetensors"))
    return torch.cat([weights[k].flatten().float() for k in sorted(weights)])


def parameters(path: Path):
    import spacy
    import torch

    from spacy_arboel.ml.bi_encoder import torch_encoders

    pipe = spacy.load(path).get_pipe("arbo_entity_linker")
    modules = dict.fromkeys(torch_encoders(pipe.model).values())
    return torch.cat([p.detach().flatten() for m in modules for p in m.parameters()])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=4, help="docs per rank and step")
    parser.add_argument("--corpus", default=str(ROOT / "corpus" / "bc5cdr"))
    parser.add_argument("--pretrain-steps", type=int, default=10,
                        help="pretrain-kb's steps (self-alignment on the same KB)")
    parser.add_argument("--pretrain-batch", type=int, default=64,
                        help="pretrain-kb's name pairs a step (over all ranks)")
    parser.add_argument("--work", type=Path, default=WORK, help="where the runs go")
    parser.add_argument("--output", type=Path,
                        help="the result file (default: benchmarks/results/NAME.json)")
    args = parser.parse_args()
    work = args.work
    work.mkdir(parents=True, exist_ok=True)
    kb = work / "kb.jsonl"
    n_entities = small_kb(Path(args.corpus), kb)
    runs = {}
    for nproc in (1, 2):
        state = train(work / f"ranks-{nproc}", nproc, args.batch_size * 2 // nproc, args, kb)
        runs[nproc] = {"ranks": nproc, "docs_per_rank_and_step": args.batch_size * 2 // nproc,
                       "steps": state["steps_timed"], "train_seconds": state["train_seconds"],
                       "steps_per_s": round(state["steps_timed"] / state["train_seconds"], 3)}
    difference = float((parameters(work / "ranks-1" / "model-last")
                        - parameters(work / "ranks-2" / "model-last")).abs().max())
    aligned = {}
    for nproc in (1, 2):
        report = pretrain(work / f"pretrain-{nproc}", nproc, args, kb)
        aligned[nproc] = {"ranks": report["ranks"], "steps": report["steps"],
                          "pairs_seen": report["pairs_seen"],
                          "train_seconds": report["train_seconds"],
                          "pairs_per_s": report["pairs_per_second"]}
    aligned_difference = float((encoder_parameters(work / "pretrain-1")
                                - encoder_parameters(work / "pretrain-2")).abs().max())
    result = {
        "name": "train-ranks-bc5cdr", "dataset": "bc5cdr", "split": "train",
        "component": "arbo_entity_linker",
        "settings": {"objective": "in_batch", "global_batch_docs": args.batch_size * 2,
                     "steps": args.steps, "kb": f"{relative_path(kb)}: the workflow's KB cut "
                     f"to train/dev gold entities and as many others ({n_entities})"},
        "runs": {str(k): v for k, v in runs.items()},
        "pretrain": {"settings": {"batch_pairs": args.pretrain_batch,
                                  "steps": args.pretrain_steps},
                     "runs": {str(k): v for k, v in aligned.items()}},
        "metrics": {"max_parameter_difference": difference,
                    "two_ranks_vs_one_steps_per_s": round(
                        runs[2]["steps_per_s"] / runs[1]["steps_per_s"], 3),
                    "pretrain_max_parameter_difference": aligned_difference,
                    "pretrain_two_ranks_vs_one_pairs_per_s": round(
                        aligned[2]["pairs_per_s"] / aligned[1]["pairs_per_s"], 3)},
        **{k: v for k, v in run_stamp().items() if k != "command"},
        "commands": [run_stamp()["command"]],
    }
    print(json.dumps(result, indent=2))
    if args.output:
        args.output.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.output or write_result(result)}")


if __name__ == "__main__":
    main()
