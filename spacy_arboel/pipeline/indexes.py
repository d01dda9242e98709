"""Building a linker's KB index with a jobs engine (what ``build-index`` does): the KB's
rows embedded in resumable shards, the FAISS index chosen by size set as the linker's."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from spacy.language import Language

from ..jobs.engines import Engine
from ..jobs.kb_vectors import SHARD_ROWS


def build_linker_index(nlp: Language, linker: str, model: str | Path, engine: Engine,
                       work_dir: str | Path, *, kind: str = "auto", pq_bytes: int | None = None,
                       refine: bool = True, shard_rows: int = SHARD_ROWS,
                       on_total: Callable[[int], object] | None = None,
                       on_rows: Callable[[int], object] | None = None,
                       on_stage: Callable[[str], object] | None = None) -> Any:
    """Embed the KB rows of ``nlp``'s ``linker`` on ``engine`` (``jobs.engines.Engine``,
    whose workers load the entity encoder saved in ``model/linker``) in shards kept in
    ``work_dir`` (a rerun resumes), build the FAISS index of ``kind`` (``auto``: by size;
    see ``jobs.build_index.build_kb_index``) and set it as the linker's index; return it.
    ``on_total`` gets the number of rows, ``on_rows`` the rows of each shard embedded,
    ``on_stage`` a message before the index is built. Raises a ValueError (coded) on a
    bad ``kind``, ``pq_bytes`` or work folder."""
    from ..jobs.build_index import EmbedderSource, build_kb_index

    pipe = nlp.get_pipe(linker)
    pipe.ensure_ready()
    retriever = pipe.retriever
    index = build_kb_index(
        retriever, EmbedderSource.of(Path(model) / linker, retriever), engine, work_dir,
        kind=kind, pq_bytes=pq_bytes, refine=refine, shard_rows=shard_rows, on_total=on_total,
        on_rows=on_rows, on_stage=on_stage)
    retriever.entities.set_index(index)
    return index
