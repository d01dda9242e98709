"""Names distributed over a coordination, without spaCy: a doc read as units (``Unit``: a
word of the names, a stop word, a coordinator, an unknown word or a break) and the parts of
a name around a coordination gap ("aplastic [or hypoplastic] nails"), hyphenated compounds
read as one word ("pre-auricular"). ``components.dictionary_spans`` matches names with
them."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

# what a unit of a doc is to the matcher
WORD, STOP, COORDINATOR, STOP_COORDINATOR, UNKNOWN, BREAK, OUTER = range(7)
# English coordinators (a name distributed over a coordination: ``coordinated``)
COORDINATORS = frozenset({"and", "or", ",", "and/or", "/", "nor"})
HYPHENS = frozenset({"-", "\u2010", "\u2011"})
MAX_GAP = 6
MAX_PART = 4


@dataclass(frozen=True)
class Unit:
    """Tokens ``start``..``end`` of a doc read as one unit: a word of the names (with its
    ``NameKeys`` stem and light form), a stop word names have inside them (``STOP``) or not
    (``OUTER``), a coordinator, an unknown word or a break."""

    start: int
    end: int
    kind: int
    stem: str
    light: str = ""


def gluable(left: str, right: str) -> bool:
    """Whether two words joined by a hyphen read as one word: two letters each at least
    ("pre-auricular"; not "L-Arg", whose "larg" would read as "large", nor "T-ALL")."""
    return sum(ch.isalpha() for ch in left) >= 2 and sum(ch.isalpha() for ch in right) >= 2


def compound_end(words: list[str], spaces: list[bool], i: int) -> int:
    """The last word of the hyphenated compound starting at word ``i`` ("pre - auricular",
    no space between, each part gluable): ``i`` itself where there is none."""
    j = i
    while (j + 2 < len(words) and words[j + 1] in HYPHENS and not spaces[j]
           and not spaces[j + 1] and gluable(words[j], words[j + 2])):
        j += 2
    return j


def glued(words: list[str], spaces: list[bool]) -> list[str]:
    """A name's words with hyphenated compounds glued ("pre-auricular" -> "preauricular")."""
    out: list[str] = []
    i = 0
    while i < len(words):
        j = compound_end(words, spaces, i)
        out.append("".join(words[k] for k in range(i, j + 1, 2)))
        i = j + 1
    return out


def coordinated(units: list[Unit], max_length: int
                 ) -> Iterator[tuple[list[Unit], list[Unit]]]:
    """The (left, right) parts around a coordination gap: a name distributed over a
    coordination reads its words without the gap. Either the gap starts at a coordinator and
    ends with a conjunct, after a left part of words alone ("aplastic [or hypoplastic] nails",
    "auricular[, ophthalmologic, and oral] anomalies"), or it starts with a conjunct and ends
    at a coordinator ("renal [hypoplasia and] agenesis"). Each part is up to ``MAX_PART``
    units of words and stop words with a word at its outer edge, and the outer edges are a
    phrase's (no word before or after: "acute [heart failure and] heart failure" reads no
    "acute heart"); the gap is up to ``MAX_GAP`` units of words and coordinators, no other
    stop word ("anomaly [and a flat] face" is no name)."""
    n = len(units)
    gap_kinds = (WORD, UNKNOWN, COORDINATOR, STOP_COORDINATOR)
    for c, unit in enumerate(units):
        if unit.kind not in (COORDINATOR, STOP_COORDINATOR):
            continue
        gaps = [(c, g2, True) for g2 in range(c + 2, min(n, c + MAX_GAP + 1))
                if units[g2 - 1].kind in (WORD, UNKNOWN)]
        gaps += [(g1, c + 1, False) for g1 in range(max(0, c - MAX_GAP + 1), c)
                 if units[g1].kind in (WORD, UNKNOWN)]
        for g1, g2, modifiers in gaps:
            gap = units[g1:g2]
            if not all(u.kind in gap_kinds for u in gap) or not any(
                    u.kind in (COORDINATOR, STOP_COORDINATOR) and u.stem != "," for u in gap):
                continue
            for s in range(g1 - 1, max(-1, g1 - MAX_PART - 1), -1):
                left = units[s:g1]
                if not is_part(left) or left[0].kind != WORD or (
                        modifiers and any(u.kind != WORD for u in left)):
                    continue
                if s > 0 and units[s - 1].kind in (WORD, UNKNOWN):
                    continue
                for e in range(g2 + 1, min(n, g2 + MAX_PART) + 1):
                    right = units[g2:e]
                    if (right[-1].end - left[0].start > max_length + MAX_GAP
                            or not is_part(right) or right[-1].kind != WORD
                            or (e < n and units[e].kind in (WORD, UNKNOWN))):
                        continue
                    yield left, right


def is_part(units: list[Unit]) -> bool:
    return any(u.kind == WORD for u in units) and all(
        u.kind in (WORD, STOP, STOP_COORDINATOR) for u in units)
