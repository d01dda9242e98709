"""Int8 copies of Hugging Face transformers for CPU inference, run by ONNX Runtime
(spaCy-free): the engine of the cores' ``quantize`` setting (``weights.quantized_copy``).

A transformer is exported to ONNX by PyTorch's torch.export-based exporter (inputs
``input_ids``, ``attention_mask`` and, where its forward takes them, ``token_type_ids``;
any batch size and length; output the last hidden state), its MatMul weights are quantised
to int8 per output channel by ONNX Runtime's dynamic quantisation (activations are
quantised per tensor as each batch runs), and the result runs in an
``onnxruntime.InferenceSession`` on the CPU. Per-channel weights keep the vectors far closer
to float32 than per-tensor ones: MiniLM-L6's mention vectors at mean cosine 0.988 to
float32's, against 0.935 per tensor and 0.91 for the torch.ao int8 copies this replaced
(short mentions on a 2-core Xeon; not yet in BENCHMARKS.md).
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import os
import tempfile
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..errors import Errors

INPUTS = ("input_ids", "attention_mask", "token_type_ids")
OUTPUT = "last_hidden_state"
# Sessions a forked worker inherited, never freed there: freeing one waits for its thread
# pool's threads, which exist only in the parent, and hangs (multiprocessing's workers leave
# through os._exit, so nothing frees them on the way out).
_FORKED_SESSIONS: list[Any] = []


def require_onnx_runtime() -> None:
    """Raise E270 unless ONNX Runtime and the exporter's packages (``onnx``, ``onnxscript``:
    the ``fast`` extra) are installed."""
    for package in ("onnxruntime", "onnx", "onnxscript"):
        try:
            __import__(package)
        except ImportError:
            raise ImportError(Errors.E270.format(package=package)) from None


def model_inputs(transformer: torch.nn.Module) -> tuple[str, ...]:
    """The names of ``INPUTS`` that ``transformer``'s forward takes (ids and mask always,
    token types where it takes them), in that order."""
    parameters = inspect.signature(transformer.forward).parameters
    return INPUTS[:2] + tuple(n for n in INPUTS[2:] if n in parameters)


class _LastHidden(torch.nn.Module):
    """``transformer``'s last hidden state (what is exported); ``token_type_ids`` is passed
    on only when given."""

    def __init__(self, transformer: torch.nn.Module) -> None:
        super().__init__()
        self.transformer = transformer

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                token_type_ids: torch.Tensor | None = None) -> torch.Tensor:
        types = {} if token_type_ids is None else {"token_type_ids": token_type_ids}
        return self.transformer(input_ids=input_ids, attention_mask=attention_mask,
                                **types)[0]


class _DropInfo(logging.Filter):
    """Drops ONNX Runtime quantisation's advice records below ERROR (its pre-processing
    hint, which brings nothing to a transformer's MatMul weights)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.ERROR or "onnxruntime" not in record.pathname


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """The exporter's and the quantiser's warnings and log lines silenced (they describe
    their own internals, nothing a user can act on)."""
    torch_onnx = logging.getLogger("torch.onnx")
    level, root, drop = torch_onnx.level, logging.getLogger(), _DropInfo()
    torch_onnx.setLevel(logging.ERROR)
    root.addFilter(drop)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        torch_onnx.setLevel(level)
        root.removeFilter(drop)


def export_onnx(transformer: torch.nn.Module, names: tuple[str, ...]) -> Any:
    """``transformer`` (on the CPU, in eval mode) as an ONNX ``ModelProto`` over the inputs
    ``names`` with dynamic batch and sequence axes; E272 when the exporter fails."""
    sample = {"input_ids": torch.ones(2, 8, dtype=torch.long),
              "attention_mask": torch.ones(2, 8, dtype=torch.long),
              "token_type_ids": torch.zeros(2, 8, dtype=torch.long)}
    axes = {0: torch.export.Dim("batch"), 1: torch.export.Dim("sequence")}
    try:
        with _quiet(), torch.no_grad():
            program = torch.onnx.export(
                _LastHidden(transformer).eval(), tuple(sample[n] for n in names),
                dynamo=True, input_names=list(names), output_names=[OUTPUT],
                dynamic_shapes={n: axes for n in names}, verbose=False)
    except Exception as err:
        first = str(err).strip().splitlines()[0][:300] if str(err).strip() else ""
        raise RuntimeError(Errors.E272.format(model=type(transformer).__name__,
                                              error=f"{type(err).__name__}: {first}")) from err
    return program.model_proto


def quantize_onnx(model: Any) -> bytes:
    """An ONNX ``ModelProto`` with its MatMul weights quantised to int8 per output channel
    (dynamic quantisation: activations per tensor as each batch runs), as bytes. Per tensor
    or ``reduce_range`` (7-bit) weights cost accuracy for no speed on a VNNI CPU; quantising
    the embeddings (Gather) saves memory only and costs accuracy, so they stay float32."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    with tempfile.TemporaryDirectory() as folder, _quiet():
        path = Path(folder) / "int8.onnx"
        quantize_dynamic(model, path, op_types_to_quantize=["MatMul"], per_channel=True,
                         reduce_range=False, weight_type=QuantType.QInt8)
        return path.read_bytes()


def _numpy(tensor: torch.Tensor | np.ndarray) -> np.ndarray:
    """Integer inputs as the int64 numpy arrays the session takes."""
    if isinstance(tensor, torch.Tensor):
        tensor = tensor.detach().cpu().numpy()
    return np.asarray(tensor, dtype=np.int64)


class OnnxInt8Transformer(torch.nn.Module):
    """An int8 ONNX copy of a transformer, called like it:
    ``module(input_ids=..., attention_mask=..., token_type_ids=...)[0]`` is the last hidden
    state (float32, CPU); missing masks are all ones and missing token types all zeros, as
    in the transformer. No parameters (``weights.module_device`` says CPU); ``config`` is
    the transformer's. The session is made on first use in each process (a forked worker
    makes its own, with its own threads) on ``torch.get_num_threads()`` threads."""

    def __init__(self, model: bytes, inputs: tuple[str, ...], config: Any = None) -> None:
        super().__init__()
        self.model = model
        self.inputs = inputs
        self.config = config
        self._session: tuple[int, Any] | None = None

    @classmethod
    def from_transformer(cls, transformer: torch.nn.Module) -> OnnxInt8Transformer:
        """Export (``export_onnx``) and quantise (``quantize_onnx``) ``transformer``, which
        must be on the CPU and in eval mode; it is not changed."""
        require_onnx_runtime()
        names = model_inputs(transformer)
        return cls(quantize_onnx(export_onnx(transformer, names)), names,
                   getattr(transformer, "config", None))

    def session(self) -> Any:
        """This process's ``onnxruntime.InferenceSession`` of the int8 model."""
        if self._session is None or self._session[0] != os.getpid():
            import onnxruntime

            if self._session is not None:  # the parent's, whose threads a fork does not copy
                _FORKED_SESSIONS.append(self._session[1])

            options = onnxruntime.SessionOptions()
            options.intra_op_num_threads = torch.get_num_threads()
            options.inter_op_num_threads = 1
            session = onnxruntime.InferenceSession(self.model, options,
                                                   providers=["CPUExecutionProvider"])
            self._session = (os.getpid(), session)
        return self._session[1]

    def forward(self, input_ids: torch.Tensor | None = None,
                attention_mask: torch.Tensor | None = None,
                token_type_ids: torch.Tensor | None = None, **_: Any) -> tuple[torch.Tensor]:
        ids = _numpy(input_ids)
        given = {"input_ids": ids, "attention_mask": attention_mask,
                 "token_type_ids": token_type_ids}
        defaults = {"attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)}
        feed = {name: defaults[name] if given[name] is None else _numpy(given[name])
                for name in self.inputs}
        hidden = self.session().run([OUTPUT], feed)[0]
        return (torch.from_numpy(hidden),)

    def __del__(self) -> None:
        """A session inherited from the parent process is kept, not freed (``_FORKED_SESSIONS``)."""
        held = self.__dict__.get("_session")
        if held is not None and held[0] != os.getpid():
            _FORKED_SESSIONS.append(held[1])

    def __getstate__(self) -> dict[str, Any]:
        """Copies and pickles keep the model bytes, not the session."""
        return {**super().__getstate__(), "_session": None}


def with_int8_transformers(module: torch.nn.Module) -> torch.nn.Module:
    """``module`` (on the CPU, in eval mode) with each Hugging Face transformer
    (``transformers.PreTrainedModel``) inside replaced by its ``OnnxInt8Transformer``, in
    place (a transformer held under two names gets one copy); the other layers stay float32
    torch. ``module`` may itself be a transformer. E271 when it holds none."""
    from transformers import PreTrainedModel

    if isinstance(module, PreTrainedModel):
        return OnnxInt8Transformer.from_transformer(module)
    made: dict[int, OnnxInt8Transformer] = {}

    def visit(parent: torch.nn.Module) -> None:
        # not named_children(): it yields a module held under two names once
        for name, child in list(parent._modules.items()):
            if isinstance(child, PreTrainedModel):
                if id(child) not in made:
                    made[id(child)] = OnnxInt8Transformer.from_transformer(child)
                setattr(parent, name, made[id(child)])
            elif child is not None and not isinstance(child, OnnxInt8Transformer):
                visit(child)

    if not any(isinstance(m, PreTrainedModel) for m in module.modules()):
        raise ValueError(Errors.E271.format(module=type(module).__name__))
    visit(module)
    return module
