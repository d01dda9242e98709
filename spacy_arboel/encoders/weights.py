"""Hashes and int8 copies of torch modules (spaCy-free)."""

from __future__ import annotations

import copy
import hashlib
import json
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
    """An int8 dynamic-quantised CPU copy of a torch module (its Linear layers), for fast CPU
    inference; the float module keeps training and saving. Scores change slightly."""
    copied = copy.deepcopy(module).to("cpu").eval()
    return torch.ao.quantization.quantize_dynamic(copied, {torch.nn.Linear}, dtype=torch.qint8)


def module_device(module: torch.nn.Module) -> torch.device:
    """Where a module's weights live."""
    return next(module.parameters()).device


def autocast(device: torch.device, mixed_precision: bool):
    """Mixed precision on a GPU when asked for; a no-op on a CPU."""
    return torch.autocast(device.type, enabled=mixed_precision and device.type == "cuda")
