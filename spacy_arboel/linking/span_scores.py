"""Span scores of the one-pass reader (ELQ, Li et al. 2020, §3.2–3.3), in torch.

All spans of up to ``max_width`` wordpieces of a passage are scored from one encoder pass:
(B, L, W) arrays whose entry [b, i, w] is the span of pieces i .. i + w of passage b.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
import torch.nn.functional as F
from scipy.special import softmax


def span_grid(n_pieces: int, max_width: int) -> tuple[torch.Tensor, torch.Tensor]:
    """First and last piece (L, W) of every span of width 1 .. ``max_width``."""
    firsts = torch.arange(n_pieces)[:, None].expand(n_pieces, max_width)
    return firsts, firsts + torch.arange(max_width)[None, :]


def span_logits(start: torch.Tensor, end: torch.Tensor, inside: torch.Tensor,
                n_pieces: torch.Tensor, max_width: int) -> torch.Tensor:
    """ELQ eq. 2: s(i, j) = start_i + end_j + Σ_{t=i..j} inside_t, for every span of at most
    ``max_width`` pieces; -inf where a span runs past its passage (``n_pieces``, (B,)).
    ``start``/``end``/``inside``: (B, L) logits over the passages' pieces."""
    batch, length = start.shape
    firsts, lasts = span_grid(length, max_width)
    lasts_in = lasts.clamp(max=length - 1)
    running = F.pad(torch.cumsum(inside, dim=1), (1, 0))  # running[:, k] = Σ inside[:, :k]
    logits = (start[:, firsts] + end[:, lasts_in] + running[:, lasts_in + 1]
              - running[:, firsts])
    valid = lasts[None] < n_pieces.to(lasts.device)[:, None, None]
    return logits.masked_fill(~valid, float("-inf"))


def continues_word(text: str, starts: Sequence[int], ends: Sequence[int]) -> list[bool]:
    """Per wordpiece, whether it continues the word of the previous one (no gap between them,
    letters or digits on both sides): a span neither starts nor ends inside a word."""
    return [i > 0 and starts[i] == ends[i - 1] and text[starts[i] - 1].isalnum()
            and text[starts[i]].isalnum() for i in range(len(starts))]


def whole_word_spans(continues: torch.Tensor, max_width: int) -> torch.Tensor:
    """(B, L, W): spans that start at a word's first piece and end at a word's last piece.
    ``continues``: (B, L), True where a piece continues the previous piece's word."""
    batch, length = continues.shape
    firsts, lasts = span_grid(length, max_width)
    following = F.pad(continues, (0, 1))  # the piece after the last one never continues
    return ~continues[:, firsts] & ~following[:, (lasts + 1).clamp(max=length)]


def span_vectors(hidden: torch.Tensor, rows: torch.Tensor, firsts: torch.Tensor,
                 lasts: torch.Tensor) -> torch.Tensor:
    """The mean of the hidden states of pieces ``firsts .. lasts`` of passage ``rows`` (ELQ's
    averaged span embedding; BEER² eq. 4 for one span). ``hidden``: (B, L, H)."""
    running = F.pad(torch.cumsum(hidden, dim=1), (0, 0, 1, 0))
    total = running[rows, lasts + 1] - running[rows, firsts]
    return total / (lasts - firsts + 1).to(hidden.dtype)[:, None]


def mention_loss(logits: torch.Tensor, positive: torch.Tensor,
                 ignore: torch.Tensor) -> torch.Tensor:
    """ELQ eq. 3: binary cross-entropy of p(m) = σ(s) over every valid span that is not
    ``ignore``d (a gold mention without a KB entity), gold spans ``positive``."""
    use = torch.isfinite(logits) & ~ignore
    if not use.any():
        return logits.new_zeros(())
    return F.binary_cross_entropy_with_logits(logits[use], positive[use].to(logits.dtype))


def boundary_loss(logits: Sequence[torch.Tensor], targets: Sequence[torch.Tensor],
                  use: torch.Tensor) -> torch.Tensor:
    """Binary cross-entropy of each piece's start, end and inside logit against whether it
    starts, ends or lies inside a gold mention, over the pieces ``use`` marks (B, L): a
    per-piece signal for the three heads of ELQ eq. 2 (our addition, see BENCHMARKS.md)."""
    if not use.any():
        return logits[0].new_zeros(())
    return sum(F.binary_cross_entropy_with_logits(x[use], y[use].to(x.dtype))
               for x, y in zip(logits, targets, strict=True)) / len(logits)


def proposed_spans(probabilities: np.ndarray, minimum: float, most: int
                   ) -> list[list[tuple[int, int, float]]]:
    """Per passage, its spans with p(m) above ``minimum``, at most ``most`` of them, best
    first: ``(first, last, p)`` in piece positions. ``probabilities``: (B, L, W)."""
    out = []
    for grid in probabilities:
        firsts, widths = np.nonzero(grid > minimum)
        scores = grid[firsts, widths]
        order = np.argsort(-scores, kind="stable")[:most]
        out.append([(int(firsts[i]), int(firsts[i] + widths[i]), float(scores[i]))
                    for i in order])
    return out


def candidate_probabilities(scores: np.ndarray) -> np.ndarray:
    """ELQ's p(e | m): a softmax over each span's retrieved candidates (-inf: padding)."""
    scores = np.asarray(scores, dtype="float64")
    empty = ~np.isfinite(scores).any(axis=1, keepdims=True)  # a span without candidates
    return softmax(np.where(empty, 0.0, scores), axis=1) * ~empty
