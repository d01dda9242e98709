"""The typer application behind ``python -m spacy_arboel`` and ``spacy-arboel``."""

import typer

app = typer.Typer(
    name="spacy-arboel",
    help="Build knowledge bases, convert corpora, evaluate and benchmark entity linkers.",
    no_args_is_help=True,
    add_completion=False,
)

# for commands that take spaCy-style config overrides (--components.x.y value)
OVERRIDES = {"allow_extra_args": True, "ignore_unknown_options": True}
