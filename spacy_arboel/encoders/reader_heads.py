"""The PyTorch side of the retriever-reader (EntQA / BEER² §2.1): the passage encoder E_S
with the reader's heads."""

from __future__ import annotations

import copy
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from .loading import load_transformer
from .saved_transformers import transformer_writers, weights_folder
from .transformer import PooledEncoder

QUERY_POOLINGS = ("cls", "mean")
# entity rows have no mention markers: "mean" is what a linker's "mention" pooling gives them
ENTITY_POOLINGS = ("cls", "mean")


class ReaderHeads(torch.nn.Module):
    """E_S with the reader's heads: W1/W2 (span start/end) and W3 (rank).

    ``forward("passage", ids, mask)``: E_S's hidden states (B, L, H);
    ``forward("read", ids, mask, type_ids)``: over ``passage ⊕ entity`` pairs (eq. 6), start
    and end logits over the pair's positions (eq. 7–8) and one rank logit per pair (eq. 10).
    The reader shares E_S's weights when ``reader`` is None (BEER² §2.1.2); the EntQA pipeline
    ablation gives it its own copy.
    """

    def __init__(self, passage: torch.nn.Module, reader: torch.nn.Module | None = None) -> None:
        super().__init__()
        self.passage = passage
        self.reader = reader
        hidden = passage.config.hidden_size
        self.span = torch.nn.Linear(hidden, 2)
        self.rank = torch.nn.Linear(hidden, 1)

    def forward(self, op: str, ids: torch.Tensor, mask: torch.Tensor,
                type_ids: torch.Tensor | None = None):
        if op == "passage":
            return self.passage(input_ids=ids, attention_mask=mask)[0]
        encoder = self.passage if self.reader is None else self.reader
        kwargs = {"token_type_ids": type_ids} if type_ids is not None else {}
        hidden = encoder(input_ids=ids, attention_mask=mask, **kwargs)[0]
        logits = self.span(hidden)
        # Rank from the pair's [CLS] vector (EntQA's choice; BEER² eq. 10 writes r_1).
        return logits[..., 0], logits[..., 1], self.rank(hidden[:, 0]).squeeze(-1)

    def head_state(self) -> dict[str, torch.Tensor]:
        """W1/W2 and W3 as one flat state (``span.*``, ``rank.*``)."""
        state = {f"span.{k}": v for k, v in self.span.state_dict().items()}
        state.update({f"rank.{k}": v for k, v in self.rank.state_dict().items()})
        return {k: v.detach().cpu().contiguous() for k, v in state.items()}

    def load_head_state(self, state: dict[str, torch.Tensor]) -> None:
        self.span.load_state_dict({k[5:]: v for k, v in state.items() if k.startswith("span.")})
        self.rank.load_state_dict({k[5:]: v for k, v in state.items() if k.startswith("rank.")})


def reader_modules(passage: torch.nn.Module, entity: torch.nn.Module, *, share_weights: bool,
                   entity_pooling: str, reader: torch.nn.Module | None = None,
                   heads: dict[str, torch.Tensor] | None = None) -> dict[str, torch.nn.Module]:
    """``heads`` (``ReaderHeads``) and ``entity`` (the pooled, frozen entity encoder) from
    loaded transformers: ``reader`` is ignored when weights are shared and copied from
    ``passage`` when not given; ``heads``: a saved head state."""
    if share_weights:
        reader = None
    elif reader is None:
        reader = copy.deepcopy(passage)
    module = ReaderHeads(passage, reader)
    if heads is not None:
        module.load_head_state(heads)
    entity_encoder = PooledEncoder(entity, entity_pooling)
    entity_encoder.requires_grad_(False)  # frozen: the index is built once (BENCHMARKS.md)
    return {"heads": module, "entity": entity_encoder}


def base_reader_modules(name: str, vocab_size: int, *, share_weights: bool,
                        entity_pooling: str) -> dict[str, torch.nn.Module]:
    """Every transformer from one base encoder (a name or a path)."""
    return reader_modules(load_transformer(name, vocab_size), load_transformer(name, vocab_size),
                          share_weights=share_weights, entity_pooling=entity_pooling)


def save_reader_modules(modules: dict[str, torch.nn.Module]) -> dict[str, object]:
    """Writers by saved name: passage/reader/entity encoders and ``heads.safetensors``."""
    heads = modules["heads"]
    writers = transformer_writers({
        "passage_encoder": heads.passage,
        **({"reader_encoder": heads.reader} if heads.reader is not None else {}),
        "entity_encoder": modules["entity"].transformer})
    writers["heads.safetensors"] = lambda p: save_file(heads.head_state(), str(p))
    return writers


def load_reader_modules(path: Path, vocab_size: int, *, share_weights: bool,
                        entity_pooling: str) -> dict[str, torch.nn.Module]:
    """The modules ``save_reader_modules`` wrote to ``path``."""
    reader = (load_transformer(str(weights_folder(path, "reader_encoder")), vocab_size)
              if (path / "reader_encoder").exists() else None)
    return reader_modules(load_transformer(str(weights_folder(path, "passage_encoder")),
                                           vocab_size),
                          load_transformer(str(weights_folder(path, "entity_encoder")),
                                           vocab_size),
                          share_weights=share_weights, entity_pooling=entity_pooling,
                          reader=reader, heads=load_file(str(path / "heads.safetensors")))
