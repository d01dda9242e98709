"""BLINK's cross-encoder (§4.2) as a plain PyTorch module (spaCy-free).

One transformer reads ``[CLS] mention context [SEP] entity [SEP]``; its [CLS] vector
y_{m,e} (eq. 5) is scored by a linear layer W: s_cross(m, e) = y_{m,e} W (eq. 6). The thinc
architecture ``spacy_arboel.CrossEncoder.v1`` (``spacy_arboel.ml.cross_encoder``) wraps this
module; ``spacy_arboel.linking.CrossEncoderReranker`` drives it directly.
"""

from __future__ import annotations

from pathlib import Path

import torch
from safetensors.torch import load_file

from .loading import load_transformer


class CrossScorer(torch.nn.Module):
    """A transformer over (mention, entity) pairs and the linear layer W of BLINK eq. 6."""

    def __init__(self, transformer: torch.nn.Module) -> None:
        super().__init__()
        self.transformer = transformer
        self.score = torch.nn.Linear(transformer.config.hidden_size, 1)

    def forward(self, ids: torch.Tensor, mask: torch.Tensor,
                type_ids: torch.Tensor) -> torch.Tensor:
        """s_cross(m, e) = y_{m,e} W (BLINK eq. 5–6), y the [CLS] vector: one score a pair."""
        hidden = self.transformer(input_ids=ids, attention_mask=mask, token_type_ids=type_ids)[0]
        return self.score(hidden[:, 0]).squeeze(-1)


def load_scorer(source: str | Path, vocab_size: int,
                head: str | Path | None = None) -> CrossScorer:
    """The transformer (a name or a saved folder) and, if given, the saved head W
    (safetensors); without ``head`` W starts from PyTorch's default initialisation."""
    scorer = CrossScorer(load_transformer(str(source), vocab_size))
    if head is not None:
        scorer.score.load_state_dict(load_file(str(head)))
    return scorer
