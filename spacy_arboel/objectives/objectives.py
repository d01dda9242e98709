"""The training objectives of BLINK and arboEL, as candidate plans for a batch of mentions.

Each objective picks, for every mention of a batch, one positive node and some negative
nodes. Nodes are entity rows of the index (encoded by the entity encoder) or training
mentions (encoded by the mention encoder). The component encodes the nodes, with gradients,
and applies the objective's loss with the positive in column 0.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import numpy as np
from spacy.util import registry

from .arborescence import arborescence_parents
from .mention_store import MentionStore

VARIANTS = ("full", "1nn", "1rand")


@dataclass
class BatchPlan:
    """What to encode for a batch and which nodes each mention is scored against.

    ``candidates[i]`` lists node ids: ``[0, len(entity_rows))`` are entity rows and
    ``len(entity_rows) + j`` is mention ``j`` of ``batch mentions + extra_mentions``.
    Column 0 is the positive; -1 is padding.
    """

    entity_rows: list[int]
    extra_mentions: list[int]
    candidates: np.ndarray
    n_positive_mentions: int = 0


@dataclass
class PlanContext:
    """What an objective may look at: gold rows, current batch vectors and cached vectors."""

    gold_rows: list[list[int]]  # per batch mention, the index rows of its gold entity
    gold_entities: list[int]  # per batch mention, its gold entity position
    store_positions: list[int]  # per batch mention, its position in the store or -1
    queries: np.ndarray  # current (detached) batch mention vectors
    row_vectors: np.ndarray | None = None  # cached entity-row vectors
    row_owners: np.ndarray | None = None
    search_rows: object = None  # callable(queries, k) -> row ids, on the cached index
    store: MentionStore | None = None
    rng: random.Random = field(default_factory=lambda: random.Random(0))


class Objective:
    """Base class; subclasses set ``loss`` and implement ``plan``."""

    name = "objective"
    loss = "softmax"
    needs_entity_index = False
    needs_mention_index = False

    def plan(self, ctx: PlanContext) -> BatchPlan:
        raise NotImplementedError

    @staticmethod
    def best_gold_row(ctx: PlanContext, i: int) -> int:
        """With several rows per entity (aliases), the positive is the closest gold row."""
        rows = ctx.gold_rows[i]
        if len(rows) == 1 or ctx.row_vectors is None:
            return rows[0]
        return rows[int(np.argmax(ctx.row_vectors[rows] @ ctx.queries[i]))]

    def hard_entity_negatives(self, ctx: PlanContext, n: int) -> list[list[int]]:
        """The best row of each of the ``n`` nearest other entities (k-NN negatives)."""
        if n <= 0:
            return [[] for _ in ctx.queries]
        # over-fetch: the gold entity's rows and several rows of one entity are skipped
        fetched = ctx.search_rows(ctx.queries, 4 * n + 16)
        return _nearest_others(fetched, ctx.row_owners, ctx.gold_entities, n, one_per_owner=True)


def _nearest_others(
    fetched: np.ndarray, owners, golds: list[int], n: int, one_per_owner: bool = False
) -> list[list[int]]:
    """Per query, the first ``n`` fetched nodes whose owner is not the query's gold entity."""
    result = []
    for gold, nodes in zip(golds, fetched, strict=True):
        keep: list[int] = []
        seen: set[int] = set()
        for node in nodes:
            if node < 0 or owners[node] == gold or (one_per_owner and owners[node] in seen):
                continue
            seen.add(int(owners[node]))
            keep.append(int(node))
            if len(keep) == n:
                break
        result.append(keep)
    return result


def _assemble(per_mention: list[list[tuple[str, int]]], batch_size: int) -> BatchPlan:
    """Turn per-mention node lists [("row"|"mention"|"batch", id), ...] into a BatchPlan."""
    rows: dict[int, int] = {}
    extras: dict[int, int] = {}
    for nodes in per_mention:
        for kind, ident in nodes:
            if kind == "row":
                rows.setdefault(ident, len(rows))
            elif kind == "mention":
                extras.setdefault(ident, len(extras))
    width = max((len(n) for n in per_mention), default=1)
    candidates = np.full((len(per_mention), width), -1, dtype="int64")
    for i, nodes in enumerate(per_mention):
        for j, (kind, ident) in enumerate(nodes):
            if kind == "row":
                candidates[i, j] = rows[ident]
            elif kind == "batch":
                candidates[i, j] = len(rows) + ident
            else:
                candidates[i, j] = len(rows) + batch_size + extras[ident]
    n_pos = sum(1 for nodes in per_mention if nodes and nodes[0][0] != "row")
    return BatchPlan(list(rows), list(extras), candidates, n_pos)


class InBatch(Objective):
    """BLINK eq. (4): the gold entities of the other mentions in the batch are negatives."""

    name = "in_batch"

    def plan(self, ctx: PlanContext) -> BatchPlan:
        positives = [self.best_gold_row(ctx, i) for i in range(len(ctx.queries))]
        per_mention = []
        for i, positive in enumerate(positives):
            gold = ctx.gold_entities[i]
            negatives = {
                r for j, r in enumerate(positives) if ctx.gold_entities[j] != gold
            }
            per_mention.append([("row", positive)] + [("row", r) for r in sorted(negatives)])
        return _assemble(per_mention, len(ctx.queries))


class KnnNegatives(Objective):
    """Hard negatives: the gold entity against the k nearest other entities of the index."""

    name = "knn_negatives"
    needs_entity_index = True

    def __init__(self, n_negatives: int = 8) -> None:
        self.n_negatives = n_negatives

    def plan(self, ctx: PlanContext) -> BatchPlan:
        negatives = self.hard_entity_negatives(ctx, self.n_negatives)
        per_mention = [
            [("row", self.best_gold_row(ctx, i))] + [("row", r) for r in negatives[i]]
            for i in range(len(ctx.queries))
        ]
        return _assemble(per_mention, len(ctx.queries))


class Arborescence(Objective):
    """arboEL §2.3: positives from the minimum spanning arborescence of the gold cluster.

    ``full`` builds the arborescence over the gold entity and every training mention of the
    gold cluster; ``1nn`` over the entity, the mention and its nearest in-cluster mention;
    ``1rand`` over the entity, the mention and a random in-cluster mention (§3.2). Negatives:
    k/2 nearest other-entity rows and k/2 nearest mentions of other clusters. Loss: eq. (6).
    """

    name = "arborescence"
    loss = "edge"
    needs_entity_index = True
    needs_mention_index = True

    def __init__(self, variant: str = "full", n_negatives: int = 8, max_cluster: int = 512):
        if variant not in VARIANTS:
            raise ValueError(f"Unknown arborescence variant '{variant}': use one of {VARIANTS}.")
        self.variant = variant
        self.n_negatives = n_negatives
        self.max_cluster = max_cluster

    def _cluster_nodes(self, ctx: PlanContext, i: int) -> list[int]:
        """Store positions of the mentions in mention i's graph (itself first when stored)."""
        store, own = ctx.store, ctx.store_positions[i]
        members = [m for m in store.clusters.get(ctx.gold_entities[i], []) if m != own]
        if self.variant == "1rand" and members:
            members = [ctx.rng.choice(members)]
        elif self.variant == "1nn" and members:
            sims = store.embeddings[members] @ ctx.queries[i]
            members = [members[int(np.argmax(sims))]]
        elif len(members) > self.max_cluster:
            # very large clusters: keep the closest mentions (the MST's edges into mention i
            # come from its near neighbours)
            sims = store.embeddings[members] @ ctx.queries[i]
            members = [members[j] for j in np.argsort(-sims)[: self.max_cluster]]
        return members

    def positive(self, ctx: PlanContext, i: int, gold_row: int) -> tuple[str, int]:
        """Mention i's incoming edge in the arborescence: ('row', r) or ('mention', pos)."""
        members = self._cluster_nodes(ctx, i) if ctx.store.embeddings is not None else []
        if not members:
            return ("row", gold_row)
        store = ctx.store
        vectors = np.vstack([ctx.queries[i][None, :], store.embeddings[members]])
        entity_affinity = vectors @ ctx.row_vectors[gold_row]
        parents = arborescence_parents(entity_affinity, vectors @ vectors.T)
        parent = int(parents[0])
        return ("row", gold_row) if parent < 0 else ("mention", members[parent - 1])

    def plan(self, ctx: PlanContext) -> BatchPlan:
        n_entity = self.n_negatives // 2
        n_mention = self.n_negatives - n_entity
        entity_negatives = self.hard_entity_negatives(ctx, n_entity)
        mention_negatives = self._mention_negatives(ctx, n_mention)
        per_mention = []
        for i in range(len(ctx.queries)):
            positive = self.positive(ctx, i, self.best_gold_row(ctx, i))
            nodes = [positive]
            nodes += [("row", r) for r in entity_negatives[i]]
            nodes += [("mention", m) for m in mention_negatives[i]]
            per_mention.append(nodes)
        return _assemble(per_mention, len(ctx.queries))

    def _mention_negatives(self, ctx: PlanContext, n: int) -> list[list[int]]:
        """The ``n`` nearest training mentions of other clusters (none before the training
        mentions are embedded, e.g. when a loaded pipeline is updated without initialize)."""
        if n <= 0 or ctx.store.embeddings is None:
            return [[] for _ in ctx.queries]
        fetched = ctx.store.nearest(ctx.queries, n + 64)
        return _nearest_others(fetched, ctx.store.gold, ctx.gold_entities, n)


@registry.misc("spacy_arboel.InBatchObjective.v1")
def make_in_batch() -> Objective:
    return InBatch()


@registry.misc("spacy_arboel.KnnNegativesObjective.v1")
def make_knn_negatives(n_negatives: int = 8) -> Objective:
    return KnnNegatives(n_negatives)


@registry.misc("spacy_arboel.ArborescenceObjective.v1")
def make_arborescence(
    variant: str = "full", n_negatives: int = 8, max_cluster: int = 512
) -> Objective:
    return Arborescence(variant, n_negatives, max_cluster)


OBJECTIVES = ("in_batch", "knn_negatives", "arborescence")


@registry.misc("spacy_arboel.Objective.v1")
def make_objective(
    name: str = "arborescence", variant: str = "full", n_negatives: int = 8,
    max_cluster: int = 512,
) -> Objective:
    """Any objective by name, so one config switches between them on the command line
    (``--components.arbo_entity_linker.objective.name in_batch``)."""
    if name == "in_batch":
        return InBatch()
    if name == "knn_negatives":
        return KnnNegatives(n_negatives)
    if name == "arborescence":
        return Arborescence(variant, n_negatives, max_cluster)
    raise ValueError(f"Unknown objective '{name}': use one of {OBJECTIVES}.")
