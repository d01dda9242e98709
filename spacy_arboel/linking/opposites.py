"""Opposite links: a mention is not linked to a term whose names say the opposite of it.

A dense encoder rates "short stature" close to *Tall stature* and "underweight" close to
*Overweight*: the names share all but the word that says which side of a scale they are on.
``polarity`` reads those words (``data.opposites``: words and prefixes with a scale and a
sign) and ``opposes`` compares a mention with an entity's names: the entity is the opposite
of the mention when, on some scale, the mention says one side, one of the entity's names says
the other, and neither says the other's side (*Hypermetropia*: "hypermetropia",
"long-sightedness", "farsightedness" against "short-sighted"). A mention or an entity with no
marker, or a language with no lexicon, is never an opposite: the check drops links, it never
adds one. No spaCy here.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from functools import lru_cache

from ..data.opposites import DEFAULT_MIN_REST, MIN_REST, NAMING, PREFIXES, WORDS, Marker, one_scale

Polarity = frozenset[Marker]  # the (scale, sign) pairs a text says
_WORDS = re.compile(r"[^\W_]+")


def marked_words(text: str, language: str = "en"
                 ) -> tuple[list[str], list[tuple[int, Marker, str]]]:
    """The words of ``text`` (lowercased runs of letters and digits) and, for each word with
    a marker, its index, the marker and what follows the prefix that made it one (``""``
    for a marker word): ``data.opposites.WORDS`` (not before a word of ``NAMING``: "long
    bone"), else ``PREFIXES`` with ``MIN_REST`` letters after."""
    words, prefixes = WORDS.get(language, {}), PREFIXES.get(language, {})
    naming = NAMING.get(language, {})
    found = []
    split = _WORDS.findall(text.lower())
    for index, word in enumerate(split):
        if word in words:
            following = split[index + 1] if index + 1 < len(split) else ""
            if following not in naming.get(word, ()):
                found.append((index, words[word], ""))
            continue
        for prefix, marker in prefixes.items():
            rest = word[len(prefix):]
            if word.startswith(prefix) and len(rest) >= MIN_REST.get(prefix, DEFAULT_MIN_REST):
                found.append((index, marker, rest))
                break
    return split, found


@lru_cache(maxsize=1 << 16)
def polarity(text: str, language: str = "en") -> Polarity:
    """The (scale, sign) markers of ``text`` (``marked_words``)."""
    return frozenset(marker for _, marker, _ in marked_words(text, language)[1])


def opposes(mention: str, names: Iterable[str], language: str = "en") -> bool:
    """Whether an entity with ``names`` (its name and aliases) says the opposite of
    ``mention``: a side of a scale the mention says and no name of the entity does, against
    the other side (``data.opposites.one_scale``) that a name says and the mention does not
    ("broad short thumbs" is not the opposite of *Short stature*, "decreased body height":
    the mention says its side too)."""
    said = polarity(mention, language)
    if not said:
        return False
    entity = frozenset().union(*(polarity(name, language) for name in names))

    def says(markers: Polarity, scale: str, sign: int) -> bool:
        return any(s == sign and one_scale(scale, other) for other, s in markers)

    return any(not says(entity, scale, sign)
               and any(other_sign == -sign and one_scale(scale, other)
                       and not says(said, other, other_sign) for other, other_sign in entity)
               for scale, sign in said)


NamesOf = Callable[[str], Iterable[str]]  # an entity id -> its name and aliases


def names_oppose(mention: str, kb_id: str, names_of: NamesOf, language: str = "en") -> bool:
    """``opposes`` for the entity ``kb_id`` (``names_of`` it), its names read only when the
    mention says a side of some scale (most say none: the check costs nothing on them)."""
    return bool(polarity(mention, language)) and opposes(mention, names_of(kb_id), language)


def unopposed(mention: str, candidates: Iterable[tuple], names_of: NamesOf,
              language: str = "en") -> list[tuple]:
    """``candidates`` (tuples whose first item is an entity id, best first) without the
    entities that say the opposite of ``mention`` (``names_oppose``)."""
    return [c for c in candidates if not names_oppose(mention, c[0], names_of, language)]


def without_opposites(text: str, links: Iterable, names_of: NamesOf,
                      language: str = "en") -> list:
    """The ``links`` found in ``text`` (each with ``start_char``, ``end_char`` and
    ``kb_id``: a reader's or a dictionary's linked spans) whose entity does not say the
    opposite of the words linked (``names_oppose``)."""
    return [link for link in links if not names_oppose(
        text[link.start_char:link.end_char], link.kb_id, names_of, language)]


def frames(name: str, language: str = "en") -> list[tuple[str, str, int]]:
    """The ways ``name`` reads with one of its markers taken out: (frame, scale, sign), the
    frame being the lowercased name with that word, or its prefix, replaced by a slot."""
    words, marked = marked_words(name, language)
    return [(" ".join([*words[:i], f"<>{rest}", *words[i + 1:]]), scale, sign)
            for i, (scale, sign), rest in marked]


def opposite_entities(entities: Iterable, language: str = "en") -> dict[tuple[str, str], str]:
    """Each ordered pair (A, B) of ``entities`` (KB entities: ``id``, ``names``) with
    opposite names, one name but for a marker of the other sign on one scale ("Tall stature"
    / "Short stature", "Hypertelorism" / "Hypotelorism"), with the name of A that made it."""
    by_frame: dict[str, dict[tuple[str, int], dict[str, str]]] = {}
    for entity in entities:
        for name in entity.names:
            for frame, scale, sign in frames(name, language):
                by_frame.setdefault(frame, {}).setdefault((scale, sign), {}).setdefault(
                    entity.id, name)
    pairs: dict[tuple[str, str], str] = {}
    for sides in by_frame.values():
        for (scale, sign), names in sides.items():
            for (other, other_sign), opposite in sides.items():
                if other_sign == -sign and one_scale(scale, other):
                    for a, a_name in names.items():
                        for b in opposite:
                            if a != b:
                                pairs.setdefault((a, b), a_name)
    return dict(sorted(pairs.items()))
