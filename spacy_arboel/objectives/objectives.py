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

from ..errors import Errors
from .arborescence import arborescence_parents
from .losses import get_loss, proxy_loss
from .mention_store import MentionStore

VARIANTS = ("full", "1nn", "1rand")
NEGATIVES = ("hard", "random", "mixed")
# negatives per mention of the hard-negative objectives: every linker row of BENCHMARKS.md
# was trained with 4 (the one declaration; the registered functions and the component's
# default objective take it from here)
N_NEGATIVES = 4


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
    rows_of: list[list[int]] | None = None  # per entity position, its index rows
    store: MentionStore | None = None
    rng: random.Random = field(default_factory=lambda: random.Random(0))


class Objective:
    """Base class; subclasses set ``loss`` and implement ``plan``.

    ``similarity``: how mentions and nodes are scored (``dot``, or ``cosine`` for the proxy
    loss; the retriever then also normalises the vectors it indexes and searches with).
    ``captures_entity_embeddings``: the trainer keeps the entity encoder's input embeddings
    of the step (FGSM needs them). FGSM and distillation wrap another objective
    (``objectives.wrappers``).
    """

    name = "objective"
    loss = "softmax"
    similarity = "dot"
    needs_entity_index = False
    needs_mention_index = False
    captures_entity_embeddings = False

    def plan(self, ctx: PlanContext) -> BatchPlan:
        raise NotImplementedError

    def compute_loss(self, scores, valid, step=None):
        """The loss over scored candidate lists (positive in column 0); ``step``: the
        trainer's ``TrainingStep``, for objectives that look beyond the scores."""
        return get_loss(self.loss)(scores, valid)

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

    def sampled_entity_negatives(self, ctx: PlanContext, n: int, negatives: str,
                                 hard_fraction: float) -> list[list[int]]:
        """``n`` negative rows per mention (PEL §5.3): ``hard`` (k-NN), ``random`` (entities
        drawn uniformly, one random row each) or ``mixed`` (``hard_fraction`` of them hard)."""
        if negatives == "hard":
            return self.hard_entity_negatives(ctx, n)
        n_hard = round(hard_fraction * n) if negatives == "mixed" else 0
        chosen = self.hard_entity_negatives(ctx, n_hard)
        for i, rows in enumerate(chosen):
            taken = {int(ctx.row_owners[r]) for r in rows} | {ctx.gold_entities[i]}
            rows.extend(_random_rows(ctx, n - len(rows), taken))
        return chosen


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


def _random_rows(ctx: PlanContext, n: int, taken: set[int]) -> list[int]:
    """One random row each of up to ``n`` entities drawn uniformly, none of ``taken``."""
    n_entities = len(ctx.rows_of)
    rows: list[int] = []
    for _ in range(min(n, max(n_entities - len(taken), 0))):
        for _attempt in range(100):
            entity = ctx.rng.randrange(n_entities)
            if entity not in taken and ctx.rows_of[entity]:
                break
        else:
            break
        taken.add(entity)
        rows.append(ctx.rng.choice(ctx.rows_of[entity]))
    return rows


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
    """Cross-entropy of the gold entity against sampled negatives: by default the k nearest
    other entities of the index (hard); ``random`` or ``mixed`` as in PEL-CE."""

    name = "knn_negatives"
    default_negatives = "hard"

    def __init__(self, n_negatives: int = N_NEGATIVES, negatives: str | None = None,
                 hard_fraction: float = 0.5) -> None:
        negatives = negatives or self.default_negatives
        if negatives not in NEGATIVES:
            raise ValueError(Errors.E007.format(what="negatives", value=negatives,
                                                options=", ".join(NEGATIVES)))
        if not 0.0 <= hard_fraction <= 1.0:
            raise ValueError(Errors.E011.format(name="hard_fraction", condition="in [0, 1]",
                                                value=hard_fraction))
        self.n_negatives = n_negatives
        self.negatives = negatives
        self.hard_fraction = hard_fraction
        # random negatives need no refreshed index (PEL's point: no repeated k-NN mining)
        self.needs_entity_index = negatives != "random"

    def plan(self, ctx: PlanContext) -> BatchPlan:
        negatives = self.sampled_entity_negatives(ctx, self.n_negatives, self.negatives,
                                                  self.hard_fraction)
        per_mention = [
            [("row", self.best_gold_row(ctx, i))] + [("row", r) for r in negatives[i]]
            for i in range(len(ctx.queries))
        ]
        return _assemble(per_mention, len(ctx.queries))


class Proxy(KnnNegatives):
    """PEL's proxy-based loss (eq. 3) over cosine similarities: the gold entity is the
    mention's proxy, pulled above ``margin`` with scale ``alpha``; sampled negatives (mixed
    by default, ``hard_fraction`` hard) are pushed below −``margin``."""

    name = "proxy"
    loss = "proxy"
    similarity = "cosine"
    default_negatives = "mixed"

    def __init__(self, n_negatives: int = N_NEGATIVES, negatives: str | None = None,
                 hard_fraction: float = 0.5, alpha: float = 32.0, margin: float = 0.0) -> None:
        super().__init__(n_negatives, negatives, hard_fraction)
        if alpha <= 0:
            raise ValueError(Errors.E011.format(name="alpha", condition="> 0", value=alpha))
        self.alpha = alpha
        self.margin = margin

    def compute_loss(self, scores, valid, step=None):
        return proxy_loss(scores, valid, alpha=self.alpha, margin=self.margin)


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

    def __init__(self, variant: str = "full", n_negatives: int = N_NEGATIVES,
                 max_cluster: int = 512):
        if variant not in VARIANTS:
            raise ValueError(Errors.E007.format(what="arborescence variant", value=variant,
                                                options=", ".join(VARIANTS)))
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
