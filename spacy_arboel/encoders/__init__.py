"""Encoders: input formatting (BLINK), model loading and the pooled transformer."""

from .inputs import InputBuilder, MentionSpan, entity_rows, mention_window
from .loading import DEFAULT_ENCODER, MARKERS, load_tokenizer, resolve_encoder_path

__all__ = [
    "DEFAULT_ENCODER", "MARKERS", "InputBuilder", "MentionSpan", "entity_rows",
    "load_tokenizer", "mention_window", "resolve_encoder_path",
]
