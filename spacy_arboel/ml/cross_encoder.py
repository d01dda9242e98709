"""BLINK's cross-encoder (§4.2, ``spacy_arboel.CrossEncoder.v1``): the ``CrossScorer`` of
``arbo_reranker`` (s_cross(m, e) = y_{m,e} W, eq. 5–6, ``spacy_arboel.encoders.cross_scorer``),
held by a thinc model (``spacy_arboel.ml.module_holder``) and run by its core,
``spacy_arboel.linking.CrossEncoderReranker``."""

from __future__ import annotations

from typing import Any

from spacy.util import registry
from thinc.api import Model

from ..encoders.cross_scorer import CrossScorer, load_scorer
from ..encoders.loading import DEFAULT_ENCODER
from ..linking.cross_encoder_reranker import RerankerSettings
from .module_holder import module_holder, torch_modules


@registry.architectures("spacy_arboel.CrossEncoder.v1")
def build_cross_encoder(encoder_name: str = DEFAULT_ENCODER,
                        mixed_precision: bool = RerankerSettings.mixed_precision) -> Model:
    """One transformer over the concatenated mention and entity, scored from its [CLS]."""
    return module_holder("arbo_cross_encoder", ["scorer"], _base_scorer,
                         {"encoder_name": encoder_name, "mixed_precision": mixed_precision})


def _base_scorer(name: str, tokenizer: Any, attrs: dict[str, Any]) -> dict[str, CrossScorer]:
    """The base encoder ``name`` with a new head."""
    return {"scorer": load_scorer(name, len(tokenizer))}


def torch_scorer(model: Model) -> CrossScorer:
    return torch_modules(model)["scorer"]
