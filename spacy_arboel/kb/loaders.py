"""Registered loaders that give a pipeline its knowledge base at initialisation."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import spacy
from spacy.language import Language

from .knowledge_base import KnowledgeBase


@spacy.registry.misc("spacy_arboel.JsonlKB.v1")
def create_jsonl_kb_loader(path: Path) -> Callable[[Language], KnowledgeBase]:
    """A function that loads the knowledge base from a JSONL file (see ``KnowledgeBase``)."""

    def load(nlp: Language) -> KnowledgeBase:
        return KnowledgeBase.from_jsonl(path)

    return load
