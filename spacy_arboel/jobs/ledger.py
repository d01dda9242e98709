"""The ledger of resumable work, and its digest. No spaCy here.

A ledger is one JSON file: the ``settings`` of the job that wrote it (compared when a run
resumes: a ledger of another job is refused) and one entry per finished unit under a key
of its user's choosing, each with the size and SHA-256 of what it covers:

- ``link-corpus``: ``manifest.json`` of the output folder, ``shards`` → the digest of each
  linked shard's source and what linking it gave;
- ``build-index``: ``manifest.json`` of the work folder, ``shards`` → the rows of each
  embedded shard and the digest of their vectors;
- a saved component: its ``manifest.json``, ``files`` → the digest of each file it saved
  (no settings: a component folder is checked, not resumed).

An entry is current while what it covers still has its size and digest (:meth:`changed`);
a unit without a current entry is done again (jobs) or refused (a component's files).
Each change is saved atomically, so an interrupted run loses at most the units in flight.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection
from pathlib import Path
from typing import Any

from ..atomic import write_text_atomic
from ..parsing import parse_json

MANIFEST = "manifest.json"


def digest(source: str | Path | bytes | memoryview, ends: int | None = None) -> str:
    """The SHA-256 (hex) of a file (a path) or of bytes (any C-contiguous buffer, e.g. a
    numpy array); ``ends``: of a file's first and last ``ends`` bytes only (a file larger
    than ``2 * ends``)."""
    if not isinstance(source, (str, Path)):
        return hashlib.sha256(source).hexdigest()
    with Path(source).open("rb") as file_:
        if ends is None:
            return hashlib.file_digest(file_, "sha256").hexdigest()
        hasher = hashlib.sha256(file_.read(ends))
        file_.seek(-ends, 2)
        hasher.update(file_.read(ends))
    return hasher.hexdigest()


def stamp(path: Path, prefix: str = "") -> dict[str, Any]:
    """The size and digest of the file ``path`` as a ledger entry records them
    (``{prefix}size``, ``{prefix}sha256``)."""
    return {f"{prefix}size": path.stat().st_size, f"{prefix}sha256": digest(path)}


def changed(entry: dict[str, Any], path: Path, name: str, prefix: str = "",
            quick: tuple[int, int] | None = None) -> str | None:
    """Why the file ``path`` (called ``name``) is not the one ``entry`` records (see
    :func:`stamp`), or None when it is. ``quick``: ``(whole, ends)``: a file larger than
    ``whole`` bytes is compared by size and by the ``{prefix}ends_sha256`` of its ends
    (``digest(path, ends)``) when the entry has one, not hashed whole."""
    if not path.is_file():
        return f"{name} is missing"
    size = path.stat().st_size
    if size != entry.get(f"{prefix}size"):
        return f"{name} has {size} bytes, {entry.get(f'{prefix}size')} were saved"
    if quick is None or size <= quick[0]:
        if digest(path) != entry.get(f"{prefix}sha256"):
            return f"{name} is not the file that was saved (its checksum differs)"
    elif (f"{prefix}ends_sha256" in entry
          and digest(path, quick[1]) != entry[f"{prefix}ends_sha256"]):
        return f"{name} is not the file that was saved (the checksum of its ends differs)"
    return None


class LedgerError(ValueError):
    """A ledger file that cannot be read (``problem``), or one written with other settings
    (``keys``: the settings that differ, ``saved``: its settings). Each user turns it into
    its own coded error."""

    def __init__(self, problem: str, keys: list[str] | None = None,
                 saved: dict[str, Any] | None = None) -> None:
        super().__init__(problem)
        self.problem, self.keys, self.saved = problem, keys or [], saved or {}


class Ledger:
    """The ledger file ``path``: ``settings`` (None: none recorded) and the ``entries``
    saved under ``key``."""

    def __init__(self, path: str | Path, key: str, settings: dict[str, Any] | None = None,
                 entries: dict[str, dict[str, Any]] | None = None) -> None:
        self.path, self.key = Path(path), key
        # as it is saved: tuples become lists, so that a saved ledger compares equal
        self.settings = None if settings is None else json.loads(json.dumps(settings))
        self.entries = entries if entries is not None else {}

    @classmethod
    def read(cls, path: str | Path, key: str, settings: bool = True,
             text: str | bytes | None = None) -> Ledger:
        """The ledger saved at ``path`` (or its ``text``, read elsewhere); LedgerError when
        it is no ledger: not JSON, or without a map of entries under ``key`` or, if
        ``settings``, a map of settings."""
        try:
            saved = parse_json(Path(path).read_bytes() if text is None else text)
            entries = saved[key]
            recorded = saved["settings"] if settings else None
            if not isinstance(entries, dict) or settings and not isinstance(recorded, dict):
                raise TypeError(f"{key} and settings must be maps" if settings
                                else f"{key!r} is not a map")
        except (ValueError, KeyError, TypeError) as err:
            raise LedgerError(f"{type(err).__name__}: {err}") from None
        return cls(path, key, recorded, entries)

    @classmethod
    def open(cls, path: str | Path, key: str, settings: dict[str, Any],
             informational: Collection[str] = ()) -> Ledger:
        """The ledger at ``path`` for a job with ``settings``: a new one when there is
        none; the saved one when it was written with the same settings, all but the
        ``informational`` ones (LedgerError with the keys that differ otherwise)."""
        ledger = cls(path, key, settings)
        if not ledger.path.exists():
            return ledger
        saved = cls.read(path, key)
        differ = sorted(k for k in {*saved.settings, *ledger.settings} - set(informational)
                        if saved.settings.get(k) != ledger.settings.get(k))
        if differ:
            raise LedgerError(f"settings {', '.join(differ)} differ", differ, saved.settings)
        saved.settings = ledger.settings
        return saved

    def mark(self, name: str, entry: dict[str, Any]) -> None:
        """Record the unit ``name`` as done (after its output was written) and save."""
        self.entries[name] = entry
        self.save()

    def drop(self, names: Collection[str]) -> None:
        """Forget the units ``names`` (their work is stale) and save."""
        for name in names:
            self.entries.pop(name, None)
        self.save()

    def save(self) -> None:
        """Write the ledger atomically (``settings`` left out when there are none)."""
        data = {self.key: self.entries} if self.settings is None else {
            "settings": self.settings, self.key: self.entries}
        write_text_atomic(self.path, json.dumps(data, indent=1) + "\n")
