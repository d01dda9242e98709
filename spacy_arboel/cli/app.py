"""The typer application behind ``python -m spacy_arboel`` and ``spacy-arboel``."""

import errno

import typer
from typer.core import TyperGroup

from ..errors import Errors, is_coded

# what the system says of a path the user named, or of the disk: not a bug of the command
PATH_ERRNOS = frozenset({errno.EACCES, errno.EPERM, errno.EISDIR, errno.ENOTDIR,
                         errno.ENOENT, errno.EROFS, errno.ENOSPC, errno.EDQUOT,
                         errno.ENAMETOOLONG, errno.ELOOP, errno.EEXIST, errno.ENOTEMPTY,
                         errno.ETXTBSY})
# these have no path when a write() fails
DISK_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS})


class CodedErrorsGroup(TyperGroup):
    """The commands' group: each command runs with its resources (``outputs.
    command_resources``: the output locks it takes, released when it ends); a coded error
    (``[E…]`` message) that a command lets through is printed as the commands print their
    own (wasabi's ✘, exit status 1), not as a traceback, and so is an OSError on a path
    (a file that cannot be read or written, a folder where a file is needed, a full disk:
    E257, :func:`os_error_message`); any other exception is a bug and keeps its
    traceback. A coded FileNotFoundError is a data file not found (E175: a vocabulary
    package not installed)."""

    def invoke(self, ctx):
        from ..outputs import command_resources

        try:
            with command_resources():
                return super().invoke(ctx)
        # ImportError: an extra not installed
        except (ValueError, ImportError, OSError) as err:
            message = str(err) if is_coded(str(err)) else os_error_message(err)
            if message is None:
                raise
            from wasabi import msg

            msg.fail(message, exits=1)


def os_error_message(err: BaseException) -> str | None:
    """E257 for an OSError that names a path the command read or wrote (permission
    denied, a folder where a file is needed, a missing file, ...) or a full or read-only
    disk; None for anything else, which stays a traceback."""
    if not isinstance(err, OSError) or err.errno not in PATH_ERRNOS:
        return None
    if err.filename is None and err.errno not in DISK_ERRNOS:
        return None
    path = "an output" if err.filename is None else str(err.filename)
    if err.filename2 is not None:
        path = f"{path} -> {err.filename2}"
    kind = f"{type(err).__name__}, {errno.errorcode.get(err.errno, err.errno)}"
    return Errors.E257.format(path=path, strerror=err.strerror, kind=kind)


app = typer.Typer(
    name="spacy-arboel",
    help="Build knowledge bases, convert corpora, evaluate and benchmark entity linkers.",
    no_args_is_help=True,
    add_completion=False,
    cls=CodedErrorsGroup,
)

# for commands that take spaCy-style config overrides (--components.x.y value)
OVERRIDES = {"allow_extra_args": True, "ignore_unknown_options": True}
