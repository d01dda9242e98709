"""BLINK's cross-encoder (§4.2) as a thinc model (``spacy_arboel.CrossEncoder.v1``).

Input: ``(input_ids, attention_mask, token_type_ids)`` of ``[CLS] mention context [SEP]
entity [SEP]`` pairs; output: one score per pair, s_cross(m, e) = y_{m,e} W (eq. 5–6) with
y the [CLS] vector: the PyTorch ``CrossScorer`` of ``spacy_arboel.encoders.cross_scorer``.
The weights load in the model's ``init`` (``spacy_arboel.ml.torch_layers``), as in
``spacy_arboel.BiEncoder.v1``.
"""

from __future__ import annotations

from functools import partial

from spacy.util import registry
from thinc.api import ArgsKwargs, Model, xp2torch

from ..encoders.cross_scorer import CrossScorer, load_scorer
from ..encoders.loading import DEFAULT_ENCODER, load_tokenizer
from ..errors import Errors
from .torch_layers import init_modules, is_loaded, shim_device, torch_layer, torch_modules


@registry.architectures("spacy_arboel.CrossEncoder.v1")
def build_cross_encoder(encoder_name: str = DEFAULT_ENCODER,
                        mixed_precision: bool = False) -> Model:
    """One transformer over the concatenated mention and entity, scored from its [CLS]."""
    return Model("arbo_cross_encoder", forward, init=init,
                 layers=[torch_layer(_convert_inputs, mixed_precision=mixed_precision)],
                 attrs={"encoder_name": encoder_name, "mixed_precision": mixed_precision,
                        "layer_names": ["scorer"]})


def init(model: Model, X=None, Y=None) -> None:
    """Load the scorer given to ``initialize_with`` (``load_scorer``), else the base
    ``encoder_name`` with a new head."""
    init_modules(model, partial(_base_scorer, model))


def _base_scorer(model: Model) -> dict[str, CrossScorer]:
    name = model.attrs["encoder_name"]
    return {"scorer": load_scorer(name, len(load_tokenizer(name)))}


def forward(model: Model, inputs: tuple, is_train: bool):
    if not is_loaded(model):
        raise ValueError(Errors.E057)
    return model.layers[0](inputs, is_train)


def _convert_inputs(model: Model, inputs: tuple, is_train: bool):
    device = shim_device(model)
    tensors = [xp2torch(model.ops.asarray(a, dtype="int64"), device=device) for a in inputs]
    return ArgsKwargs(args=tuple(tensors), kwargs={}), lambda d_inputs: None


def torch_scorer(model: Model) -> CrossScorer:
    return torch_modules(model)["scorer"]
