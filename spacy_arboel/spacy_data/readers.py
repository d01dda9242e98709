"""The corpora as spaCy reads them: documents of any input format with ``.spacy`` DocBins
beside them (``data.inputs`` reads the others), gold docs for ``build-kb --alias-corpus``,
and spaCy's corpus readers (``spacy_arboel.PubtatorCorpus.v1``,
``spacy_arboel.GoldMentionsCorpus.v1``)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from itertools import islice
from pathlib import Path

import spacy
from spacy.language import Language
from spacy.tokens import Doc, DocBin
from spacy.training import Corpus, Example
from spacy.vocab import Vocab

from ..data.documents import Document, Mention
from ..data.ids import gold_ids
from ..data.inputs import DOCBIN, document_sources, read_documents, read_source
from ..data.pubtator import NO_ID
from ..errors import Errors
from .convert import document_to_doc, documents_to_docs


def read_corpus_documents(path: str | Path, format: str = "auto", *,
                          strict: bool = True) -> Iterator[Document]:
    """``data.inputs.read_documents`` with ``.spacy`` DocBins read too (see
    :func:`read_docbin_documents`)."""
    for source, fmt in document_sources(path, format):
        yield from (read_docbin_documents(source) if fmt == DOCBIN
                    else read_source(source, fmt, strict=strict))


def read_docbin_documents(path: Path) -> Iterator[Document]:
    """The docs of a ``.spacy`` DocBin as documents, one at a time: the id in their user
    data (else ``<file stem>:<number>``), their text and their ents as mentions (gold ids
    from ``kb_id_``, PubTator's "no id" ``-1`` left out). E155 names the doc that cannot be
    read."""
    number = 0
    try:
        for doc in DocBin().from_disk(path).get_docs(Vocab()):
            yield Document(str(doc.user_data.get("id", f"{path.stem}:{number}")), doc.text,
                           [Mention(e.start_char, e.end_char, e.text, e.label_,
                                    tuple(i for i in gold_ids(e.kb_id_) if i != NO_ID))
                            for e in doc.ents])
            number += 1
    except Exception as err:  # spaCy, msgpack and numpy raise several unrelated types
        raise ValueError(Errors.E155.format(path=path, number=number,
                                            problem=f"{type(err).__name__}: {err}")) from None


def read_corpus_docs(paths: Iterable[Path], nlp: Language) -> Iterator[Doc]:
    """The gold docs of corpora (``build-kb --alias-corpus``): a ``.spacy`` DocBin's docs as
    saved, the documents of the others (``data.inputs``, read strictly) made docs by
    ``nlp``."""
    for path in paths:
        for source, fmt in document_sources(path):
            if fmt == DOCBIN:
                yield from DocBin().from_disk(source).get_docs(nlp.vocab)
            else:
                yield from documents_to_docs(read_source(source, fmt), nlp)


def with_gold_mentions(predicted: Doc, gold: Doc) -> Doc:
    """Copy the gold spans (label only, no kb_id) onto ``predicted``: the linking-only setting
    of BLINK and arboEL, where mentions are given and only their entities are predicted."""
    predicted.ents = [
        predicted.char_span(e.start_char, e.end_char, label=e.label_) for e in gold.ents
    ]
    return predicted


@spacy.registry.readers("spacy_arboel.GoldMentionsCorpus.v1")
def create_gold_mentions_reader(
    path: Path, limit: int = 0, gold_mentions: bool = True
) -> Callable[[Language], Iterable[Example]]:
    """spaCy's DocBin corpus whose predicted docs already carry the gold mention spans.

    With ``gold_mentions`` an entity linker can be trained and evaluated inside
    ``spacy train`` without an NER component in front of it (spaCy's own entity_linker
    has ``use_gold_ents`` for the same purpose).
    """
    corpus = Corpus(path, limit=limit)

    def read(nlp: Language) -> Iterator[Example]:
        for eg in corpus(nlp):
            if gold_mentions:
                with_gold_mentions(eg.predicted, eg.reference)
            yield eg

    return read


@spacy.registry.readers("spacy_arboel.PubtatorCorpus.v1")
def create_pubtator_reader(
    path: Path, limit: int = 0, gold_mentions: bool = False
) -> Callable[[Language], Iterable[Example]]:
    """A reader yielding ``Example(nlp.make_doc(text), gold_doc)`` for each PubTator document.

    ``path`` is a PubTator file or a folder of them (its ``.txt`` and ``.pubtator`` files,
    ``data.inputs``); ``limit`` > 0 keeps the first documents.
    Gold docs carry the mentions as ``ents`` (kb_id_ = ids joined by "|") and all of them in
    ``spans["pubtator"]``; with ``gold_mentions`` the predicted docs get the gold spans too.
    """

    def read(nlp: Language) -> Iterator[Example]:
        for document in islice(read_documents(path, "pubtator"),
                               limit if limit > 0 else None):
            gold = document_to_doc(document, nlp)
            predicted = nlp.make_doc(gold.text)
            if gold_mentions:
                with_gold_mentions(predicted, gold)
            yield Example(predicted, gold)

    return read
