"""The thinc model of each architecture: a declared holder of the PyTorch modules that its
component's core runs, not a compute path.

spacy-transformers makes its thinc model the compute path: the ``transformer`` component
calls ``model.predict(docs)`` and ``model.begin_update(docs)``, thinc's PyTorch wrapper
converts the inputs and outputs, and the shim's ``to_bytes`` writes the weights. Here the
forward passes belong to the cores of ``spacy_arboel.linking`` (the retriever, the readers,
the re-ranker and their trainers): plain PyTorch, used and tested without spaCy or thinc
(``DenseRetriever.from_pretrained``), which write their modules with ``save_pretrained`` and
safetensors. A thinc forward as well would put thinc into the cores or keep a second forward
beside each of theirs (what issue 31 found: a forward only tests ran, four input
conversions, weights written twice). So the model of an architecture holds the modules and
does nothing else:

- its ``init`` loads them (:func:`initialize_with`: the component's saved or given modules,
  else the base encoder); building loads nothing, so loading a saved pipeline never touches
  the base encoder (as in spacy-transformers);
- spaCy reaches them through the model's shims (thinc's ``PyTorchShim``, one per module):
  the optimizer (``finish_update`` steps the parameters to which the core's loss gave
  gradients), device placement (a module goes to thinc's torch device, so ``require_gpu``
  places it) and ``Model.copy``. ``use_params`` reaches the shims too, but like every thinc
  PyTorch shim (spacy-transformers' included) finds none of the optimizer's averages (thinc
  keys them ``(shim id, name)``, the shim looks for ``"pytorch_{id}_{name}"``): parameter
  averaging leaves these weights alone, and the configs set ``use_averages = false``;
- the component hands them to its core (:func:`torch_modules`), which runs them: the
  modules the optimizer updates are the ones the core computes with;
- its forward refuses (E058), so it converts no inputs;
- it is not serialised (E059): a component writes its modules once, in its own folder, and
  loads them back through ``initialize_with``; no pickle is ever read.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any, NoReturn

import torch
from thinc.api import Model, get_torch_default_device
from thinc.shims import PyTorchShim

from ..encoders.loading import load_tokenizer
from ..errors import Errors

ModuleLoader = Callable[[], dict[str, torch.nn.Module]]
# (encoder name, its tokenizer, the model's attrs) -> the base modules by name
BaseLoader = Callable[[str, Any, dict[str, Any]], dict[str, torch.nn.Module]]
LOADER_ATTR = "load_modules"
NAMES_ATTR = "module_names"


class ModuleShim(PyTorchShim):
    """thinc's PyTorch shim over one module, created empty (``set_module`` gives it its module
    in ``init``). thinc's optimizer, ``use_params``, ``to_device`` and ``copy`` work on it as
    on any PyTorch shim; its bytes are refused (E059): the component saves the module."""

    def __init__(self) -> None:
        super().__init__(None)

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

    def to_bytes(self) -> NoReturn:
        raise ValueError(Errors.E059)

    def from_bytes(self, bytes_data: bytes) -> NoReturn:
        raise ValueError(Errors.E059)


def module_holder(name: str, module_names: list[str], load_base: BaseLoader,
                  attrs: dict[str, Any]) -> Model:
    """The model of an architecture: one empty ``ModuleShim`` per name of ``module_names``,
    filled in ``init``; ``attrs``: the architecture's arguments, which its component reads."""
    return Model(name, _refuse_forward, init=partial(_init, load_base=load_base),
                 shims=[ModuleShim() for _ in module_names],
                 attrs={**attrs, NAMES_ATTR: list(module_names)})


def _refuse_forward(model: Model, inputs: Any, is_train: bool) -> NoReturn:
    raise ValueError(Errors.E058.format(name=model.name))


def _init(model: Model, X: Any = None, Y: Any = None, *, load_base: BaseLoader) -> None:
    """Put the modules of the loader given to ``initialize_with`` (else the base modules of
    ``encoder_name``) into the shims."""
    def base() -> dict[str, torch.nn.Module]:
        name = model.attrs["encoder_name"]
        return load_base(name, load_tokenizer(name), model.attrs)

    modules = (model.attrs.get(LOADER_ATTR) or base)()
    model.attrs[LOADER_ATTR] = None  # loaded once: a later initialize() starts from the base
    for shim, name in zip(model.shims, model.attrs[NAMES_ATTR], strict=True):
        shim.set_module(modules[name])


def initialize_with(model: Model, load: ModuleLoader | None = None) -> None:
    """Initialise ``model`` (its ``init``) with the modules that ``load`` returns, by name
    (``model.attrs["module_names"]``): the saved or trained modules of a component; without
    ``load``, the architecture's base encoder."""
    model.attrs[LOADER_ATTR] = load
    model.initialize()


def is_loaded(model: Model) -> bool:
    return all(shim.has_module for shim in model.shims)


def torch_modules(model: Model) -> dict[str, torch.nn.Module]:
    """The PyTorch module of each shim, by name (E057 before ``init``): what the component
    hands to its core."""
    return {name: shim.module
            for name, shim in zip(model.attrs[NAMES_ATTR], model.shims, strict=True)}
