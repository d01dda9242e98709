"""The mentions that ``arbo_coref`` clusters and remembers across batches, and their
clustering by arboEL's graph partition. Plain inputs (keys, vectors, KB positions): no spaCy.

Saved as three numpy arrays (``vectors.npy``, ``entity_positions.npy``,
``entity_scores.npy``) and ``memory.json`` (keys, doc keys, cluster ids, labels,
fingerprints), or as one msgpack map of the same; never pickled.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import srsly

from ..errors import Errors
from ..settings import Finite, PositiveInt, check_fields
from .graph import MentionGraph, build_graph, knn_graph
from .partition import Partition, partition_graph

ARRAYS = ("vectors", "entity_positions", "entity_scores")
FIELDS = ("keys", "doc_keys", "cluster_ids", "labels", "fingerprints")


class MemoryFormatError(ValueError):
    """A malformed memory (E060); ``problem`` says what is wrong."""

    def __init__(self, problem: str) -> None:
        super().__init__(Errors.E060.format(problem=problem))
        self.problem = problem


def text_key(text: str) -> str:
    """A document's key: the start of the SHA-1 of its text (equal texts, equal keys)."""
    return hashlib.sha1(text.encode("utf8")).hexdigest()[:12]


class Mention(NamedTuple):
    """One mention to cluster: its document's key (:func:`text_key`), character offsets,
    vector, nearest entity (KB position, -1 when it retrieved none, and its score) and
    label (for a type rule; "" for none)."""

    doc_key: str
    start_char: int
    end_char: int
    vector: Any  # a 1-D array of floats
    entity_position: int = -1
    entity_score: float = 0.0
    label: str = ""

    @property
    def key(self) -> str:
        """The same in every batch for the same document text and offsets."""
        return f"{self.doc_key}_{self.start_char}_{self.end_char}"


class MentionMemory:
    """Mentions to cluster: vectors, nearest entity (KB position and score), a stable key,
    their document's key, their label and, once clustered, their cluster ids;
    ``fingerprints`` name the KB and mention encoder the vectors and positions belong to."""

    def __init__(
        self,
        vectors: np.ndarray | None = None,
        entity_positions: np.ndarray | None = None,
        entity_scores: np.ndarray | None = None,
        keys: list[str] | None = None,
        doc_keys: list[str] | None = None,
        cluster_ids: list[str | None] | None = None,
        fingerprints: dict[str, str] | None = None,
        labels: list[str] | None = None,
    ) -> None:
        self.vectors = np.zeros((0, 0), "float32") if vectors is None else vectors
        self.entity_positions = (np.zeros(0, "int64") if entity_positions is None
                                 else entity_positions)
        self.entity_scores = (np.zeros(0, "float32") if entity_scores is None
                              else entity_scores)
        self.keys = keys or []
        self.doc_keys = doc_keys or []
        self.cluster_ids = cluster_ids or [None] * len(self.keys)
        self.fingerprints = fingerprints or {}
        self.labels = [""] * len(self.keys) if labels is None else labels

    def __len__(self) -> int:
        return len(self.keys)

    @classmethod
    def from_mentions(cls, mentions: Sequence[Mention]) -> MentionMemory:
        """The unclustered memory of ``mentions`` (E061 unless their vectors agree)."""
        if not mentions:
            return cls()
        shapes = {np.shape(m.vector) for m in mentions}
        if len(shapes) != 1 or len(next(iter(shapes))) != 1:
            raise ValueError(Errors.E061.format(shapes=sorted(shapes)))
        return cls(
            np.asarray([m.vector for m in mentions], dtype="float32"),
            np.asarray([m.entity_position for m in mentions], dtype="int64"),
            np.asarray([m.entity_score for m in mentions], dtype="float32"),
            [m.key for m in mentions], [m.doc_key for m in mentions],
            labels=[m.label for m in mentions],
        )

    def merged(self, batch: MentionMemory) -> tuple[MentionMemory, list[int]]:
        """A new memory: these mentions followed by those of ``batch`` not already here (by
        key), and the position of each mention of ``batch`` in it."""
        slot_of = {key: i for i, key in enumerate(self.keys)}
        new: list[int] = []
        slots = []
        for i, key in enumerate(batch.keys):
            if key not in slot_of:
                slot_of[key] = len(self) + len(new)
                new.append(i)
            slots.append(slot_of[key])
        merged = MentionMemory(
            np.concatenate([self.vectors, batch.vectors[new]]) if len(self)
            else batch.vectors[new],
            np.concatenate([self.entity_positions, batch.entity_positions[new]]),
            np.concatenate([self.entity_scores, batch.entity_scores[new]]),
            self.keys + [batch.keys[i] for i in new],
            self.doc_keys + [batch.doc_keys[i] for i in new],
            self.cluster_ids + [batch.cluster_ids[i] for i in new], dict(self.fingerprints),
            self.labels + [batch.labels[i] for i in new],
        )
        return merged, slots

    def doc_codes(self) -> np.ndarray:
        """One integer per mention, equal for the mentions of one document."""
        codes: dict[str, int] = {}
        return np.array([codes.setdefault(key, len(codes)) for key in self.doc_keys])

    # --- serialisation: numpy arrays and JSON ------------------------------------------------

    def _meta(self) -> dict[str, Any]:
        return {"keys": self.keys, "doc_keys": self.doc_keys, "cluster_ids": self.cluster_ids,
                "fingerprints": self.fingerprints, "labels": self.labels}

    def to_disk(self, path: str | Path) -> None:
        """Write the arrays (``.npy``, no pickle) and ``memory.json`` into folder ``path``."""
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        for name in ARRAYS:
            np.save(path / f"{name}.npy", getattr(self, name), allow_pickle=False)
        (path / "memory.json").write_text(json.dumps(self._meta()))

    @classmethod
    def from_disk(cls, path: str | Path) -> MentionMemory:
        """Read what ``to_disk`` wrote (E060 when its parts are malformed)."""
        path = Path(path)
        meta = json.loads((path / "memory.json").read_text())
        arrays = {name: np.load(path / f"{name}.npy", allow_pickle=False) for name in ARRAYS}
        return cls._from_parts(arrays, meta)

    def to_bytes(self) -> bytes:
        """The memory as a msgpack map of ``meta`` and the arrays."""
        return srsly.msgpack_dumps({"meta": self._meta(),
                                    **{name: getattr(self, name) for name in ARRAYS}})

    @classmethod
    def from_bytes(cls, data: bytes) -> MentionMemory:
        """Read what ``to_bytes`` wrote (E060 when its parts are malformed)."""
        msg = srsly.msgpack_loads(data)
        if not isinstance(msg, dict) or set(msg) != {"meta", *ARRAYS}:
            raise MemoryFormatError(Errors.E060_MAP.format(fields=", ".join(("meta", *ARRAYS))))
        return cls._from_parts({name: msg[name] for name in ARRAYS}, msg["meta"])

    @classmethod
    def _from_parts(cls, arrays: dict[str, Any], meta: Any) -> MentionMemory:
        if not isinstance(meta, dict) or set(meta) != set(FIELDS):
            raise MemoryFormatError(Errors.E060_META.format(fields=", ".join(FIELDS)))
        if not (all(isinstance(meta[f], list) for f in FIELDS[:4])
                and isinstance(meta["fingerprints"], dict)):
            raise MemoryFormatError(Errors.E060_LISTS)
        if not all(isinstance(a, np.ndarray) for a in arrays.values()):
            raise MemoryFormatError(Errors.E060_ARRAYS.format(names=", ".join(ARRAYS)))
        return cls(**arrays, **meta)

    def validate(self, n_entities: int, width: int) -> None:
        """Raise E060 unless the arrays and lists agree with each other, with a KB of
        ``n_entities`` and with mention vectors of ``width`` (a truncated or foreign memory)."""
        n = len(self.keys)
        problems = []
        if self.vectors.dtype != np.float32 or self.vectors.shape != (n, width):
            problems.append(Errors.E060_VECTORS.format(
                dtype=self.vectors.dtype, shape=self.vectors.shape, n=n, width=width))
        positions, scores = self.entity_positions, self.entity_scores
        if positions.dtype.kind not in "iu" or positions.shape != (n,):
            problems.append(Errors.E060_POSITIONS.format(dtype=positions.dtype,
                                                         shape=positions.shape))
        elif n and (positions.min() < -1 or positions.max() >= n_entities):
            problems.append(Errors.E060_OUTSIDE_KB.format(n_entities=n_entities))
        if scores.dtype.kind != "f" or scores.shape != (n,):
            problems.append(Errors.E060_SCORES.format(dtype=scores.dtype, shape=scores.shape))
        if len(self.doc_keys) != n or len(self.cluster_ids) != n or len(self.labels) != n:
            problems.append(Errors.E060_LENGTHS.format(
                n_doc_keys=len(self.doc_keys), n_cluster_ids=len(self.cluster_ids),
                n_labels=len(self.labels), n=n))
        strings = [*self.keys, *self.doc_keys, *self.labels]
        if not all(isinstance(k, str) for k in strings) or not all(
                c is None or isinstance(c, str) for c in self.cluster_ids):
            problems.append(Errors.E060_STRINGS)
        if problems:
            raise MemoryFormatError("; ".join(problems))


@dataclass(frozen=True)
class ClusterSettings:
    """How ``cluster_mentions`` clusters (arboEL §2.3): ``k`` nearest mentions per mention,
    edges above ``threshold`` (λ; None keeps all) dropped, a ``directed`` partition or not,
    neighbours from the same document only (``same_doc_only``), and the prefix of the id of
    a discovered entity (``nil_prefix``)."""

    k: PositiveInt = 8
    threshold: Finite | None = None
    directed: bool = True
    same_doc_only: bool = False
    nil_prefix: str = "NIL_"

    def __post_init__(self) -> None:
        check_fields(self)


def cluster_link(cluster_id: str, own_id: str, nil_id: str, nil_prefix: str,
                 fits: Callable[[str], bool] | None = None) -> tuple[str, str]:
    """A mention's cluster id and link after clustering: the link is its cluster's entity,
    or ``nil_id`` for a discovered entity's cluster (arboEL eq. 8); where ``fits`` (of a
    KB id: the type rule of the mention's label) refuses that entity, the mention keeps
    its linker's ``own_id`` as both (a mention never moves to an entity of another type)."""
    kb_id = nil_id if cluster_id.startswith(nil_prefix) else cluster_id
    if fits is not None and kb_id != nil_id and not fits(kb_id):
        return own_id, own_id
    return cluster_id, kb_id


def cluster_mentions(
    memory: MentionMemory,
    batch: MentionMemory,
    entity_id: Callable[[int], str],
    *,
    k: int,
    threshold: float | None,
    directed: bool,
    same_doc_only: bool,
    nil_prefix: str,
    compatible: Callable[[str, str], bool] | None = None,
) -> tuple[MentionMemory, list[int]]:
    """Cluster the mentions of ``batch`` together with those of ``memory`` by arboEL's
    inference (§2.3, appendix A.2): a graph with edges from each mention's ``k`` nearest
    mentions (within its document with ``same_doc_only``) and from its nearest entity
    (eq. 7), edges above ``threshold`` (λ) dropped, partitioned so that each cluster holds
    at most one entity (``directed`` or not).

    Returns the merged memory (see :meth:`MentionMemory.merged`) with every mention's cluster
    id set, and the position of each mention of ``batch`` in it. A cluster's id is the KB id
    of its entity (``entity_id`` of its KB position), else that of a discovered entity:
    the id of its first mention if that one was remembered with a ``nil_prefix`` id, else
    ``nil_prefix`` + that mention's key. With ``compatible`` (of two labels; a type rule's),
    no edge joins two mentions whose labels are not compatible: a mention keeps fewer than
    ``k`` neighbours rather than join another type's cluster (our addition to arboEL).
    Neither input is changed.
    """
    mentions, slots = memory.merged(batch)
    n_remembered = len(memory)
    neighbours, scores = knn_graph(
        mentions.vectors, k, groups=mentions.doc_codes() if same_doc_only else None)
    if compatible is not None:
        neighbours = compatible_neighbours(neighbours, mentions.labels, compatible)
    graph = build_graph(neighbours, scores, mentions.entity_positions, mentions.entity_scores)
    part = partition_graph(
        graph.n_nodes, np.arange(graph.n_entities), graph.sources, graph.targets,
        graph.weights, directed=directed, threshold=threshold,
    )
    mentions.cluster_ids = cluster_names(graph, part, entity_id, mentions.keys, nil_prefix,
                                         mentions.cluster_ids[:n_remembered])
    return mentions, slots


def compatible_neighbours(neighbours: np.ndarray, labels: Sequence[str],
                          compatible: Callable[[str, str], bool]) -> np.ndarray:
    """``neighbours`` (a k-NN graph's, -1 for none) with -1 where the neighbour's label is
    not ``compatible`` with the mention's."""
    names = sorted(set(labels))
    codes = np.array([names.index(label) for label in labels], dtype="int64")
    table = np.array([[compatible(a, b) for b in names] for a in names], dtype=bool)
    found = neighbours >= 0
    keep = np.zeros_like(found)
    rows = np.broadcast_to(codes[:, None], neighbours.shape)
    keep[found] = table[rows[found], codes[neighbours[found]]]
    return np.where(keep, neighbours, -1)


def cluster_names(graph: MentionGraph, part: Partition, entity_id: Callable[[int], str],
                  keys: Sequence[str], nil_prefix: str,
                  remembered: Sequence[str | None] = ()) -> list[str]:
    """Each mention's cluster id: the KB id of its cluster's entity (``entity_id`` of its
    KB position), else the id of the cluster's first mention if that one is ``remembered``
    with a ``nil_prefix`` id, else ``nil_prefix`` + that mention's key."""
    ids: list[str] = []
    nil_ids: dict[int, str] = {}
    entity_nodes = part.entity[graph.n_entities:].tolist()
    clusters = part.cluster[graph.n_entities:].tolist()
    for entity_node, cluster in zip(entity_nodes, clusters, strict=True):
        if entity_node >= 0:
            ids.append(entity_id(int(graph.entity_positions[entity_node])))
            continue
        if cluster not in nil_ids:
            # a cluster is named after its first mention: a remembered one keeps its id
            first = cluster - graph.n_entities
            earlier = remembered[first] if first < len(remembered) else None
            if earlier is not None and earlier.startswith(nil_prefix):
                nil_ids[cluster] = earlier
            else:
                nil_ids[cluster] = nil_prefix + keys[first]
        ids.append(nil_ids[cluster])
    return ids
