"""ELQ's span scores: every span's logit, span vectors, the mention loss, proposals."""

import numpy as np
import torch

from spacy_arboel.linking.span_scores import (
    boundary_loss,
    candidate_probabilities,
    continues_word,
    mention_loss,
    proposed_spans,
    span_logits,
    span_vectors,
    whole_word_spans,
)


def test_span_logits_follow_elq_eq_2():
    torch.manual_seed(0)
    start, end, inside = torch.randn(3, 2, 5).unbind(0)
    n_pieces = torch.tensor([5, 3])
    logits = span_logits(start, end, inside, n_pieces, max_width=4)
    assert logits.shape == (2, 5, 4)
    for b in range(2):
        for i in range(5):
            for w in range(4):
                j = i + w
                if j >= n_pieces[b]:
                    assert logits[b, i, w] == float("-inf")
                else:
                    expected = start[b, i] + end[b, j] + inside[b, i : j + 1].sum()
                    assert torch.isclose(logits[b, i, w], expected, atol=1e-5)


def test_span_vectors_are_means_of_their_pieces():
    hidden = torch.arange(2 * 4 * 3, dtype=torch.float32).reshape(2, 4, 3)
    vectors = span_vectors(hidden, torch.tensor([0, 1, 1]), torch.tensor([0, 1, 3]),
                           torch.tensor([2, 2, 3]))
    assert torch.allclose(vectors[0], hidden[0, 0:3].mean(0))
    assert torch.allclose(vectors[1], hidden[1, 1:3].mean(0))
    assert torch.allclose(vectors[2], hidden[1, 3])


def test_mention_loss_ignores_padding_and_ignored_spans():
    logits = torch.tensor([[[2.0, float("-inf")], [-1.0, 0.5]]])
    positive = torch.tensor([[[True, False], [False, False]]])
    ignore = torch.tensor([[[False, False], [False, True]]])
    loss = mention_loss(logits, positive, ignore)
    expected = torch.nn.functional.binary_cross_entropy_with_logits(
        torch.tensor([2.0, -1.0]), torch.tensor([1.0, 0.0]))
    assert torch.isclose(loss, expected)
    assert mention_loss(logits, positive, torch.ones_like(ignore)) == 0


def test_proposals_keep_the_best_spans_above_the_minimum():
    grid = np.zeros((1, 3, 2))
    grid[0, 0, 1], grid[0, 2, 0], grid[0, 1, 0] = 0.9, 0.6, 0.2
    assert proposed_spans(grid, 0.5, most=5) == [[(0, 1, 0.9), (2, 2, 0.6)]]
    assert proposed_spans(grid, 0.1, most=1) == [[(0, 1, 0.9)]]


def test_candidate_probabilities_are_a_softmax_over_valid_candidates():
    p = candidate_probabilities(np.array([[1.0, 0.0, -np.inf], [-np.inf, -np.inf, -np.inf]]))
    assert np.isclose(p[0, 0], np.e / (np.e + 1)) and p[0, 2] == 0
    assert np.allclose(p[1], 0)


def test_spans_start_and_end_on_word_boundaries():
    text = "doxorubicin-induced cardiotoxicity"
    # pieces: "dox", "##orubicin", "-", "induced", "cardio", "##toxicity"
    starts, ends = [0, 3, 11, 12, 20, 26], [3, 11, 12, 19, 26, 34]
    continues = continues_word(text, starts, ends)
    assert continues == [False, True, False, False, False, True]
    whole = whole_word_spans(torch.tensor([continues]), max_width=3)[0]
    assert whole[0, 1] and not whole[0, 0]  # "doxorubicin", not "dox"
    assert not whole[1].any()  # nothing starts inside a word
    assert whole[2, 0] and whole[3, 0] and whole[2, 1]  # "-", "induced", "-induced"
    assert whole[4, 1] and not whole[4, 0]  # "cardiotoxicity", not "cardio"


def test_boundary_loss_is_the_mean_of_three_piece_losses():
    logits = [torch.tensor([[0.0, 1.0, 2.0]])] * 3
    targets = [torch.tensor([[True, False, False]]), torch.tensor([[False, True, False]]),
               torch.tensor([[True, True, False]])]
    use = torch.tensor([[True, True, False]])
    bce = torch.nn.functional.binary_cross_entropy_with_logits
    expected = sum(bce(torch.tensor([0.0, 1.0]), t[0, :2].float()) for t in targets) / 3
    assert torch.isclose(boundary_loss(logits, targets, use), expected)
