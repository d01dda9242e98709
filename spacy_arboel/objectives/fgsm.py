"""FGSM adversarial entities (PEL §4.2, eq. 6–8) on the entity encoder's input embeddings.

PEL perturbs the composite token embeddings (word + position + segment) of the entity inputs:
negatives towards a higher similarity with the mention (eq. 6), the positive towards a lower
one (eq. 7), by ε times the sign of the gradient; the perturbed entities give an extra loss
term weighted by λ (eq. 8). The hooks here capture and perturb the sum of the embeddings as
it enters the embedding LayerNorm (BERT-family encoders), or the embedding module's output
for encoders without one.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch

from ..errors import Errors


def _embedding_site(transformer: torch.nn.Module) -> tuple[torch.nn.Module, bool]:
    """The module whose input (True) or output (False) is the composite embedding."""
    embeddings = getattr(transformer, "embeddings", None)
    if embeddings is None:
        raise ValueError(Errors.E023.format(name=type(transformer).__name__))
    norm = getattr(embeddings, "LayerNorm", None)
    if isinstance(norm, torch.nn.Module):
        return norm, True
    return embeddings, False


@contextmanager
def embedding_hook(
    transformer: torch.nn.Module,
    captured: list[torch.Tensor] | None = None,
    delta: torch.Tensor | None = None,
) -> Iterator[None]:
    """While active, every forward of ``transformer`` appends its composite input embeddings
    to ``captured`` and adds ``delta`` (B, L, H) to them."""
    site, is_input = _embedding_site(transformer)

    def change(z: torch.Tensor) -> torch.Tensor:
        if captured is not None:
            captured.append(z)
        return z if delta is None else z + delta.to(z.dtype)

    if is_input:
        handle = site.register_forward_pre_hook(lambda _m, args: (change(args[0]), *args[1:]))
    else:
        handle = site.register_forward_hook(lambda _m, _args, output: change(output))
    try:
        yield
    finally:
        handle.remove()


@contextmanager
def output_hook(module: torch.nn.Module, captured: list[torch.Tensor]) -> Iterator[None]:
    """While active, every forward output of ``module`` is appended to ``captured``."""
    handle = module.register_forward_hook(lambda _m, _args, output: captured.append(output))
    try:
        yield
    finally:
        handle.remove()


def adversarial_objective(scores: torch.Tensor, valid: torch.Tensor,
                          entity_columns: torch.Tensor) -> torch.Tensor:
    """Σ s(m, e⁻) − Σ s(m, e⁺) over the valid entity candidates (positive in column 0): its
    gradient sign w.r.t. an entity's inputs is eq. 6 for a negative and eq. 7 for the positive.
    ``entity_columns`` (B, C) is True where the candidate is an entity row (mentions, as in
    arboEL's mention–mention edges, are not perturbed)."""
    signs = torch.ones_like(scores)
    signs[:, 0] = -1.0
    keep = valid & entity_columns
    return (scores.masked_fill(~keep, 0.0) * signs).sum()


def fgsm_delta(outputs: torch.Tensor, output_grad: torch.Tensor, embeddings: torch.Tensor,
               mask: torch.Tensor, epsilon: float) -> torch.Tensor:
    """ε · sign(∂objective/∂z) at the real (unpadded) wordpieces, zero at padding.

    ``output_grad``: ∂objective/∂``outputs`` (the pooled entity vectors), propagated through
    the encoder graph to the captured embeddings ``z`` (the graph is kept for the backward
    pass of the clean loss)."""
    (grad,) = torch.autograd.grad(outputs, embeddings, grad_outputs=output_grad,
                                  retain_graph=True)
    return (epsilon * grad.sign() * mask[..., None].to(grad.dtype)).detach()
