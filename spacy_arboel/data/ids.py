"""The composite gold-id convention, in one place (no spaCy needed)."""

from __future__ import annotations

from collections.abc import Iterable

ID_SEPARATOR = "|"


def gold_ids(kb_id: str) -> tuple[str, ...]:
    """The gold ids of a span's ``kb_id_``: composite mentions join several ids with ``|``."""
    return tuple(dict.fromkeys(p.strip() for p in kb_id.split(ID_SEPARATOR) if p.strip()))


def join_ids(ids: Iterable[str]) -> str:
    """The ``kb_id_`` for a mention with these gold ids (inverse of :func:`gold_ids`)."""
    return ID_SEPARATOR.join(ids)
