"""One declaration per setting: a packaged training config states a component setting only
where it deliberately differs from its default (the factory's, or that of the architecture,
objective or scorer a block names), each such difference is listed in
``spacy_arboel.configs.DEVIATIONS`` with its reason, and ``init-config`` writes the rest
filled in from the factories."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from inspect import Parameter, signature
from typing import Any

import pytest
from spacy.util import load_config, registry

from spacy_arboel.configs import DEVIATIONS, FOLDER, packaged_config
from spacy_arboel.pipeline.configs import factory_defaults, fill_components

CONFIGS = sorted(path.stem for path in FOLDER.glob("*.cfg"))
UNSET = object()


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


def component_blocks(config: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """The name and block of each component of ``config`` made by a factory."""
    for name, block in config.get("components", {}).items():
        if "factory" in block:
            yield name, block


def settings(raw: Mapping[str, Any], value: Mapping[str, Any], defaults: Mapping[str, Any],
             where: str) -> Iterator[tuple[str, Any, Any]]:
    """Each setting a config block states (its value interpolated) with its default; a
    value that names a variable (``${paths.encoder}``) is the user's to give, not a
    setting of the config."""
    for key, stated in raw.items():
        at = f"{where}.{key}"
        if key == "factory":
            continue
        if isinstance(stated, Mapping):
            default = defaults.get(key)
            same = isinstance(default, Mapping) and function_of(default) == function_of(stated)
            base = {**function_defaults(stated), **(default if same else {})}
            if not same and function_of(stated):
                key_, name = function_of(stated)
                yield f"{at}.{key_}", name, (function_of(default) or (None, UNSET))[1]
            yield from settings(stated, value[key], base, at)
        elif key.startswith("@") or (isinstance(stated, str) and "${" in stated):
            continue  # the function of a block (compared above), or a variable
        else:
            yield at, value[key], defaults.get(key, UNSET)


def stated_settings(name: str) -> list[tuple[str, Any, Any]]:
    raw = load_config(packaged_config(name), interpolate=False)
    value = load_config(packaged_config(name), interpolate=True)
    found = []
    for component, block in component_blocks(raw):
        found += settings(block, value["components"][component],
                          factory_defaults(block["factory"]), f"components.{component}")
    return found


@pytest.mark.parametrize("name", CONFIGS)
def test_a_packaged_config_states_only_its_listed_deviations(name):
    stated = stated_settings(name)
    assert stated or name not in DEVIATIONS
    restated = [where for where, value, default in stated if value == default]
    assert not restated, f"{name}.cfg restates these defaults (remove them): {restated}"
    differences = {where for where, value, default in stated if value != default}
    listed = set(DEVIATIONS.get(name, {}))
    assert differences - listed == set(), (
        f"{name}.cfg differs from its defaults here without a reason in "
        f"spacy_arboel.configs.DEVIATIONS: {sorted(differences - listed)}")
    assert listed - differences == set(), f"listed but not a deviation: {listed - differences}"
    assert all(reason.strip() for reason in DEVIATIONS.get(name, {}).values())


def test_every_listed_config_exists():
    assert set(DEVIATIONS) <= set(CONFIGS)


def test_a_setting_restated_at_its_default_fails(tmp_path, monkeypatch):
    """The check above can fail: a copy of the linker's config that restates ``top_k`` at
    its default, and one that changes it without a listed reason."""
    import spacy_arboel.configs as configs

    text = packaged_config("arbo_entity_linker").read_text()
    block = '[components.arbo_entity_linker]\nfactory = "arbo_entity_linker"\n'
    for top_k, problem in ((64, "restates"), (8, "without a reason")):
        (tmp_path / "arbo_entity_linker.cfg").write_text(
            text.replace(block, block + f"top_k = {top_k}\n"))
        monkeypatch.setattr(configs, "FOLDER", tmp_path)
        with pytest.raises(AssertionError, match=problem):
            test_a_packaged_config_states_only_its_listed_deviations("arbo_entity_linker")


@pytest.mark.parametrize("name", CONFIGS)
def test_the_filled_config_is_what_spacy_trains(name):
    """``fill_components`` (spaCy's ``auto_fill``) fills in the factory's defaults and those
    of the architecture a block names, keeps a sourced component as written and leaves the
    given config unchanged."""
    config = load_config(packaged_config(name), interpolate=False)
    filled = fill_components(config)
    for component, block in component_blocks(config):
        defaults = factory_defaults(block["factory"])
        full = filled["components"][component]
        assert set(defaults) <= set(full)
        assert {k: v for k, v in block.items() if not isinstance(v, Mapping)}.items() <= \
            full.items()
        model = full["model"]
        assert set(function_defaults(model)) <= set(model)
        assert model["encoder_name"] == "${paths.encoder}"
    for component, block in config["components"].items():
        if "source" in block:
            assert filled["components"][component] == block
    assert filled["nlp"]["pipeline"] == config["nlp"]["pipeline"]
    assert config == load_config(packaged_config(name), interpolate=False)  # not changed


def test_a_block_naming_no_function_is_filled_over_the_default_one():
    """spaCy merges ``{"model": {"encoder_name": ...}}`` into the factory's model."""
    from confection import Config

    config = Config({"nlp": {"lang": "xx", "pipeline": ["arbo_entity_linker"]},
                     "components": {"arbo_entity_linker": {
                         "factory": "arbo_entity_linker",
                         "model": {"encoder_name": "my-encoder"}}}})
    filled = fill_components(config)["components"]["arbo_entity_linker"]
    assert filled["model"]["@architectures"] == "spacy_arboel.BiEncoder.v1"
    assert filled["model"]["encoder_name"] == "my-encoder"
    assert filled["model"]["pooling"] == "mention" and filled["top_k"] == 64


def test_every_config_names_the_one_default_encoder():
    """Issue 63: the default encoder is one constant (``encoders.loading.DEFAULT_ENCODER``);
    the packaged configs, the project's configs and project.yml name it, not another."""
    import srsly

    from spacy_arboel.encoders.loading import DEFAULT_ENCODER

    root = FOLDER.parents[1]
    paths = [*FOLDER.glob("*.cfg"), *(root / "configs").glob("*.cfg")]
    named = {path.name: paths_["encoder"] for path in paths
             if "encoder" in (paths_ := load_config(path).get("paths", {}))}
    assert len(named) >= 5 and set(named.values()) == {DEFAULT_ENCODER}, named
    project = srsly.read_yaml(root / "project.yml")
    assert project["vars"]["encoder"] == DEFAULT_ENCODER
