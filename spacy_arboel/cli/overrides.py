"""Config overrides given on the command line as extra options (``--section.key value``),
parsed as ``spacy train`` parses them, with spaCy's environment variable too."""

from __future__ import annotations

import os
import shlex
from typing import Any

import typer
from click import NoSuchOption

from ..errors import Errors
from ..parsing import parse_json

ENV_VAR = "SPACY_CONFIG_OVERRIDES"  # as spaCy's commands: overrides from the environment


def parse_value(value: str) -> Any:
    """A value as JSON where it parses (``4``, ``true``, ``null``, ``[1, 2]``), else the
    string itself (so that ``--paths.train corpus/train.spacy`` needs no quotes). A JSON
    object stays its text (e.g. ``label_types``): confection would read a dict as a config
    section, which an override cannot add."""
    try:
        parsed = parse_json(value)  # not srsly's: it reads 0.020036 as 0.020035999999999998
    except ValueError:
        return str(value)
    return str(value) if isinstance(parsed, dict) else parsed


def _parse(args: list[str], from_cli: bool) -> dict[str, Any]:
    result: dict[str, Any] = {}
    args = list(args)
    while args:
        option = args.pop(0)
        if not option.startswith("--"):
            raise ValueError(Errors.E211.format(option=option,
                                                problem="name should start with --"))
        key = option.replace("--", "")
        if "." not in key:
            if from_cli:  # an unknown option of the command, as click says it
                raise NoSuchOption(option)
            raise ValueError(Errors.E211.format(option=option,
                                                problem="can't override top-level sections"))
        if "=" in key:  # --section.key=value
            key, value = key.split("=", 1)
            key = key.replace("-", "_")
        elif not args or args[0].startswith("--"):  # a flag with no value
            value = "true"
        else:
            value = args.pop(0)
        result[key] = parse_value(value)
    return result


def parse_overrides(args: list[str]) -> dict[str, Any]:
    """The dotted config overrides of a command's extra arguments (typer's ``ctx.args``),
    e.g. ``["--components.arbo_coref.k", "4"]`` → ``{"components.arbo_coref.k": 4}``,
    with those of ``$SPACY_CONFIG_OVERRIDES`` winning, as in spaCy's commands. An option
    without a dot is an unknown option (click's usage error); other malformed ones raise
    a ValueError (E211)."""
    from_env = _parse(shlex.split(os.environ.get(ENV_VAR, "")), from_cli=False)
    return {**_parse(args, from_cli=True), **from_env}


def command_overrides(ctx: typer.Context | None) -> dict[str, Any]:
    """:func:`parse_overrides` of a typer context's extra arguments (none without a
    context); a malformed override exits with E211."""
    from wasabi import msg

    if ctx is None:
        return {}
    try:
        return parse_overrides(ctx.args)
    except ValueError as err:
        msg.fail(str(err))
        raise SystemExit(1) from None
