"""``cluster`` over the output of ``link-corpus --vectors`` (issue 19): every mention of the
corpus clustered at once by arboEL's inference (the graph of eq. 7 over each mention's k
nearest mentions and its best candidate, partitioned as ``arbo_coref`` does), with the
mention vectors read from the shards' memory-mapped ``.vectors.npy`` and the k-NN graph from
``coref.corpus_knn``. The output folder gets each shard's JSONL again, every entity with
its ``cluster`` (the KB id of its cluster's entity, or ``nil_prefix`` + the key of the
cluster's first mention for an entity the KB lacks). No spaCy here.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..artefacts import unsafe_name
from ..atomic import atomic_folder, check_own_folder
from ..coref.corpus_knn import ShardedVectors, edge_recall, mention_index
from ..coref.graph import build_graph, knn_graph
from ..coref.mention_memory import cluster_names
from ..coref.partition import partition_graph
from ..errors import Errors
from ..parsing import parse_json
from .shards import MANIFEST_NAME, vectors_path

# what `cluster` writes last into its output folder, beside the clustered JSONL shards: the
# mark of a folder it may replace
CLUSTERS_FILE = "clusters.json"


@dataclass
class LinkedMentions:
    """The mentions of a linked corpus in shard order: a key per mention (its shard, the
    line of its document there and its offsets: unique even where document ids repeat
    across shards, as PMIDs do in PubMed's update files), its best candidate (code into
    ``entity_ids``, -1 for none) and score."""

    keys: list[str] = field(default_factory=list)
    entity_codes: list[int] = field(default_factory=list)
    entity_scores: list[float] = field(default_factory=list)
    entity_ids: dict[str, int] = field(default_factory=dict)

    def add(self, where: str, entity: dict) -> None:
        """Add ``entity`` of the document at ``where`` (``<shard stem>_<line>``)."""
        self.keys.append(f"{where}_{entity['start']}_{entity['end']}")
        candidates = entity.get("candidates") or []
        if candidates:
            kb_id, score = candidates[0]
            self.entity_codes.append(self.entity_ids.setdefault(kb_id, len(self.entity_ids)))
            self.entity_scores.append(float(score))
        else:
            self.entity_codes.append(-1)
            self.entity_scores.append(0.0)


def linked_shards(folder: str | Path) -> list[Path]:
    """The JSONL shards a ``link-corpus --vectors`` run finished in ``folder`` (E135 when
    it is no such output)."""
    folder = Path(folder)
    try:
        manifest = parse_json((folder / MANIFEST_NAME).read_bytes())
        settings, shards = manifest["settings"], manifest["shards"]
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise ValueError(Errors.E135.format(path=folder, problem=f"no readable "
                                            f"{MANIFEST_NAME} ({err})")) from None
    if settings.get("format") != "jsonl" or not settings.get("vectors"):
        raise ValueError(Errors.E135.format(path=folder, problem=f"it was linked with "
                                            f"{settings}, without --vectors"))
    outside = [name for name in shards if not _plain_name(folder, name)]
    if outside:
        raise ValueError(Errors.E135.format(path=folder, problem=f"its manifest names "
                                            f"{outside[0]!r}, not a .jsonl file of the "
                                            "folder itself"))
    paths = [folder / name for name in sorted(shards)]
    missing = [p.name for p in paths if not p.exists() or not vectors_path(p).exists()]
    if missing:
        raise ValueError(Errors.E135.format(path=folder, problem=f"the manifest lists "
                                            f"{', '.join(missing[:3])}, which are missing"))
    return paths


def _records(shard: Path) -> Iterator[tuple[int, dict]]:
    """The line numbers and records of a linked JSONL shard (E135 naming a line that is
    not a JSON object with an "entities" list)."""
    with shard.open("rb") as lines:
        for number, line in enumerate(lines, start=1):
            try:
                record = parse_json(line)
                if not isinstance(record, dict) or not isinstance(record.get("entities"),
                                                                  list):
                    raise ValueError('not an object with an "entities" list')
            except ValueError as err:
                raise ValueError(Errors.E135.format(path=shard, problem=f"line {number}: "
                                                    f"{err}")) from None
            yield number, record


def _plain_name(folder: Path, name: object) -> bool:
    """Whether ``name`` is a ``.jsonl`` file directly in ``folder`` (no path, no link out:
    the rule of the component manifests, ``artefacts.unsafe_name``)."""
    if unsafe_name(name) is not None or "/" in name or not name.endswith(".jsonl"):
        return False
    return (folder / name).resolve().parent == folder.resolve()


def read_mentions(shards: list[Path]) -> tuple[LinkedMentions, ShardedVectors]:
    """The mentions of the shards and their vectors (E136 when a shard's vector file does
    not have one row per entity)."""
    mentions = LinkedMentions()
    vectors = ShardedVectors([vectors_path(s) for s in shards])
    for shard, part in zip(shards, vectors.parts, strict=True):
        before = len(mentions.keys)
        for number, record in _records(shard):
            try:
                for entity in record["entities"]:
                    mentions.add(f"{shard.stem}_{number}", entity)
            except (KeyError, TypeError, ValueError) as err:
                raise ValueError(Errors.E135.format(path=shard, problem=f"line {number}: "
                                                    f"{type(err).__name__}: {err}")) from None
        if len(part) != len(mentions.keys) - before:
            raise ValueError(Errors.E136.format(path=vectors_path(shard), rows=len(part),
                                                n=len(mentions.keys) - before))
    return mentions, vectors


@dataclass
class ClusterSummary:
    mentions: int = 0
    clusters: int = 0
    discovered: int = 0
    edge_recall: float | None = None
    seconds: dict[str, float] = field(default_factory=dict)


def cluster_linked(input_dir: str | Path, output_dir: str | Path, *, k: int = 8,
                   threshold: float | None = None, directed: bool = True,
                   nil_prefix: str = "NIL_", recall_sample: int = 0,
                   on_stage: Callable[[str], object] = lambda message: None
                   ) -> ClusterSummary:
    """Cluster every mention of a linked corpus (see the module docstring) and write the
    shards with their clusters to ``output_dir`` (a new or empty folder or an earlier
    output of this function, checked first: E244; replaced whole at the end);
    ``recall_sample`` > 0 measures the k-NN graph's edge recall against exact search on
    that many mentions."""
    check_cluster_folder(output_dir)
    summary, clock = ClusterSummary(), time.perf_counter()

    def lap(stage: str) -> None:
        nonlocal clock
        summary.seconds[stage] = round(time.perf_counter() - clock, 2)
        clock = time.perf_counter()

    shards = linked_shards(input_dir)
    mentions, vectors = read_mentions(shards)
    summary.mentions = len(mentions.keys)
    lap("read")
    on_stage(f"{summary.mentions} mentions in {len(shards)} shards: k-NN graph (k={k})")
    index = mention_index(vectors)
    lap("index")
    neighbours, scores = knn_graph(vectors, k, index=index)
    del index
    lap("knn")
    if recall_sample:
        summary.edge_recall = edge_recall(vectors, neighbours, sample=recall_sample)
        lap("edge_recall")
    on_stage("partitioning the graph")
    graph = build_graph(neighbours, scores, np.asarray(mentions.entity_codes, "int64"),
                        np.asarray(mentions.entity_scores, "float32"))
    del neighbours, scores
    part = partition_graph(graph.n_nodes, np.arange(graph.n_entities), graph.sources,
                           graph.targets, graph.weights, directed=directed,
                           threshold=threshold)
    by_code = list(mentions.entity_ids)
    ids = cluster_names(graph, part, by_code.__getitem__, mentions.keys, nil_prefix)
    lap("partition")
    summary.clusters = len(set(ids))
    summary.discovered = len({i for i in ids if i.startswith(nil_prefix)})
    settings = {"input": str(Path(input_dir).resolve()), "k": k, "threshold": threshold,
                "directed": directed, "nil_prefix": nil_prefix}
    write_clustered(shards, Path(output_dir), ids, {
        "settings": settings, "mentions": summary.mentions, "clusters": summary.clusters,
        "discovered": summary.discovered})
    lap("write")
    return summary


def check_cluster_folder(path: str | Path) -> None:
    """E244 unless ``cluster`` may replace the folder ``path`` whole: it is missing, empty
    or an earlier ``cluster`` output (its ``clusters.json`` and JSONL shards only; not the
    output of ``link-corpus``, whose shards it would replace under that run's manifest)."""
    check_own_folder(path, "cluster", CLUSTERS_FILE,
                     lambda name: name.endswith(".jsonl") and not name.startswith("."))


def write_clustered(shards: list[Path], output_dir: Path, ids: list[str],
                    about: dict | None = None) -> None:
    """Each shard's JSONL again, every entity with its ``cluster``, and ``about`` (what was
    clustered, how) in ``clusters.json``: written to a folder beside ``output_dir`` that
    replaces it whole at the end (E244 unless it may, :func:`check_cluster_folder`)."""
    with atomic_folder(output_dir, check=check_cluster_folder) as folder:
        folder.mkdir()
        position = 0
        for shard in shards:
            with (folder / shard.name).open("w", encoding="utf8") as out:
                for _, record in _records(shard):
                    for entity in record["entities"]:
                        entity["cluster"] = ids[position]
                        position += 1
                    out.write(json.dumps(record, ensure_ascii=False) + "\n")
        (folder / CLUSTERS_FILE).write_text(json.dumps(about or {}, indent=2) + "\n",
                                            encoding="utf8")
