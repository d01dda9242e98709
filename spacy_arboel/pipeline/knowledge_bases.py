"""Swapping the knowledge base of a pipeline (what ``build-index --kb`` does): every
component that holds the linker's KB takes the new one, and the coref memory embedded
against the old one is cleared."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from spacy.language import Language

from ..factories import COREF, RERANKER, find_components
from ..kb.knowledge_base import KnowledgeBase

# components that link with the linker's KB (shared, or a copy where they were given a
# kb_path of their own)
KB_COPY_FACTORIES = (RERANKER,)


def kb_holders(pipeline: Language | Mapping[str, Any], linker: str) -> list[str]:
    """``linker`` and the components that keep a copy of its KB (``KB_COPY_FACTORIES``)."""
    return [linker, *find_components(pipeline, KB_COPY_FACTORIES)]


def without_kb_paths(pipeline: Language | Mapping[str, Any], linker: str) -> dict[str, None]:
    """Overrides that set the ``kb_path`` of ``linker`` and its KB's copies to null, so
    that a pipeline loaded with them (and saved) links against the KB it holds, not a KB
    file of the machine that trained it."""
    return {f"components.{name}.kb_path": None for name in kb_holders(pipeline, linker)}


def clear_coref_memory(nlp: Language, linker: str) -> list[str]:
    """Forget the remembered mentions of every ``arbo_coref`` clustering ``linker``'s
    vectors (they belong to its old KB or mention encoder); return those components' names."""
    cleared = [name for name in find_components(nlp, COREF)
               if nlp.get_pipe(name).settings.linker == linker]
    for name in cleared:
        nlp.get_pipe(name).clear_state()
    return cleared


def swap_kb(nlp: Language, kb: KnowledgeBase, linker: str) -> list[str]:
    """Link with ``kb``: the linker ``linker`` and the components that keep a copy of its
    KB take it (their indexes are rebuilt by ``ensure_ready``, or set by ``build-index``),
    their ``kb_path`` is cleared (the pipeline saves the KB it holds, and a path to the old
    KB file would bring it back when loaded), and the coref memory of its old KB is
    cleared. Returns the names of the coref
    components whose memory was cleared. Raises a ValueError (E035) where ``kb`` holds the
    linker's NIL id."""
    pipe = nlp.get_pipe(linker)
    pipe.ensure_ready()
    pipe.set_kb(kb)
    for name in kb_holders(nlp, linker)[1:]:
        holder = nlp.get_pipe(name)
        holder.ensure_ready()
        holder.set_kb(kb)
    for name in kb_holders(nlp, linker):  # a kb_path would bring the old KB back at load
        nlp.get_pipe_config(name)["kb_path"] = None
        nlp.get_pipe(name).forget_kb_path()
    return clear_coref_memory(nlp, linker)
