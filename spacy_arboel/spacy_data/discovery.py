"""The entity-discovery setting (arboEL-discovery §4): hold entities out of the KB and out of
the training data, so that their test mentions must be found as new clusters."""

from __future__ import annotations

from collections.abc import Container, Iterable

import numpy as np
from spacy.tokens import Doc, Span

from ..data.ids import gold_ids, join_ids
from ..errors import Errors
from ..kb.knowledge_base import KnowledgeBase
from .gold_ids import kb_of, resolved_gold_ids


def choose_heldout(test_docs: Iterable[Doc], kb: Container[str], fraction: float,
                   seed: int = 0) -> list[str]:
    """A random ``fraction`` (fixed ``seed``) of the KB entities that the test set mentions
    (``kb``: the KB, whose alternate ids count as their entity's, or its ids;
    ``kb.build.without_entities`` takes them out of it)."""
    if not 0 < fraction < 1:
        raise ValueError(Errors.E011.format(name="fraction", value=fraction,
                                            condition="in (0, 1) (`prepare --holdout`)"))
    mentioned = sorted({i for doc in test_docs for ent in doc.ents
                        for i in resolved_gold_ids(ent.kb_id_, kb_of(kb)) if i in kb})
    n = max(1, round(len(mentioned) * fraction)) if mentioned else 0
    chosen = np.random.default_rng(seed).choice(len(mentioned), size=n, replace=False)
    return sorted(mentioned[i] for i in chosen)


def without_ids(doc: Doc, heldout: set[str], kb: KnowledgeBase | None = None) -> Doc:
    """Drop the held-out ids (and the alternate ids ``kb`` gives them) from the gold ids of
    ``doc.ents`` and of its other span groups (a mention left with none has no gold id,
    like PubTator's -1)."""
    def strip(span: Span) -> Span:
        kb_id = join_ids(i for i in gold_ids(span.kb_id_)
                         if (kb.resolve_ids([i])[0] if kb else i) not in heldout)
        return Span(doc, span.start, span.end, label=span.label_, kb_id=kb_id)

    doc.ents = [strip(e) for e in doc.ents]
    for key, group in list(doc.spans.items()):
        doc.spans[key] = [strip(span) for span in group]
    return doc
