"""SapBERT's objective: the multi-similarity loss over a batch of labelled rows, with its
online hard-pair miner.

SapBERT (Liu et al., NAACL 2021, "Self-Alignment Pretraining for Biomedical Entity
Representations"; code: github.com/cambridgeltl/sapbert) trains on batches of rows (names)
labelled by their entity: rows of one label are positives of each other, every row of
another label is an in-batch negative. Per batch of rows X_b with unit vectors and cosine
similarities S (S_ij = cos(x_i, x_j)):

1. **Online hard-pair mining** (SapBERT's "online hard pairs mining"; its released code
   uses pytorch-metric-learning's ``TripletMarginMiner(margin=0.2, type_of_triplets="all")``):
   every triplet
   of an anchor a, a positive p (same entity) and a negative n (another entity) is kept when
   it violates the margin ε, ``S_an > S_ap − ε``; the positive pairs P_a and negative pairs
   N_a of the kept triplets are what the loss sees. Equivalently: (a, p) is kept when
   ``S_ap < max_n S_an + ε`` and (a, n) when ``S_an > min_p S_ap − ε``.
2. **Multi-similarity loss** (Wang et al., CVPR 2019, eq. 9; SapBERT eq. 2)::

       L = 1/|X_b| Σ_a [ 1/α · log(1 + Σ_{p∈P_a} exp(−α (S_ap − λ)))
                       + 1/β · log(1 + Σ_{n∈N_a} exp( β (S_an − λ))) ]

   with α = 2 on the positives, β = 50 on the negatives and the base λ = 0.5 by default
   (Wang et al.'s values and pytorch-metric-learning's defaults). Which scale goes with
   which side: in Wang et al. and in the code SapBERT released (pytorch-metric-
   learning's ``MultiSimilarityLoss``, whose ``alpha`` scales the positive term, there
   called with ``alpha=1, beta=60, base=0.5``, a comment listing 1–3 and 40–60 as the
   values tried) the *small* scale weighs the positives and the *large* one the negatives;
   so it is here (``alpha`` → positives). (This follows the released code and Wang et al.;
   should the paper's equation attach the letters the other way round, only the naming
   differs, not the values per side.)

Deviations, and why:

* **Cosine similarity of unit vectors** for both mining and loss. The loss is as in SapBERT
  (pytorch-metric-learning's cosine default); SapBERT's miner compares *Euclidean*
  distances of unit vectors (d = √(2 − 2S)), so its margin 0.2 is a distance margin, ours a
  cosine one (0.2 in cosine is a little looser near S = 1, tighter below S ≈ 0.5).
* **Identical inputs are never a pair**: rows marked ``identical`` (the caller's mask; the
  self-alignment trainer marks rows whose whitespace-normalised, case-folded texts or
  wordpiece ids are equal — the same name on two entities, the same name in two pairs of
  one entity) are neither a positive nor a mined negative: their similarity is 1 whatever
  the weights, so such a negative only adds a constant push. The reference code has no
  such mask.

The trainer that uses it is ``linking.self_alignment``. Torch only: no spaCy, no KB.
"""

from __future__ import annotations

import torch


def valid_pairs(labels: torch.Tensor, identical: torch.Tensor | None = None
                ) -> tuple[torch.Tensor, torch.Tensor]:
    """Boolean (N, N) masks of all positive (same label) and negative (other label) pairs of
    distinct rows, without the pairs of ``identical`` inputs."""
    same = labels[:, None] == labels[None, :]
    valid = ~torch.eye(len(labels), dtype=torch.bool, device=labels.device)
    if identical is not None:
        valid &= ~identical
    return same & valid, ~same & valid


def mine_hard_pairs(similarity: torch.Tensor, labels: torch.Tensor, margin: float = 0.2,
                    identical: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """The positive and negative pairs of all margin-violating triplets (SapBERT's online
    hard-pair mining, "all" triplets): (a, p, n) is kept when ``S_an > S_ap − margin``.

    ``similarity``: (N, N) cosine similarities; ``labels``: (N,) entity labels;
    ``identical``: (N, N) bool, rows whose inputs are the same text (never a pair).
    Returns boolean (N, N) masks of the kept positive and negative pairs (no gradient).
    """
    with torch.no_grad():
        positives, negatives = valid_pairs(labels, identical)
        sim = similarity.detach()
        inf = torch.tensor(float("inf"), dtype=sim.dtype, device=sim.device)
        hardest_negative = torch.where(negatives, sim, -inf).amax(dim=1, keepdim=True)
        easiest_positive = torch.where(positives, sim, inf).amin(dim=1, keepdim=True)
        # (a, p) is in a kept triplet iff some negative n has S_an > S_ap - margin
        kept_positives = positives & (sim < hardest_negative + margin)
        # (a, n) is in a kept triplet iff some positive p has S_ap < S_an + margin
        kept_negatives = negatives & (sim > easiest_positive - margin)
    return kept_positives, kept_negatives


def _log_one_plus_sum_exp(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Row-wise ``log(1 + Σ_{mask} exp(values))``, stable; 0 for an empty row."""
    masked = values.masked_fill(~mask, float("-inf"))
    zero = torch.zeros(values.shape[0], 1, dtype=values.dtype, device=values.device)
    return torch.logsumexp(torch.cat([zero, masked], dim=1), dim=1)


def multi_similarity_terms(embeddings: torch.Tensor, labels: torch.Tensor,
                           identical: torch.Tensor | None = None, *, alpha: float = 2.0,
                           beta: float = 50.0, base: float = 0.5, margin: float | None = 0.2
                           ) -> tuple[torch.Tensor, int, int]:
    """:func:`multi_similarity_loss` with the numbers of mined positive and negative pairs."""
    vectors = torch.nn.functional.normalize(embeddings.float(), dim=-1)
    similarity = vectors @ vectors.T
    if margin is None:  # no mining: every valid pair
        positives, negatives = valid_pairs(labels, identical)
    else:
        positives, negatives = mine_hard_pairs(similarity, labels, margin, identical)
    positive_term = _log_one_plus_sum_exp(-alpha * (similarity - base), positives) / alpha
    negative_term = _log_one_plus_sum_exp(beta * (similarity - base), negatives) / beta
    loss = (positive_term + negative_term).mean()
    return loss, int(positives.sum()), int(negatives.sum())


def multi_similarity_loss(embeddings: torch.Tensor, labels: torch.Tensor,
                          identical: torch.Tensor | None = None, *, alpha: float = 2.0,
                          beta: float = 50.0, base: float = 0.5,
                          margin: float | None = 0.2) -> torch.Tensor:
    """The multi-similarity loss (Wang et al. 2019, eq. 9; SapBERT eq. 2) of a batch::

        L = 1/N Σ_a [ 1/α log(1 + Σ_{p∈P_a} e^{−α(S_ap − λ)})
                    + 1/β log(1 + Σ_{n∈N_a} e^{β(S_an − λ)}) ]

    ``embeddings``: (N, d) row vectors (normalised here: S is the cosine); ``labels``: (N,)
    entity of each row; ``identical``: optional (N, N) bool of rows with the same input text,
    never used as a pair; P_a, N_a: the pairs :func:`mine_hard_pairs` keeps with ``margin``
    (``None``: all pairs, no mining); ``alpha`` scales the positives, ``beta`` the
    negatives, ``base`` is λ. Rows without a kept pair add 0 (the mean is over all rows).
    """
    return multi_similarity_terms(embeddings, labels, identical, alpha=alpha, beta=beta,
                                  base=base, margin=margin)[0]
