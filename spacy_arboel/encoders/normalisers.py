"""Mention normalisers: how a mention is read before the encoder reads it, registered by name.

A normaliser turns a mention's text into the form the KB writes ("oestrogen" -> "estrogen",
"Ca(2+)" -> "calcium"); the linkers' ``normalisers`` setting names those to apply, in order,
after a defined abbreviation has been read as its long form (``inputs.InputBuilder.read_as``).
None is applied by default: the readings are a domain's (British spellings of medical words,
chemical element symbols), and a general KB gets none of them. The biomedical configs
(``configs/datasets.yml``) turn on ``american_spelling`` and ``element_symbols``.

The catalogue registry ``mention_normalisers`` (entry-point group
``spacy_arboel_mention_normalisers``) maps a name to a ``MentionNormaliser``; a new one is a
function ``str -> str`` and one registration: an entry point, or
``@mention_normalisers.register(name)``. Registered here: ``american_spelling``
(``data.spelling``); the biomedical package registers ``element_symbols``
(``biomedical.element_symbols``, which needs ``periodictable``: the ``mesh`` extra).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import catalogue

from ..data.spelling import american_spelling
from ..errors import Errors
from ..factories import registered

mention_normalisers = catalogue.create("spacy_arboel", "mention_normalisers",
                                       entry_points=True)


@dataclass(frozen=True)
class MentionNormaliser:
    """One reading of mentions: ``read(text)`` is the text as the KB would write it (the
    text itself when the reading does not apply); ``requires``: the modules it imports
    (checked when a setting names it: E265), installed with the extra ``extra``."""

    read: Callable[[str], str]
    requires: tuple[str, ...] = ()
    extra: str = ""


AMERICAN_SPELLING = MentionNormaliser(american_spelling)


def get_normaliser(name: str) -> MentionNormaliser:
    """The normaliser registered as ``name`` (E264 naming those there are), whose modules
    are installed (E265)."""
    normaliser = registered(mention_normalisers, name, Errors.E264)
    missing = [m for m in normaliser.requires if importlib.util.find_spec(m) is None]
    if missing:
        extra = (f"; the `{normaliser.extra}` extra of spacy-arboel holds it"
                 if normaliser.extra else "")
        raise ValueError(Errors.E265.format(name=name, module=missing[0], extra=extra))
    return normaliser


class MentionNormalisers:
    """The type of a ``normalisers`` setting: registered names, in the order they apply
    (a list in a config, a tuple once checked: ``coerce``). Confection checks the shape (a
    list of names); ``refusal`` also that each is registered and usable (E264, E265), when
    the settings are built (``settings.check_fields``), so that the error names the
    normalisers there are."""

    coerce = tuple

    @classmethod
    def __get_validators__(cls) -> Iterable[Callable]:
        yield cls.validate

    @classmethod
    def validate(cls, value: object) -> tuple[str, ...]:
        problem = cls._shape("normalisers", value)
        if problem:
            raise ValueError(problem)
        return tuple(value)  # type: ignore[arg-type]

    @staticmethod
    def _shape(name: str, value: object) -> str | None:
        """E011 where ``value`` is no list of names."""
        if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
            return None
        return Errors.E011.format(name=name, value=value,
                                  condition="a list of registered normaliser names")

    @classmethod
    def refusal(cls, name: str, value: object) -> str | None:
        """Why ``value`` names no registered normalisers (None when it does)."""
        problem = cls._shape(name, value)
        if problem:
            return problem
        for item in value:  # type: ignore[union-attr]
            try:
                get_normaliser(item)
            except ValueError as err:
                return str(err)
        return None


class Reading:
    """A text read by each normaliser of ``names`` in turn, looked up once (a registry
    lookup reads the installed entry points); pickled as its names (a pipeline's spawned
    processes each look them up)."""

    def __init__(self, names: Sequence[str]) -> None:
        self.names = tuple(names)
        self._reads = [get_normaliser(name).read for name in self.names]

    def __reduce__(self) -> tuple:
        return Reading, (self.names,)

    def __call__(self, text: str) -> str:
        for read in self._reads:
            text = read(text)
        return text
