"""A linker built from a KB and an encoder alone, with no corpus (``pretrain-kb``'s
``linker/``)."""

from __future__ import annotations

from pathlib import Path

from spacy.language import Language

from ..factories import ENTITY_LINKER
from ..kb.knowledge_base import KnowledgeBase


def zero_shot_linker(kb: str | Path, encoder: str | Path, gpu_id: int = -1) -> Language:
    """A blank English pipeline with ``arbo_entity_linker`` over the KB JSONL ``kb`` and
    the encoder folder ``encoder``, initialised without a corpus (names inputs, its index
    built; its config names no KB file, so the KB is saved inside it)."""
    import spacy

    if gpu_id >= 0:
        spacy.require_gpu(gpu_id)
    nlp = spacy.blank("en")
    # the factory's model and settings, with this encoder
    linker = nlp.add_pipe(ENTITY_LINKER, config={
        "model": {"encoder_name": str(Path(encoder).resolve())}})
    linker.initialize(lambda: [], nlp=nlp, kb_loader=lambda _: KnowledgeBase.from_jsonl(kb))
    return nlp
