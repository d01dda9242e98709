"""The PyTorch side of the one-pass span reader (ELQ, Li et al. 2020, §3): a passage encoder
with mention-boundary heads, the frozen entity encoder and, optionally, a cross reader that
re-reads a span's best candidates (``ReaderHeads`` of the retriever-reader)."""

from __future__ import annotations

import copy
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from .loading import load_transformer
from .reader_heads import ReaderHeads
from .saved_transformers import transformer_writers, weights_folder
from .transformer import PooledEncoder


class MentionHeads(torch.nn.Module):
    """The passage encoder and ELQ's mention scores (§3.2).

    ``forward(ids, mask)`` gives the hidden states q_1..q_n (B, L, H) and, per wordpiece, the
    start, end and inside logits w_start·q_i, w_end·q_j and w_mention·q_t of ELQ eq. 2; a span
    [i, j] scores s = start_i + end_j + Σ_{t=i..j} inside_t (``span_scores.span_logits``).
    """

    def __init__(self, encoder: torch.nn.Module) -> None:
        super().__init__()
        self.encoder = encoder
        self.boundaries = torch.nn.Linear(encoder.config.hidden_size, 3)

    def forward(self, ids: torch.Tensor, mask: torch.Tensor):
        hidden = self.encoder(input_ids=ids, attention_mask=mask)[0]
        logits = self.boundaries(hidden)
        return hidden, logits[..., 0], logits[..., 1], logits[..., 2]

    def head_state(self) -> dict[str, torch.Tensor]:
        return {f"boundaries.{k}": v.detach().cpu().contiguous()
                for k, v in self.boundaries.state_dict().items()}

    def load_head_state(self, state: dict[str, torch.Tensor]) -> None:
        self.boundaries.load_state_dict({k[len("boundaries."):]: v for k, v in state.items()
                                         if k.startswith("boundaries.")})


def span_reader_modules(passage: torch.nn.Module, entity: torch.nn.Module, *,
                        entity_pooling: str, cross: torch.nn.Module | None = None,
                        with_cross: bool = False,
                        heads: dict[str, torch.Tensor] | None = None,
                        new_cross: bool = False) -> dict[str, torch.nn.Module]:
    """``spans`` (``MentionHeads``), ``entity`` (pooled, frozen) and, ``with_cross``, ``cross``
    (a ``ReaderHeads`` over ``cross``, a copy of ``passage`` when not given); ``heads``: a
    saved head state of ``spans`` and ``cross`` (``new_cross``: of ``spans`` only, the cross
    reader is new)."""
    spans = MentionHeads(passage)
    modules: dict[str, torch.nn.Module] = {"spans": spans}
    entity_encoder = PooledEncoder(entity, entity_pooling)
    entity_encoder.requires_grad_(False)  # frozen: the index is built once
    modules["entity"] = entity_encoder
    if with_cross:
        modules["cross"] = ReaderHeads(cross if cross is not None else copy.deepcopy(passage))
    if heads is not None:
        spans.load_head_state(heads)
        if with_cross and not new_cross:
            modules["cross"].load_head_state({k[len("cross."):]: v for k, v in heads.items()
                                              if k.startswith("cross.")})
    return modules


def base_span_reader_modules(name: str, vocab_size: int, *, entity_pooling: str,
                             with_cross: bool) -> dict[str, torch.nn.Module]:
    """Every transformer from one base encoder (a name or a path)."""
    return span_reader_modules(load_transformer(name, vocab_size),
                               load_transformer(name, vocab_size),
                               entity_pooling=entity_pooling, with_cross=with_cross)


def save_span_reader_modules(modules: dict[str, torch.nn.Module]) -> dict[str, object]:
    """Writers by saved name: passage/entity (and cross) encoders and ``heads.safetensors``."""
    spans = modules["spans"]

    def heads(path: Path) -> None:
        state = spans.head_state()
        if "cross" in modules:
            state.update({f"cross.{k}": v for k, v in modules["cross"].head_state().items()})
        save_file(state, str(path))

    writers = transformer_writers({
        "passage_encoder": spans.encoder, "entity_encoder": modules["entity"].transformer,
        **({"cross_encoder": modules["cross"].passage} if "cross" in modules else {})})
    writers["heads.safetensors"] = heads
    return writers


def load_span_reader_modules(path: Path, vocab_size: int, *, entity_pooling: str,
                             with_cross: bool) -> dict[str, torch.nn.Module]:
    """The modules ``save_span_reader_modules`` wrote to ``path``."""
    cross = (load_transformer(str(weights_folder(path, "cross_encoder")), vocab_size)
             if with_cross else None)
    return span_reader_modules(load_transformer(str(weights_folder(path, "passage_encoder")),
                                                vocab_size),
                               load_transformer(str(weights_folder(path, "entity_encoder")),
                                                vocab_size),
                               entity_pooling=entity_pooling, cross=cross,
                               with_cross=with_cross,
                               heads=load_file(str(path / "heads.safetensors")))
