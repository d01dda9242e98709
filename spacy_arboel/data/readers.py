"""The spaCy corpus reader for PubTator files (``spacy_arboel.PubtatorCorpus.v1``)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from itertools import islice
from pathlib import Path

import spacy
from spacy.language import Language
from spacy.training import Example

from ..errors import Errors
from .convert import pubtator_to_doc
from .pubtator import PubtatorDocument, read_pubtator


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


@spacy.registry.readers("spacy_arboel.PubtatorCorpus.v1")
def create_pubtator_reader(path: Path, limit: int = 0) -> Callable[[Language], Iterable[Example]]:
    """A reader yielding ``Example(nlp.make_doc(text), gold_doc)`` for each PubTator document.

    ``path`` is a PubTator file or a folder of them; ``limit`` > 0 keeps the first documents.
    Gold docs carry the mentions as ``ents`` (kb_id_ = ids joined by "|") and all of them in
    ``spans["pubtator"]``.
    """

    def read(nlp: Language) -> Iterator[Example]:
        for document in read_pubtator_documents(path, limit):
            gold = pubtator_to_doc(document, nlp)
            yield Example(nlp.make_doc(gold.text), gold)

    return read
