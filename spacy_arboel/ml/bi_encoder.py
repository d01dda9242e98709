"""The bi-encoder as a thinc model (``spacy_arboel.BiEncoder.v1``).

Input: ``(side, input_ids, attention_mask)`` with side ``"mention"`` or ``"entity"``;
output: one vector per row. The two PyTorch encoders sit behind thinc's PyTorch shim
(as in spacy-transformers) and their weights load in the model's ``init``
(``spacy_arboel.ml.torch_layers``), so that building the model never touches them.
"""

from __future__ import annotations

from functools import partial

import numpy as np
import torch
from spacy.util import registry
from thinc.api import ArgsKwargs, Model, xp2torch
from thinc.types import Floats2d

from ..encoders.inputs import InputBuilder
from ..encoders.loading import DEFAULT_ENCODER, load_tokenizer
from ..encoders.transformer import POOLINGS, PooledEncoder, load_pooled_encoders
from ..errors import Errors
from .torch_layers import init_modules, is_loaded, shim_device, torch_layer, torch_modules

SIDES = ("mention", "entity")
BiEncoderInput = tuple[str, np.ndarray, np.ndarray]


@registry.architectures("spacy_arboel.BiEncoder.v1")
def build_bi_encoder(
    encoder_name: str = DEFAULT_ENCODER,
    pooling: str = "cls",
    share_weights: bool = False,
    mixed_precision: bool = False,
) -> Model[BiEncoderInput, Floats2d]:
    """Separate mention and entity transformers (BLINK), or one shared if ``share_weights``."""
    if pooling not in POOLINGS:
        raise ValueError(Errors.E007.format(what="pooling", value=pooling,
                                            options=", ".join(POOLINGS)))
    sides = SIDES[:1] if share_weights else SIDES
    return Model(
        "arbo_bi_encoder",
        forward,
        init=init,
        layers=[torch_layer(_convert_inputs, mixed_precision=mixed_precision) for _ in sides],
        attrs={"encoder_name": encoder_name, "pooling": pooling,
               "share_weights": share_weights, "mixed_precision": mixed_precision,
               "layer_names": list(sides)},
    )


def init(model: Model, X=None, Y=None) -> None:
    """Load the encoders given to ``initialize_with``, else the base ``encoder_name``."""
    init_modules(model, partial(base_encoders, model))


def base_encoders(model: Model) -> dict[str, PooledEncoder]:
    """Untrained encoders from ``encoder_name``, sized to its tokenizer with our markers."""
    name = model.attrs["encoder_name"]
    tokenizer = load_tokenizer(name)
    return load_pooled_encoders({side: name for side in SIDES}, model.attrs["pooling"],
                                model.attrs["share_weights"], len(tokenizer),
                                InputBuilder(tokenizer).marker_ids)


def forward(model: Model, inputs: BiEncoderInput, is_train: bool):
    side, ids, mask = inputs
    if not is_loaded(model):
        raise ValueError(Errors.E057)
    layer = model.layers[0] if model.attrs["share_weights"] else model.layers[SIDES.index(side)]
    return layer((ids, mask), is_train)


def _convert_inputs(model: Model, inputs: tuple[np.ndarray, np.ndarray], is_train: bool):
    device = shim_device(model)
    args = [xp2torch(model.ops.asarray(a, dtype="int64"), device=device) for a in inputs]
    return ArgsKwargs(args=tuple(args), kwargs={}), lambda d_inputs: None


def torch_encoders(model: Model) -> dict[str, torch.nn.Module]:
    """The PyTorch ``PooledEncoder`` per side (the same object twice when weights are shared)."""
    modules = torch_modules(model)
    return {side: modules.get(side, modules["mention"]) for side in SIDES}
