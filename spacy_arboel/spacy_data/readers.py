"""The spaCy corpus reader for PubTator files (``spacy_arboel.PubtatorCorpus.v1``)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from itertools import islice
from pathlib import Path

import spacy
from spacy.language import Language
from spacy.tokens import Doc
from spacy.training import Corpus, Example

from ..data.pubtator import PubtatorDocument, read_pubtator
from ..errors import Errors
from .convert import pubtator_to_doc


def pubtator_paths(path: str | Path) -> list[Path]:
    """A PubTator file, or the ``.txt`` files of a folder in sorted order."""
    path = Path(path)
    if path.is_dir():
        return sorted(p for p in path.iterdir() if p.suffix == ".txt")
    if not path.exists():
        raise FileNotFoundError(Errors.E103.format(path=path, what="PubTator corpus"))
    return [path]


def read_pubtator_documents(path: str | Path, limit: int = 0) -> Iterator[PubtatorDocument]:
    """Stream the documents of a PubTator file or folder, at most ``limit`` if it is > 0."""
    documents: Iterable[PubtatorDocument] = (
        document for file_path in pubtator_paths(path) for document in read_pubtator(file_path)
    )
    if limit > 0:
        documents = islice(documents, limit)
    yield from documents


CORPUS_FORMATS = ("auto", "pubtator", "jsonl", "brat")


def corpus_format(path: str | Path, fmt: str = "auto") -> str:
    """``fmt``, or for "auto" the format of ``path``: "jsonl" for a ``.jsonl`` file, "brat"
    for a folder with ``.ann`` files, else "pubtator"."""
    path = Path(path)
    if fmt != "auto":
        return fmt
    if path.suffix == ".jsonl":
        return "jsonl"
    if path.is_dir() and any(path.glob("*.ann")):
        return "brat"
    return "pubtator"


def read_annotated_documents(path: str | Path, fmt: str = "auto",
                             limit: int = 0) -> Iterator[PubtatorDocument]:
    """Stream the documents of an annotated corpus in ``fmt`` (see :func:`corpus_format`):
    PubTator, JSONL with character spans and ids, or brat standoff (``data.annotations``);
    at most ``limit`` if it is > 0."""
    from ..data.annotations import read_brat_documents, read_jsonl_documents

    fmt = corpus_format(path, fmt)
    if fmt != "pubtator" and not Path(path).exists():
        raise FileNotFoundError(Errors.E103.format(path=path, what=f"{fmt} corpus"))
    documents = {"pubtator": lambda: read_pubtator_documents(path),
                 "jsonl": lambda: read_jsonl_documents(path),
                 "brat": lambda: read_brat_documents(path)}[fmt]()
    yield from islice(documents, limit) if limit > 0 else documents


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

    ``path`` is a PubTator file or a folder of them; ``limit`` > 0 keeps the first documents.
    Gold docs carry the mentions as ``ents`` (kb_id_ = ids joined by "|") and all of them in
    ``spans["pubtator"]``; with ``gold_mentions`` the predicted docs get the gold spans too.
    """

    def read(nlp: Language) -> Iterator[Example]:
        for document in read_pubtator_documents(path, limit):
            gold = pubtator_to_doc(document, nlp)
            predicted = nlp.make_doc(gold.text)
            if gold_mentions:
                with_gold_mentions(predicted, gold)
            yield Example(predicted, gold)

    return read
