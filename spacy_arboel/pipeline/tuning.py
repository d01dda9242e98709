"""Tuning a linker's setting on dev gold mentions where it takes the linker's retriever."""

from __future__ import annotations

from collections.abc import Iterable

from spacy.language import Language
from spacy.tokens import Doc

from ..components.common import gold_mentions


def tune_lexical_weight(nlp: Language, linker: str, docs: Iterable[Doc], top_k: int = 64
                        ) -> tuple[float, dict[float, float]]:
    """The weight of BioSyn's lexical score added to ``linker``'s dense score that
    maximises in-KB recall@1 on the gold mentions (its ``span_getter``) of ``docs`` (over the
    union of the dense and lexical top ``top_k``), and the recall@1 of each weight tried
    (``DenseRetriever.tune_lexical_weight``)."""
    pipe = nlp.get_pipe(linker)
    pipe.ensure_ready()
    texts, spans, gold_ids = gold_mentions(docs, pipe.span_getter, pipe.kb)
    return pipe.retriever.tune_lexical_weight(texts, spans, gold_ids, top_k)
