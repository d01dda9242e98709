"""One way in for documents: :func:`read_documents` reads a corpus in the formats people
have (PubTator, JSONL with spans, brat standoff, plain text), a file or a folder of files,
into ``data.documents.Document`` objects, strictly (gold annotations) or leniently (texts to
link). No spaCy here: ``.spacy`` DocBins are spaCy's, read beside the others by
``spacy_data.readers.read_corpus_documents`` from the same :func:`document_sources`.

``format="auto"`` goes by the path:

- a folder with ``.ann`` files is brat; another folder holds its files with a suffix of
  ``SUFFIXES["auto"]``, in name order, each read by its suffix;
- ``.jsonl`` is JSONL, ``.pubtator`` PubTator, ``.spacy`` a DocBin;
- ``.txt`` is PubTator when its first non-empty line is a PubTator title line
  (``PMID|t|title``), else plain text: one document with its file's stem as id (none when
  the file is blank).

A format given reads a file in that format whatever its suffix, and a folder as its files
with a suffix of that format (brat: the folder itself).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from ..errors import Errors
from ..parsing import decode_utf8
from .annotations import read_brat_documents, read_jsonl_documents
from .documents import Document
from .pubtator import is_title_line, read_pubtator

FORMATS = ("auto", "pubtator", "jsonl", "brat", "text")
DOCBIN = "spacy"  # the format of a .spacy file: spaCy's, read in spacy_data
# the suffixes of a folder's document files, by format
SUFFIXES = {"auto": (".jsonl", ".txt", ".pubtator", ".spacy"), "pubtator": (".txt", ".pubtator"),
            "jsonl": (".jsonl",), "text": (".txt",)}
_SUFFIX_FORMATS = {".jsonl": "jsonl", ".pubtator": "pubtator", ".spacy": DOCBIN}


def document_files(path: str | Path, format: str = "auto") -> list[Path]:
    """The document files of ``path`` in ``format`` (one with files: not brat): the file
    itself, or a folder's files with a suffix of the format (any case), in name order. E103 when
    ``path`` does not exist; E114 for a folder without such files or, in ``auto``, a file
    of another suffix."""
    path = _existing(path, format)
    suffixes = SUFFIXES[format]
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.suffix.lower() in suffixes)
    else:
        files = [path] if format != "auto" or path.suffix.lower() in suffixes else []
    if not files:
        raise ValueError(Errors.E114.format(path=path, suffixes=", ".join(suffixes)))
    return files


def document_sources(path: str | Path, format: str = "auto") -> list[tuple[Path, str]]:
    """What :func:`read_documents` reads from ``path`` in ``format`` (see the module's
    notes): each document file with its format (``DOCBIN`` for a ``.spacy`` file), or a
    brat folder. E007 for an unknown format."""
    if format not in FORMATS:
        raise ValueError(Errors.E007.format(what="format", value=format,
                                            options=", ".join(FORMATS)))
    path = _existing(path, format)
    if format == "brat" or (format == "auto" and path.is_dir() and any(path.glob("*.ann"))):
        return [(path, "brat")]
    return [(file, _file_format(file, format)) for file in document_files(path, format)]


def read_documents(path: str | Path, format: str = "auto", *,
                   strict: bool = True) -> Iterator[Document]:
    """Stream the documents of ``path``, a file or a folder, in ``format`` (see the
    module's notes). ``strict`` reads gold annotations (a JSONL span that cannot be read is
    E203); lenient reads texts to link (such a span is skipped with W105; see
    ``data.annotations.read_jsonl_documents``). PubTator, brat and plain text are read
    alike either way. A ``.spacy`` DocBin is E206: spaCy reads it
    (``spacy_data.readers.read_corpus_documents``)."""
    for source, fmt in document_sources(path, format):
        yield from read_source(source, fmt, strict=strict)


def read_source(source: Path, fmt: str, *, strict: bool = True) -> Iterator[Document]:
    """The documents of one source of :func:`document_sources` (see
    :func:`read_documents`)."""
    if fmt == DOCBIN:
        raise ValueError(Errors.E206.format(path=source))
    if fmt == "jsonl":
        return read_jsonl_documents(source, strict=strict)
    return {"pubtator": read_pubtator, "brat": read_brat_documents,
            "text": read_text_document}[fmt](source)


def read_text_document(path: Path) -> Iterator[Document]:
    """A plain-text file as one document, with its stem as id and no mentions (none when
    the file is blank); E154 when it is not UTF-8."""
    try:
        text = decode_utf8(path.read_bytes())
    except ValueError as err:
        raise ValueError(Errors.E154.format(path=path, problem=err)) from None
    if text.strip():
        yield Document(path.stem, text)


def starts_like_pubtator(path: Path) -> bool:
    """Whether the first non-empty line of ``path`` is a PubTator title line."""
    with path.open("rb") as lines:  # bytes that are not UTF-8 are the reader's to report
        for line in lines:
            if line.strip():
                return is_title_line(line.decode("utf8", errors="replace"))
    return False


def _existing(path: str | Path, format: str) -> Path:
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(Errors.E103.format(
            path=path, what="corpus" if format == "auto" else f"{format} corpus"))
    return path


def _file_format(path: Path, format: str) -> str:
    if format != "auto":
        return format
    suffix = path.suffix.lower()  # Train.PubTator (BioRED's spelling) is a .pubtator file
    if suffix == ".txt":
        return "pubtator" if starts_like_pubtator(path) else "text"
    return _SUFFIX_FORMATS[suffix]
