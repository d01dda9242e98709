"""The typer application behind ``python -m spacy_arboel`` and ``spacy-arboel``."""

import typer
from typer.core import TyperGroup

from ..errors import is_coded


class CodedErrorsGroup(TyperGroup):
    """The commands' group: each command runs with its resources (``outputs.
    command_resources``: the output locks it takes, released when it ends); a coded error
    (``[E…]`` message) that a command lets through is printed as the commands print their
    own (wasabi's ✘, exit status 1), not as a traceback; any other exception is a bug and
    keeps its traceback. A coded FileNotFoundError is a data file not found (E175: a
    vocabulary package not installed)."""

    def invoke(self, ctx):
        from .outputs import command_resources

        try:
            with command_resources():
                return super().invoke(ctx)
        # ImportError: an extra not installed
        except (ValueError, ImportError, FileNotFoundError) as err:
            if not is_coded(str(err)):
                raise
            from wasabi import msg

            msg.fail(str(err), exits=1)


app = typer.Typer(
    name="spacy-arboel",
    help="Build knowledge bases, convert corpora, evaluate and benchmark entity linkers.",
    no_args_is_help=True,
    add_completion=False,
    cls=CodedErrorsGroup,
)

# for commands that take spaCy-style config overrides (--components.x.y value)
OVERRIDES = {"allow_extra_args": True, "ignore_unknown_options": True}
