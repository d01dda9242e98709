"""Saved component folders: a manifest of their files, checked on load, and ``to_bytes`` /
``from_bytes`` as a msgpack map of those files (no pickle).

A component's ``to_disk`` removes the files of an earlier save (``clear_saved``), writes its
own and lists them with ``write_manifest``; ``from_disk`` calls ``check_folder`` before it
reads anything, so a missing, truncated, stale or swapped file is a coded error (E030)
instead of a numpy, safetensors or FAISS traceback, or a silently wrong link. Bytes from
elsewhere are unpacked only under names the component writes itself and its manifest lists
(E031, E032).

The check reads every listed file whole (SHA-256 at about 1.4 GB/s from the page cache on
one core, less from disk: a 2.1 GB ``index.faiss`` adds 1.5 s to each load); a component's
``verify_files = "quick"`` hashes only small files whole and the ends of large ones (about
3 ms for that file; see ``check_folder``).
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
from collections.abc import Callable, Collection, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path, PurePosixPath
from typing import Any

import srsly

from .errors import Errors, is_coded
from .jobs.ledger import MANIFEST, Ledger, LedgerError, changed, digest, stamp
from .settings import VERIFY_MODES

FILES = "files"  # the key of a manifest's entries
# "quick": files up to QUICK_WHOLE bytes are hashed whole, larger ones only their first and
# last QUICK_ENDS bytes
QUICK_WHOLE = 16 * 2**20
QUICK_ENDS = 2**20


def verify_mode(value: str) -> str:
    """``value`` when it is one of ``VERIFY_MODES`` (E007 otherwise)."""
    if value not in VERIFY_MODES:
        raise ValueError(Errors.E007.format(what="verify_files", value=value,
                                            options=", ".join(VERIFY_MODES)))
    return value


def write_manifest(folder: Path, names: Iterable[str]) -> None:
    """Record in ``manifest.json`` (a ledger with no settings, its entries under
    ``files``) the size and SHA-256 of every file under the top-level entries ``names`` of
    ``folder`` that this save wrote (names that do not exist, such as optional files, are
    skipped; other files of the folder are not listed), and for files larger than
    ``QUICK_WHOLE`` the SHA-256 of their ends (``ends_sha256``)."""
    found: list[Path] = []
    for path in (folder / name for name in names):
        found += [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]
    files: dict[str, dict[str, Any]] = {}
    for path in sorted(found):
        entry = files[path.relative_to(folder).as_posix()] = stamp(path)
        if entry["size"] > QUICK_WHOLE:
            entry["ends_sha256"] = digest(path, QUICK_ENDS)
    Ledger(folder / MANIFEST, FILES, entries=files).save()


def clear_saved(folder: Path, names: Iterable[str]) -> None:
    """Remove the entries ``names`` (those a component saves) and the manifest from
    ``folder`` before the component saves there, so that no file of an earlier save is
    left to be listed and loaded."""
    for path in (folder / name for name in (*names, MANIFEST)):
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)


def _manifest_files(path: Path, text: bytes) -> tuple[dict[str, dict[str, Any]], str | None]:
    """The ``files`` map of a manifest and None, or an empty map and why it is malformed
    (the callers put the reason into E030 or E031)."""
    try:
        files = Ledger.read(path, FILES, settings=False, text=text).entries
    except LedgerError as err:
        return {}, err.problem
    if not files:
        return {}, '"files" is not a non-empty map'
    for name, entry in files.items():
        problem = unsafe_name(name)
        if problem:
            return {}, f"the name {name!r} is refused: {problem}"
        if not (isinstance(entry, dict) and isinstance(entry.get("size"), int)
                and isinstance(entry.get("sha256"), str)
                and isinstance(entry.get("ends_sha256", ""), str)):
            return {}, f'the entry of {name} is not {{"size": int, "sha256": str}}'
    return files, None


def check_folder(folder: Path, component: str, required: Iterable[str],
                 verify: str = "sha256") -> None:
    """Raise E030 unless ``folder`` holds the ``required`` entries, its manifest is well
    formed, lists them, names only files inside the folder, and every file it lists has the
    recorded size and checksum. A folder without a manifest is refused too: every save
    writes one, so such a folder is incomplete.

    ``verify``: ``sha256`` reads every listed file whole; ``quick`` checks every size but
    hashes whole only the files up to ``QUICK_WHOLE`` bytes (16 MiB), the larger ones at
    their first and last MiB. ``quick`` catches a missing, truncated, extended or swapped
    file and damage at the ends of a large one (headers, array shapes), not a same-size
    change inside a large file (bit rot, a partial overwrite); for files you saved on
    storage you trust."""

    def fail(problem: str) -> None:
        raise ValueError(Errors.E030.format(component=component, path=folder, problem=problem))

    verify_mode(verify)
    if not folder.is_dir():
        fail("the folder does not exist")
    required = list(required)
    missing = [name for name in required if not (folder / name).exists()]
    if missing:
        fail(f"{', '.join(missing)} missing")
    manifest = folder / MANIFEST
    if not manifest.exists():
        fail(f"{MANIFEST} is missing, and every save writes one, so the folder is incomplete")
    files, problem = _manifest_files(manifest, manifest.read_bytes())
    if problem:
        fail(f"{MANIFEST} is malformed ({problem})")
    root = folder.resolve()
    outside = [name for name in files if root not in (folder / name).resolve().parents]
    if outside:
        fail(f"{MANIFEST} names {outside[0]!r}, which resolves outside the folder")
    unlisted = [name for name in required
                if name not in files and not any(f.startswith(f"{name}/") for f in files)]
    if unlisted:
        fail(f"{MANIFEST} does not list {', '.join(unlisted)}")
    quick = (QUICK_WHOLE, QUICK_ENDS) if verify == "quick" else None
    for name, expected in files.items():
        problem = changed(expected, folder / name, name, quick=quick)
        if problem:
            fail(problem)


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


def unsafe_name(name: Any, allowed: Collection[str] | None = None) -> str | None:
    """Why ``name`` may not name a file of a component's folder (None when it may): it must
    be a relative POSIX path without ``..``, under one of the ``allowed`` top-level names
    when these are given."""
    if not isinstance(name, str) or not name:
        return "the name is not a non-empty string"
    if "\\" in name or "\0" in name or ":" in name:
        return "the name holds a backslash, a NUL or a colon"
    path = PurePosixPath(name)
    if path.is_absolute():
        return "the name is an absolute path"
    if any(part in ("", ".", "..") for part in name.split("/")):
        return "the name holds an empty, '.' or '..' part"
    if allowed is not None and path.parts[0] not in allowed:
        return "the component writes no such file"
    return None


def unsafe_entry(name: Any, content: Any, allowed: Collection[str]) -> str | None:
    """Why a packed entry may not be written (None when it may): a safe name (see
    :func:`unsafe_name`) that holds bytes."""
    problem = unsafe_name(name, allowed)
    if problem is None and not isinstance(content, bytes):
        return "the content is not bytes"
    return problem


def folder_from_bytes(data: bytes, from_disk: Callable[..., Any], *, component: str,
                      allowed: Collection[str], exclude: Iterable[str] = ()) -> Any:
    """Unpack the files of ``folder_to_bytes`` into a temporary folder and load it.

    The data must be a msgpack map (E032) whose entries all have safe names, hold bytes and
    are listed in its manifest, which it must hold (E031); all of this is checked before
    anything is written, so bytes from elsewhere never write outside the temporary folder,
    nor files the component does not write itself.
    """
    allowed = {*allowed, MANIFEST}

    def refuse(name: Any, problem: str) -> None:
        raise ValueError(Errors.E031.format(component=component, name=name, problem=problem,
                                            allowed=", ".join(sorted(allowed))))

    try:
        files = srsly.msgpack_loads(data)
    except Exception as err:  # msgpack raises several unrelated types
        raise ValueError(Errors.E032.format(component=component,
                                            problem=f"they are not msgpack ({err})")) from None
    if not isinstance(files, dict):
        raise ValueError(Errors.E032.format(
            component=component, problem=f"they hold a {type(files).__name__}, not a map"))
    for name, content in files.items():
        problem = unsafe_entry(name, content, allowed)
        if problem:
            refuse(name, problem)
    if MANIFEST not in files:
        refuse(MANIFEST, "it is missing, and to_bytes always writes it")
    listed, problem = _manifest_files(Path(MANIFEST), files[MANIFEST])
    if problem:
        refuse(MANIFEST, f"it is malformed ({problem})")
    unlisted = sorted(set(files) - set(listed) - {MANIFEST})
    if unlisted:
        refuse(unlisted[0], f"{MANIFEST} does not list it")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp).resolve()
        for name, content in files.items():
            target = root / name
            target.parent.mkdir(parents=True, exist_ok=True)
            if root not in target.resolve().parents:  # defence in depth: links, odd names
                refuse(name, "it resolves outside the folder")
            target.write_bytes(content)
        return from_disk(tmp, exclude=exclude)


class SavedAsFolder:
    """``to_bytes``/``from_bytes`` for a component saved as a folder of ``saved_files``
    (packed by :func:`folder_to_bytes`, unpacked and checked by :func:`folder_from_bytes`)."""

    saved_files: tuple[str, ...] = ()

    def to_bytes(self, *, exclude: Iterable[str] = tuple()) -> bytes:
        return folder_to_bytes(self.to_disk, exclude)

    def from_bytes(self, bytes_data: bytes, *, exclude: Iterable[str] = tuple()):
        return folder_from_bytes(bytes_data, self.from_disk, component=self.name,
                                 allowed=self.saved_files, exclude=exclude)


def pipeline_fingerprint(folder: str | Path) -> str:
    """A SHA-256 of what a saved pipeline links with: its config.cfg and every file of its
    folders, a component folder with a manifest by that manifest (it holds its files'
    checksums, which loading checks), other files by their content; meta.json (scores,
    descriptions) is left out. A rename, copy or move keeps it; a retrained or
    re-configured pipeline changes it."""
    folder = Path(folder)
    hasher = hashlib.sha256()
    paths = [p for p in sorted(folder.rglob("*")) if p.is_file()
             and p.relative_to(folder).as_posix() != "meta.json"]
    covered = {p.parent for p in paths if p.name == MANIFEST}
    for path in paths:
        if path.name != MANIFEST and any(c in path.parents for c in covered):
            continue  # listed by its component's manifest
        hasher.update(path.relative_to(folder).as_posix().encode("utf8") + b"\0")
        hasher.update(digest(path).encode("ascii") + b"\0")
    return hasher.hexdigest()
