"""The one-pass span reader of ELQ (``spacy_arboel.SpanReader.v1``): ``spans``
(``MentionHeads``: the passage encoder and its mention-boundary heads), ``entity`` (the
pooled, frozen entity encoder) and, with ``cross_reread``, ``cross`` (the cross reader) of
``arbo_linker``, held by a thinc model (``spacy_arboel.ml.module_holder``) and run by its
core, ``spacy_arboel.linking.SpanReader``."""

from __future__ import annotations

from typing import Any

import torch
from spacy.util import registry
from thinc.api import Model

from ..encoders.loading import DEFAULT_ENCODER
from ..encoders.reader_heads import ENTITY_POOLINGS
from ..encoders.span_heads import base_span_reader_modules
from ..linking.span_reader import SpanReaderSettings
from ..settings import NonNegativeInt, PositiveInt, Probability, choices
from .module_holder import module_holder


@registry.architectures("spacy_arboel.SpanReader.v1")
def build_span_reader(
    encoder_name: str = DEFAULT_ENCODER,
    entity_pooling: choices(ENTITY_POOLINGS) = SpanReaderSettings.entity_pooling,
    span_threshold: Probability = SpanReaderSettings.span_threshold,
    max_spans: PositiveInt = SpanReaderSettings.max_spans,
    cross_reread: NonNegativeInt = SpanReaderSettings.cross_reread,
    abbreviations: bool = SpanReaderSettings.abbreviations,
    mixed_precision: bool = SpanReaderSettings.mixed_precision,
) -> Model:
    """A passage encoder with ELQ's mention heads, an entity encoder and, when
    ``cross_reread`` > 0, a cross reader that re-reads that many candidates of each span.
    ``span_threshold``: the p(m) a span needs to retrieve candidates, at most ``max_spans``
    per passage; ``abbreviations``: a short form the text defines is linked through its long
    form's link; ``entity_pooling``: ``mean`` matches an ``arbo_entity_linker`` trained with
    ``mention`` pooling, whose index is then reused."""
    return module_holder(
        "arbo_span_reader", ["spans", "entity"] + (["cross"] if cross_reread > 0 else []),
        _base_modules,
        {"encoder_name": encoder_name, "reader": "span",
         "settings": {"entity_pooling": entity_pooling, "span_threshold": span_threshold,
                      "max_spans": max_spans, "cross_reread": cross_reread,
                      "abbreviations": abbreviations, "mixed_precision": mixed_precision}})


def _base_modules(name: str, tokenizer: Any, attrs: dict[str, Any]
                  ) -> dict[str, torch.nn.Module]:
    settings = attrs["settings"]
    return base_span_reader_modules(name, len(tokenizer),
                                    entity_pooling=settings["entity_pooling"],
                                    with_cross=settings["cross_reread"] > 0)
