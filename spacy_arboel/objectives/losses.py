"""Losses over per-mention candidate lists whose column 0 is the positive."""

from __future__ import annotations

import torch

LOSSES = ("softmax", "edge")


def candidate_scores(
    queries: torch.Tensor, nodes: torch.Tensor, candidates: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Dot-product scores of each query with its candidate nodes; padding (-1) is masked.

    ``queries`` (B, d), ``nodes`` (N, d), ``candidates`` (B, C) indices into ``nodes``.
    Returns scores (B, C) with -inf at padding, and the padding mask.
    """
    valid = candidates >= 0
    gathered = nodes[candidates.clamp(min=0)]  # (B, C, d)
    scores = torch.einsum("bd,bcd->bc", queries, gathered)
    return scores.masked_fill(~valid, float("-inf")), valid


def softmax_loss(scores: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """Cross-entropy with the positive in column 0 (BLINK eq. 4)."""
    return -(scores.log_softmax(dim=-1)[:, 0]).mean()


def edge_loss(scores: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """arboEL eq. (6): log σ of the positive edge plus log(1 − σ) of each negative edge.

    σ is the softmax over all incoming edges of the mention. The paper writes the edge
    weights w = −affinity; the softmax is taken over affinities (higher = closer), which is
    what makes maximising the positive edge's likelihood pull its endpoints together.
    """
    log_p = scores.log_softmax(dim=-1)
    positive = log_p[:, 0]
    # log(1 - p) computed stably from log p; padding contributes nothing.
    negatives = torch.log1p(-log_p[:, 1:].exp().clamp(max=1 - 1e-6))
    negatives = negatives.masked_fill(~valid[:, 1:], 0.0).sum(dim=-1)
    return -(positive + negatives).mean()


def get_loss(name: str):
    if name == "softmax":
        return softmax_loss
    if name == "edge":
        return edge_loss
    raise ValueError(f"Unknown loss '{name}': use one of {LOSSES}.")
