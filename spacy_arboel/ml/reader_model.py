"""The retriever-reader of EntQA / BEER² as a thinc model (``spacy_arboel.RetrieverReader.v1``).

Two layers: ``heads`` (``ReaderHeads``: the passage encoder E_S, the reader and its heads) and
``entity`` (the pooled entity encoder E_E, eq. 2). Their weights load in the model's ``init``
(``spacy_arboel.ml.torch_layers``), as in ``spacy_arboel.BiEncoder.v1``; the linking core
(``spacy_arboel.linking.RetrieverReader``) runs the PyTorch modules, and the thinc model
carries them through spaCy's training loop (optimizer, device) and serialisation.
"""

from __future__ import annotations

import torch
from spacy.util import registry
from thinc.api import ArgsKwargs, Model, xp2torch

from ..encoders.loading import DEFAULT_ENCODER
from ..encoders.reader_heads import ENTITY_POOLINGS, QUERY_POOLINGS, base_reader_modules
from ..errors import Errors
from .torch_layers import init_from_base, is_loaded, shim_device, torch_layer, torch_modules


@registry.architectures("spacy_arboel.RetrieverReader.v1")
def build_retriever_reader(
    encoder_name: str = DEFAULT_ENCODER,
    entity_pooling: str = "mean",
    query_pooling: str = "cls",
    share_weights: bool = True,
    mode: str = "joint",
    warmup_retriever_steps: int = 50,
    warmup_reader_steps: int = 50,
    span_retrieval: bool = True,
    empty_passage_rate: float = 1.0,
    mixed_precision: bool = False,
) -> Model:
    """Passage encoder + reader heads (shared transformer when ``share_weights``) and an
    entity encoder. ``query_pooling``: the passage query, [CLS] as BEER² eq. 3 or the mean
    over the passage; ``entity_pooling``: how entity rows are pooled (``mean`` matches an
    ``arbo_entity_linker`` trained with ``mention`` pooling, whose index can be reused).
    ``mode``, the warm-ups, ``span_retrieval`` and ``empty_passage_rate``: how it trains and
    reads (``spacy_arboel.linking.ReaderSettings``)."""
    for what, value, options in (("entity_pooling", entity_pooling, ENTITY_POOLINGS),
                                 ("query_pooling", query_pooling, QUERY_POOLINGS)):
        if value not in options:
            raise ValueError(Errors.E007.format(what=what, value=value,
                                                options=", ".join(options)))
    return Model(
        "arbo_retriever_reader", forward, init=init_from_base(_base_modules),
        layers=[torch_layer(_convert_inputs, mixed_precision=mixed_precision),
                torch_layer(_convert_inputs, mixed_precision=mixed_precision)],
        attrs={"encoder_name": encoder_name, "reader": "passage",
               "layer_names": ["heads", "entity"],
               "settings": {"entity_pooling": entity_pooling, "query_pooling": query_pooling,
                            "share_weights": share_weights, "mode": mode,
                            "warmup_retriever_steps": warmup_retriever_steps,
                            "warmup_reader_steps": warmup_reader_steps,
                            "span_retrieval": span_retrieval,
                            "empty_passage_rate": empty_passage_rate,
                            "mixed_precision": mixed_precision}},
    )


def forward(model: Model, inputs: tuple, is_train: bool):
    """``(op, *arrays)`` with op ``passage``, ``read`` (the heads) or ``entity``."""
    if not is_loaded(model):
        raise ValueError(Errors.E057)
    layer = model.layers[1] if inputs[0] == "entity" else model.layers[0]
    return layer(inputs, is_train)


def _convert_inputs(model: Model, inputs: tuple, is_train: bool):
    op, *arrays = inputs
    device = shim_device(model)
    tensors = [xp2torch(model.ops.asarray(a, dtype="int64"), device=device) for a in arrays]
    args = tuple(tensors) if op == "entity" else (op, *tensors)
    return ArgsKwargs(args=args, kwargs={}), lambda d_inputs: None


def torch_parts(model: Model) -> dict[str, torch.nn.Module]:
    """The PyTorch modules: ``heads`` and ``entity``."""
    return torch_modules(model)


def _base_modules(name: str, vocab_size: int, settings: dict) -> dict[str, torch.nn.Module]:
    return base_reader_modules(name, vocab_size, share_weights=settings["share_weights"],
                               entity_pooling=settings["entity_pooling"])
