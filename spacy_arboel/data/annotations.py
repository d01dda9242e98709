"""Readers of the annotation formats people have besides PubTator: JSONL with character
spans and ids, and brat standoff. Each gives ``data.documents.Document`` objects. No spaCy
here.

JSONL, one document a line::

    {"id": "doc1", "text": "Aspirin induced cough.",
     "spans": [{"start": 0, "end": 7, "label": "Chemical", "kb_id": "D001241"}]}

``id`` is optional (see :func:`read_jsonl_documents`), a string or an integer; ``entities``
may stand for ``spans``; a span may be a list ``[start, end, label, kb_id]``. Offsets are
integers (not ``true``, not ``1.0``) with ``0 <= start < end <= len(text)``, counting the
characters of ``text``. ``kb_id`` is an id, several ids joined by ``|`` (a composite
mention, as ``data.ids``) or a list of ids; ids are stripped of surrounding whitespace, and
an id that is empty, whitespace only, or (in a list) holds ``|`` is refused. ``""``,
``"-1"``, ``[]``, ``null`` or no ``kb_id`` is a mention with no id (scored as out-of-KB).
``label`` is a string, or missing, ``null`` or ``""`` ("ENTITY"). A span's optional
``text`` is compared with the document text at its offsets (W103 where they differ).
:func:`read_jsonl_documents` is the one JSONL reader, :func:`parse_span` its one span
parser: read strictly (gold for ``convert``) a bad span is refused (E203), read leniently
(texts to link, for ``render`` and ``link-corpus``) it is skipped with W105.

brat standoff, a folder of ``name.txt`` and ``name.ann`` pairs: text-bound annotations
``T1<TAB>Chemical 0 7<TAB>Aspirin`` are the mentions and normalizations
``N1<TAB>Reference T1 MeSH:D001241<TAB>Aspirin`` their ids (the part after the resource's
``:``; one id a line, several lines for a composite mention); other annotation lines
(relations, events, attributes, notes) are skipped. The text is read as brat counts it:
UTF-8, without newline translation (a Windows line end ``\\r\\n`` is two characters), and
each mention's text column is compared with the text at its offsets (W103 where they
differ). A discontinuous span (``0 5;10 15``, fragments in order) becomes the span from its
first start to its last end, with a warning (W104) per file that has any.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..errors import Errors, Warnings
from ..parsing import decode_utf8, parse_json, utf8_lines
from .documents import Document, Mention
from .ids import ID_SEPARATOR
from .pubtator import NO_ID

DEFAULT_LABEL = "ENTITY"
SPAN_FIELDS = ("start", "end", "label", "kb_id")


class SpanError(ValueError):
    """A span or document that cannot be read: the problem alone (the caller names the file
    and line)."""


def read_jsonl_documents(path: str | Path, *, strict: bool = True) -> Iterator[Document]:
    """Stream the documents of a JSONL file (the module's format); a path that is no file
    to read (a folder) is E230.

    ``strict`` (gold annotations: ``convert``, ``build-kb``): a line that is not such a
    document is E203, naming the file, the line and what is wrong; a document without an
    ``id`` gets its line number; an id seen before is W101 (both documents are kept, as in
    PubTator). Lenient (texts to link: ``render``, ``link-corpus``): a line that is no
    document (not JSON, no ``text`` string, an ``id`` that is no id) is E115; a span that
    cannot be read, or ``spans`` that are no list, are skipped with W105 naming the file and
    line; a document without an ``id`` gets ``<file stem>:<line>`` (ids seen before are
    ``link-corpus``'s W007)."""
    path = Path(path)
    try:
        opened = path.open("rb")
    except (IsADirectoryError, PermissionError) as err:
        raise ValueError(Errors.E230.format(
            path=path, what="JSONL corpus file", error=err.strerror,
            hint=' of one {"text", "spans"} object a line (a brat folder is --format brat)')
        ) from None

    def fail(number: int, problem: str) -> ValueError:
        return ValueError(Errors.E203.format(where=f"{path}:{number}", problem=problem)
                          if strict else
                          Errors.E115.format(path=path, line=number, problem=problem))

    seen: dict[str, int] = {}
    with opened as file_:
        for number, line in enumerate(utf8_lines(file_, fail), start=1):
            if not line.strip():
                continue
            try:
                document = _jsonl_document(line, f"{path}:{number}", str(number) if strict
                                           else f"{path.stem}:{number}", strict)
            except SpanError as err:
                raise fail(number, str(err)) from None
            if strict:
                if document.id in seen:
                    warnings.warn(Warnings.W101.format(
                        path=path, line=number, pmid=document.id, first=seen[document.id]),
                        stacklevel=2)
                seen.setdefault(document.id, number)
            yield document


def _jsonl_document(line: str, where: str, default_id: str, strict: bool) -> Document:
    """The document of one JSONL line, or a SpanError; a span that cannot be read is one
    too where ``strict``, else skipped with W105 naming ``where``."""
    try:
        data = parse_json(line)
    except ValueError as err:
        raise SpanError(str(err)) from None
    if not isinstance(data, dict) or not isinstance(data.get("text"), str):
        raise SpanError('not an object with a "text" string')
    text = data["text"]
    doc_id = _document_id(data, default_id)

    def refuse_or_skip(err: SpanError) -> None:
        if strict:
            raise err
        warnings.warn(Warnings.W105.format(where=where, problem=err), stacklevel=5)

    mentions = []
    try:
        spans = _span_list(data)
    except SpanError as err:
        refuse_or_skip(err)
        spans = []
    for span in spans:
        try:
            mentions.append(parse_span(span, text, where))
        except SpanError as err:
            refuse_or_skip(err)
    return Document(doc_id, text, sorted(mentions, key=lambda m: (m.start, -m.end)))


def _document_id(data: dict[str, Any], default: str) -> str:
    """A JSONL document's ``id``: a string that is not blank, or an integer (as its decimal
    string); ``default`` when it has none. Another value is a SpanError (``null`` would
    become the id "None", ``true`` "True")."""
    if "id" not in data:
        return default
    value = data["id"]
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if not isinstance(value, str) or not value.strip():
        raise SpanError(f'"id" must be a string that is not blank, or an integer, got '
                        f"{_json(value)}")
    return value


def _span_list(data: dict[str, Any]) -> list[Any]:
    """A JSONL document's ``spans`` (or ``entities``): a list, ``[]`` when it has none."""
    key = "spans" if "spans" in data else "entities"
    spans = data.get(key, [])
    if not isinstance(spans, list):
        raise SpanError(f'"{key}" is not a list')
    return spans


def parse_span(span: Any, text: str, where: str = "") -> Mention:
    """One JSONL span (the module's format) of a document whose text is ``text``: its
    mention, or a SpanError saying what is wrong. A span ``text`` that differs from the
    document text at its offsets is W103 (``where`` names the file and line)."""
    if isinstance(span, list) and 2 <= len(span) <= len(SPAN_FIELDS):
        span = dict(zip(SPAN_FIELDS, span, strict=False))
    if not isinstance(span, dict):
        raise SpanError(f"the span {_json(span)} is neither an object nor a list "
                        "[start, end, label, kb_id]")
    start, end = span.get("start"), span.get("end")
    for key, value in (("start", start), ("end", end)):
        if not isinstance(value, int) or isinstance(value, bool):
            raise SpanError(f'the span {_json(span)} has a "{key}" that is not an integer '
                            "offset")
    if not 0 <= start < end <= len(text):
        problem = ("a negative offset" if start < 0 else
                   "start >= end" if start >= end else
                   f"an end past the end of the text ({len(text)} characters)")
        raise SpanError(f"the span {_json(span)} has {problem}: offsets must be "
                        f"0 <= start < end, within the text ({len(text)} characters)")
    mention_text = span.get("text")
    if mention_text is not None and not isinstance(mention_text, str):
        raise SpanError(f'the span {_json(span)} has a "text" that is not a string')
    if mention_text is not None and mention_text != text[start:end]:
        warnings.warn(Warnings.W103.format(where=where, mention="span", start=start, end=end,
                                           text=mention_text, found=text[start:end]),
                      stacklevel=3)
    label = span.get("label")
    if label is None or label == "":
        label = DEFAULT_LABEL
    elif not isinstance(label, str) or not label.strip():
        raise SpanError(f"the span {_json(span)} has a label that is not text (a string "
                        "that is not blank)")
    ids = span_ids(span.get("kb_id", span.get("id")))
    return Mention(start, end, text[start:end], label.strip(), ids)


def span_ids(value: Any) -> tuple[str, ...]:
    """The gold ids of a JSONL span's ``kb_id`` (see the module's notes), or a SpanError."""
    if value is None or value in ("", NO_ID) or value == [] or (
            type(value) is int and value == -1):
        return ()
    if isinstance(value, str):
        parts = value.split(ID_SEPARATOR)
        if any(not part.strip() for part in parts):
            raise SpanError(f"the kb_id {_json(value)} holds an empty or blank id ('|' "
                            "joins the ids of a composite mention)")
        items: list[Any] = parts
    elif isinstance(value, list):
        items = value
    else:
        items = [value]
    ids = []
    for item in items:
        if isinstance(item, int) and not isinstance(item, bool) and item >= 0:
            item = str(item)
        if not isinstance(item, str) or not item.strip():
            raise SpanError(f"the kb_id {_json(value)} holds {_json(item)}, which is not text "
                            "(an id is a string that is not blank, or an integer)")
        item = item.strip()
        if ID_SEPARATOR in item:
            raise SpanError(f"the kb_id {_json(value)} holds {_json(item)}: '|' joins the "
                            "ids of a composite mention, so no id holds it; list each id "
                            "on its own")
        if item == NO_ID:
            raise SpanError(f"the kb_id {_json(value)} holds {NO_ID!r} (no id) among ids: "
                            'a mention with no id has kb_id "" or []')
        ids.append(item)
    return tuple(dict.fromkeys(ids))


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)[:200]


def brat_pairs(folder: str | Path) -> list[tuple[Path, Path]]:
    """The (``.txt``, ``.ann``) pairs of a brat folder, in name order; a ``.ann`` without
    its ``.txt`` is E204, and ``.txt`` files without their ``.ann`` (not read) W106."""
    folder = Path(folder)
    pairs = []
    for ann in sorted(folder.glob("*.ann")):
        txt = ann.with_suffix(".txt")
        if not txt.is_file():
            raise ValueError(Errors.E204.format(where=str(ann), problem=f"no {txt.name} beside "
                                                "it: brat keeps each text in NAME.txt"))
        pairs.append((txt, ann))
    if pairs:
        lone = sorted(t.name for t in folder.glob("*.txt")
                      if not t.with_suffix(".ann").is_file())
        if lone:
            warnings.warn(Warnings.W106.format(folder=folder, n=len(lone), example=lone[0]),
                          stacklevel=3)
    return pairs


def read_brat_documents(folder: str | Path) -> Iterator[Document]:
    """Stream the documents of a brat standoff folder (the module's format). A text that is
    not UTF-8 or a malformed annotation line is E204, naming the file and the line."""
    for txt, ann in brat_pairs(folder):
        text = read_brat_text(txt)
        yield Document(txt.stem, text, _brat_mentions(ann, text))


def read_brat_text(txt: Path) -> str:
    """The text of a brat ``.txt`` as brat counts offsets in it: UTF-8, no newline
    translation (E204 naming the file, line and column of a byte that is not UTF-8)."""
    try:
        return decode_utf8(txt.read_bytes())
    except ValueError as err:
        raise ValueError(Errors.E204.format(where=str(txt), problem=str(err))) from None


def _brat_mentions(ann: Path, text: str) -> list[Mention]:
    spans: dict[str, tuple[int, int, str]] = {}
    ids: dict[str, list[str]] = {}
    discontinuous: list[tuple[str, str, str]] = []
    with ann.open("rb") as file_:
        for number, line in enumerate(utf8_lines(file_, lambda n, problem: ValueError(
                Errors.E204.format(where=f"{ann}:{n}", problem=problem))), start=1):
            def fail(problem: str, number: int = number) -> ValueError:
                return ValueError(Errors.E204.format(where=f"{ann}:{number}", problem=problem))

            columns = line.rstrip("\r\n").split("\t")
            if columns[0].startswith("T"):
                if columns[0] in spans:
                    raise fail(f"{columns[0]} is defined twice")
                start, end, label, pieces = _brat_span(columns, text, fail)
                spans[columns[0]] = (start, end, label)
                found = " ".join(text[s:e] for s, e in pieces)
                if len(columns) > 2 and "\t".join(columns[2:]) != found:
                    warnings.warn(Warnings.W103.format(
                        where=f"{ann}:{number}", mention=columns[0], start=start, end=end,
                        text="\t".join(columns[2:]), found=found), stacklevel=3)
                if len(pieces) > 1:
                    discontinuous.append((f"{columns[0]} (line {number})", columns[1],
                                          text[start:end]))
            elif columns[0].startswith("N"):
                fields = columns[1].split() if len(columns) > 1 else []
                if len(fields) != 3 or ":" not in fields[2]:
                    raise fail("a normalization is N<n><TAB>Reference T<n> RESOURCE:ID")
                entity_id = fields[2].split(":", 1)[1].strip()
                if not entity_id or ID_SEPARATOR in entity_id or entity_id == NO_ID:
                    raise fail(f"{fields[2]!r} names no single id ('|' joins the ids of a "
                               "composite mention: give each id its own N line)")
                ids.setdefault(fields[1], []).append(entity_id)
    unknown = sorted(set(ids) - set(spans))
    if unknown:
        raise ValueError(Errors.E204.format(where=str(ann), problem=f"normalizations refer to "
                                            f"{', '.join(unknown)}, which it does not define"))
    if discontinuous:
        mention, offsets, covered = discontinuous[0]
        warnings.warn(Warnings.W104.format(path=ann, n=len(discontinuous), mention=mention,
                                           offsets=offsets.partition(" ")[2], text=covered),
                      stacklevel=3)
    return sorted((Mention(start, end, text[start:end], label,
                                   tuple(dict.fromkeys(ids.get(key, ()))))
                   for key, (start, end, label) in spans.items()),
                  key=lambda m: (m.start, -m.end))


def _brat_span(columns: list[str], text: str,
               fail: Any) -> tuple[int, int, str, list[tuple[int, int]]]:
    if len(columns) < 2:
        raise fail("a text-bound annotation is T<n><TAB>LABEL START END<TAB>TEXT")
    label, _, offsets = columns[1].partition(" ")
    try:
        pieces = [tuple(int(x) for x in piece.split()) for piece in offsets.split(";")]
    except ValueError:
        raise fail(f"{offsets!r} are not START END offsets") from None
    if not label.strip() or not all(len(p) == 2 for p in pieces):
        raise fail(f"{columns[1]!r} is not LABEL START END")
    previous = 0
    for start, end in pieces:
        if not previous <= start < end <= len(text):
            raise fail(f"the span {offsets} is not within the text ({len(text)} characters) "
                       "with each fragment's start before its end, fragments in order")
        previous = end
    return pieces[0][0], pieces[-1][1], label.strip(), pieces  # type: ignore[return-value]
