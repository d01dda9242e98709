"""The settings of the core's own optimiser loops, declared once and free of torch, so that
the commands take their defaults from them (no spaCy here).

``LoopSettings`` holds what every loop has (examples per step, AdamW's learning rate,
passes, seed); ``DistillSettings`` (the mention-encoder distillation of
``mention_distiller``) and ``SelfAlignmentSettings`` (SapBERT's pre-training of
``self_alignment``) add their own fields and their own defaults.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..settings import (
    AtLeastThree,
    Cosine,
    NonNegativeFloat,
    PositiveFloat,
    PositiveInt,
    check_fields,
    choices,
)

NAME_POOLINGS = ("mean", "cls")


@dataclass(frozen=True)
class LoopSettings:
    """``batch_size``: examples per optimiser step; ``learning_rate``: AdamW's;
    ``epochs``: passes over the examples; ``seed``: their order (and new weights)."""

    batch_size: PositiveInt = 32
    learning_rate: PositiveFloat = 1e-4
    epochs: PositiveInt = 1
    seed: int = 0

    __post_init__ = check_fields


@dataclass(frozen=True)
class DistillSettings(LoopSettings):
    """``epochs``: passes over the corpus's mentions (the learning rate decays linearly);
    ``layers``: the student's transformer layers; ``top_k``: teacher candidates (index
    rows) the soft term ranks; ``temperature``: T; ``vector_weight``: β."""

    epochs: PositiveInt = 6
    layers: PositiveInt = 3
    top_k: PositiveInt = 64
    temperature: PositiveFloat = 2.0
    vector_weight: NonNegativeFloat = 1.0


@dataclass(frozen=True)
class SelfAlignmentSettings(LoopSettings):
    """``batch_size``: (name, synonym) pairs per step (2 rows each; SapBERT: 256 pairs, the
    paper's 512 rows; our CPU default 128); ``learning_rate``: constant; ``max_length``:
    wordpieces per name, [CLS] and [SEP] included; ``max_pairs_per_entity``: pairs drawn
    from one entity's names at most (caps very large synonym sets); ``alpha`` / ``beta``:
    the scales of the positive / negative terms of the multi-similarity loss; ``base``:
    its λ; ``margin``: ε of the hard-pair miner; ``max_steps`` / ``time_limit_s``: stop
    after this many optimiser steps / seconds of ``SelfAlignmentTrainer.fit`` (checked
    after each step, so at least one step runs); ``pooling``: "mean" (ours) or "cls"
    (SapBERT's); ``mixed_precision``: fp16 autocast with loss scaling on a GPU (SapBERT
    trains with ``--amp``), ignored on a CPU; ``opposite_negatives``: a pair of an entity
    whose names have an opposite in the KB ("Tall stature" / "Short stature",
    ``linking.opposites.opposite_entities``) brings a pair of that opposite into its batch,
    a hard negative the miner finds (issue 61; not in SapBERT)."""

    batch_size: PositiveInt = 128
    learning_rate: PositiveFloat = 2e-5
    max_length: AtLeastThree = 25
    max_pairs_per_entity: PositiveInt = 50
    alpha: PositiveFloat = 2.0
    beta: PositiveFloat = 50.0
    base: Cosine = 0.5
    margin: NonNegativeFloat = 0.2
    weight_decay: NonNegativeFloat = 0.01
    max_steps: PositiveInt | None = None
    time_limit_s: PositiveFloat | None = None
    pooling: choices(NAME_POOLINGS) = "mean"
    mixed_precision: bool = False
    opposite_negatives: bool = False
