"""The retriever-reader of EntQA / BEER² (``spacy_arboel.RetrieverReader.v1``): ``heads``
(``ReaderHeads``: the passage encoder E_S, the reader and its heads) and ``entity`` (the
pooled entity encoder E_E, eq. 2) of ``arbo_linker``, held by a thinc model
(``spacy_arboel.ml.module_holder``) and run by its core,
``spacy_arboel.linking.RetrieverReader``."""

from __future__ import annotations

from typing import Any

import torch
from spacy.util import registry
from thinc.api import Model

from ..encoders.loading import DEFAULT_ENCODER
from ..encoders.reader_heads import ENTITY_POOLINGS, QUERY_POOLINGS, base_reader_modules
from ..linking.retriever_reader import MODES, ReaderSettings
from ..settings import Fraction, NonNegativeInt, choices
from .module_holder import module_holder


@registry.architectures("spacy_arboel.RetrieverReader.v1")
def build_retriever_reader(
    encoder_name: str = DEFAULT_ENCODER,
    entity_pooling: choices(ENTITY_POOLINGS) = ReaderSettings.entity_pooling,
    query_pooling: choices(QUERY_POOLINGS) = ReaderSettings.query_pooling,
    share_weights: bool = ReaderSettings.share_weights,
    mode: choices(MODES) = ReaderSettings.mode,
    warmup_retriever_steps: NonNegativeInt = ReaderSettings.warmup_retriever_steps,
    warmup_reader_steps: NonNegativeInt = ReaderSettings.warmup_reader_steps,
    span_retrieval: bool = ReaderSettings.span_retrieval,
    empty_passage_rate: Fraction = ReaderSettings.empty_passage_rate,
    mixed_precision: bool = ReaderSettings.mixed_precision,
) -> Model:
    """Passage encoder + reader heads (shared transformer when ``share_weights``) and an
    entity encoder. ``query_pooling``: the passage query, [CLS] as BEER² eq. 3 or the mean
    over the passage; ``entity_pooling``: how entity rows are pooled (``mean`` matches an
    ``arbo_entity_linker`` trained with ``mention`` pooling, whose index can be reused).
    ``mode``, the warm-ups, ``span_retrieval`` and ``empty_passage_rate``: how it trains and
    reads (``spacy_arboel.linking.ReaderSettings``)."""
    return module_holder(
        "arbo_retriever_reader", ["heads", "entity"], _base_modules,
        {"encoder_name": encoder_name, "reader": "passage",
         "settings": {"entity_pooling": entity_pooling, "query_pooling": query_pooling,
                      "share_weights": share_weights, "mode": mode,
                      "warmup_retriever_steps": warmup_retriever_steps,
                      "warmup_reader_steps": warmup_reader_steps,
                      "span_retrieval": span_retrieval,
                      "empty_passage_rate": empty_passage_rate,
                      "mixed_precision": mixed_precision}})


def _base_modules(name: str, tokenizer: Any, attrs: dict[str, Any]
                  ) -> dict[str, torch.nn.Module]:
    settings = attrs["settings"]
    return base_reader_modules(name, len(tokenizer), share_weights=settings["share_weights"],
                               entity_pooling=settings["entity_pooling"])
