"""``build-index``: embed a KB of millions of entities in shards (local processes or Ray)
and save the pipeline with a compressed or graph FAISS index that loads memory-mapped."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Any

import typer

from ..jobs.kb_vectors import SHARD_ROWS
from ..outputs import check_outputs
from ..pipeline.loading import save_pipeline
from .app import OVERRIDES, app
from .options import EngineName, IndexKind
from .overrides import command_overrides


@app.command("build-index", context_settings=OVERRIDES)
def build_index_command(
    ctx: typer.Context,
    model: Annotated[Path, typer.Argument(help="Pipeline with a trained arbo_entity_linker",
                                          exists=True)],
    output: Annotated[Path, typer.Argument(help="Where to save the pipeline with the index")],
    kb: Annotated[Path | None, typer.Option(
        help="KB JSONL to link against instead of the pipeline's (e.g. millions of "
             "entities)", exists=True)] = None,
    kind: Annotated[IndexKind, typer.Option(
        help="auto (FAISS guidelines by size: flat up to 100k rows, HNSW below 1M, IVF-PQ "
             "above), flat, hnsw, ivf or ivfpq")] = "auto",
    pq_bytes: Annotated[int | None, typer.Option(
        help="ivfpq: bytes per vector (a divisor of the width; default width/8)")] = None,
    refine: Annotated[bool, typer.Option(
        help="ivfpq: re-score the PQ candidates from 8-bit vectors (recall@1 0.94 instead "
             "of 0.77 at 1M rows; 384 more bytes per row at 384 dimensions, "
             "memory-mapped)")] = True,
    engine: Annotated[EngineName, typer.Option(help="local (processes) or ray (actors)")] = (
        "local"),
    num_workers: Annotated[int | None, typer.Option(
        help="Processes or Ray actors embedding shards, each loading the encoder once "
             "(default: 1 process, or 2 Ray actors)")] = None,
    address: Annotated[str | None, typer.Option(
        help="--engine ray: join this cluster (e.g. auto); default: start a local one")] =
        None,
    num_gpus: Annotated[float, typer.Option(help="--engine ray: GPUs per actor")] = 0.0,
    shard_rows: Annotated[int, typer.Option(help="KB rows per shard")] = SHARD_ROWS,
    work_dir: Annotated[Path | None, typer.Option(
        help="Folder of the embedded shards (a rerun resumes from it; default: OUTPUT "
             "with .shards appended)")] = None,
    component: Annotated[str | None, typer.Option(
        help="The linker's name (default: the pipeline's arbo_entity_linker)")] = None,
) -> None:
    """Embed the KB's rows shard by shard with the linker's entity encoder (a rerun skips
    the shards already in --work-dir), build the FAISS index chosen by size, and save the
    pipeline with it: the linker then loads index.faiss memory-mapped instead of embedding
    the KB. Extra --section.key value options override the pipeline's config."""
    from wasabi import msg

    from ..factories import ENTITY_LINKER, find_component
    from ..jobs.engines import make_engine
    from ..kb.knowledge_base import KnowledgeBase
    from ..pipeline.indexes import build_linker_index
    from ..pipeline.knowledge_bases import swap_kb, without_kb_paths
    from ..pipeline.loading import load_pipeline, pipeline_config

    work_dir = work_dir or output.with_name(output.name + ".shards")
    # the engine first: checked before anything is written (E007, E011, E128)
    runner = make_engine(engine, num_workers, address=address, num_gpus=num_gpus)
    check_outputs({"MODEL": model, "--kb": kb}, {"OUTPUT": output, "--work-dir": work_dir},
                  pipelines=("OUTPUT",), folders=("--work-dir",))
    config = pipeline_config(model)
    component = find_component(config, ENTITY_LINKER, component, where=str(model))
    nlp = load_pipeline(model, {**command_overrides(ctx), **without_kb_paths(config, component)})
    progress = Progress()
    if kb is not None:
        for name in swap_kb(nlp, KnowledgeBase.from_jsonl(kb), component):
            msg.warn(f"{name}'s remembered mentions were linked to the old KB: cleared")
    index = build_linker_index(nlp, component, model, runner, work_dir, kind=kind,
                               pq_bytes=pq_bytes, refine=refine, shard_rows=shard_rows,
                               on_total=progress.start_bar, on_rows=progress.update,
                               on_stage=progress.stage)
    save_pipeline(nlp, output)
    msg.good(f"Saved {output}: {index.meta.factory} over {index.meta.n_rows} rows of "
             f"{len(nlp.get_pipe(component).kb)} entities (shards kept in {work_dir}; delete "
             "them when done)")


class Progress:
    """A progress bar over the KB's rows (those embedded before, by an interrupted run,
    first), and the embedding rate of this run when the index is being built."""

    def __init__(self) -> None:
        self.bar: Any = None
        self.before: int | None = None
        self.done = 0  # counted here: a bar disabled off a terminal counts nothing
        self.start = time.perf_counter()

    def start_bar(self, total: int) -> None:
        from tqdm import tqdm

        self.bar = tqdm(total=total, unit="row", desc="Embedding KB", disable=None)

    def update(self, rows: int) -> None:
        if self.before is None:  # the first call: the rows done before
            self.before = rows
            self.start = time.perf_counter()
        self.done += rows
        self.bar.update(rows)

    def stage(self, message: str) -> None:
        from wasabi import msg

        self.bar.close()
        seconds = time.perf_counter() - self.start
        rows = self.done - (self.before or 0)
        msg.info(f"Embedded {rows} rows in {seconds:.1f} s ({rows / max(seconds, 1e-9):.0f} "
                 f"rows/s; {self.before or 0} rows were embedded before)")
        msg.info(message)
