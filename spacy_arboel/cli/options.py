"""The arguments and options several commands share, declared once (typer's ``Annotated``
types), and the choices options take, typed from the vocabulary their library declares
(typer refuses another value and lists these)."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated, Literal

import typer

from ..configs import COMPONENT_CONFIGS
from ..corpus.shards import OUTPUT_FORMATS
from ..evaluation.rerank_eval import ORACLES
from ..jobs.engines import ENGINES
from ..kb.index_builder import INDEX_KINDS
from ..pipeline.ranks import RankSettings

EngineName = Literal[ENGINES]  # type: ignore[valid-type]
IndexKind = Literal[INDEX_KINDS]  # type: ignore[valid-type]
ShardFormat = Literal[OUTPUT_FORMATS]  # type: ignore[valid-type]
TrainedComponent = Literal[tuple(COMPONENT_CONFIGS)]  # type: ignore[valid-type]
# a repeatable choice: typer takes a list of an Enum, not of a Literal
Oracle = Enum("Oracle", {name: name for name in ORACLES}, type=str)

LinkerModel = Annotated[Path, typer.Argument(help="Pipeline with arbo_entity_linker")]
PipelineModel = Annotated[Path, typer.Argument(help="Pipeline directory (spacy.load)")]
GoldCorpus = Annotated[Path, typer.Argument(help="Gold .spacy DocBin (ents with kb_id)")]
MetricsOutput = Annotated[Path | None, typer.Option(help="Metrics JSON to write")]
RunName = Annotated[str | None, typer.Option(help="Run name stored in the JSON")]
LinkerComponent = Annotated[str, typer.Option(help="Linker component name")]
CorefComponent = Annotated[str, typer.Option(help="Coref component name")]
DocLimit = Annotated[int, typer.Option(help="Evaluate the first N docs (0 = all)")]
GpuId = Annotated[int, typer.Option(help="GPU to link on (-1: the CPU); needs CuPy and a "
                                           "CUDA build of PyTorch")]
TunedCoref = Annotated[Path | None, typer.Option(
    help="JSON written by tune-coref: its best k, threshold and directed are used")]

# the commands that run on several ranks (train-ranks, pretrain-kb)
RANKS = RankSettings()  # the defaults of the options
NprocPerNode = Annotated[int, typer.Option(
    help="Ranks to start on this machine (torchrun's --nproc-per-node); 1 runs in this "
         "process")]
RankTimeout = Annotated[float, typer.Option(
    help="Seconds a rank waits for the others in one exchange (rank 0's evaluation "
         "included) before the run fails")]
