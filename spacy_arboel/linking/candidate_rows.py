"""Rows of candidate entity positions, one per passage or mention, padded with -1: what
both readers train on (the gold put among a passage's candidates) and merge (EntQA /
BEER²'s union of two retrievals). numpy only."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np


def union_rows(first: np.ndarray, second: np.ndarray, use_second: np.ndarray) -> np.ndarray:
    """Per row, the entities of ``first`` then the new ones of ``second`` (where
    ``use_second``), padded with -1."""
    rows = []
    for a, b, flag in zip(first, second, use_second, strict=True):
        row = [int(x) for x in a if x >= 0]
        if flag:
            seen = set(row)
            row += [int(x) for x in b if x >= 0 and int(x) not in seen]
        rows.append(row)
    return pad_rows(rows)


def with_gold(candidates: np.ndarray, gold: Sequence[dict[int, Any]], *,
              append: bool = False) -> np.ndarray:
    """Put each passage's gold entities among its candidates: in place of the lowest-ranked
    non-gold ones (reader: K stays fixed), or after them (``append``: retriever negatives)."""
    rows = []
    for row, entities in zip(candidates, gold, strict=True):
        row = [int(c) for c in row if c >= 0]
        missing = [e for e in sorted(entities) if e not in row]
        if append:
            row = row + missing
        elif missing:
            keep = [c for c in row if c in entities]
            others = [c for c in row if c not in entities]
            room = max(0, len(row) - len(keep) - len(missing))
            row = (keep + missing + others[:room])[: max(len(row), 1)]
        rows.append(row)
    return pad_rows(rows)


def pad_rows(rows: Sequence[Sequence[int]]) -> np.ndarray:
    """Rows of entity positions as one array, padded with -1."""
    out = np.full((len(rows), max(len(r) for r in rows)), -1, dtype="int64")
    for i, row in enumerate(rows):
        out[i, : len(row)] = row
    return out
