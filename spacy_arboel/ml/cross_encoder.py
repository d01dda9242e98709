"""BLINK's cross-encoder (§4.2) as a thinc model (``spacy_arboel.CrossEncoder.v1``).

Input: ``(input_ids, attention_mask, token_type_ids)`` of ``[CLS] mention context [SEP]
entity [SEP]`` pairs; output: one score per pair, s_cross(m, e) = y_{m,e} W (eq. 5–6) with
y the [CLS] vector. The transformer is created lazily, when the component initialises or
loads, as in ``spacy_arboel.BiEncoder.v1``.
"""

from __future__ import annotations

from pathlib import Path

import torch
from spacy.util import registry
from thinc.api import ArgsKwargs, Model, PyTorchWrapper_v2, xp2torch

from ..encoders.loading import DEFAULT_ENCODER, load_transformer


class CrossScorer(torch.nn.Module):
    """A transformer over (mention, entity) pairs and the linear layer W of eq. 6."""

    def __init__(self, transformer: torch.nn.Module) -> None:
        super().__init__()
        self.transformer = transformer
        self.score = torch.nn.Linear(transformer.config.hidden_size, 1)

    def forward(self, ids: torch.Tensor, mask: torch.Tensor,
                type_ids: torch.Tensor) -> torch.Tensor:
        hidden = self.transformer(input_ids=ids, attention_mask=mask, token_type_ids=type_ids)[0]
        return self.score(hidden[:, 0]).squeeze(-1)


@registry.architectures("spacy_arboel.CrossEncoder.v1")
def build_cross_encoder(encoder_name: str = DEFAULT_ENCODER,
                        mixed_precision: bool = False) -> Model:
    """One transformer over the concatenated mention and entity, scored from its [CLS]."""
    return Model("arbo_cross_encoder", forward,
                 attrs={"encoder_name": encoder_name, "mixed_precision": mixed_precision,
                        "loaded": False})


def forward(model: Model, inputs: tuple, is_train: bool):
    if not model.attrs["loaded"]:
        raise ValueError(
            "The cross-encoder has no weights yet: initialise the pipeline "
            "(`nlp.initialize()`) or load a trained one before using it."
        )
    return model.layers[0](inputs, is_train)


def _convert_inputs(model: Model, inputs: tuple, is_train: bool):
    device = model.shims[0].device if model.shims else None
    tensors = [xp2torch(model.ops.asarray(a, dtype="int64"), device=device) for a in inputs]
    return ArgsKwargs(args=tuple(tensors), kwargs={}), lambda d_inputs: None


def set_cross_encoder(model: Model, source: str | Path, vocab_size: int,
                      head: dict[str, torch.Tensor] | None = None) -> None:
    """Load the transformer (a name or a saved folder) and, if given, the saved head W."""
    scorer = CrossScorer(load_transformer(str(source), vocab_size))
    if head is not None:
        scorer.score.load_state_dict(head)
    model._layers = [PyTorchWrapper_v2(scorer, convert_inputs=_convert_inputs,
                                       mixed_precision=model.attrs["mixed_precision"])]
    model.attrs["loaded"] = True


def torch_scorer(model: Model) -> CrossScorer:
    return model.layers[0].shims[0]._model
