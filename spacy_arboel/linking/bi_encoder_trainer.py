"""Training the dense retriever's encoders with one objective (BLINK §3.2, arboEL §2.3, PEL).

No spaCy here: a step takes texts, character spans and each mention's gold ids::

    trainer = BiEncoderTrainer(retriever, KnnNegatives(8))
    trainer.collect(texts, spans, gold_ids)      # the gold training mentions (arboEL's graph)
    trainer.refresh()
    loss = trainer.step(texts, spans, gold_ids)  # gradients are in the encoders' .grad
    optimizer.step(); retriever.entities.changed()
"""

from __future__ import annotations

import random
import warnings
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from ..encoders.inputs import MentionSpan
from ..encoders.weights import autocast, module_device
from ..errors import Errors, Warnings
from ..objectives import InBatch, MentionStore, Objective, PlanContext
from ..objectives.fgsm import embedding_hook, output_hook
from ..objectives.gathered import in_batch_loss, rank_weight, shared_rows, world
from ..objectives.losses import candidate_scores
from ..objectives.objectives import BatchPlan
from ..settings import NonNegativeInt, PositiveInt, check_fields
from .dense_retriever import COSINE_SCALE, DenseRetriever
from .name_pairs import NamePairSampler, PseudoMention, other_name_rows

# W002 (mentions longer than the window) is said when a pipeline links; repeated at every
# training step it would only be noise, so training leaves that one warning out
LONG_MENTION_WARNING = r"\[W002\]"


@dataclass
class TrainingStep:
    """One step's batch as the objective sees it: ``leaves`` are the encoder outputs
    (entity rows, batch mentions, extra mentions) as leaf tensors the loss is taken on."""

    texts: Sequence[str]
    spans: Sequence[MentionSpan]
    plan: BatchPlan
    retriever: DenseRetriever
    candidates: torch.Tensor
    entity_batch: tuple[np.ndarray, np.ndarray]
    leaves: list[torch.Tensor] = field(default_factory=list)
    captured: tuple[torch.Tensor, torch.Tensor] | None = None
    cache: dict[str, Any] = field(default_factory=dict)
    # (encoder output, its leaf): gradients flow from each leaf into its encoder
    pending: list[tuple[torch.Tensor, torch.Tensor]] = field(default_factory=list)
    encode_entities: Any = None  # callable(delta) -> adversarial leaf (FGSM)
    similarity: tuple[str, float] = ("dot", 1.0)  # what the loss scores with, and its scale


def training_similarity(objective_similarity: str, scoring: str) -> tuple[str, float]:
    """The similarity a loss is taken on, and its scale: the objective's, except that a
    dot-product objective trained under ``names`` inputs (whose index searches by cosine)
    learns ``COSINE_SCALE`` x cosine, the scores its softmax reads at link time and the
    encoder's own pretraining objective, so that training starts from the untrained linker
    instead of from dot products the index never searches with."""
    if objective_similarity == "dot" and scoring == "cosine":
        return "cosine", COSINE_SCALE
    return objective_similarity, 1.0


@dataclass(frozen=True)
class TrainerSettings:
    """``refresh_every``: updates between refreshes of the mined negatives' index (the
    workflow's measured setting). ``name_pairs``: KB names per step as pseudo-mentions of
    their entity (none by default). ``skip_own_name``: a gold row that spells the mention's
    own text is no positive. ``BiEncoderTrainer`` says more of each."""

    refresh_every: PositiveInt = 200
    name_pairs: NonNegativeInt = 0
    skip_own_name: bool = True

    def __post_init__(self) -> None:
        check_fields(self)


class BiEncoderTrainer:
    """Computes the objective's loss and gradients for a batch of gold mentions.

    The entity index (and, for arborescence, the training mentions' vectors) are refreshed
    every ``refresh_every`` steps when the objective mines them (``settings``:
    ``TrainerSettings``). ``name_pairs``: KB names
    added to each step as pseudo-mentions of their entity, its other names the positives
    (``name_pairs.NamePairSampler``; drawn with ``seed``, the KB types as often as the
    corpus's gold mentions carry them); 0 adds none. ``skip_own_name``: under ``names``
    inputs, a mention's positives are its gold entity's rows other than the one that spells
    its own text (case and spaces aside; all of them where the entity has no other name).
    A KB whose aliases hold the corpus's surface forms (``build-kb --alias-corpus``) would
    otherwise hand every training mention its own text as the positive, encoded as the
    mention is, at cosine 1, and the loss would only push the negatives away; without that
    row the positive is a synonym, SapBERT's pair (Liu et al. 2021, §2) drawn from the
    corpus. Under ``blink`` inputs the mention is read in its context, so the row of its
    own name is no copy of it and stays a positive (BLINK's).
    """

    def __init__(self, retriever: DenseRetriever, objective: Objective,
                 settings: TrainerSettings = TrainerSettings(), *,
                 mixed_precision: bool = False, seed: int = 0) -> None:
        self.retriever = retriever
        self.objective = objective
        self.settings = settings
        self.mixed_precision = mixed_precision
        self.rng = random.Random(seed)
        self.gold_types: Counter[str] = Counter()  # KB types of the gold mentions
        self._sampler: tuple[object, NamePairSampler] | None = None
        self.store = MentionStore()
        self.seen_ids: set[str] = set()
        self.n_missing_gold_ids = 0
        self.updates = 0
        self.last_refresh = 0

    # --- the gold training mentions ------------------------------------------------------

    def known_gold(self, ids: Sequence[str]) -> int | None:
        """The KB position of the first gold id that is in the KB (None if none is)."""
        kb = self.retriever.kb
        known = [i for i in ids if i in kb]
        return kb.position(known[0]) if known else None

    def collect(self, texts: Sequence[str], spans: Sequence[MentionSpan],
                gold_ids: Sequence[Sequence[str]]) -> None:
        """Keep the gold mentions whose id is in the KB (arboEL's clusters); the others are
        counted (W001), and none at all is an error (E009)."""
        self.store = MentionStore()
        self.seen_ids = set()
        self._sampler = None
        missing: dict[str, int] = {}
        kept: list[tuple[MentionSpan, int]] = []
        n_gold = 0
        for span, ids in zip(spans, gold_ids, strict=True):
            if not ids:
                continue
            n_gold += 1
            self.seen_ids.update(ids)
            gold = self.known_gold(ids)
            if gold is None:
                for i in ids:
                    missing[i] = missing.get(i, 0) + 1
                continue
            kept.append((span, gold))
        self.gold_types = Counter(t for _, gold in kept
                                  for t in self.retriever.kb.entity_at(gold).types)
        by_doc: dict[int, list[tuple[MentionSpan, int]]] = {}
        for span, gold in kept:
            by_doc.setdefault(span.doc_index, []).append((span, gold))
        for doc_index, mentions in by_doc.items():
            text = texts[doc_index]
            local = [MentionSpan(0, s.start_char, s.end_char) for s, _ in mentions]
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message=LONG_MENTION_WARNING)
                inputs = self.retriever.builder.mention_ids([text], local)
            for (span, gold), ids in zip(mentions, inputs, strict=True):
                self.store.add((text, span.start_char, span.end_char), ids, gold)
        n_missing = sum(missing.values())
        if n_missing:
            warnings.warn(Warnings.W001.format(n_missing=n_missing, n_total=n_gold,
                                               examples=", ".join(list(missing)[:5])),
                          stacklevel=2)
        if n_gold and not len(self.store):
            raise ValueError(Errors.E009.format(n_missing=n_missing))
        self.n_missing_gold_ids = n_missing

    def refresh(self) -> None:
        """Re-embed the KB (and the training mentions if the objective mines them); in a
        data-parallel run each rank embeds its share (``shared_rows``) and all search the
        same index."""
        self.retriever.entities.refresh(across_ranks=True)
        if self.objective.needs_mention_index and len(self.store):
            inputs = self.store.inputs
            self.store.set_embeddings(shared_rows(len(inputs), lambda part: self.retriever.encode(
                "mention", inputs[part], desc="Embedding training mentions", quantized=False),
                "the training mentions' vectors"))
        self.last_refresh = self.updates

    # --- one step ----------------------------------------------------------------------------

    def _forward(self, side: str, batch: tuple[np.ndarray, np.ndarray]) -> torch.Tensor:
        encoder = self.retriever.encoders[side]
        encoder.train()
        device = module_device(encoder)
        with autocast(device, self.mixed_precision):
            return encoder(torch.as_tensor(batch[0], device=device),
                           torch.as_tensor(batch[1], device=device))

    def _leaf(self, step: TrainingStep, output: torch.Tensor) -> torch.Tensor:
        """A float32 leaf of an encoder output (half under mixed precision): the scores and
        the loss are taken in float32, the gradient flows back cast to the output's type."""
        leaf = output.detach().float().requires_grad_()
        step.pending.append((output, leaf))
        return leaf

    def step(self, texts: Sequence[str], spans: Sequence[MentionSpan],
             gold_ids: Sequence[Sequence[str]]) -> float | None:
        """One step of the objective on the mentions whose gold id is in the KB: the loss,
        with the gradients accumulated in the encoders (None when no mention is usable)."""
        retriever, builder = self.retriever, self.retriever.builder
        if retriever.index is None or (
            self.objective.needs_entity_index
            and self.updates - self.last_refresh >= self.settings.refresh_every
        ):
            self.refresh()
        usable = [(span, self.known_gold(ids)) for span, ids in zip(spans, gold_ids,
                                                                      strict=True)]
        usable = [(span, gold) for span, gold in usable if gold is not None]
        if not usable:
            return self._idle_across_ranks() if world()[1] > 1 else None
        spans = [span for span, _ in usable]
        golds = [gold for _, gold in usable]
        gold_rows = [self.positive_rows(retriever.entities.rows_of[g],
                                        texts[s.doc_index][s.start_char:s.end_char])
                     for s, g in zip(spans, golds, strict=True)]
        pseudo = self.sample_name_pairs()
        if pseudo:  # each a text of its own, the whole text its span
            texts = [*texts, *(p.text for p in pseudo)]
            spans = [*spans, *(MentionSpan(len(texts) - len(pseudo) + i, 0, len(p.text))
                               for i, p in enumerate(pseudo))]
            golds = [*golds, *(p.entity for p in pseudo)]
            gold_rows = [*gold_rows, *(p.positive_rows for p in pseudo)]
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=LONG_MENTION_WARNING)
            mention_inputs = builder.mention_ids(texts, spans)
        queries_out = self._forward("mention", builder.pad(mention_inputs))
        index = retriever.index
        ctx = PlanContext(
            gold_rows=gold_rows,
            gold_entities=golds,
            store_positions=[self.store.lookup((texts[s.doc_index], s.start_char, s.end_char))
                             for s in spans],
            queries=retriever.normalized(queries_out.detach().float().cpu().numpy()),
            row_vectors=index.embeddings, row_owners=index.owners,
            search_rows=index.search_rows, rows_of=retriever.entities.rows_of, store=self.store,
        )
        if world()[1] > 1 and type(self.objective) is InBatch:
            return self._in_batch_across_ranks(ctx, queries_out, golds)
        plan = self.objective.plan(ctx)
        entity_batch = builder.pad(retriever.entities.inputs_of(
            [int(index.rows[r]) for r in plan.entity_rows]))
        step = TrainingStep(texts, spans, plan, retriever, torch.as_tensor(plan.candidates),
                            entity_batch, similarity=training_similarity(
                                self.objective.similarity, retriever.settings.scoring))
        entity_out = self._encode_entities(step)
        step.leaves = [self._leaf(step, entity_out), self._leaf(step, queries_out)]
        if plan.extra_mentions:
            extra = self._forward("mention", builder.pad(
                [self.store.inputs[m] for m in plan.extra_mentions]))
            step.leaves.append(self._leaf(step, extra))
        step.candidates = step.candidates.to(step.leaves[0].device)
        step.encode_entities = lambda delta: self._leaf(step, self._adversarial(step, delta))
        scores, valid = candidate_scores(step.leaves[1], torch.cat(step.leaves),
                                         step.candidates, *step.similarity)
        loss = self.objective.compute_loss(scores, valid, step)
        (loss * rank_weight(len(spans))).backward()  # DDP's average: the whole batch's
        for output, leaf in step.pending:
            output.backward(leaf.grad)
        self.updates += 1
        return float(loss.item())

    def _in_batch_across_ranks(self, ctx: PlanContext, queries_out: torch.Tensor,
                               golds: list[int]) -> float:
        """BLINK eq. (4) with every rank's batch as negatives (``objectives.gathered``): the
        step a single process takes on the whole batch, its positives chosen as
        ``InBatch``'s; the whole batch's mean loss."""
        retriever, index = self.retriever, self.retriever.index
        positives = [self.objective.best_gold_row(ctx, i) for i in range(len(golds))]
        entity_out = self._forward("entity", retriever.builder.pad(
            retriever.entities.inputs_of([int(index.rows[r]) for r in positives])))
        device = queries_out.device
        loss, whole = in_batch_loss(
            queries_out.float(), entity_out.float(), torch.as_tensor(golds, device=device),
            *training_similarity(self.objective.similarity, retriever.settings.scoring),
            rows=torch.as_tensor(positives, device=device))
        loss.backward()
        self.updates += 1
        return whole

    def _idle_across_ranks(self) -> float:
        """A rank with no usable mention in its share still takes part in the step's
        exchanges (the others would wait for it until the timeout): its loss is 0 and its
        gradients none."""
        if type(self.objective) is InBatch:
            empty = torch.zeros((0, self.retriever.index.embeddings.shape[1]),
                                requires_grad=True)
            loss, whole = in_batch_loss(empty, empty, torch.zeros(0, dtype=torch.long),
                                        rows=torch.zeros(0, dtype=torch.long))
            loss.backward()  # the gathered rows' gradients go back to the ranks that sent them
        else:
            rank_weight(0)  # the exchange of the counts the others' weights take
            whole = 0.0
        self.updates += 1
        return whole

    def positive_rows(self, rows: list[int], text: str) -> list[int]:
        """The gold entity's index ``rows`` a mention spelt ``text`` may take as its
        positive: with ``skip_own_name`` under ``names`` inputs, those whose name is not
        ``text`` (case and spaces aside), or all of them where every one is."""
        if not self.settings.skip_own_name or self.retriever.settings.inputs != "names" \
                or len(rows) < 2:
            return rows
        texts = self.retriever.entities.index_row_texts()
        return other_name_rows(rows, texts, text) or rows

    def sample_name_pairs(self) -> list[PseudoMention]:
        """``name_pairs`` pseudo-mentions (``NamePairSampler``) for this step, drawn over
        the current index's rows (the sampler is built again when the index is)."""
        if not self.settings.name_pairs:
            return []
        entities = self.retriever.entities
        if self._sampler is None or self._sampler[0] is not entities.rows_of:
            self._sampler = (entities.rows_of, NamePairSampler(
                self.retriever.kb, entities.rows_of, entities.index_row_texts(),
                self.gold_types, self.rng))
        return self._sampler[1].sample(self.settings.name_pairs)

    def _encode_entities(self, step: TrainingStep) -> torch.Tensor:
        """The entity rows of the plan, keeping their input embeddings for FGSM."""
        if not self.objective.captures_entity_embeddings:
            return self._forward("entity", step.entity_batch)
        encoder = self.retriever.encoders["entity"]
        embeddings: list[torch.Tensor] = []
        outputs: list[torch.Tensor] = []
        with embedding_hook(encoder.transformer, embeddings), output_hook(encoder, outputs):
            result = self._forward("entity", step.entity_batch)
        step.captured = (embeddings[-1], outputs[-1])
        return result

    def _adversarial(self, step: TrainingStep, delta: torch.Tensor) -> torch.Tensor:
        """The plan's entity rows encoded again with ``delta`` added to their embeddings."""
        with embedding_hook(self.retriever.encoders["entity"].transformer, delta=delta):
            return self._forward("entity", step.entity_batch)
