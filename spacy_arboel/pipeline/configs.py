"""A training config filled against the factories: every setting a packaged config leaves
out is its factory's default, or that of the architecture, objective or scorer a block
names, so that ``init_config`` (``init-config``) writes them all (as ``spacy init
fill-config`` does) and the packaged configs hold only their deliberate deviations
(``configs.DEVIATIONS``)."""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from inspect import Parameter, signature
from typing import Any

from confection import Config
from spacy import blank
from spacy.util import load_config, registry

from ..configs import COMPONENT_CONFIGS, packaged_config
from ..errors import Errors


def function_of(block: Mapping[str, Any]) -> tuple[str, str] | None:
    """The registry and name of the function a config block names (``@architectures``,
    ``@misc``, ``@scorers``...), None for a plain section."""
    return next(((key, value) for key, value in block.items() if key.startswith("@")), None)


def function_defaults(block: Mapping[str, Any]) -> dict[str, Any]:
    """The defaults of the registered function a block names (none for a plain section)."""
    named = function_of(block)
    if named is None:
        return {}
    function = getattr(registry, named[0][1:]).get(named[1])
    return {name: p.default for name, p in signature(function).parameters.items()
            if p.default is not Parameter.empty}


def factory_defaults(factory: str) -> dict[str, Any]:
    """The ``default_config`` of the component factory ``factory`` (a blank pipeline loads
    the factories of the installed packages' entry points)."""
    return copy.deepcopy(dict(blank("xx").get_factory_meta(factory).default_config))


def fill_block(block: Mapping[str, Any], defaults: Mapping[str, Any]) -> dict[str, Any]:
    """``block`` over ``defaults``: a nested block over the defaults of the block it
    replaces when it names the same function or none (spaCy merges such a block into the
    default one), else over its own function's defaults."""
    filled: dict[str, Any] = {}
    keys = {**defaults, **block}
    for key in sorted(keys, key=lambda k: not k.startswith("@")):  # the function first
        value = block[key] if key in block else defaults[key]
        if not isinstance(value, Mapping):
            filled[key] = copy.deepcopy(value)
            continue
        default = defaults.get(key)
        same = isinstance(default, Mapping) and function_of(value) in (None,
                                                                       function_of(default))
        base = {**function_defaults(value), **(default if same else {})}
        filled[key] = fill_block(value if key in block else {}, base)
    return filled


def component_blocks(config: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """The name and block of each component of ``config`` made by a factory (a sourced
    component takes its settings from its pipeline)."""
    for name, block in config.get("components", {}).items():
        if "factory" in block:
            yield name, block


def fill_components(config: Config) -> Config:
    """``config`` with each factory-made component's settings filled in from its factory,
    architecture, objective and scorer; variables such as ``${paths.encoder}`` are kept."""
    filled = config.copy()
    for name, block in component_blocks(config):
        filled["components"][name] = fill_block(block, factory_defaults(block["factory"]))
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
