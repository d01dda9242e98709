"""Command-line interface: each module adds its commands to one typer app."""

from . import data_commands, eval_commands, project_commands  # noqa: F401  (registers the commands)
from .app import app

__all__ = ["app"]
