"""``to_bytes``/``from_bytes`` for components that save a folder (msgpack of its files; no
pickle)."""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import srsly


def folder_to_bytes(to_disk: Callable[..., None], exclude: Iterable[str] = ()) -> bytes:
    """Save with ``to_disk`` into a temporary folder and pack its files."""
    with tempfile.TemporaryDirectory() as tmp:
        to_disk(tmp, exclude=exclude)
        files = {str(p.relative_to(tmp)): p.read_bytes()
                 for p in sorted(Path(tmp).rglob("*")) if p.is_file()}
    return srsly.msgpack_dumps(files)


def folder_from_bytes(data: bytes, from_disk: Callable[..., Any],
                      exclude: Iterable[str] = ()) -> Any:
    """Unpack the files of ``folder_to_bytes`` into a temporary folder and load it."""
    files = srsly.msgpack_loads(data)
    with tempfile.TemporaryDirectory() as tmp:
        for name, content in files.items():
            target = Path(tmp) / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(content)
        return from_disk(tmp, exclude=exclude)
