"""The composite gold-id convention, in one place, and the held-out ids of a prepared
dataset (no spaCy needed)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from ..errors import Errors
from ..parsing import parse_json

ID_SEPARATOR = "|"


def gold_ids(kb_id: str) -> tuple[str, ...]:
    """The gold ids of a span's ``kb_id_``: composite mentions join several ids with ``|``."""
    return tuple(dict.fromkeys(p.strip() for p in kb_id.split(ID_SEPARATOR) if p.strip()))


def join_ids(ids: Iterable[str]) -> str:
    """The ``kb_id_`` for a mention with these gold ids (inverse of :func:`gold_ids`)."""
    return ID_SEPARATOR.join(ids)


def read_heldout_ids(path: str | Path) -> set[str]:
    """The ``ids`` of a ``heldout_ids.json`` (the entities ``prepare --holdout`` held out)
    and their ``alt_ids`` (a gold id of an older release names a held-out entity too);
    E152 when it is no such file."""
    path = Path(path)
    try:
        data = parse_json(path.read_bytes())
        ids, alt_ids = data["ids"], data.get("alt_ids", [])
        if not all(isinstance(value, list) and all(isinstance(i, str) for i in value)
                   for value in (ids, alt_ids)):
            raise TypeError('"ids" or "alt_ids" is not a list of strings')
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise ValueError(Errors.E152.format(path=path, problem=f"{type(err).__name__}: {err}")
                         ) from None
    return {*ids, *alt_ids}
