"""Saving a component's transformers once each, however many of its sides hold them.

An untrained linker's mention and entity encoders (``arbo_linker``'s passage and entity
encoders) are two modules with the same weights, the base encoder's: saved as they are, the
pipeline holds two identical copies (87 MB each for MiniLM-L6). A transformer with the same
weights as one written before it is written as a folder holding only ``SAME_AS``, which names
that folder; loading reads the named folder's weights into a module of its own, so that the
two sides train apart again as before (issue 62). Folders saved before this (full copies)
load as they did.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path

import torch

from ..errors import Errors

# the file of a folder whose weights are another folder's, and what it holds
SAME_AS = "same_weights_as.json"


def same_weights(first: torch.nn.Module, second: torch.nn.Module) -> bool:
    """Whether two modules hold equal tensors under the same names (one module: True)."""
    if first is second:
        return True
    a, b = first.state_dict(), second.state_dict()
    return a.keys() == b.keys() and all(
        a[k].shape == b[k].shape and a[k].dtype == b[k].dtype and torch.equal(a[k], b[k])
        for k in a)


def transformer_writers(transformers: Mapping[str, torch.nn.Module]
                        ) -> dict[str, Callable[[Path], None]]:
    """A writer per saved folder name: ``save_pretrained`` (safetensors), or, for a
    transformer with the same weights as one earlier in ``transformers``, a ``SAME_AS``
    file naming that one's folder."""
    writers: dict[str, Callable[[Path], None]] = {}
    written: list[tuple[str, torch.nn.Module]] = []
    for name, module in transformers.items():
        twin = next((other for other, saved in written if same_weights(saved, module)), None)
        if twin is None:
            writers[name] = lambda p, m=module: m.save_pretrained(str(p),
                                                                  safe_serialization=True)
            written.append((name, module))
        else:
            writers[name] = lambda p, t=twin: _write_same_as(p, t)
    return writers


def _write_same_as(path: Path, folder: str) -> None:
    path.mkdir(parents=True, exist_ok=True)
    (path / SAME_AS).write_text(json.dumps({"folder": folder}) + "\n")


def weights_folder(path: Path, name: str) -> Path:
    """The folder that holds the weights of the saved folder ``name`` in ``path``: itself,
    or the sibling its ``SAME_AS`` names (E030 for a name that is no sibling folder)."""
    marker = path / name / SAME_AS
    if not marker.is_file():
        return path / name
    try:
        folder = json.loads(marker.read_text())["folder"]
    except (ValueError, KeyError, TypeError) as error:
        raise ValueError(Errors.E030.format(component=name, path=path,
                                            problem=f"{marker.name} is unreadable: {error}")
                         ) from error
    target = path / str(folder)
    if Path(str(folder)).name != folder or folder == name or not target.is_dir() \
            or (target / SAME_AS).exists():
        raise ValueError(Errors.E030.format(
            component=name, path=path,
            problem=f"{marker.name} names {folder!r}, not a saved folder beside it"))
    return target
