"""Loading a pipeline with config overrides, and saving it whole or not at all."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from confection import Config
from spacy.language import Language

from ..atomic import atomic_folder
from ..errors import Errors


def pipeline_config(path: str | Path) -> Config:
    """The config of the pipeline saved in the folder ``path`` (not interpolated); E229 where
    it has no readable ``config.cfg``."""
    from spacy.util import load_config

    try:
        return load_config(Path(path) / "config.cfg", interpolate=False)
    except (OSError, ValueError) as err:  # spaCy's E053 (an OSError), a config parse error
        raise ValueError(Errors.E229.format(path=path, error=err)) from None


def load_pipeline(path: str | Path, overrides: Mapping[str, Any] | None = None, *,
                  disable: Iterable[str] = ()) -> Language:
    """``spacy.load(path)`` with ``overrides`` (dotted config keys, as in ``spacy train``:
    ``{"components.arbo_coref.k": 4}``) and the components of ``disable`` disabled; a folder
    that is no pipeline is E229. A dict value (``get_candidates.label_types``) is given as
    its JSON text, the form such settings read: confection takes a dict under a dotted key
    for sections to override, and refuses it."""
    import json

    import spacy

    if Path(path).is_dir():
        pipeline_config(path)
    config = {key: json.dumps(value) if isinstance(value, Mapping) else value
              for key, value in (overrides or {}).items()}
    return spacy.load(path, config=config, disable=list(disable))


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
