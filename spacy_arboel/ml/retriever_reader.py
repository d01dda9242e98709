"""The retriever-reader of EntQA / BEER² as a thinc model (``spacy_arboel.RetrieverReader.v1``).

Inputs are ``(op, *arrays)``:

- ``("passage", ids, mask)``: the passage encoder E_S's hidden states (B, L, H); the
  retriever's query is its [CLS] vector (BEER² eq. 1, 3) and span-based retrieval mean-pools
  the predicted spans' wordpieces (eq. 4);
- ``("read", ids, mask, type_ids)``: the reader over ``passage ⊕ entity`` pairs (eq. 6):
  start logits and end logits over the pair's positions (W1, W2 of eq. 7–8) and one rank
  logit per pair (W3 of eq. 10), as a tuple;
- ``("entity", ids, mask)``: the entity encoder E_E (eq. 2), pooled to one vector per row.

The reader shares E_S's weights when ``share_weights`` (BEER² §2.1.2); the EntQA pipeline
ablation gives it its own copy. The transformers are created lazily, when the component
initialises or loads, as in ``spacy_arboel.BiEncoder.v1``.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import torch
from spacy.util import registry
from thinc.api import ArgsKwargs, Model, PyTorchWrapper_v2, torch2xp, xp2torch

from ..encoders.loading import DEFAULT_ENCODER, load_transformer
from ..encoders.transformer import POOLINGS, PooledEncoder

QUERY_POOLINGS = ("cls", "mean")


class ReaderHeads(torch.nn.Module):
    """E_S with the reader's heads: W1/W2 (span start/end) and W3 (rank)."""

    def __init__(self, passage: torch.nn.Module, reader: torch.nn.Module | None = None) -> None:
        super().__init__()
        self.passage = passage
        self.reader = reader  # None: shared with the passage encoder (BEER²)
        hidden = passage.config.hidden_size
        self.span = torch.nn.Linear(hidden, 2)
        self.rank = torch.nn.Linear(hidden, 1)

    def forward(self, op: str, ids: torch.Tensor, mask: torch.Tensor,
                type_ids: torch.Tensor | None = None):
        if op == "passage":
            return self.passage(input_ids=ids, attention_mask=mask)[0]
        encoder = self.passage if self.reader is None else self.reader
        kwargs = {"token_type_ids": type_ids} if type_ids is not None else {}
        hidden = encoder(input_ids=ids, attention_mask=mask, **kwargs)[0]
        logits = self.span(hidden)
        # Rank from the pair's [CLS] vector (EntQA's choice; BEER² eq. 10 writes r_1).
        return logits[..., 0], logits[..., 1], self.rank(hidden[:, 0]).squeeze(-1)


@registry.architectures("spacy_arboel.RetrieverReader.v1")
def build_retriever_reader(
    encoder_name: str = DEFAULT_ENCODER,
    entity_pooling: str = "mean",
    query_pooling: str = "cls",
    share_weights: bool = True,
    mixed_precision: bool = False,
) -> Model:
    """Passage encoder + reader heads (shared transformer when ``share_weights``) and an
    entity encoder. ``query_pooling``: the passage query, [CLS] as BEER² eq. 3 or the mean
    over the passage; ``entity_pooling``: how entity rows are pooled (``mean`` matches an
    ``arbo_entity_linker`` trained with ``mention`` pooling, whose index can be reused)."""
    if entity_pooling not in POOLINGS:
        raise ValueError(f"Unknown entity_pooling '{entity_pooling}': use one of {POOLINGS}.")
    if query_pooling not in QUERY_POOLINGS:
        raise ValueError(f"Unknown query_pooling '{query_pooling}': use one of "
                         f"{QUERY_POOLINGS}.")
    return Model(
        "arbo_retriever_reader",
        forward,
        attrs={"encoder_name": encoder_name, "entity_pooling": entity_pooling,
               "query_pooling": query_pooling, "share_weights": share_weights,
               "mixed_precision": mixed_precision, "loaded": False},
    )


def forward(model: Model, inputs: tuple, is_train: bool):
    if not model.attrs["loaded"]:
        raise ValueError(
            "The retriever-reader has no weights yet: initialise the pipeline "
            "(`nlp.initialize()`) or load a trained one before using it."
        )
    layer = model.layers[1] if inputs[0] == "entity" else model.layers[0]
    return layer(inputs, is_train)


def _convert_inputs(model: Model, inputs: tuple, is_train: bool):
    op, *arrays = inputs
    device = model.shims[0].device if model.shims else None
    tensors = [xp2torch(model.ops.asarray(a, dtype="int64"), device=device) for a in arrays]
    if op == "entity":
        return ArgsKwargs(args=tuple(tensors), kwargs={}), lambda d_inputs: None
    return ArgsKwargs(args=(op, *tensors), kwargs={}), lambda d_inputs: None


def _convert_outputs(model: Model, inputs_outputs: tuple, is_train: bool):
    """Like thinc's default, but a tuple of outputs (the reader's) backpropagates as one
    ``torch.autograd.backward`` call over all of them."""
    _, outputs = inputs_outputs
    device = model.shims[0].device if model.shims else None
    single = isinstance(outputs, torch.Tensor)
    tensors = (outputs,) if single else tuple(outputs)
    converted = tuple(torch2xp(t) for t in tensors)

    def backprop(d_outputs) -> ArgsKwargs:
        grads = (d_outputs,) if single else tuple(d_outputs)
        grads = tuple(xp2torch(g, device=device) for g in grads)
        return ArgsKwargs(args=(tensors,), kwargs={"grad_tensors": grads})

    return (converted[0] if single else converted), backprop


def set_transformers(
    model: Model,
    passage: torch.nn.Module,
    entity: torch.nn.Module,
    reader: torch.nn.Module | None = None,
    heads: dict[str, torch.Tensor] | None = None,
) -> None:
    """Put loaded transformers into ``model``. ``reader`` is ignored when weights are shared
    and copied from ``passage`` when not given; ``heads``: a saved state of the heads."""
    if model.attrs["share_weights"]:
        reader = None
    elif reader is None:
        reader = copy.deepcopy(passage)
    module = ReaderHeads(passage, reader)
    if heads is not None:
        module.span.load_state_dict({k[5:]: v for k, v in heads.items() if k.startswith("span.")})
        module.rank.load_state_dict({k[5:]: v for k, v in heads.items() if k.startswith("rank.")})
    entity_encoder = PooledEncoder(entity, model.attrs["entity_pooling"])
    entity_encoder.requires_grad_(False)  # frozen: the index is built once (BENCHMARKS.md)
    mp = model.attrs["mixed_precision"]
    model._layers = [
        PyTorchWrapper_v2(module, convert_inputs=_convert_inputs,
                          convert_outputs=_convert_outputs, mixed_precision=mp),
        PyTorchWrapper_v2(entity_encoder, convert_inputs=_convert_inputs, mixed_precision=mp),
    ]
    model.attrs["loaded"] = True


def load_base(model: Model, vocab_size: int, source: str | Path | None = None) -> None:
    """Initialise every transformer from one base encoder (a name or a path)."""
    name = str(source or model.attrs["encoder_name"])
    passage = load_transformer(name, vocab_size)
    set_transformers(model, passage, load_transformer(name, vocab_size))


def torch_parts(model: Model) -> dict[str, Any]:
    """The PyTorch modules: ``heads`` (ReaderHeads: passage encoder, reader, heads) and
    ``entity`` (the pooled entity encoder)."""
    return {"heads": model.layers[0].shims[0]._model,
            "entity": model.layers[1].shims[0]._model}
