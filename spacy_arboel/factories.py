"""Our components' factory names, and finding a pipeline's components by the factory that
made them: the one way the commands, the pipeline API, the evaluation and the components
themselves find a linker, a re-ranker or a coref component, and the one lookup of a name in
one of our catalogue registries (``registered``: KB readers, mention normalisers); ``errors``
only, and no spaCy at import, so that every layer, the spaCy-free core included, can use
it."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Any, Union

from .errors import Errors

if TYPE_CHECKING:
    from spacy.language import Language

ENTITY_LINKER = "arbo_entity_linker"
LINKER = "arbo_linker"
RERANKER = "arbo_reranker"
COREF = "arbo_coref"
NER = "ner"  # spaCy's, which finds the mentions that the linkers link
# the components that link a doc's mentions to a KB, and those that hold a KB
LINKER_FACTORIES = (LINKER, ENTITY_LINKER)
KB_FACTORIES = (ENTITY_LINKER, LINKER, RERANKER)

Pipeline = Union["Language", Mapping[str, Any]]  # a loaded pipeline, or a pipeline's config


def registered(registry: Any, name: str, error: str) -> Any:
    """What the catalogue ``registry`` holds under ``name`` (its entry points read too); a
    ValueError with ``error`` (a coded message taking ``name`` and ``known``, the names there
    are) where it holds nothing."""
    import catalogue

    try:
        return registry.get(name)
    except catalogue.RegistryError:
        known = ", ".join(sorted(registry.get_all())) or "none"
        raise ValueError(error.format(name=name, known=known)) from None


def component_factories(pipeline: Pipeline) -> dict[str, str | None]:
    """Each component's name (in pipeline order, disabled ones included) and the factory
    that made it: from the meta of a loaded pipeline, or from a config's ``factory``
    entries (None for a component sourced from another pipeline)."""
    if not isinstance(pipeline, Mapping):  # a loaded pipeline (spaCy's Language)
        return {name: pipeline.get_pipe_meta(name).factory
                for name in pipeline.component_names}
    components = pipeline.get("components", {})
    return {name: components.get(name, {}).get("factory")
            for name in pipeline["nlp"]["pipeline"]}


def _wanted(factories: str | Collection[str]) -> tuple[str, ...]:
    return (factories,) if isinstance(factories, str) else tuple(factories)


def find_components(pipeline: Pipeline, factories: str | Collection[str]) -> list[str]:
    """The names of the components made by one of ``factories``, in pipeline order."""
    wanted = _wanted(factories)
    return [name for name, factory in component_factories(pipeline).items()
            if factory in wanted]


def find_component(pipeline: Pipeline, factories: str | Collection[str],
                   name: str | None = None, *, where: str = "The pipeline") -> str:
    """The name of the one component made by one of ``factories`` (the one called ``name``
    when given). Raises a ValueError (E210) when none fits, or several do and no ``name``
    says which; ``where`` names the pipeline in the message, e.g. its path."""
    found = find_components(pipeline, factories)
    if (name is None and len(found) == 1) or (name is not None and name in found):
        return name or found[0]
    present = ", ".join(f"{n} ({f})" for n, f in component_factories(pipeline).items())
    if name is not None:
        problem = f"has no component '{name}' made by"
    else:
        problem = "has several components made by" if found else "has no component made by"
    raise ValueError(Errors.E210.format(where=where, problem=problem,
                                        factories=" or ".join(_wanted(factories)),
                                        present=present or "none"))


def pipeline_kb(nlp: Language) -> Any:
    """The KB of the pipeline's first enabled component that holds one (``KB_FACTORIES``),
    set up first; None when no such component holds a KB."""
    holders = [name for name in find_components(nlp, KB_FACTORIES) if name in nlp.pipe_names]
    if not holders:
        return None
    pipe = nlp.get_pipe(holders[0])
    pipe.ensure_ready()
    return pipe.kb
