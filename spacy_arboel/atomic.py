"""Atomic writes: a file or folder is written beside its target and renamed over it, so an
interrupted or failed write leaves the old one as it was and no half-written file."""

from __future__ import annotations

import fcntl
import os
import secrets
import shutil
import stat
import sys
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from pathlib import Path

from .errors import Errors

PIPELINE_FILES = ("config.cfg", "meta.json")
# the other top-level entries of spaCy's Language.to_disk, besides one per component
PIPELINE_ENTRIES = ("tokenizer", "vocab")


def _sibling(path: Path, kind: str) -> Path:
    """A new hidden path beside ``path`` that keeps its suffix (writers may read it)."""
    return path.with_name(f".{path.stem}.{kind}-{secrets.token_hex(4)}{path.suffix}")


@contextmanager
def atomic_file(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path beside ``path`` to write the file to; when the block ends
    without error it replaces ``path`` in one ``os.replace``, else it is removed and
    ``path`` is left as it was. A replaced file keeps its permission bits (a KB kept 0600
    stays 0600), from the start: the temporary file is made with them before anything is
    written to it, so licensed strings are never in a file others may read; a new file has
    the umask's, as any file the process creates."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = _sibling(path, "tmp")
    try:
        if path.is_file():  # the writer opens it again ("w" keeps an existing file's mode)
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            os.close(fd)
            _keep_mode(path, temp)
        yield temp
        with temp.open("rb") as file_:
            os.fsync(file_.fileno())
        _keep_mode(path, temp)
        os.replace(temp, path)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise


def _keep_mode(path: Path, temp: Path) -> None:
    """Give ``temp`` the permission bits of ``path``, which it is about to replace (none
    when ``path`` is missing: ``temp`` keeps the umask's)."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return
    os.chmod(temp, stat.S_IMODE(mode))


def write_text_atomic(path: str | Path, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically; return the path."""
    with atomic_file(path) as temp:
        temp.write_text(text, encoding="utf8")
    return Path(path)


def _is_saved_pipeline(path: Path) -> bool:
    """Whether the folder ``path`` holds config.cfg, meta.json and only what
    ``nlp.to_disk`` writes besides: tokenizer, vocab/ and one entry per component of the
    config's pipeline (spaCy components may add a suffix, e.g. sentencizer.json)."""
    from thinc.api import Config

    if not all((path / name).is_file() for name in PIPELINE_FILES) or (
            path / "vocab").is_file():
        return False
    try:
        pipeline = Config().from_disk(path / "config.cfg", interpolate=False)["nlp"]["pipeline"]
    except Exception:  # a config that cannot be read is no pipeline's
        return False
    if not isinstance(pipeline, list) or not all(isinstance(n, str) for n in pipeline):
        return False
    stems = {Path(name).stem for name in pipeline}  # as Path.with_suffix replaces them
    return all(entry.name in (*PIPELINE_FILES, *PIPELINE_ENTRIES, *pipeline)
               or entry.suffix and entry.stem in stems for entry in path.iterdir())


def check_replaceable(path: str | Path) -> None:
    """Raise E046 unless a saved pipeline may replace ``path``: it is missing, an empty
    folder, or a saved spaCy pipeline that holds only what ``nlp.to_disk`` writes."""
    path = Path(path)
    if not path.exists() or path.is_dir() and (
            not any(path.iterdir()) or _is_saved_pipeline(path)):
        return
    raise ValueError(Errors.E046.format(path=path))


@contextmanager
def atomic_folder(path: str | Path, check: Callable[[Path], None] | None = None
                  ) -> Iterator[Path]:
    """Yield a temporary folder path beside ``path`` to save to (e.g. ``nlp.to_disk``);
    when the block ends without error the new folder takes the place of ``path`` (an old
    one is renamed aside, then deleted), else it is removed and ``path`` is left as it was.
    Saving into the folder that was loaded from is safe: it is replaced only at the end.
    Only a missing or empty folder or a pipeline is replaced (E046 before anything is
    written, see :func:`check_replaceable`; ``check`` replaces that rule, e.g. for a
    folder of another kind of output). A replaced folder keeps its own permission bits, and
    each file of the new folder that replaces one of the same name those of the old (a
    ``kb.jsonl`` kept 0600 in a saved pipeline or a prepared dataset); new files have the
    umask's."""
    path = Path(path)
    (check or check_replaceable)(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = _sibling(path, "tmp")
    try:
        yield temp
        if path.is_dir() and not path.is_symlink():
            _keep_mode(path, temp)
            for written in temp.rglob("*"):
                replaced = path / written.relative_to(temp)
                if written.is_file() and not written.is_symlink() and replaced.is_file():
                    _keep_mode(replaced, written)
    except BaseException:
        shutil.rmtree(temp, ignore_errors=True)
        raise
    old = _sibling(path, "old") if path.exists() or path.is_symlink() else None
    if old is not None:
        os.rename(path, old)
    try:
        os.rename(temp, path)
    except BaseException:
        if old is not None:
            os.rename(old, path)
        shutil.rmtree(temp, ignore_errors=True)
        raise
    if old is not None:
        if old.is_dir() and not old.is_symlink():
            shutil.rmtree(old)
        else:
            old.unlink()


def lock_path(path: str | Path) -> Path:
    """The lock file of the output ``path``: hidden beside it (not inside a folder output,
    which an atomic save replaces whole and whose files readers list); ``.`` and ``..``
    are named by the folder they stand for."""
    path = Path(os.path.abspath(path))
    return path.with_name(f".{path.name}.lock")


@contextmanager
def output_lock(path: str | Path, command: str = "") -> Iterator[Path]:
    """Hold the exclusive lock of the output ``path`` (``fcntl.flock`` on
    :func:`lock_path`) for the block: a second run on the same output gets E240 at once,
    naming the lock and the process that holds it. The OS releases a flock when its
    process ends, so a killed run leaves no lock behind that counts (at most its file,
    which the next run takes over and removes)."""
    path = Path(path)
    lock = lock_path(path)
    lock.parent.mkdir(parents=True, exist_ok=True)
    while True:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            try:
                holder = lock.read_text(encoding="utf8").strip() or "unknown"
            except OSError:
                holder = "unknown"
            raise ValueError(Errors.E240.format(path=path, lock=lock, holder=holder)
                             ) from None
        try:  # the file may have been removed by the run that held it: lock the new one
            if os.stat(lock).st_ino == os.fstat(fd).st_ino:
                break
        except FileNotFoundError:
            pass
        os.close(fd)
    try:
        os.ftruncate(fd, 0)
        os.write(fd, f"pid {os.getpid()}: {command or ' '.join(sys.argv)}\n".encode())
        yield lock
    finally:
        lock.unlink(missing_ok=True)  # still holding it: no run locks this file after
        os.close(fd)


def check_own_folder(path: str | Path, command: str, marker: str,
                     owned: Callable[[str], bool] | Collection[str]) -> None:
    """Raise E244 unless ``command`` may replace the folder ``path`` whole: it is missing
    or empty, or it holds ``marker`` (the file an earlier run of ``command`` writes last)
    and only names it writes (``owned``: the names, or a test of a name)."""
    path = Path(path)
    if not path.exists():
        return
    if not path.is_dir():
        raise ValueError(Errors.E244.format(path=path, command=command,
                                            problem="it is a file"))
    names = sorted(entry.name for entry in path.iterdir())
    if not names:
        return
    is_owned = owned if callable(owned) else set(owned).__contains__
    foreign = [name for name in names if name != marker and not is_owned(name)]
    if marker not in names or foreign:
        shown = ", ".join(foreign[:5] or names[:5])
        raise ValueError(Errors.E244.format(
            path=path, command=command, problem=f"it holds {shown}" + (
                "" if marker in names else f" and no {marker}")))
