"""Safe outputs for the CLI commands and the project's scripts (a library module, no
typer): no output may be one of the inputs (or another
output), a file output is no folder and a folder output no file, an output that may hold
the user's edits is not replaced without --force, each output is locked for the whole
command (a second run on it gets E240), output folders exist before the work starts, and
files and folders are written atomically (``spacy_arboel.atomic``), so that a failed or
interrupted command leaves the old output as it was."""

from __future__ import annotations

import errno
import importlib.util
import os
import stat
from collections.abc import Collection, Iterable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from contextvars import ContextVar
from pathlib import Path

__all__ = ["atomic_file", "atomic_folder", "check_outputs", "check_writable", "lock_outputs",
           "same_path", "write_text_atomic"]

from wasabi import msg

from .atomic import (
    atomic_file,
    atomic_folder,
    check_replaceable,
    output_lock,
    write_text_atomic,
)
from .errors import Errors

PathArg = Path | Iterable[Path] | None


def _paths(value: PathArg) -> list[Path]:
    if value is None:
        return []
    return [Path(value)] if isinstance(value, str | os.PathLike) else [Path(p) for p in value]


def same_path(a: str | Path, b: str | Path) -> bool:
    """Whether ``a`` and ``b`` name one file or folder (resolved, or os.path.samefile)."""
    a, b = Path(a), Path(b)
    if a.resolve() == b.resolve():
        return True
    return a.exists() and b.exists() and os.path.samefile(a, b)


def _relation(output: Path, other: Path) -> str | None:
    """How ``output`` stands to ``other``: "same", "lies inside", "contains" or None."""
    if same_path(output, other):
        return "same"
    out, oth = output.resolve(), other.resolve()
    if oth in out.parents:
        return "lies inside"
    if out in oth.parents:
        return "contains"
    return None


def check_outputs(inputs: Mapping[str, PathArg], outputs: Mapping[str, PathArg],
                  pipelines: Collection[str] = (), *, folders: Collection[str] = (),
                  kinds: Mapping[str, str] | None = None, keep: Collection[str] = (),
                  force: bool = False) -> None:
    """Raise E227 when a ``png`` output is asked for and matplotlib is not installed; exit
    (E040, E041) when an output is an input or another output, or when one lies
    inside the other; raise E254-E256 when an output cannot be written
    (:func:`check_writable`); take each output's lock for the rest of the command (E240 when
    another run holds it, :func:`lock_outputs`); then exit (E046) when an output named in
    ``pipelines`` (saved with ``pipeline.save_pipeline``) would replace a folder that is not a
    pipeline, (E241) when an output named in ``folders`` (or ``pipelines``) is a file or
    any other output (a file) is a folder, (E245) when an existing file output is not of
    the kind ``kinds`` names for it (:data:`KINDS`: the command did not write it), and
    (E242) when an output named in ``keep`` exists and not ``force``; then create the
    parent folders of the outputs. Keys name the arguments and options, e.g. "CORPUS" or
    "--output"; values are paths, lists or None."""
    kinds = kinds or {}
    named_outputs = [(name, p) for name, value in outputs.items() for p in _paths(value)]
    for name, _ in named_outputs:
        if kinds.get(name) == "png":
            require_plots(name)
    others = [(name, p, "an input of the command")
              for name, value in inputs.items() for p in _paths(value)]
    for i, (name, path) in enumerate(named_outputs):
        later = [(n, p, "another output of the command") for n, p in named_outputs[i + 1:]]
        for other_name, other, what in others + later:
            relation = _relation(path, other)
            if relation == "same":
                msg.fail(Errors.E040.format(output_name=name, output=path,
                                            other_name=other_name, other=other, what=what),
                         exits=1)
            elif relation:
                msg.fail(Errors.E041.format(output_name=name, output=path, relation=relation,
                                            other_name=other_name, other=other, what=what),
                         exits=1)
    for name, path in named_outputs:
        check_writable(name, path, folder=name in folders or name in pipelines)
    lock_outputs([path for _, path in named_outputs])
    for name, path in named_outputs:
        if name in pipelines:
            check_replaceable(path)
        is_folder = name in folders or name in pipelines
        if path.is_dir() != is_folder and path.exists():
            found, wanted = ("file", "folder") if is_folder else ("folder", "file")
            msg.fail(Errors.E241.format(name=name, path=path, found=found, wanted=wanted),
                     exits=1)
        kind = kinds.get(name)
        problem = _not_of_kind(path, kind) if kind and path.is_file() else None
        if problem:
            msg.fail(Errors.E245.format(name=name, path=path, kind=kind, problem=problem),
                     exits=1)
        if name in keep and not force and path.exists():
            msg.fail(Errors.E242.format(name=name, path=path), exits=1)
    for _, path in named_outputs:
        path.parent.mkdir(parents=True, exist_ok=True)


def check_writable(name: str, path: str | Path, *, folder: bool = False) -> None:
    """Raise unless this user can write the output ``path`` (``name``: the argument or
    option), checked before any input is read: its lock and its temporary file or folder
    are made beside it, so the nearest folder on its way that exists must be writable and
    searchable (E254; a file on its way: E256), and so must an existing ``folder`` output,
    which is written into or replaced whole (E254). An existing file output that is
    read-only is refused, not replaced (E255): read-only for this user, or with no write
    permission bit at all, which root would otherwise override: the user made it so."""
    path = Path(os.path.abspath(path))
    place = path.parent
    while True:  # the nearest existing ancestor: missing folders are created in it
        try:
            mode = os.stat(place).st_mode
            break
        except OSError as err:
            if err.errno not in (errno.ENOENT, errno.ENOTDIR, errno.EACCES):
                raise
            place = place.parent
    if not stat.S_ISDIR(mode):
        raise ValueError(Errors.E256.format(name=name, path=path, file=place))
    if not os.access(place, os.W_OK | os.X_OK):
        raise ValueError(Errors.E254.format(
            name=name, path=path, folder=place,
            problem=f"this user may not create files in {place} (mode "
                    f"{stat.S_IMODE(mode):04o})"))
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return  # a new output (or a dangling link, replaced by the new file)
    if stat.S_ISDIR(mode):
        if folder and not os.access(path, os.W_OK | os.X_OK):
            raise ValueError(Errors.E254.format(
                name=name, path=path, folder=path,
                problem=f"this user may not write in the folder (mode "
                        f"{stat.S_IMODE(mode):04o})"))
    elif not folder and (not os.access(path, os.W_OK) or not mode & 0o222):
        why = (f"mode {stat.S_IMODE(mode):04o}" if mode & 0o222 else
               f"mode {stat.S_IMODE(mode):04o}: no one may write it")
        raise ValueError(Errors.E255.format(name=name, path=path, why=why))


def require_plots(what: str) -> None:
    """E227 unless matplotlib (the ``plots`` extra) is installed: checked before a command
    that draws a plot writes anything."""
    if importlib.util.find_spec("matplotlib") is None:
        raise ValueError(Errors.E227.format(what=what))


# the kinds of file a command writes, each told by how it begins: a .spacy DocBin
# (zlib-compressed msgpack), JSON, JSON lines (a KB: one object a line), a PNG, an HTML page
KINDS = {
    "spacy": lambda head: head[:1] == b"\x78",
    "json": lambda head: head.lstrip()[:1] in (b"{", b"["),
    "jsonl": lambda head: head.lstrip()[:1] == b"{",
    "png": lambda head: head.startswith(b"\x89PNG\r\n\x1a\n"),
    "html": lambda head: head.lstrip()[:1] == b"<",
}


def _not_of_kind(path: Path, kind: str) -> str | None:
    """Why the existing file ``path`` is not a ``kind`` file (None when it is one, or
    empty: a file of no content holds nothing to lose)."""
    with path.open("rb") as file_:
        head = file_.read(512)
    if not head.strip() or KINDS[kind](head):
        return None
    return f"it begins {head[:24]!r}"


# what the running command holds until it ends (its output locks): set by the commands'
# group (``cli.app``) around each command
_COMMAND_RESOURCES: ContextVar[ExitStack | None] = ContextVar("command_resources",
                                                              default=None)


@contextmanager
def command_resources() -> Iterator[None]:
    """Around one command: what it takes with :func:`lock_outputs` is released when it
    ends, however it ends (the process ending releases a lock in any case)."""
    with ExitStack() as stack:
        token = _COMMAND_RESOURCES.set(stack)
        try:
            yield
        finally:
            _COMMAND_RESOURCES.reset(token)


def lock_outputs(paths: Iterable[Path]) -> None:
    """Hold the lock of each output (``atomic.output_lock``) until the command ends; exit
    with E240 where another run holds one (printed by the commands' group, ``cli.app``).
    Outside a command (from Python, no :func:`command_resources`) nothing is locked."""
    stack = _COMMAND_RESOURCES.get()
    if stack is None:
        return
    for path in paths:
        stack.enter_context(output_lock(path))
