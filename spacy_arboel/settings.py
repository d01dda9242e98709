"""The types of the settings, declared once (no spaCy here).

The core's settings dataclasses (``RetrieverSettings``, ``ReaderSettings``,
``SpanReaderSettings``, ``RerankerSettings``) annotate their fields with these types and hold
the defaults; the component factories take their ``default_config`` from those defaults
(``defaults``) and annotate their arguments with the same types, which confection checks
when a pipeline is created or loaded (``ConfigValidationError`` naming the setting). A
dataclass built without spaCy checks its own fields against them once (``check_fields``:
E007 for a choice, E011 for a range). Ranges are pydantic's constrained types (its v1 API,
the one confection checks).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import MISSING, dataclass, field, fields, make_dataclass
from functools import lru_cache
from types import UnionType
from typing import Any, Literal, TypeVar, Union, get_args, get_origin, get_type_hints

from pydantic.v1 import ConstrainedFloat, ConstrainedInt, ValidationError, parse_obj_as

from .errors import Errors

S = TypeVar("S")

# how a saved component's files are checked when it is loaded (``artefacts.check_folder``):
# every component's ``verify_files`` setting
VERIFY_MODES = ("sha256", "quick")


def _constrained(name: str, base: type, doc: str, **bounds: Any) -> Any:
    """A named pydantic constrained number (integers strict: a bool is none; floats
    finite), so that confection's message names what is allowed."""
    extra = {"strict": True} if base is ConstrainedInt else {"allow_inf_nan": False}
    return type(name, (base,), {"__doc__": doc, "__module__": __name__, **extra, **bounds})


PositiveInt = _constrained("PositiveInt", ConstrainedInt, "An integer >= 1.", ge=1)
NonNegativeInt = _constrained("NonNegativeInt", ConstrainedInt, "An integer >= 0.", ge=0)
AtLeastThree = _constrained("AtLeastThree", ConstrainedInt, "An integer >= 3: a wordpiece "
                            "window with room for [CLS], [SEP] and a piece.", ge=3)
NonNegativeFloat = _constrained("NonNegativeFloat", ConstrainedFloat, "A number >= 0.", ge=0)
PositiveFloat = _constrained("PositiveFloat", ConstrainedFloat, "A number > 0.", gt=0)
Probability = _constrained("Probability", ConstrainedFloat, "A probability that a threshold "
                           "keeps: in [0, 1) (1 would keep nothing).", ge=0, lt=1)
Fraction = _constrained("Fraction", ConstrainedFloat, "A share: in [0, 1].", ge=0, le=1)
Recall = _constrained("Recall", ConstrainedFloat, "A share that is kept: in (0, 1].", gt=0,
                      le=1)
Finite = _constrained("Finite", ConstrainedFloat, "A finite number.")
Cosine = _constrained("Cosine", ConstrainedFloat, "A cosine: in [-1, 1].", ge=-1, le=1)


def choices(options: Iterable[str]) -> Any:
    """``Literal[...]`` of the ``options`` a module lists in a tuple."""
    return Literal[tuple(options)]


def defaults(settings_class: type, names: Iterable[str]) -> dict[str, Any]:
    """The defaults of the fields ``names`` of the dataclass ``settings_class``, in that
    order: what a factory's ``default_config`` takes from its core."""
    declared = {f.name: f.default for f in fields(settings_class)}
    return {name: declared[name] for name in names if declared[name] is not MISSING}


@lru_cache
def at_least(n: int) -> Any:
    """The type of an integer >= ``n``."""
    return _constrained(f"AtLeast{n}", ConstrainedInt, f"An integer >= {n}.", ge=n)


def plain(value: Any) -> Any:
    """A setting's value as a config and a saved file hold it: a tuple as a list."""
    return list(value) if isinstance(value, tuple) else value


def check_value(name: str, value: Any, kind: Any) -> Any:
    """``value`` if it is a ``kind`` (E007 for a choice, E011 for a range otherwise): the
    check of one argument of a core class that has no settings dataclass."""
    problem = _refusal(name, kind, value)
    if problem:
        raise ValueError(problem)
    return value


def check_fields(settings: Any) -> None:
    """Check each field of the dataclass ``settings`` against its annotation: E007 naming
    the choices of a ``Literal``, E011 naming the range of a constrained number; other
    annotations are not checked. A type with ``coerce`` keeps the value as it makes it (a
    config's list as a tuple, as it is saved and compared)."""
    hints = get_type_hints(type(settings))
    for declared in fields(settings):
        value, kind = getattr(settings, declared.name), hints[declared.name]
        check_value(declared.name, value, kind)
        if hasattr(kind, "coerce"):
            object.__setattr__(settings, declared.name, kind.coerce(value))


def _refusal(name: str, kind: Any, value: Any) -> str | None:
    """Why ``value`` is no ``kind`` (None when it is, or when ``kind`` is not checked)."""
    if get_origin(kind) in (Union, UnionType):  # ``X | None``
        arms = [a for a in get_args(kind) if a is not type(None)]
        if value is None and len(arms) < len(get_args(kind)):
            return None
        kind = arms[0] if len(arms) == 1 else Any
    if hasattr(kind, "refusal"):  # a type that says itself what is wrong (E264, E265)
        return kind.refusal(name, value)
    if get_origin(kind) is Literal:
        if value in get_args(kind):
            return None
        return Errors.E007.format(what=name, value=value,
                                  options=", ".join(map(str, get_args(kind))))
    if hasattr(kind, "__get_validators__"):
        try:
            parse_obj_as(kind, value)
        except ValidationError:
            return Errors.E011.format(name=name, condition=_condition(kind), value=value)
    return None


def _condition(kind: Any) -> str:
    """The range of a constrained number in words: ">= 1", "in [0, 1)", "> 0"."""
    high = kind.lt if kind.lt is not None else kind.le
    if kind.ge is not None and high is not None:
        return f"in [{kind.ge}, {high}{')' if kind.lt is not None else ']'}"
    if kind.gt is not None:
        return f"> {kind.gt}"
    if kind.ge is None:
        return "a finite number"
    return f"{'an integer ' if getattr(kind, 'strict', False) else ''}>= {kind.ge}"


@dataclass(frozen=True)
class ComponentSettings:
    """The settings of a pipeline component: each argument of its factory that is no
    registered block, typed and with its default. A field a core also takes is declared
    once, in the core's settings dataclass, and copied from there (``component_settings``);
    the factory's ``default_config`` is ``config()``. Checked once when built (E007, E011)."""

    def __post_init__(self) -> None:
        check_fields(self)

    @classmethod
    def config(cls) -> dict[str, Any]:
        """Every field's default, in order: what the factory's ``default_config`` holds (a
        tuple as a config's list)."""
        return {f.name: plain(f.default) for f in fields(cls)}

    @classmethod
    def from_arguments(cls: type[S], arguments: Mapping[str, Any]) -> S:
        """The settings among a factory's ``arguments`` (its ``locals()``)."""
        return cls(**{f.name: arguments[f.name] for f in fields(cls)})

    def of(self, settings_class: type[S], **extra: Any) -> S:
        """The dataclass ``settings_class`` (a core's) from the fields it shares with these,
        and ``extra`` (the settings a model's architecture holds)."""
        own = {f.name for f in fields(self)}
        return settings_class(**{f.name: getattr(self, f.name) for f in fields(settings_class)
                                 if f.name in own and f.name not in extra}, **extra)


@dataclass(frozen=True)
class KBComponentSettings(ComponentSettings):
    """What every component over a KB takes: ``kb_path``, the KB when none is given at
    ``initialize`` (or one to link with after loading), and ``verify_files``, how
    ``from_disk`` checks the saved files (``artefacts.check_folder``)."""

    kb_path: str | None = None
    verify_files: choices(VERIFY_MODES) = "sha256"


def taken(settings_class: type, names: Iterable[str] | None = None
          ) -> list[tuple[str, Any, Any]]:
    """The fields ``names`` (default: all) of the dataclass ``settings_class`` as
    ``(name, type, field)``, each with its declared default: a component's settings take
    them from there rather than restating them."""
    hints = get_type_hints(settings_class)
    declared = {f.name: f for f in fields(settings_class)}
    return [(name, hints[name], field(default=declared[name].default))
            for name in (names if names is not None else declared)]


def component_settings(name: str, module: str, doc: str,
                       specs: Iterable[tuple[str, Any, Any]],
                       base: type[ComponentSettings] = KBComponentSettings) -> type:
    """A frozen ``base`` dataclass named ``name`` (of ``module``) with the fields ``specs``:
    ``(name, type, default)``, or those ``taken`` from a core's dataclass."""
    return make_dataclass(name, list(specs), bases=(base,), frozen=True,
                          namespace={"__doc__": doc, "__module__": module})
