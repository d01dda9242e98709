"""The bi-encoder as a thinc model (``spacy_arboel.BiEncoder.v1``).

Input: ``(side, input_ids, attention_mask)`` with side ``"mention"`` or ``"entity"``;
output: one vector per row. The two PyTorch encoders sit behind thinc's PyTorch shim
(as in spacy-transformers) and are created lazily, when the component initialises or loads,
so that loading a saved pipeline never touches the base weights.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from spacy.util import registry
from thinc.api import ArgsKwargs, Model, PyTorchWrapper_v2, xp2torch
from thinc.types import Floats2d

from ..encoders.loading import DEFAULT_ENCODER, load_transformer
from ..encoders.transformer import POOLINGS, PooledEncoder
from ..encoders.weights import quantized_copy, weights_fingerprint  # noqa: F401 (re-exported)

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
        raise ValueError(f"Unknown pooling '{pooling}': use one of {POOLINGS}.")
    return Model(
        "arbo_bi_encoder",
        forward,
        attrs={
            "encoder_name": encoder_name,
            "pooling": pooling,
            "share_weights": share_weights,
            "mixed_precision": mixed_precision,
            "loaded": False,
        },
    )


def forward(model: Model, inputs: BiEncoderInput, is_train: bool):
    side, ids, mask = inputs
    if not model.attrs["loaded"]:
        raise ValueError(
            "The bi-encoder has no weights yet: initialise the pipeline (`nlp.initialize()`) "
            "or load a trained one before using it."
        )
    layer = model.layers[0] if model.attrs["share_weights"] else model.layers[SIDES.index(side)]
    return layer((ids, mask), is_train)


def _convert_inputs(model: Model, inputs: tuple[np.ndarray, np.ndarray], is_train: bool):
    ids, mask = inputs
    device = model.shims[0].device if model.shims else None
    args = [xp2torch(model.ops.asarray(a, dtype="int64"), device=device) for a in (ids, mask)]
    return ArgsKwargs(args=tuple(args), kwargs={}), lambda d_inputs: None


def set_encoders(
    model: Model,
    sources: dict[str, str | Path],
    vocab_size: int,
    marker_ids: tuple[int, int] | None = None,
) -> None:
    """Load the transformer weights (a name, or one saved directory per side) into ``model``.

    ``marker_ids``: the [START] and [END] token ids, needed by ``mention`` pooling.
    """
    layers = []
    sides = SIDES[:1] if model.attrs["share_weights"] else SIDES
    for side in sides:
        transformer = load_transformer(str(sources[side]), vocab_size)
        encoder = PooledEncoder(transformer, model.attrs["pooling"], marker_ids)
        layers.append(
            PyTorchWrapper_v2(
                encoder,
                convert_inputs=_convert_inputs,
                mixed_precision=model.attrs["mixed_precision"],
            )
        )
    model._layers = layers
    model.attrs["loaded"] = True


def torch_encoders(model: Model) -> dict[str, Any]:
    """The PyTorch ``PooledEncoder`` per side (the same object twice when weights are shared)."""
    modules = [layer.shims[0]._model for layer in model.layers]
    if model.attrs["share_weights"]:
        return {side: modules[0] for side in SIDES}
    return dict(zip(SIDES, modules, strict=True))


def quantized_encoders(model: Model) -> dict[str, Any]:
    """int8 dynamic-quantised copies of the encoders, for fast CPU inference only.

    The thinc model keeps its float weights (for training and saving); the copies are what
    ``quantize = true`` links with. Quantisation changes scores slightly.
    """
    quantized = {}
    for side, module in torch_encoders(model).items():
        if side not in quantized:
            quantized[side] = quantized_copy(module)
    if model.attrs["share_weights"]:
        quantized["entity"] = quantized["mention"]
    return quantized
