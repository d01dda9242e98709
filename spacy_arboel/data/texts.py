"""Raw documents to link, from the files users have: JSONL (one object per line with a
``text`` and an optional ``id``), PubTator (``.pubtator``, or a ``.txt`` that starts like
one), plain ``.txt`` (one document per file) and ``.spacy`` DocBins, or a folder of them.
No spaCy needed except for ``.spacy``."""

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ..errors import Errors
from ..parsing import decode_utf8, parse_json
from .ids import join_ids
from .pubtator import is_title_line, read_pubtator

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
                             tuple((e.start_char, e.end_char, e.kb_id_) for e in doc.ents
                                   if e.kb_id_))
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
            yield TextRecord(str(record.get("id", f"{file.stem}:{number}")), record["text"],
                             _jsonl_gold(record))


def _jsonl_gold(record: dict) -> tuple[tuple[int, int, str], ...]:
    """The spans of a JSONL record (``data.annotations``' format) that carry ids; spans of
    another shape are not gold and are skipped here (``convert`` reports them)."""
    gold = []
    for span in record.get("spans", record.get("entities", [])) or []:
        if isinstance(span, list):
            span = dict(zip(("start", "end", "label", "kb_id"), span, strict=False))
        if not isinstance(span, dict):
            continue
        start, end, ids = span.get("start"), span.get("end"), span.get("kb_id")
        ids = join_ids(ids) if isinstance(ids, list) else ids
        if isinstance(start, int) and isinstance(end, int) and isinstance(ids, str) and ids:
            gold.append((start, end, ids))
    return tuple(gold)
