"""Check that a corpus has what scoring needs: documents, ents, and ents with gold ids."""

from __future__ import annotations

from collections.abc import Iterable

from spacy.tokens import Doc

from ..data.ids import gold_ids
from ..data.pubtator import NO_ID
from ..errors import Errors


def gold_counts(docs: Iterable[Doc]) -> tuple[int, int, int]:
    """The number of docs, of ents and of ents with a gold id ("-1" is no id)."""
    n_docs = n_ents = n_gold = 0
    for doc in docs:
        n_docs += 1
        n_ents += len(doc.ents)
        n_gold += sum(1 for ent in doc.ents if set(gold_ids(ent.kb_id_)) - {NO_ID})
    return n_docs, n_ents, n_gold


def check_gold(docs: Iterable[Doc], corpus: str = "The gold corpus") -> None:
    """Raise a ValueError (E042, E043, E044) unless some ent of ``docs`` has a gold id."""
    n_docs, n_ents, n_gold = gold_counts(docs)
    if not n_docs:
        raise ValueError(Errors.E042.format(corpus=corpus))
    if not n_ents:
        raise ValueError(Errors.E043.format(corpus=corpus, n_docs=n_docs))
    if not n_gold:
        raise ValueError(Errors.E044.format(corpus=corpus, n_ents=n_ents))
