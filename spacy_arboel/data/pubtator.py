"""A streaming reader for the PubTator format (BC5CDR, NCBI disease). No spaCy here.

A document is a block of lines::

    PMID|t|title
    PMID|a|abstract
    PMID<TAB>start<TAB>end<TAB>text<TAB>type<TAB>id[<TAB>individual mentions]
    PMID<TAB>CID<TAB>chemical<TAB>disease        (relation lines: skipped)

with offsets into ``title + " " + abstract`` (the text of its ``Document``), and blocks
separated by blank lines. Composite mentions carry several ids joined by ``|`` or ``+``;
``-1`` means "no id".
"""

from __future__ import annotations

import re
import warnings
import zipfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from ..errors import Errors, Warnings
from ..parsing import utf8_lines
from .documents import Document, Mention

NO_ID = "-1"
_ID_SEPARATORS = re.compile(r"[|+]")
_TEXT_LINE = re.compile(r"^([^\t|]+)\|([ta])\|(.*)$")


def is_title_line(line: str) -> bool:
    """Whether ``line`` is a PubTator title or abstract line (``PMID|t|…``)."""
    return bool(_TEXT_LINE.match(line.rstrip("\n")))


def split_ids(value: str) -> tuple[str, ...]:
    """Split a PubTator id field on ``|`` and ``+``; ``-1`` (no id) gives ``()``."""
    ids = tuple(part.strip() for part in _ID_SEPARATORS.split(value))
    return tuple(i for i in ids if i and i != NO_ID)


def read_pubtator(path: str | Path) -> Iterator[Document]:
    """Stream the documents of a PubTator file.

    Raises ValueError (naming the file and line) for malformed lines; warns about mentions
    whose text does not match the document text and about repeated PMIDs, keeping both.
    """
    path = Path(path)
    with path.open("rb") as file_:
        lines = utf8_lines(file_, lambda number, problem: ValueError(
            Errors.E010.format(path=path, line=number, reason=problem)))
        yield from _parse_lines(lines, str(path))


def read_pubtator_member(archive: str | Path, name: str) -> Iterator[Document]:
    """Stream the documents of the PubTator file whose base name is ``name`` inside the zip
    ``archive`` (BC5CDR's ``CDR_Data.zip`` as downloaded), without unpacking it. An archive
    that is not a readable zip is E200, one without such a member E201."""
    archive = Path(archive)
    try:
        with zipfile.ZipFile(archive) as zipped:
            members = [m for m in zipped.namelist() if m.rsplit("/", 1)[-1] == name]
            if not members:
                raise ValueError(Errors.E201.format(archive=archive, name=name))
            source = f"{archive}:{members[0]}"
            with zipped.open(members[0]) as file_:
                lines = utf8_lines(file_, lambda number, problem: ValueError(
                    Errors.E010.format(path=source, line=number, reason=problem)))
                yield from _parse_lines(lines, source)
    except (zipfile.BadZipFile, OSError) as err:
        raise ValueError(Errors.E200.format(archive=archive, error=err)) from None


def parse_pubtator_string(text: str, source: str = "<string>") -> list[Document]:
    """Parse PubTator text held in a string (for tests and small snippets)."""
    return list(_parse_lines(text.splitlines(), source))


def _parse_lines(lines: Iterable[str], source: str) -> Iterator[Document]:
    doc: Document | None = None
    doc_line = 0
    title = ""  # the text of ``doc`` is its title, a space and its abstract
    seen: dict[str, int] = {}

    def error(number: int, reason: str) -> ValueError:
        return ValueError(Errors.E010.format(path=source, line=number, reason=reason))

    def finish(document: Document, first_line: int) -> Document:
        if document.id in seen:
            warnings.warn(
                Warnings.W101.format(path=source, line=first_line, pmid=document.id,
                                     first=seen[document.id]),
                stacklevel=3,
            )
        else:
            seen[document.id] = first_line
        return document

    for number, raw in enumerate(lines, start=1):
        line = raw.rstrip("\r\n")
        if not line.strip():
            if doc is not None:
                yield finish(doc, doc_line)
                doc = None
            continue
        match = _TEXT_LINE.match(line)
        if match:
            pmid, kind, content = match.groups()
            if kind == "t":
                if doc is not None:  # a new title without a blank line in between
                    yield finish(doc, doc_line)
                doc, doc_line, title = Document(pmid, content + " "), number, content
                continue
            if doc is None or doc.id != pmid:
                raise error(number, f"abstract line for PMID {pmid} without its title line")
            if doc.mentions or doc.text != title + " ":
                raise error(number, f"second abstract line, or abstract after mentions, "
                                    f"for PMID {pmid}")
            doc.text = title + " " + content
            continue
        if "\t" not in line:
            raise error(number, f"expected 'PMID|t|title', 'PMID|a|abstract' or a tab-separated "
                                f"annotation line, got {line[:60]!r}")
        columns = line.split("\t")
        if len(columns) == 4 and not columns[1].strip().lstrip("-").isdigit():
            continue  # relation line, e.g. PMID<TAB>CID<TAB>D015738<TAB>D003693
        if doc is None:
            raise error(number, "annotation line before any 'PMID|t|title' line")
        if columns[0] != doc.id:
            raise error(number, f"annotation for PMID {columns[0]} inside the document of "
                                f"PMID {doc.id}")
        doc.mentions.append(_parse_mention(columns, doc, number, source, error))
    if doc is not None:
        yield finish(doc, doc_line)


def _parse_mention(columns: list[str], doc: Document, number: int, source: str,
                   error: Callable[[int, str], ValueError]) -> Mention:
    if len(columns) not in (6, 7):
        if len(columns) == 5:
            columns = [*columns, NO_ID]  # some PubTator exports omit the id of unlinked mentions
        else:
            raise error(number, f"a mention line needs 6 tab-separated columns "
                                f"(PMID, start, end, text, type, id), found {len(columns)}")
    _, start_str, end_str, mention_text, label, id_field = columns[:6]
    try:
        start, end = int(start_str), int(end_str)
    except ValueError:
        raise error(number, f"mention offsets must be integers, got start={start_str!r} "
                            f"end={end_str!r}") from None
    if start < 0 or end <= start:
        raise error(number, f"invalid mention offsets start={start} end={end}")
    if end > len(doc.text):
        raise error(number, f"the mention ends at {end}, past the end of its document's text "
                            f"({len(doc.text)} characters of title, space and abstract)")
    if not label.strip():
        raise error(number, "the mention has no type (the fifth column)")
    found = doc.text[start:end]
    if found != mention_text:
        warnings.warn(
            Warnings.W100.format(path=source, line=number, pmid=doc.id, start=start, end=end,
                                 text=mention_text, found=found),
            stacklevel=4,
        )
    return Mention(start, end, mention_text, label.strip(), split_ids(id_field))
