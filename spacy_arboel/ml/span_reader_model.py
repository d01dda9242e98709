"""The one-pass span reader (ELQ) as a thinc model (``spacy_arboel.SpanReader.v1``).

Layers ``spans`` (``MentionHeads``: the passage encoder and its mention-boundary heads),
``entity`` (the pooled, frozen entity encoder) and, with ``cross_reread``, ``cross`` (the
cross reader). Their weights load in the model's ``init`` (``spacy_arboel.ml.torch_layers``);
the linking core (``spacy_arboel.linking.SpanReader``) runs the PyTorch modules, and the
thinc model carries them through spaCy's training loop (optimizer, device) and serialisation.
"""

from __future__ import annotations

import torch
from spacy.util import registry
from thinc.api import ArgsKwargs, Model, xp2torch

from ..encoders.loading import DEFAULT_ENCODER
from ..encoders.reader_heads import ENTITY_POOLINGS
from ..encoders.span_heads import base_span_reader_modules
from ..errors import Errors
from .torch_layers import init_from_base, is_loaded, shim_device, torch_layer

OP_LAYERS = {"spans": "spans", "entity": "entity", "read": "cross"}


@registry.architectures("spacy_arboel.SpanReader.v1")
def build_span_reader(
    encoder_name: str = DEFAULT_ENCODER,
    entity_pooling: str = "mean",
    span_threshold: float = 0.05,
    max_spans: int = 64,
    cross_reread: int = 0,
    abbreviations: bool = True,
    mixed_precision: bool = False,
) -> Model:
    """A passage encoder with ELQ's mention heads, an entity encoder and, when
    ``cross_reread`` > 0, a cross reader that re-reads that many candidates of each span.
    ``span_threshold``: the p(m) a span needs to retrieve candidates, at most ``max_spans``
    per passage; ``abbreviations``: a short form the text defines is linked through its long
    form's link; ``entity_pooling``: ``mean`` matches an ``arbo_entity_linker`` trained with
    ``mention`` pooling, whose index is then reused."""
    if entity_pooling not in ENTITY_POOLINGS:
        raise ValueError(Errors.E007.format(what="entity_pooling", value=entity_pooling,
                                            options=", ".join(ENTITY_POOLINGS)))
    names = ["spans", "entity"] + (["cross"] if cross_reread > 0 else [])
    return Model(
        "arbo_span_reader", forward, init=init_from_base(_base_modules),
        layers=[torch_layer(_convert_inputs, mixed_precision=mixed_precision) for _ in names],
        attrs={"encoder_name": encoder_name, "reader": "span", "layer_names": names,
               "settings": {"entity_pooling": entity_pooling, "span_threshold": span_threshold,
                            "max_spans": max_spans, "cross_reread": cross_reread,
                            "abbreviations": abbreviations,
                            "mixed_precision": mixed_precision}},
    )


def forward(model: Model, inputs: tuple, is_train: bool):
    """``(op, *arrays)`` with op ``spans``, ``entity`` or ``read`` (the cross reader)."""
    if not is_loaded(model):
        raise ValueError(Errors.E057)
    name = OP_LAYERS[inputs[0]]
    if name not in model.attrs["layer_names"]:
        raise ValueError(Errors.E027.format(n=model.attrs["settings"]["cross_reread"]))
    return model.layers[model.attrs["layer_names"].index(name)](inputs, is_train)


def _convert_inputs(model: Model, inputs: tuple, is_train: bool):
    op, *arrays = inputs
    device = shim_device(model)
    tensors = [xp2torch(model.ops.asarray(a, dtype="int64"), device=device) for a in arrays]
    args = tuple(tensors) if op in ("entity", "spans") else (op, *tensors)
    return ArgsKwargs(args=args, kwargs={}), lambda d_inputs: None


def _base_modules(name: str, vocab_size: int, settings: dict) -> dict[str, torch.nn.Module]:
    return base_span_reader_modules(name, vocab_size, entity_pooling=settings["entity_pooling"],
                                    with_cross=settings["cross_reread"] > 0)
