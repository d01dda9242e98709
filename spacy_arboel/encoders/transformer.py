"""The PyTorch side of the bi-encoder: a transformer with a pooling head."""

from __future__ import annotations

import copy
from pathlib import Path

import torch

from ..errors import Errors
from .loading import load_transformer

POOLINGS = ("cls", "mean", "mention")


class PooledEncoder(torch.nn.Module):
    """Encodes padded wordpiece ids to one vector per row.

    ``cls``: the [CLS] vector (BLINK §3.1). ``mean``: the mean over all wordpieces.
    ``mention``: the mean over the marked span ``[START] … [END]`` where the row has one
    (mention inputs), else over all wordpieces (entity inputs) — BEER²'s mean-pooled span
    representation (eq. 3), our CPU-friendly default for small encoders (see BENCHMARKS.md).
    """

    def __init__(
        self,
        transformer: torch.nn.Module,
        pooling: str = "cls",
        marker_ids: tuple[int, int] | None = None,
    ) -> None:
        super().__init__()
        if pooling not in POOLINGS:
            raise ValueError(Errors.E007.format(what="pooling", value=pooling,
                                                options=", ".join(POOLINGS)))
        if pooling == "mention" and marker_ids is None:
            raise ValueError(Errors.E109.format(
                options=", ".join(p for p in POOLINGS if p != "mention")))
        self.transformer = transformer
        self.pooling = pooling
        self.marker_ids = marker_ids

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        hidden = self.transformer(input_ids=input_ids, attention_mask=attention_mask)[0]
        if self.pooling == "cls":
            return hidden[:, 0]
        mask = attention_mask
        if self.pooling == "mention":
            start_id, end_id = self.marker_ids
            is_end = (input_ids == end_id).long()
            started = (input_ids == start_id).long().cumsum(1) > 0
            ended = (is_end.cumsum(1) - is_end) > 0
            span = (started & ~ended).long()
            has_span = span.sum(1, keepdim=True) > 0
            mask = torch.where(has_span, span, attention_mask)
        mask = mask.unsqueeze(-1).to(hidden.dtype)
        return (hidden * mask).sum(1) / mask.sum(1).clamp(min=1.0)


def load_pooled_encoders(
    sources: dict[str, str | Path], pooling: str, share_weights: bool, vocab_size: int,
    marker_ids: tuple[int, int] | None = None,
) -> dict[str, PooledEncoder]:
    """The mention and entity ``PooledEncoder`` from a name or saved folder per side (one
    module for both sides when ``share_weights``); ``marker_ids``: [START] and [END]."""
    sides = ("mention",) if share_weights else ("mention", "entity")
    encoders = {side: PooledEncoder(load_transformer(str(sources[side]), vocab_size), pooling,
                                    marker_ids) for side in sides}
    if share_weights:
        encoders["entity"] = encoders["mention"]
    return encoders


def bf16_copy(encoder: PooledEncoder) -> PooledEncoder:
    """A bfloat16 copy of ``encoder`` for inference on a CPU with native bfloat16
    (``weights.runs_bf16``), with transformers' plain ("eager") attention: PyTorch's fused
    CPU attention is 2-3x slower on names' short sequences. The float32 encoder keeps
    training and saving. On the 2-core AMD EPYC of BENCHMARKS.md MiniLM-L6 embeds KB names
    1.7-1.9x faster than in float32, each vector within cosine 0.9998 of float32's
    (BENCHMARKS.md, issue 43)."""
    from transformers import AutoModel

    source = encoder.transformer
    with torch.random.fork_rng(devices=[]):  # its throwaway initial weights draw numbers
        transformer = AutoModel.from_config(copy.deepcopy(source.config),
                                            attn_implementation="eager")
    transformer.load_state_dict(source.state_dict())
    return PooledEncoder(transformer.to(dtype=torch.bfloat16), encoder.pooling,
                         encoder.marker_ids).eval()
