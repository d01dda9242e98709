"""Losses over per-mention candidate lists whose column 0 is the positive."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from ..errors import Errors

LOSSES = ("softmax", "edge")  # the others (proxy, distill) are computed by their objectives
SIMILARITIES = ("dot", "cosine")


def candidate_scores(
    queries: torch.Tensor, nodes: torch.Tensor, candidates: torch.Tensor,
    similarity: str = "dot", scale: float = 1.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Scores of each query with its candidate nodes; padding (-1) is masked.

    ``queries`` (B, d), ``nodes`` (N, d), ``candidates`` (B, C) indices into ``nodes``;
    ``similarity``: ``dot`` (BLINK) or ``cosine`` (PEL's proxy loss); ``scale`` multiplies
    the scores (the softmax temperature of a cosine, as sentence-transformers train).
    Returns scores (B, C) with -inf at padding, and the padding mask.
    """
    if similarity not in SIMILARITIES:
        raise ValueError(Errors.E007.format(what="similarity", value=similarity,
                                            options=", ".join(SIMILARITIES)))
    if similarity == "cosine":
        queries = torch.nn.functional.normalize(queries, dim=-1)
        nodes = torch.nn.functional.normalize(nodes, dim=-1)
    valid = candidates >= 0
    gathered = nodes[candidates.clamp(min=0)]  # (B, C, d)
    scores = torch.einsum("bd,bcd->bc", queries, gathered) * scale
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


def proxy_loss(scores: torch.Tensor, valid: torch.Tensor, alpha: float = 32.0,
               margin: float = 0.0) -> torch.Tensor:
    """PEL eq. (3): softplus(−α(s⁺ − δ)) + log(1 + Σ_{e⁻} exp(α(s⁻ + δ))), positive in
    column 0, scores ``s`` cosine similarities; the positive and negative terms are decoupled,
    so negatives are pushed to low absolute scores (what makes NIL thresholds work)."""
    positive = torch.nn.functional.softplus(-alpha * (scores[:, 0] - margin))
    negatives = (alpha * (scores[:, 1:] + margin)).masked_fill(~valid[:, 1:], float("-inf"))
    zero = torch.zeros_like(positive)[:, None]
    negative = torch.logsumexp(torch.cat([zero, negatives], dim=1), dim=1)  # log(1 + Σ e^x)
    return (positive + negative).mean()


def distillation_loss(scores: torch.Tensor, valid: torch.Tensor, teacher: torch.Tensor,
                      temperature: float = 2.0, alpha: float = 0.5) -> torch.Tensor:
    """BLINK eq. (8–10): α·H(e, σ(z_s; 1)) + (1 − α)·H(σ(z_t; T), σ(z_s; T)) with the gold
    in column 0; ``teacher`` holds the cross-encoder's logits z_t for the same candidates
    (padding is ignored). As in the paper, the soft term is not rescaled by T²."""
    student = -(scores.log_softmax(dim=-1)[:, 0])
    log_q = (scores / temperature).log_softmax(dim=-1)
    p = (teacher.masked_fill(~valid, float("-inf")) / temperature).softmax(dim=-1)
    soft = -(p * log_q.masked_fill(~valid, 0.0)).sum(dim=-1)
    return (alpha * student + (1 - alpha) * soft).mean()


def get_loss(name: str):
    if name == "softmax":
        return softmax_loss
    if name == "edge":
        return edge_loss
    raise ValueError(Errors.E007.format(what="loss", value=name, options=", ".join(LOSSES)))


def ranked_candidate_loss(scores: Sequence[np.ndarray], gold: Sequence[int | None]
                          ) -> tuple[float, list[np.ndarray]]:
    """BLINK's softmax cross-entropy (eq. 4) of each mention's gold column among its scored
    candidates, as predicted (no gradient through an encoder): the mean loss over the mentions
    whose gold entity is among their candidates, and d loss / d scores per mention (softmax
    minus one-hot; zero where the gold is missing). ``-inf`` scores are padding."""
    grads, losses = [], []
    for row, target in zip(scores, gold, strict=True):
        row = np.asarray(row, dtype="float64")
        grad = np.zeros_like(row)
        finite = np.isfinite(row)
        if target is not None and finite[target]:
            shifted = np.where(finite, row - row[finite].max(), -np.inf)
            probs = np.exp(shifted) / np.exp(shifted).sum()
            losses.append(-np.log(max(probs[target], 1e-30)))
            grad = probs
            grad[target] -= 1.0
        grads.append(grad.astype("float32"))
    n = len(losses)
    return (float(np.mean(losses)) if n else 0.0), [g / max(n, 1) for g in grads]
