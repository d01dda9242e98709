"""The training losses of BEER² (§2.3): the retriever's NCE (eq. 13) and the reader's span and
rank likelihood (eq. 14); the joint loss is their sum (eq. 15)."""

from __future__ import annotations

from collections.abc import Sequence

import torch


def retriever_loss(scores: torch.Tensor, positive: torch.Tensor,
                   valid: torch.Tensor | None = None) -> torch.Tensor:
    """Eq. 13: for each gold entity g of a passage, −log(e^{Q(t,g)} / (e^{Q(t,g)} +
    Σ_n e^{Q(t,n)})) over the passage's negatives n, averaged over the gold entities.

    ``scores`` (P, C): Q(t, e) of each passage's candidates; ``positive`` (P, C): gold;
    ``valid`` (P, C): False at padding."""
    if valid is None:
        valid = torch.ones_like(positive)
    negatives = scores.masked_fill(positive | ~valid, float("-inf"))
    negative_mass = torch.logsumexp(negatives, dim=1, keepdim=True)
    per_entity = torch.logaddexp(scores, negative_mass) - scores
    mask = positive & valid
    if not mask.any():
        return scores.sum() * 0.0
    return per_entity[mask].mean()


def reader_loss(
    start_logits: torch.Tensor,
    end_logits: torch.Tensor,
    rank_logits: torch.Tensor,
    allowed: torch.Tensor,
    targets: Sequence[Sequence[tuple[int, int]]],
) -> torch.Tensor:
    """Eq. 14: −log p_span of each gold span of each candidate, and −log p_rank of each gold
    candidate (softmax over its passage's K candidates).

    ``start_logits``/``end_logits`` (P, K, L); ``rank_logits`` (P, K); ``allowed`` (P, K, L):
    the positions a span may start or end at ([CLS] and the passage's wordpieces);
    ``targets[p * K + k]``: the gold (start, end) pair positions of candidate k in passage
    p — empty for a wrong candidate, whose target is [CLS] (0, 0), EntQA's "no span"."""
    n_passages, n_candidates, _ = start_logits.shape
    log_p1 = start_logits.masked_fill(~allowed, float("-inf")).log_softmax(-1)
    log_p2 = end_logits.masked_fill(~allowed, float("-inf")).log_softmax(-1)
    pair, xs, ys = [], [], []
    gold = torch.zeros(n_passages, n_candidates, dtype=torch.bool, device=rank_logits.device)
    for index, spans in enumerate(targets):
        p, k = divmod(index, n_candidates)
        for x, y in spans or [(0, 0)]:
            pair.append(index)
            xs.append(x)
            ys.append(y)
        if spans:
            gold[p, k] = True
    device = start_logits.device
    pair_t = torch.tensor(pair, device=device)
    flat_p1 = log_p1.reshape(n_passages * n_candidates, -1)
    flat_p2 = log_p2.reshape(n_passages * n_candidates, -1)
    span = -(flat_p1[pair_t, torch.tensor(xs, device=device)]
             + flat_p2[pair_t, torch.tensor(ys, device=device)]).mean()
    has_gold = gold.any(dim=1)
    if not has_gold.any():
        return span
    log_rank = rank_logits.log_softmax(-1)
    rank = -(log_rank * gold).sum(1)[has_gold] / gold.sum(1)[has_gold]
    return span + rank.mean()
