"""Raw documents to link, from the files users have: JSONL (one object per line with a
``text`` and an optional ``id``), PubTator (``.pubtator``, or a ``.txt`` that starts like
one), plain ``.txt`` (one document per file) and ``.spacy`` DocBins, or a folder of them.
No spaCy needed except for ``.spacy``.

The gold spans of a JSONL line (``data.annotations``' format, read by its one span parser,
:func:`~.annotations.parse_span`) are kept where they carry ids; one that ``convert``
would refuse is skipped here with W105 naming the file and line, since linking does not
need gold."""

import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ..errors import Errors, Warnings
from ..parsing import decode_utf8, parse_json
from .annotations import SpanError, document_id, parse_span, span_list
from .ids import gold_ids, join_ids
from .pubtator import NO_ID, is_title_line, read_pubtator

SUFFIXES = (".jsonl", ".txt", ".pubtator", ".spacy")


@dataclass(frozen=True)
class TextRecord:
    """One document: its id (given, or ``<file stem>:<number>``), text, and the gold
    mentions the input gives with ids, as ``(start_char, end_char, ids)`` (``ids`` joined
    with ``|``; none for plain text)."""

    id: str
    text: str
    gold: tuple[tuple[int, int, str], ...] = ()


def input_files(path: str | Path) -> list[Path]:
    """``path``, or the files of the folder ``path`` with a known suffix (sorted); a
    ValueError (E114) for a file of another kind or a folder without any."""
    path = Path(path)
    files = sorted(p for p in path.iterdir() if p.suffix in SUFFIXES) if path.is_dir() \
        else [path]
    if not files or any(p.suffix not in SUFFIXES for p in files):
        raise ValueError(Errors.E114.format(path=path, suffixes=", ".join(SUFFIXES)))
    return files


def is_pubtator(path: Path) -> bool:
    """Whether the first non-empty line of ``path`` is a PubTator title line."""
    with path.open("rb") as lines:  # bytes that are not UTF-8 are the reader's to report
        for line in lines:
            if line.strip():
                return is_title_line(line.decode("utf8", errors="replace"))
    return False


def read_texts(path: str | Path) -> Iterator[TextRecord]:
    """The documents of ``path`` (a file or a folder of them), file by file."""
    for file in input_files(path):
        if file.suffix == ".jsonl":
            yield from _jsonl(file)
        elif file.suffix == ".spacy":
            yield from _docbin(file)
        elif file.suffix == ".pubtator" or is_pubtator(file):
            for doc in read_pubtator(file):
                yield TextRecord(doc.pmid, doc.text, tuple(
                    (m.start, m.end, join_ids(m.ids)) for m in doc.mentions if m.ids))
        else:
            try:
                text = decode_utf8(file.read_bytes())
            except ValueError as err:
                raise ValueError(Errors.E154.format(path=file, problem=err)) from None
            yield TextRecord(file.stem, text)


def _docbin(file: Path) -> Iterator[TextRecord]:
    """The docs of a .spacy file, one at a time (E155 naming the doc that cannot be read)."""
    from spacy.tokens import DocBin
    from spacy.vocab import Vocab

    number = 0
    try:
        for doc in DocBin().from_disk(file).get_docs(Vocab()):
            yield TextRecord(str(doc.user_data.get("id", f"{file.stem}:{number}")), doc.text,
                             tuple((e.start_char, e.end_char, ids) for e in doc.ents
                                   if (ids := _docbin_ids(e.kb_id_))))
            number += 1
    except Exception as err:  # spaCy, msgpack and numpy raise several unrelated types
        raise ValueError(Errors.E155.format(path=file, number=number,
                                            problem=f"{type(err).__name__}: {err}")) from None


def _jsonl(file: Path) -> Iterator[TextRecord]:
    with file.open("rb") as lines:
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                record = parse_json(line)
            except ValueError as err:
                raise ValueError(Errors.E115.format(path=file, line=number,
                                                    problem=err)) from None
            if not isinstance(record, dict) or not isinstance(record.get("text"), str):
                raise ValueError(Errors.E115.format(
                    path=file, line=number, problem='no "text" string field'))
            try:
                record_id = document_id(record, f"{file.stem}:{number}")
            except SpanError as err:
                raise ValueError(Errors.E115.format(path=file, line=number,
                                                    problem=err)) from None
            yield TextRecord(record_id, record["text"], _jsonl_gold(record, f"{file}:{number}"))


def _jsonl_gold(record: dict, where: str) -> tuple[tuple[int, int, str], ...]:
    """The spans of a JSONL record that carry ids, read as ``convert`` reads them
    (:func:`~.annotations.parse_span`); a span it would refuse is skipped with W105."""
    def skip(err: SpanError) -> None:
        warnings.warn(Warnings.W105.format(where=where, problem=err), stacklevel=4)

    try:
        spans = span_list(record)
    except SpanError as err:
        skip(err)
        return ()
    gold = []
    for span in spans:
        try:
            mention = parse_span(span, record["text"], where)
        except SpanError as err:
            skip(err)
            continue
        if mention.ids:
            gold.append((mention.start, mention.end, join_ids(mention.ids)))
    return tuple(gold)


def _docbin_ids(kb_id: str) -> str:
    """The gold ids of a DocBin ent's ``kb_id_`` (``data.ids``), without PubTator's "no
    id" ``-1``, joined again ("" for none)."""
    return join_ids(i for i in gold_ids(kb_id) if i != NO_ID)
