"""The worker of ``link-corpus``: a pipeline, loaded once per process or Ray actor (by
``jobs.engines``), that links a batch of one shard's documents."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..data.documents import Document
from ..factories import COREF
from .outcomes import Outcome, link_documents
from .shard_writer import docbin_bytes

# a batch of one shard's documents: the shard's number, the position of the first one in
# the shard, and the documents
LinkTask = tuple[int, int, Sequence[Document]]


@dataclass(frozen=True)
class LinkSettings:
    """``model``: the pipeline to load; ``fmt``: ``jsonl`` or ``spacy``; ``batch_size``:
    documents per ``nlp.pipe`` call (and per task); ``top_k``: candidates kept per
    entity in JSONL; ``overrides``: config overrides for ``spacy.load``; ``vectors``: write
    each shard's mention vectors (``<stem>.vectors.npy``, for ``cluster``)."""

    model: str
    fmt: str = "jsonl"
    batch_size: int = 32
    top_k: int = 5
    overrides: dict[str, Any] = field(default_factory=dict)
    vectors: bool = False


class PipelineLinker:
    """A loaded pipeline that links batches of one shard: the worker of one process or one
    Ray actor. ``load``: how it loads the pipeline (default :func:`load_pipeline`; tests
    pass their own)."""

    def __init__(self, settings: LinkSettings,
                 load: Callable[[LinkSettings], Any] | None = None) -> None:
        self.settings = settings
        self.nlp = (load or load_pipeline)(settings)

    def __call__(self, task: LinkTask) -> tuple[int, list[Outcome]]:
        """The outcomes of a batch, with its shard's number."""
        shard, start, documents = task
        return shard, link_documents(self.nlp, documents, start, self.settings.fmt,
                                   self.settings.top_k, docbin_bytes, self.settings.vectors)


CROSS_DOCUMENT_FACTORIES = (COREF,)


def load_pipeline(settings: LinkSettings) -> Any:
    """``spacy.load`` with the overrides, cross-document components disabled: linked batch
    by batch on several workers, their clusters would be those of each batch (cluster the
    linked corpus with the ``cluster`` command instead)."""
    import spacy

    nlp = spacy.load(settings.model, config=settings.overrides)
    for name in cross_document_pipes(nlp.config):
        nlp.disable_pipe(name)
    return nlp


def cross_document_pipes(config: dict) -> list[str]:
    """The components of a pipeline config that cluster across documents."""
    from ..factories import find_components

    return find_components(config, CROSS_DOCUMENT_FACTORIES)
