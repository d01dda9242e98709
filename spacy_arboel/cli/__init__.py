"""Command-line interface: each module adds its commands to one typer app."""

from . import (  # noqa: F401  (registers the commands)
    config_commands,
    coref_commands,
    corpus_commands,
    data_commands,
    distill_commands,
    eval_commands,
    index_commands,
    lexical_commands,
    nil_commands,
    pretrain_commands,
    ranks_commands,
    render_commands,
)
from .app import app

__all__ = ["app"]
