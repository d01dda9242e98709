"""``arbo_coref``'s settings merged from their sources: its factory's defaults, the
pipeline's config, a ``tune-coref`` output file and config overrides (what ``cluster``,
``evaluate-coref``, ``tune-coref`` and ``add-coref`` load with)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from spacy.language import Language

from ..components.arbo_coref import ArboCorefSettings
from ..errors import Errors
from ..factories import COREF
from ..parsing import parse_json
from .loading import load_pipeline, pipeline_config

TUNED = ("k", "threshold", "directed")  # what a tune-coref file chooses
# what clustering a linked corpus (``cluster_linked``) takes from the settings
LINKED_CORPUS = ("k", "threshold", "directed", "nil_prefix")


def read_tuned_settings(path: str | Path) -> dict[str, Any]:
    """The best k, threshold and directed of a ``tune-coref`` output file (E151 when it is
    no such file)."""
    try:
        best = parse_json(Path(path).read_bytes())["best"]
        return {key: best[key] for key in TUNED}
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise ValueError(Errors.E151.format(
            path=path, problem=f"{type(err).__name__}: {err}")) from None


def split_overrides(overrides: Mapping[str, Any], component: str
                    ) -> tuple[dict[str, Any], dict[str, Any]]:
    """``overrides`` split into the settings of ``component`` (``components.NAME.key``, as
    ``key``) and the others (kept dotted)."""
    prefix = f"components.{component}."
    own = {key[len(prefix):]: value for key, value in overrides.items()
           if key.startswith(prefix)}
    return own, {key: value for key, value in overrides.items() if not key.startswith(prefix)}


def merge_coref_settings(component: str, overrides: Mapping[str, Any] | None = None, *,
                         tuned: Mapping[str, Any] | None = None,
                         **settings: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """The settings of ``component``, each source winning over the one before: ``tuned``
    (:func:`read_tuned_settings`), ``settings`` given as keywords (None: not given), then
    ``overrides``' ``components.NAME.key`` entries; and the other overrides."""
    own, others = split_overrides(overrides or {}, component)
    merged = {**(tuned or {}), **{k: v for k, v in settings.items() if v is not None}, **own}
    return merged, others


def load_with_coref(model: str | Path, component: str = COREF,
                    overrides: Mapping[str, Any] | None = None, *,
                    tuned: Mapping[str, Any] | None = None, **settings: Any) -> Language:
    """The pipeline at ``model`` with ``component`` (an ``arbo_coref``, added where the
    pipeline has none of that name) configured by :func:`merge_coref_settings`; the
    settings go through the config, so that a saved pipeline keeps them."""
    merged, others = merge_coref_settings(component, overrides, tuned=tuned, **settings)
    if component in pipeline_config(model)["nlp"]["pipeline"]:
        return load_pipeline(model, {**others, **{f"components.{component}.{key}": value
                                                  for key, value in merged.items()}})
    nlp = load_pipeline(model, others)
    nlp.add_pipe(COREF, name=component, config=merged)
    return nlp


def linked_corpus_settings(model: str | Path, component: str = COREF,
                           overrides: Mapping[str, Any] | None = None, *,
                           tuned: Mapping[str, Any] | None = None
                           ) -> tuple[dict[str, Any], bool]:
    """The settings of clustering a linked corpus (``LINKED_CORPUS``): ``arbo_coref``'s
    defaults, then ``component``'s config in the pipeline at ``model`` (where there is
    one), ``tuned``, then the overrides of ``component``. Also whether that config sets
    ``same_doc_only``, which clustering a linked corpus does not apply."""
    defaults = ArboCorefSettings.config()
    settings = {key: defaults[key] for key in LINKED_CORPUS}
    found: dict[str, Any] = {}
    if (Path(model) / "config.cfg").exists():
        found = pipeline_config(model)["components"].get(component, {})
        settings.update({key: found[key] for key in settings if key in found})
    settings.update(tuned or {})
    own, _ = split_overrides(overrides or {}, component)
    settings.update({key: value for key, value in own.items() if key in settings})
    return settings, bool(found.get("same_doc_only"))
