"""The bi-encoder (``spacy_arboel.BiEncoder.v1``): the mention and entity encoders of
``arbo_entity_linker``, held by a thinc model (``spacy_arboel.ml.module_holder``) and run by
its core, ``spacy_arboel.linking.DenseRetriever``."""

from __future__ import annotations

from typing import Any

import torch
from spacy.util import registry
from thinc.api import Model

from ..encoders.inputs import InputBuilder
from ..encoders.loading import DEFAULT_ENCODER
from ..encoders.transformer import POOLINGS, PooledEncoder, load_pooled_encoders
from ..linking.dense_retriever import RetrieverSettings
from ..settings import choices
from .module_holder import module_holder, torch_modules

SIDES = ("mention", "entity")


@registry.architectures("spacy_arboel.BiEncoder.v1")
def build_bi_encoder(
    encoder_name: str = DEFAULT_ENCODER,
    pooling: choices(POOLINGS) = RetrieverSettings.pooling,
    share_weights: bool = RetrieverSettings.share_weights,
    mixed_precision: bool = RetrieverSettings.mixed_precision,
) -> Model:
    """Separate mention and entity transformers (BLINK), or one shared if ``share_weights``."""
    return module_holder(
        "arbo_bi_encoder", list(SIDES[:1] if share_weights else SIDES), _base_encoders,
        {"encoder_name": encoder_name, "pooling": pooling, "share_weights": share_weights,
         "mixed_precision": mixed_precision})


def _base_encoders(name: str, tokenizer: Any, attrs: dict[str, Any]) -> dict[str, PooledEncoder]:
    """Untrained encoders from ``name``, sized to its tokenizer with our markers."""
    return load_pooled_encoders({side: name for side in SIDES}, attrs["pooling"],
                                attrs["share_weights"], len(tokenizer),
                                InputBuilder(tokenizer).marker_ids)


def torch_encoders(model: Model) -> dict[str, torch.nn.Module]:
    """The PyTorch ``PooledEncoder`` per side (the same object twice when weights are shared)."""
    modules = torch_modules(model)
    return {side: modules.get(side, modules["mention"]) for side in SIDES}
