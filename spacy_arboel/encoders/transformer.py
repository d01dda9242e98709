"""The PyTorch side of the bi-encoder: a transformer with a pooling head."""

from __future__ import annotations

import torch

POOLINGS = ("cls", "mean")


class PooledEncoder(torch.nn.Module):
    """Encodes padded wordpiece ids to one vector per row ([CLS] or mean pooling, BLINK §3.1)."""

    def __init__(self, transformer: torch.nn.Module, pooling: str = "cls") -> None:
        super().__init__()
        if pooling not in POOLINGS:
            raise ValueError(f"Unknown pooling '{pooling}': use one of {POOLINGS}.")
        self.transformer = transformer
        self.pooling = pooling

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        hidden = self.transformer(input_ids=input_ids, attention_mask=attention_mask)[0]
        if self.pooling == "cls":
            return hidden[:, 0]
        mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
        return (hidden * mask).sum(1) / mask.sum(1).clamp(min=1.0)
