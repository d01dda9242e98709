"""``pretrain-kb``: self-alignment pretraining (SapBERT) of the encoder on a KB's names, and
the zero-shot linker it gives."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ..atomic import check_replaceable
from ..encoders.loading import DEFAULT_ENCODER
from ..linking.loop_settings import SelfAlignmentSettings
from ..outputs import check_outputs
from ..pipeline.loading import save_pipeline
from .app import app
from .options import RANKS, NprocPerNode, RankTimeout
from .ranks_commands import check_count, launch_ranks, launched

ENCODER_FOLDER = "encoder"
LINKER_FOLDER = "linker"
ALIGNMENT = SelfAlignmentSettings()  # the defaults of the options


@app.command("pretrain-kb")
def pretrain_kb_command(
    ctx: typer.Context,
    kb: Annotated[Path, typer.Argument(help="KB JSONL (names and aliases)", exists=True)],
    output: Annotated[Path, typer.Argument(
        help="Folder to write: encoder/ (the self-aligned encoder, a drop-in encoder_name or "
             "--paths.encoder) and linker/ (a pipeline that links with no corpus training)")],
    encoder: Annotated[str, typer.Option(
        help="Encoder to start from: an installed encoder package, a local path or a "
             "Hugging Face name")] = DEFAULT_ENCODER,
    batch_size: Annotated[int, typer.Option(
        help="Name pairs per step (over all ranks)")] = ALIGNMENT.batch_size,
    learning_rate: Annotated[float, typer.Option(
        help="AdamW learning rate")] = ALIGNMENT.learning_rate,
    epochs: Annotated[int, typer.Option(help="Passes over the KB's name pairs")] = ALIGNMENT.epochs,
    max_steps: Annotated[int | None, typer.Option(help="Stop after this many steps")] = None,
    max_minutes: Annotated[float | None, typer.Option(
        help="Stop after this many minutes of training")] = None,
    max_pairs_per_entity: Annotated[int, typer.Option(
        help="Positive pairs drawn from one entity's names at most (caps huge synonym "
             "sets)")] = ALIGNMENT.max_pairs_per_entity,
    seed: Annotated[int, typer.Option(help="Random seed (pair order, weights)")] = ALIGNMENT.seed,
    opposite_negatives: Annotated[bool, typer.Option(
        help="Put a pair of each entity's opposite (Tall stature for Short stature) in its "
             "batch as a hard negative")] = ALIGNMENT.opposite_negatives,
    gpu_id: Annotated[int, typer.Option(
        help="GPU to train on (-1: CPU; with several ranks each takes its own)")] = -1,
    nproc_per_node: NprocPerNode = 1,
    timeout: RankTimeout = RANKS.timeout_s,
    linker: Annotated[bool, typer.Option(
        help="Also save linker/: a pipeline with arbo_entity_linker over KB and the new "
             "encoder, its index built")] = True,
) -> None:
    """Train the encoder so that the names and aliases of one KB entity embed together and
    apart from other entities' names (SapBERT: multi-similarity loss over in-batch pairs with
    online hard-pair mining), with no annotated corpus. OUTPUT/encoder is the starting
    encoder of `spacy train` (--paths.encoder); OUTPUT/linker links gold mentions or a
    ruler's ents with no training at all (spacy.load)."""
    from wasabi import msg

    from ..kb.knowledge_base import KnowledgeBase
    from ..linking.kb_pairs import check_pairs
    from ..linking.self_alignment import check_output_dir, pretrain_encoder
    from ..objectives.gathered import joined_ranks, rank_device
    from ..pipeline.zero_shot import zero_shot_linker

    encoder_dir, linker_dir = output / ENCODER_FOLDER, output / LINKER_FOLDER
    check_count("--nproc-per-node", nproc_per_node)
    if not launched():
        check_outputs({"KB": kb,
                       "--encoder": Path(encoder) if Path(encoder).exists() else None},
                      {"OUTPUT": output}, folders=["OUTPUT"])
        # what it would replace (E168, E046) and the KB (E001, E165, E166), before the
        # encoder is loaded and trained
        check_output_dir(encoder_dir)
        if linker:
            check_replaceable(linker_dir)
    knowledge_base = KnowledgeBase.from_jsonl(kb)
    settings = SelfAlignmentSettings(
        batch_size=batch_size, learning_rate=learning_rate, epochs=epochs,
        max_steps=max_steps, time_limit_s=None if max_minutes is None else max_minutes * 60,
        max_pairs_per_entity=max_pairs_per_entity, seed=seed,
        opposite_negatives=opposite_negatives)
    check_pairs(knowledge_base, settings.max_pairs_per_entity)
    if launch_ranks(ctx, nproc_per_node):  # each rank encodes its share of every batch
        return
    try:
        with joined_ranks(timeout, gpu=gpu_id >= 0) as (rank, size):
            device = rank_device() if size > 1 else "cpu" if gpu_id < 0 else f"cuda:{gpu_id}"
            report = pretrain_encoder(knowledge_base, encoder, encoder_dir, settings,
                                      progress=rank == 0, device=device)
    except RuntimeError as err:  # E266: another rank failed
        msg.fail(str(err), exits=1)
    if rank:
        return
    msg.good(f"Saved the self-aligned encoder to {encoder_dir}: {report['steps']} steps, "
             f"{report['pairs_seen']} pairs in {report['seconds'] / 60:.1f} min"
             + (f" on {size} ranks" if size > 1 else ""))
    if linker:  # after the ranks are done: rank 0 alone
        save_pipeline(zero_shot_linker(kb, encoder_dir, gpu_id), linker_dir)
        msg.good(f"Saved a linker over {kb.name} to {linker_dir} (spacy.load)")
