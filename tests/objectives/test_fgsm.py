"""FGSM adversarial entities (PEL eq. 6–8): where the perturbation goes and what it does."""

import pytest
import torch

from spacy_arboel.encoders.transformer import PooledEncoder
from spacy_arboel.objectives.fgsm import (
    adversarial_objective,
    embedding_hook,
    fgsm_delta,
    output_hook,
)


def _encoder(tiny_encoder):
    from transformers import BertModel

    return PooledEncoder(BertModel.from_pretrained(tiny_encoder), "cls").eval()


def test_fgsm_moves_negatives_closer_and_the_positive_away(tiny_encoder):
    torch.manual_seed(0)
    encoder = _encoder(tiny_encoder)
    ids = torch.tensor([[2, 10, 11, 12, 3], [2, 13, 3, 0, 0]])  # row 1 is padded
    mask = (ids > 0).long()
    mention = torch.randn(1, 32)
    captured_z, captured_out = [], []
    with embedding_hook(encoder.transformer, captured_z), output_hook(encoder, captured_out):
        entities = encoder(ids, mask)
    leaf = entities.detach().requires_grad_(True)
    scores = mention @ leaf.T  # candidates: row 0 positive, row 1 negative
    valid = torch.ones_like(scores, dtype=torch.bool)
    objective = adversarial_objective(scores, valid, valid)
    (grad,) = torch.autograd.grad(objective, leaf)
    epsilon = 1e-3
    delta = fgsm_delta(captured_out[0], grad, captured_z[0], mask, epsilon)
    assert delta.shape == captured_z[0].shape
    assert torch.all(delta[1, 3:] == 0)  # padding is never perturbed
    assert torch.allclose(delta[mask.bool()].abs(), torch.full_like(delta[mask.bool()], epsilon))
    with torch.no_grad(), embedding_hook(encoder.transformer, delta=delta):
        adversarial = encoder(ids, mask)
    clean = (mention @ entities.detach().T)[0]
    moved = (mention @ adversarial.T)[0]
    assert moved[0] < clean[0]  # eq. 7: the positive moves away from the mention
    assert moved[1] > clean[1]  # eq. 6: the negative moves towards it


def test_hooks_leave_the_encoder_unchanged_afterwards(tiny_encoder):
    encoder = _encoder(tiny_encoder)
    ids = torch.tensor([[2, 10, 11, 3]])
    mask = torch.ones_like(ids)
    before = encoder(ids, mask)
    with embedding_hook(encoder.transformer, delta=torch.full((1, 4, 32), 0.5)):
        during = encoder(ids, mask)
    after = encoder(ids, mask)
    assert not torch.allclose(before, during)
    assert torch.allclose(before, after)


def test_adversarial_objective_skips_mentions_and_padding():
    scores = torch.tensor([[1.0, 2.0, 3.0, float("-inf")]])
    valid = torch.tensor([[True, True, True, False]])
    is_entity = torch.tensor([[True, True, False, True]])  # column 2 is a mention node
    assert adversarial_objective(scores, valid, is_entity).item() == pytest.approx(2.0 - 1.0)


def test_encoder_without_embeddings_is_a_clear_error():
    with pytest.raises(ValueError, match="no `embeddings` module"):
        with embedding_hook(torch.nn.Linear(2, 2), []):
            pass
