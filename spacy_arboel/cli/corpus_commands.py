"""``link-corpus``: link a corpus of shards in one process or on Ray (issue 19)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ..outputs import check_outputs
from .app import OVERRIDES, app
from .options import EngineName, ShardFormat
from .overrides import command_overrides


@app.command("link-corpus", context_settings=OVERRIDES)
def link_corpus_command(
    ctx: typer.Context,
    model: Annotated[Path, typer.Argument(help="A pipeline that links (ner + "
                                               "arbo_entity_linker, or arbo_linker)",
                                          exists=True)],
    input_path: Annotated[Path, typer.Argument(
        help="A folder of shards (.jsonl with \"text\" and optional \"id\", .txt, .pubtator, "
             ".spacy) or one such file", exists=True)],
    output: Annotated[Path, typer.Argument(
        help="Folder for one output shard per input shard, its errors files and "
             "manifest.json (a rerun skips the shards it lists)")],
    engine: Annotated[EngineName, typer.Option(help="local (this process) or ray (Ray actors)")] =
        "local",
    fmt: Annotated[ShardFormat, typer.Option("--format", help="jsonl (id, entities with offsets, "
                                     "label, kb_id, score, candidates) or spacy (DocBin)")] =
        "jsonl",
    batch_size: Annotated[int, typer.Option(help="Documents per nlp.pipe call")] = 32,
    top_k: Annotated[int, typer.Option(help="Candidates kept per entity in JSONL")] = 5,
    num_workers: Annotated[int | None, typer.Option(
        help="Worker processes (--engine local) or Ray actors (--engine ray), each with the "
             "pipeline loaded once (default: 1 local, that is this process; 2 on Ray)")] =
        None,
    address: Annotated[str | None, typer.Option(
        help="--engine ray: join this Ray cluster (e.g. auto, or ray://host:10001); default: "
             "start a local one")] = None,
    num_gpus: Annotated[float, typer.Option(help="--engine ray: GPUs per actor (0: CPU)")] =
        0.0,
    vectors: Annotated[bool, typer.Option(
        help="Also write each shard's mention vectors (<shard>.vectors.npy, float16), which "
             "`cluster` needs to cluster the linked corpus (arbo_entity_linker sets them)")] =
        False,
) -> None:
    """Link every document of a corpus of shards and write one output shard per input
    shard (atomically, with a manifest of finished shards: a rerun resumes), the documents
    that raised in <shard>.errors.jsonl. Extra --section.key value options override the
    pipeline's config."""
    from tqdm import tqdm
    from wasabi import msg

    from ..corpus.link_corpus import link_corpus
    from ..corpus.worker import LinkSettings, cross_document_pipes
    from ..errors import Warnings
    from ..jobs.engines import make_engine
    from ..pipeline.loading import pipeline_config

    # the engine first: checked before anything is written (E007, E011, E128)
    runner = make_engine(engine, num_workers, address=address, num_gpus=num_gpus)
    check_outputs({"MODEL": model, "INPUT": input_path}, {"OUTPUT": output},
                  folders=["OUTPUT"])
    skipped = cross_document_pipes(pipeline_config(model))
    if skipped:
        msg.info(f"{', '.join(skipped)} clusters across documents, which batch-by-batch "
                 "linking cannot do: it is disabled here; cluster the linked corpus with "
                 "`python -m spacy_arboel cluster`")
    if vectors and fmt != "jsonl":
        msg.fail("--vectors writes vectors beside JSONL shards: use --format jsonl", exits=1)
    settings = LinkSettings(str(model), fmt, batch_size, top_k,
                            command_overrides(ctx), vectors)
    with tqdm(unit="doc", desc="link-corpus", disable=None) as bar:
        summary = link_corpus(input_path, output, settings, runner, bar.update,
                              lambda total: setattr(bar, "total", total))
    msg.table([("shards linked", len(summary.linked)),
               ("shards already done", len(summary.skipped)),
               ("docs", summary.docs), ("mentions", summary.mentions),
               ("docs that raised", summary.errors), ("seconds", f"{summary.seconds:.1f}"),
               ("docs/s", f"{summary.docs_per_s:.2f}")], title=f"link-corpus: {output}")
    if summary.errors:
        msg.warn(f"{summary.errors} docs raised: see {output}/*.errors.jsonl")
    if summary.duplicate_ids:
        shards = summary.duplicate_shards
        msg.warn(Warnings.W007.format(n=summary.duplicate_ids, shards=", ".join(
            shards[:5]) + (f" and {len(shards) - 5} more" if len(shards) > 5 else "")))
    problem = summary.unreadable_error(len(summary.linked) + len(summary.skipped) +
                                       len(summary.unreadable))
    if problem:
        msg.fail(problem, exits=1)
