"""Swapping a linker's mention encoder for a smaller one distilled from it (what
``distill-mentions`` does): the entity encoder and its index stay."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from spacy.language import Language
from spacy.tokens import Doc

from ..components.common import gold_mentions
from ..linking.loop_settings import DistillSettings
from ..linking.mention_distiller import MentionDistiller, shrink_encoder
from .knowledge_bases import clear_coref_memory


def swap_mention_encoder(nlp: Language, linker: str, encoder) -> list[str]:
    """Link with ``encoder`` (a ``PooledEncoder``) as the mention encoder of ``linker``, and
    clear the coref memory that the old one embedded (its λ is on the old score scale too:
    tune the coref again). Returns the names of the coref components whose memory was
    cleared. Raises a ValueError (E123) when the linker's two encoders share weights."""
    nlp.get_pipe(linker).use_mention_encoder(encoder)
    return clear_coref_memory(nlp, linker)


def distill_mention_encoder(nlp: Language, linker: str, docs: Iterable[Doc],
                            settings: DistillSettings, *,
                            on_start: Callable[[int], None] | None = None,
                            on_epoch: Callable[[int, float], None] | None = None) -> list[str]:
    """Distil ``linker``'s mention encoder into one with ``settings.layers`` layers on the
    mentions (its ``span_getter``: ``doc.ents`` by default) of ``docs`` against its index
    (``MentionDistiller``) and link with it (:func:`swap_mention_encoder`; E123 when the two
    encoders share weights). ``on_start`` gets the number of mentions, ``on_epoch`` each
    epoch's number and loss. Returns the names of the coref components whose memory was
    cleared."""
    pipe = nlp.get_pipe(linker)
    pipe.ensure_ready()
    texts, spans, _ = gold_mentions(docs, pipe.span_getter)
    student = shrink_encoder(pipe.retriever.encoders["mention"], settings.layers)
    distiller = MentionDistiller(pipe.retriever, student, settings)
    if on_start is not None:
        on_start(len(spans))
    distiller.fit(texts, spans, on_epoch=on_epoch)
    return swap_mention_encoder(nlp, linker, student)
