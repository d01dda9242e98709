"""PyTorch modules inside thinc models whose weights load in thinc's ``init``.

As in spacy-transformers, an architecture is built without weights (loading a saved pipeline
must never touch the base model); its ``init`` loads them, so ``model.initialize()`` is the
one place weights enter a model. The shim serialises with safetensors: thinc's default
``PyTorchShim.to_bytes`` pickles with ``torch.save``, which a user must never have to load.
"""

from __future__ import annotations

from collections.abc import Callable

import safetensors.torch
import torch
from thinc.api import Model, get_torch_default_device
from thinc.layers.pytorchwrapper import convert_pytorch_default_outputs
from thinc.layers.pytorchwrapper import forward as pytorch_forward
from thinc.shims import PyTorchShim

from ..errors import Errors

ModuleLoader = Callable[[], dict[str, torch.nn.Module]]
LOADER_ATTR = "load_modules"


def _to_safetensors(module: torch.nn.Module) -> bytes:
    return safetensors.torch.save({k: v.contiguous() for k, v in module.state_dict().items()})


def _from_safetensors(module: torch.nn.Module | None, data: bytes,
                      device: torch.device) -> torch.nn.Module:
    if module is None:
        raise ValueError(Errors.E057)
    module.load_state_dict(safetensors.torch.load(data))
    return module.to(device)


class TorchModuleShim(PyTorchShim):
    """thinc's PyTorch shim, created empty; ``set_module`` gives it its module (from ``init``)
    and its bytes are safetensors."""

    def __init__(self, mixed_precision: bool = False) -> None:
        super().__init__(None, mixed_precision=mixed_precision,
                         serialize_model=_to_safetensors, deserialize_model=_from_safetensors)

    @property
    def has_module(self) -> bool:
        return self._model is not None

    @property
    def module(self) -> torch.nn.Module:
        if self._model is None:
            raise ValueError(Errors.E057)
        return self._model

    def set_module(self, module: torch.nn.Module) -> None:
        self._model = module.to(get_torch_default_device())


def torch_layer(convert_inputs: Callable, convert_outputs: Callable | None = None,
                mixed_precision: bool = False) -> Model:
    """``PyTorchWrapper_v2``'s layer over an empty ``TorchModuleShim``."""
    return Model("pytorch", pytorch_forward,
                 attrs={"convert_inputs": convert_inputs,
                        "convert_outputs": convert_outputs or convert_pytorch_default_outputs},
                 shims=[TorchModuleShim(mixed_precision)], dims={"nI": None, "nO": None})


def initialize_with(model: Model, load: ModuleLoader | None = None) -> None:
    """Initialise ``model`` (its ``init``) with the modules that ``load`` returns, by layer
    name (``model.attrs["layer_names"]``): the saved or trained weights of a component;
    without ``load``, the architecture's base encoder."""
    model.attrs[LOADER_ATTR] = load
    model.initialize()


def init_modules(model: Model, default: ModuleLoader) -> None:
    """The body of an architecture's ``init``: put the modules of the loader given to
    ``initialize_with`` (else ``default``, the base encoder) into the layers."""
    modules = (model.attrs.get(LOADER_ATTR) or default)()
    model.attrs[LOADER_ATTR] = None  # loaded once: a later initialize() starts from the base
    for layer, name in zip(model.layers, model.attrs["layer_names"], strict=True):
        layer.shims[0].set_module(modules[name])


def init_from_base(load_base: Callable[[str, int, dict], dict[str, torch.nn.Module]]):
    """An architecture's ``init``: the modules given to ``initialize_with``, else
    ``load_base(encoder_name, vocabulary size, model.attrs["settings"])``."""
    from ..encoders.loading import load_tokenizer

    def init(model: Model, X=None, Y=None) -> None:
        def base() -> dict[str, torch.nn.Module]:
            name = model.attrs["encoder_name"]
            return load_base(name, len(load_tokenizer(name)), model.attrs["settings"])

        init_modules(model, base)

    return init


def is_loaded(model: Model) -> bool:
    return all(layer.shims[0].has_module for layer in model.layers)


def torch_modules(model: Model) -> dict[str, torch.nn.Module]:
    """The PyTorch module of each layer, by layer name (E057 before ``init``)."""
    return {name: layer.shims[0].module
            for name, layer in zip(model.attrs["layer_names"], model.layers, strict=True)}


def shim_device(model: Model) -> torch.device | None:
    """The device of a layer's module (None before ``init``), for input conversion."""
    shim = model.shims[0] if model.shims else None
    return shim.device if shim is not None and shim.has_module else None
