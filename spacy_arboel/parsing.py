"""Parsing text that comes from outside (corpus shards, KB JSONL, manifests, settings
files): every way a line or file can be unreadable (bad syntax, bytes that are not UTF-8,
nesting too deep for the parser) is one ``ValueError`` saying what is wrong, which the
caller turns into its coded error naming the file and line."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

BOM = b"\xef\xbb\xbf"  # the UTF-8 byte-order mark


def decode_utf8(data: bytes) -> str:
    """``data`` decoded as UTF-8 (ValueError naming the first byte that is not)."""
    try:
        return data.decode("utf8")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        column = err.start - (data.rfind(b"\n", 0, err.start) + 1) + 1
        where = f"column {column}" if line == 1 else f"line {line}, column {column}"
        raise ValueError(f"not UTF-8 text: byte {data[err.start]:#x} at {where}") from None


def parse_json(text: str | bytes) -> Any:
    """``json.loads`` of ``text`` (bytes must be UTF-8): ValueError whatever makes it
    unreadable, including nesting too deep for the parser (a RecursionError)."""
    if isinstance(text, bytes):
        text = decode_utf8(text)
    try:
        return json.loads(text)
    except ValueError as err:  # JSONDecodeError, or an int of too many digits
        raise ValueError(f"not JSON ({err})") from None
    except RecursionError:
        raise ValueError("not JSON that can be read (nested too deeply)") from None


def utf8_lines(lines: Iterable[bytes],
               fail: Callable[[int, str], Exception]) -> Iterator[str]:
    """The ``lines`` of a file opened in binary mode, decoded; ``fail(number, problem)``
    is raised for the first line that is not UTF-8. A byte-order mark that starts the file
    (as Windows editors write) is not part of its first line: it would become part of the
    first id or column name."""
    for number, raw in enumerate(lines, start=1):
        if number == 1 and raw.startswith(BOM):
            raw = raw[len(BOM):]
        try:
            yield decode_utf8(raw)
        except ValueError as err:
            raise fail(number, str(err)) from None


def input_problem(path: str | Path, *, folder_ok: bool = False) -> str | None:
    """Why ``path`` cannot be read as an input file (or folder, where ``folder_ok``), as the
    end of a sentence ("does not exist", "is a folder, not a file", "cannot be read by this
    user"), or None when it can: checked before a long read, so that a bad path fails the
    command at once rather than after the other inputs were read."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return "does not exist"
    except NotADirectoryError:
        return "does not exist (a folder on its way is a file)"
    except OSError as err:  # e.g. a folder on its way that this user may not search
        return f"cannot be reached ({err.strerror})"
    is_dir = stat.S_ISDIR(mode)
    if is_dir and not folder_ok:
        return "is a folder, not a file"
    if not os.access(path, os.R_OK | (os.X_OK if is_dir else 0)):
        return f"cannot be read by this user (permission denied, mode {stat.S_IMODE(mode):04o})"
    return None
