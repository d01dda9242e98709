"""A training config filled in by spaCy: ``fill_components`` loads it with ``auto_fill`` (as
``spacy init fill-config`` does), so that every setting a packaged config leaves out is its
factory's default, or that of the architecture, objective or scorer a block names;
``init_config`` (``init-config``) writes them all, and the packaged configs hold only their
deliberate deviations (``configs.DEVIATIONS``)."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from confection import Config
from spacy import blank
from spacy.util import load_config, load_model_from_config

from ..configs import COMPONENT_CONFIGS, packaged_config
from ..errors import Errors

# the lists of the [training] section that name components
TRAINING_LISTS = ("frozen_components", "annotating_components")


def factory_defaults(factory: str) -> dict[str, Any]:
    """The ``default_config`` of the component factory ``factory`` (a blank pipeline loads
    the factories of the installed packages' entry points)."""
    return copy.deepcopy(dict(blank("xx").get_factory_meta(factory).default_config))


def fill_components(config: Config) -> Config:
    """``config`` filled in by spaCy (``load_model_from_config(auto_fill=True)``, which makes
    the pipeline without initialising it): each factory-made component's settings from its
    factory, architecture, objective and scorer, and spaCy's own sections; variables such
    as ``${paths.encoder}`` are kept. A sourced component is kept as it is written (spaCy
    would load the pipeline it names; ``spacy init fill-config`` re-adds it so too)."""
    sourced = {name for name, block in config.get("components", {}).items()
               if "source" in block}
    bare = config.copy()
    for name in sourced:
        del bare["components"][name]
    bare["nlp"]["pipeline"] = [n for n in config["nlp"]["pipeline"] if n not in sourced]
    for key in TRAINING_LISTS:
        if key in bare.get("training", {}):
            bare["training"][key] = [n for n in bare["training"][key] if n not in sourced]
    filled = load_model_from_config(bare, auto_fill=True, validate=False).config
    filled["components"] = {name: (config["components"][name] if name in sourced
                                   else filled["components"][name])
                            for name in config["components"]}
    filled["nlp"]["pipeline"] = list(config["nlp"]["pipeline"])
    for key in TRAINING_LISTS:
        if key in config.get("training", {}):
            filled["training"][key] = list(config["training"][key])
    return filled


def init_config(component: str, paths: Mapping[str, Any] | None = None,
                lang: str = "en") -> Config:
    """The training config of ``component`` (a key of ``configs.COMPONENT_CONFIGS``) with
    every component setting filled in (``fill_components``) and the given ``paths`` set
    (``None`` values are left to ``spacy train --paths.x``). E007 for an unknown
    component, E228 for a path its config does not have."""
    if component not in COMPONENT_CONFIGS:
        raise ValueError(Errors.E007.format(what="--component", value=component,
                                            options=", ".join(COMPONENT_CONFIGS)))
    config = fill_components(load_config(packaged_config(COMPONENT_CONFIGS[component]),
                                         interpolate=False))
    for key, value in (paths or {}).items():
        if value is None:
            continue
        if key not in config["paths"]:
            raise ValueError(Errors.E228.format(key=key, component=component,
                                                known=", ".join(config["paths"])))
        config["paths"][key] = str(value)
    config["nlp"]["lang"] = lang
    return config
