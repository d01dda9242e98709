"""Hashes, and the int8 (ONNX Runtime, ``onnx_int8``) and bfloat16 copies that passes without
gradient run, of torch modules (spaCy-free)."""

from __future__ import annotations

import copy
import functools
import hashlib
import itertools
import json
from collections.abc import Callable, Sequence
from typing import Any

import torch


def weights_fingerprint(settings: list[Any], module: torch.nn.Module) -> str:
    """A hash of a torch module's weights and the input settings it was used with (what a
    saved index or state was built from)."""
    digest = hashlib.sha256()
    digest.update(json.dumps(settings).encode())
    for key, tensor in sorted(module.state_dict().items()):
        digest.update(key.encode())
        digest.update(tensor.detach().cpu().numpy().tobytes())
    return digest.hexdigest()[:16]


def quantized_copy(module: torch.nn.Module) -> torch.nn.Module:
    """An int8 CPU copy of a torch module for fast CPU inference: each Hugging Face
    transformer inside runs as an int8 ONNX Runtime model (``onnx_int8``), the small heads
    stay float32 torch; the module passed in is not changed (it keeps training and saving).
    Scores change slightly. E270 without ONNX Runtime (the ``fast`` extra), E271 for a
    module without a transformer."""
    from .onnx_int8 import require_onnx_runtime, with_int8_transformers

    require_onnx_runtime()
    return with_int8_transformers(copy.deepcopy(module).to("cpu").eval())


@functools.cache
def cpu_has_native_bf16() -> bool:
    """Whether this CPU multiplies bfloat16 matrices in hardware (AVX512-BF16 or AMX); where
    it does not, bfloat16 is emulated and slower than float32."""
    checks = [getattr(torch.cpu, name, None)
              for name in ("_is_avx512_bf16_supported", "_is_amx_tile_supported")]
    return any(bool(check()) for check in checks if check is not None)


@functools.cache
def cpu_bf16_pays() -> bool:
    """Whether this CPU's bfloat16 is faster than its float32 for a transformer: with AMX
    (Intel Xeon from Sapphire Rapids on), or AVX512-BF16 on an AMD CPU. AVX512-BF16 alone
    does not say it: a 2-core AMD EPYC set the MeSH KB up 1.8 times faster in bfloat16, a
    2-core Intel Xeon with AVX512-BF16 and without AMX linked 613 mentions a second in
    bfloat16 against 743 in float32 (BENCHMARKS.md, "Fast CPU linking on a kept path"). Read
    from the CPU, not timed, so that every process of a run (workers, ranks, actors) takes
    the same copy and embeds alike."""
    amx = getattr(torch.cpu, "_is_amx_tile_supported", None)
    return bool(amx is not None and amx()) or cpu_vendor() == "AuthenticAMD"


def cpu_vendor() -> str | None:
    """The CPU's vendor id (``GenuineIntel``, ``AuthenticAMD``) where /proc/cpuinfo says it."""
    try:
        with open("/proc/cpuinfo", encoding="utf8") as info:
            for line in info:
                if line.startswith("vendor_id"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        return None
    return None


def runs_bf16(module: torch.nn.Module, cpu_bf16: bool) -> bool:
    """Whether passes without gradient run ``module``'s bfloat16 copy
    (``encoders.transformer.bf16_copy``): asked for (``cpu_bf16``), on a CPU with native
    bfloat16 of a kind where it is the faster (``cpu_bf16_pays``)."""
    return (cpu_bf16 and module_device(module).type == "cpu" and cpu_has_native_bf16()
            and cpu_bf16_pays())


GPU_BATCH = 1024  # rows a forward pass without gradient takes at least on a GPU


def inference_batch_size(batch_size: int, module: torch.nn.Module) -> int:
    """The rows of one forward pass without gradient (the KB at a refresh, mentions to
    link): ``batch_size`` on a CPU, at least ``GPU_BATCH`` on a GPU, where small batches
    leave it idle (the rows are sorted by length, so padding stays small)."""
    return max(batch_size, GPU_BATCH) if module_device(module).type == "cuda" else batch_size


def module_device(module: torch.nn.Module) -> torch.device:
    """Where a module's weights live: the CPU for one without any torch weights (an int8
    ONNX copy, ``onnx_int8.OnnxInt8Transformer``, inside a pooling head)."""
    for tensor in itertools.chain(module.parameters(), module.buffers()):
        return tensor.device
    return torch.device("cpu")


def autocast_dtype(device: torch.device) -> torch.dtype:
    """The half type of mixed precision on ``device``: bfloat16 where the GPU has it (Ampere
    and later: fp32's range, so gradients need no loss scaling, and the bi-encoder's and
    readers' trainers scale none), else float16."""
    if device.type == "cuda" and torch.cuda.is_bf16_supported():
        return torch.bfloat16
    return torch.float16


def autocast(device: torch.device, mixed_precision: bool):
    """Mixed precision on a GPU when asked for (``autocast_dtype``); a no-op on a CPU."""
    enabled = mixed_precision and device.type == "cuda"
    return torch.autocast(device.type, dtype=autocast_dtype(device) if enabled else None,
                          enabled=enabled)


class ModuleCopies:
    """Copies of named modules made by ``make`` (``quantized_copy``, or
    ``encoders.transformer.bf16_copy``) for one weights version: made when first asked for,
    made again after the weights change (a new ``version``), one copy for two names of the
    same module. The one cache of the cores' inference copies."""

    def __init__(self, make: Callable[[torch.nn.Module], torch.nn.Module] = quantized_copy
                 ) -> None:
        self.make = make
        self.copies: dict[str, torch.nn.Module] = {}
        self.version = -1

    def get(self, name: str, module: torch.nn.Module, version: int,
            modules: dict[str, torch.nn.Module] | None = None) -> torch.nn.Module:
        """The copy of ``module`` (called ``name``; ``modules``: the other named modules, to
        share one copy where two names are one module) for weights ``version``."""
        if version != self.version:
            self.copies, self.version = {}, version
        if name not in self.copies:
            shared = [n for n in self.copies if modules is not None and modules.get(n) is module]
            self.copies[name] = self.copies[shared[0]] if shared else self.make(module)
        return self.copies[name]

    def clear(self) -> None:
        self.copies, self.version = {}, -1


def to_numpy(output: Any) -> Any:
    """A module's output (a tensor or a tuple of them) as float32 numpy arrays."""
    if isinstance(output, tuple):
        return tuple(o.float().cpu().numpy() for o in output)
    return output.float().cpu().numpy()


def forward_without_grad(module: torch.nn.Module, arrays: Sequence[Any], *,
                         mixed_precision: bool = False, prefix: Sequence[Any] = ()) -> Any:
    """One forward pass of ``module`` in eval mode without gradient over integer arrays
    (token ids, masks, token types) moved to its device, mixed precision on a GPU when asked
    for; ``prefix``: arguments passed before the tensors (an op name). Returns numpy
    (``to_numpy``). The one no-gradient forward of the cores."""
    device = module_device(module)
    module.eval()
    tensors = [torch.as_tensor(a, dtype=torch.long, device=device) for a in arrays]
    with torch.no_grad(), autocast(device, mixed_precision):
        return to_numpy(module(*prefix, *tensors))
