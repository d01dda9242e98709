"""Saved component folders: a manifest of their files, checked on load, and ``to_bytes`` /
``from_bytes`` as a msgpack map of those files (no pickle).

A component writes its files with ``to_disk`` and then ``write_manifest``; ``from_disk``
calls ``check_folder`` before it reads anything, so a missing, truncated or swapped file is a
coded error (E030) instead of a numpy, safetensors or FAISS traceback, or a silently wrong
link. Bytes from elsewhere are unpacked only under names the component writes itself (E031).
"""

from __future__ import annotations

import hashlib
import json
import tempfile
import warnings
from collections.abc import Callable, Collection, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path, PurePosixPath
from typing import Any

import srsly

from .errors import Errors, Warnings, is_coded

MANIFEST = "manifest.json"


def _digest(path: Path) -> str:
    with path.open("rb") as file_:
        return hashlib.file_digest(file_, "sha256").hexdigest()


def _files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file() and p.name != MANIFEST)


def write_manifest(folder: Path) -> None:
    """Record the size and SHA-256 of every file under ``folder`` in ``manifest.json``."""
    files = {p.relative_to(folder).as_posix(): {"size": p.stat().st_size, "sha256": _digest(p)}
             for p in _files(folder)}
    (folder / MANIFEST).write_text(json.dumps({"files": files}, indent=1) + "\n")


def check_folder(folder: Path, component: str, required: Iterable[str]) -> None:
    """Raise E030 unless ``folder`` holds the ``required`` entries and every file of its
    manifest with the recorded size and checksum; warn (W003) when it has no manifest."""

    def fail(problem: str) -> None:
        raise ValueError(Errors.E030.format(component=component, path=folder, problem=problem))

    if not folder.is_dir():
        fail("the folder does not exist")
    missing = [name for name in required if not (folder / name).exists()]
    if missing:
        fail(f"{', '.join(missing)} missing")
    manifest = folder / MANIFEST
    if not manifest.exists():
        warnings.warn(Warnings.W003.format(component=component, path=folder), stacklevel=3)
        return
    try:
        files = json.loads(manifest.read_text())["files"]
    except (ValueError, KeyError, TypeError) as err:
        fail(f"{MANIFEST} is not readable ({err})")
    for name, expected in files.items():
        path = folder / name
        if not path.is_file():
            fail(f"{name} is missing")
        if path.stat().st_size != expected["size"]:
            fail(f"{name} has {path.stat().st_size} bytes, {expected['size']} were saved")
        if _digest(path) != expected["sha256"]:
            fail(f"{name} is not the file that was saved (its checksum differs)")


@contextmanager
def reading(path: str | Path, component: str) -> Iterator[None]:
    """Turn a failure to read a saved file (truncated, wrong format) into E030."""
    try:
        yield
    except Exception as err:  # numpy, safetensors, tokenizers and json each raise their own
        if is_coded(str(err)):
            raise  # already one of ours
        raise ValueError(Errors.E030.format(component=component, path=path,
                                            problem=f"{type(err).__name__}: {err}")) from err


# --- to_bytes / from_bytes -----------------------------------------------------------------


def folder_to_bytes(to_disk: Callable[..., None], exclude: Iterable[str] = ()) -> bytes:
    """Save with ``to_disk`` into a temporary folder and pack its files."""
    with tempfile.TemporaryDirectory() as tmp:
        to_disk(tmp, exclude=exclude)
        files = {p.relative_to(tmp).as_posix(): p.read_bytes()
                 for p in sorted(Path(tmp).rglob("*")) if p.is_file()}
    return srsly.msgpack_dumps(files)


def unsafe_entry(name: Any, content: Any, allowed: Collection[str]) -> str | None:
    """Why a packed entry may not be written (None when it may): names must be relative
    POSIX paths under one of the ``allowed`` top-level names, without ``..``, and hold
    bytes."""
    if not isinstance(name, str) or not name:
        return "the name is not a non-empty string"
    if "\\" in name or "\0" in name or ":" in name:
        return "the name holds a backslash, a NUL or a colon"
    path = PurePosixPath(name)
    if path.is_absolute():
        return "the name is an absolute path"
    if any(part in ("", ".", "..") for part in name.split("/")):
        return "the name holds an empty, '.' or '..' part"
    if path.parts[0] not in allowed:
        return "the component writes no such file"
    if not isinstance(content, bytes):
        return "the content is not bytes"
    return None


def folder_from_bytes(data: bytes, from_disk: Callable[..., Any], *, component: str,
                      allowed: Collection[str], exclude: Iterable[str] = ()) -> Any:
    """Unpack the files of ``folder_to_bytes`` into a temporary folder and load it.

    Every entry is checked before anything is written (E031): bytes from elsewhere never
    write outside the temporary folder, nor files the component does not write itself.
    """
    allowed = {*allowed, MANIFEST}
    try:
        files = srsly.msgpack_loads(data)
    except Exception as err:  # msgpack raises several unrelated types
        raise ValueError(Errors.E031.format(component=component, name="<data>",
                                            problem=f"not a msgpack map ({err})",
                                            allowed=", ".join(sorted(allowed)))) from None
    if not isinstance(files, dict):
        files = {"<data>": None}
    for name, content in files.items():
        problem = unsafe_entry(name, content, allowed)
        if problem:
            raise ValueError(Errors.E031.format(component=component, name=name,
                                                problem=problem,
                                                allowed=", ".join(sorted(allowed))))
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp).resolve()
        for name, content in files.items():
            target = root / name
            target.parent.mkdir(parents=True, exist_ok=True)
            if root not in target.resolve().parents:  # defence in depth: links, odd names
                raise ValueError(Errors.E031.format(component=component, name=name,
                                                    problem="it resolves outside the folder",
                                                    allowed=", ".join(sorted(allowed))))
            target.write_bytes(content)
        return from_disk(tmp, exclude=exclude)
