"""The typer application of the project's scripts (``python scripts/project.py COMMAND``):
the library's commands group (``spacy_arboel.cli.app.CodedErrorsGroup``), so that a coded
error of a script is printed as the library's commands print theirs."""

import typer

from spacy_arboel.cli.app import OVERRIDES, CodedErrorsGroup

app = typer.Typer(
    name="project",
    help="The workflow of project.yml over the BC5CDR, NCBI-disease and toy datasets: "
         "prepare a dataset, train a step with its settings, report a run, describe a package.",
    no_args_is_help=True,
    add_completion=False,
    cls=CodedErrorsGroup,
)

__all__ = ["OVERRIDES", "app"]
