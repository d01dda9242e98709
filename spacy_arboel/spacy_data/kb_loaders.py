"""Registered loaders that give a pipeline its knowledge base at initialisation."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import spacy
from spacy.language import Language

from ..kb.knowledge_base import KnowledgeBase


@spacy.registry.misc("spacy_arboel.JsonlKB.v1")
def create_jsonl_kb_loader(path: Path | None) -> Callable[[Language], KnowledgeBase | None]:
    """A function that loads the knowledge base from a JSONL file (see ``KnowledgeBase``);
    with ``path = null`` it gives no KB, and the component keeps the one it has (e.g. the
    KB of arbo_linker's ``linker_path``)."""

    def load(nlp: Language) -> KnowledgeBase | None:
        return None if path is None else KnowledgeBase.from_jsonl(path)

    return load
