"""Loading a pipeline with config overrides, and saving it whole or not at all."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from spacy.language import Language

from ..atomic import atomic_folder


def load_pipeline(path: str | Path, overrides: Mapping[str, Any] | None = None, *,
                  disable: Iterable[str] = ()) -> Language:
    """``spacy.load(path)`` with ``overrides`` (dotted config keys, as in ``spacy train``:
    ``{"components.arbo_coref.k": 4}``) and the components of ``disable`` disabled."""
    import spacy

    return spacy.load(path, config=dict(overrides or {}), disable=list(disable))


def save_pipeline(nlp: Language, path: str | Path) -> None:
    """``nlp.to_disk(path)`` atomically: a failed save leaves ``path`` as it was. Raises a
    ValueError (E046) where ``path`` is a folder that is not a pipeline."""
    with atomic_folder(path) as temp:
        nlp.to_disk(temp)


def save_with_setting(model: str | Path, overrides: Mapping[str, Any], key: str, value: Any,
                      output: str | Path) -> None:
    """Load ``model`` with ``key = value`` in its config (after ``overrides``), so that the
    saved pipeline keeps it, and save it to ``output`` (atomically)."""
    save_pipeline(load_pipeline(model, {**overrides, key: value}), output)
