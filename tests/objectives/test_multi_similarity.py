"""SapBERT's objective (spacy_arboel.objectives.multi_similarity): the multi-similarity
loss (Wang et al. 2019, eq. 9; SapBERT eq. 2) and its online hard-pair miner."""

import itertools

import pytest
import torch

from spacy_arboel.objectives.multi_similarity import mine_hard_pairs, multi_similarity_loss


def _pair_masks(labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    same = labels[:, None] == labels[None, :]
    off = ~torch.eye(len(labels), dtype=torch.bool)
    return same & off, ~same


def test_loss_prefers_aligned_embeddings():
    labels = torch.tensor([0, 0, 1, 1, 2, 2])
    basis = torch.eye(6)
    aligned = basis[[0, 0, 1, 1, 2, 2]] + 0.05 * basis[[3, 4, 3, 4, 3, 4]]
    # the reverse: names of one entity orthogonal, names of different entities close
    crossed = basis[[0, 1, 0, 1, 0, 1]] + 0.05 * basis[[2, 3, 4, 5, 2, 3]]
    for margin in (None, 0.2):
        good = multi_similarity_loss(aligned, labels, margin=margin)
        bad = multi_similarity_loss(crossed, labels, margin=margin)
        assert good < bad - 0.1, (margin, good, bad)


def test_loss_matches_the_equation_with_alpha_on_positives():
    torch.manual_seed(1)
    embeddings = torch.randn(6, 8)
    labels = torch.tensor([0, 0, 1, 1, 2, 2])
    alpha, beta, base = 2.0, 50.0, 0.5
    vectors = torch.nn.functional.normalize(embeddings, dim=-1)
    sim = vectors @ vectors.T
    positives, negatives = _pair_masks(labels)
    expected = 0.0
    for a in range(6):
        pos = sim[a][positives[a]]
        neg = sim[a][negatives[a]]
        expected += torch.log1p(torch.exp(-alpha * (pos - base)).sum()) / alpha
        expected += torch.log1p(torch.exp(beta * (neg - base)).sum()) / beta
    expected /= 6
    got = multi_similarity_loss(embeddings, labels, alpha=alpha, beta=beta, base=base,
                                margin=None)
    assert got.item() == pytest.approx(float(expected), rel=1e-5)
    swapped = multi_similarity_loss(embeddings, labels, alpha=beta, beta=alpha, base=base,
                                    margin=None)
    assert abs(swapped.item() - got.item()) > 1e-3


def test_loss_without_negatives_is_the_positive_term():
    torch.manual_seed(2)
    embeddings = torch.randn(3, 4)
    vectors = torch.nn.functional.normalize(embeddings, dim=-1)
    sim = vectors @ vectors.T
    off = ~torch.eye(3, dtype=torch.bool)
    expected = sum(torch.log1p(torch.exp(-2.0 * (sim[a][off[a]] - 0.5)).sum()) / 2.0
                   for a in range(3)) / 3
    labels = torch.zeros(3, dtype=torch.long)
    got = multi_similarity_loss(embeddings, labels, margin=None)
    assert got.item() == pytest.approx(float(expected), rel=1e-5)
    # with mining, no negative means no triplet, so nothing is kept
    assert multi_similarity_loss(embeddings, labels, margin=0.2).item() == 0.0


def test_gradient_steps_pull_positives_and_push_negatives():
    torch.manual_seed(0)
    labels = torch.tensor([0, 0, 1, 1, 2, 2, 3, 3])
    embeddings = torch.randn(8, 16, requires_grad=True)
    positives, negatives = _pair_masks(labels)

    def means() -> tuple[float, float]:
        with torch.no_grad():
            v = torch.nn.functional.normalize(embeddings, dim=-1)
            sim = v @ v.T
        return float(sim[positives].mean()), float(sim[negatives].mean())

    pos_before, neg_before = means()
    optimizer = torch.optim.SGD([embeddings], lr=0.5)
    for _ in range(20):
        optimizer.zero_grad()
        multi_similarity_loss(embeddings, labels, margin=None).backward()
        optimizer.step()
    pos_after, neg_after = means()
    assert pos_after > pos_before + 0.2
    assert neg_after < neg_before


def test_miner_keeps_exactly_the_pairs_of_margin_violating_triplets():
    torch.manual_seed(3)
    labels = torch.tensor([0, 0, 0, 1, 1, 2, 2, 2])
    vectors = torch.nn.functional.normalize(torch.randn(8, 4), dim=-1)
    sim = vectors @ vectors.T
    margin = 0.2
    kept_pos, kept_neg = mine_hard_pairs(sim, labels, margin)
    expect_pos = torch.zeros(8, 8, dtype=torch.bool)
    expect_neg = torch.zeros(8, 8, dtype=torch.bool)
    for a, p, n in itertools.product(range(8), repeat=3):
        if a != p and labels[a] == labels[p] and labels[a] != labels[n]:
            if sim[a, n] > sim[a, p] - margin:
                expect_pos[a, p] = expect_neg[a, n] = True
    assert torch.equal(kept_pos, expect_pos)
    assert torch.equal(kept_neg, expect_neg)
    assert 0 < int(kept_neg.sum()) < int((labels[:, None] != labels[None, :]).sum())


def test_identical_inputs_are_never_pairs():
    labels = torch.tensor([0, 0, 1, 1])
    vectors = torch.nn.functional.normalize(torch.tensor(
        [[1.0, 0.0], [0.0, 1.0], [1.0, 0.0], [0.6, 0.8]]), dim=-1)
    identical = torch.zeros(4, 4, dtype=torch.bool)
    identical[0, 2] = identical[2, 0] = True  # the same name on entities 0 and 1
    _, negatives = mine_hard_pairs(vectors @ vectors.T, labels, 0.2, identical)
    assert not negatives[0, 2] and not negatives[2, 0]
    _, unmasked = mine_hard_pairs(vectors @ vectors.T, labels, 0.2)
    assert unmasked[0, 2]
