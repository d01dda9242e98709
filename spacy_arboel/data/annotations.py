"""Readers of the annotation formats people have besides PubTator: JSONL with character
spans and ids, and brat standoff. Each gives ``PubtatorDocument`` objects (whole text as the
title, no abstract), which ``data.convert`` turns into spaCy docs. No spaCy here.

JSONL, one document a line::

    {"id": "doc1", "text": "Aspirin induced cough.",
     "spans": [{"start": 0, "end": 7, "label": "Chemical", "kb_id": "D001241"}]}

``id`` is optional (the line number otherwise); ``entities`` may stand for ``spans``; a span
may be a list ``[start, end, label, kb_id]``; ``kb_id`` may be a list of ids, "" or missing
(a mention with no id: scored as out-of-KB), and ``label`` may be missing ("ENTITY").

brat standoff, a folder of ``name.txt`` and ``name.ann`` pairs: text-bound annotations
``T1<TAB>Chemical 0 7<TAB>Aspirin`` are the mentions and normalizations
``N1<TAB>Reference T1 MeSH:D001241<TAB>Aspirin`` their ids (the part after the resource's
``:``); other annotation lines (relations, events, attributes, notes) are skipped. A
discontinuous span (``0 5;10 15``) becomes the span from its first start to its last end.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..errors import Errors
from ..parsing import parse_json, utf8_lines
from .pubtator import PubtatorDocument, PubtatorMention, split_ids

DEFAULT_LABEL = "ENTITY"


def read_jsonl_documents(path: str | Path) -> Iterator[PubtatorDocument]:
    """Stream the documents of a JSONL file (the module's format). A line that is not such
    a document is E203, naming the file, the line and what is wrong."""
    path = Path(path)
    with path.open("rb") as file_:
        for number, line in enumerate(utf8_lines(file_, lambda n, problem: ValueError(
                Errors.E203.format(where=f"{path}:{n}", problem=problem))), start=1):
            if line.strip():
                yield _jsonl_document(line, f"{path}:{number}", str(number))


def _jsonl_document(line: str, where: str, default_id: str) -> PubtatorDocument:
    def fail(problem: str) -> ValueError:
        return ValueError(Errors.E203.format(where=where, problem=problem))

    try:
        data = parse_json(line)
    except ValueError as err:
        raise fail(f"not JSON ({err})") from None
    if not isinstance(data, dict) or not isinstance(data.get("text"), str):
        raise fail('not an object with a "text" string')
    text = data["text"]
    spans = data.get("spans", data.get("entities", []))
    if not isinstance(spans, list):
        raise fail('"spans" is not a list')
    mentions = [_jsonl_mention(span, text, fail) for span in spans]
    return PubtatorDocument(str(data.get("id", default_id)), text, None,
                            sorted(mentions, key=lambda m: (m.start, -m.end)))


def _jsonl_mention(span: Any, text: str, fail: Any) -> PubtatorMention:
    if isinstance(span, list) and 2 <= len(span) <= 4:
        span = dict(zip(("start", "end", "label", "kb_id"), span, strict=False))
    if not isinstance(span, dict):
        raise fail(f"the span {json.dumps(span)} is neither an object nor a list "
                   "[start, end, label, kb_id]")
    start, end = span.get("start"), span.get("end")
    if not (isinstance(start, int) and isinstance(end, int) and 0 <= start < end <= len(text)):
        raise fail(f"the span {json.dumps(span)} has no start < end within the text "
                   f"({len(text)} characters)")
    label = span.get("label") or DEFAULT_LABEL
    kb_id = span.get("kb_id", span.get("id", ""))
    ids = tuple(kb_id) if isinstance(kb_id, list) else split_ids(str(kb_id or ""))
    if not isinstance(label, str) or not all(isinstance(i, str) and i for i in ids):
        raise fail(f"the span {json.dumps(span)} has a label or kb_id that is not text")
    return PubtatorMention(start, end, text[start:end], label, ids)


def brat_pairs(folder: str | Path) -> list[tuple[Path, Path]]:
    """The (``.txt``, ``.ann``) pairs of a brat folder, in name order; a ``.ann`` without
    its ``.txt`` is E204."""
    folder = Path(folder)
    pairs = []
    for ann in sorted(folder.glob("*.ann")):
        txt = ann.with_suffix(".txt")
        if not txt.is_file():
            raise ValueError(Errors.E204.format(where=str(ann), problem=f"no {txt.name} beside "
                                                "it: brat keeps each text in NAME.txt"))
        pairs.append((txt, ann))
    return pairs


def read_brat_documents(folder: str | Path) -> Iterator[PubtatorDocument]:
    """Stream the documents of a brat standoff folder (the module's format). A malformed
    annotation line is E204, naming the file and the line."""
    for txt, ann in brat_pairs(folder):
        text = txt.read_text(encoding="utf8")
        yield PubtatorDocument(txt.stem, text, None, _brat_mentions(ann, text))


def _brat_mentions(ann: Path, text: str) -> list[PubtatorMention]:
    spans: dict[str, tuple[int, int, str]] = {}
    ids: dict[str, list[str]] = {}
    with ann.open("rb") as file_:
        for number, line in enumerate(utf8_lines(file_, lambda n, problem: ValueError(
                Errors.E204.format(where=f"{ann}:{n}", problem=problem))), start=1):
            def fail(problem: str, number: int = number) -> ValueError:
                return ValueError(Errors.E204.format(where=f"{ann}:{number}", problem=problem))

            columns = line.rstrip("\r\n").split("\t")
            if columns[0].startswith("T"):
                spans[columns[0]] = _brat_span(columns, text, fail)
            elif columns[0].startswith("N"):
                fields = columns[1].split() if len(columns) > 1 else []
                if len(fields) != 3 or ":" not in fields[2]:
                    raise fail("a normalization is N<n><TAB>Reference T<n> RESOURCE:ID")
                ids.setdefault(fields[1], []).append(fields[2].split(":", 1)[1])
    unknown = sorted(set(ids) - set(spans))
    if unknown:
        raise ValueError(Errors.E204.format(where=str(ann), problem=f"normalizations refer to "
                                            f"{', '.join(unknown)}, which it does not define"))
    return sorted((PubtatorMention(start, end, text[start:end], label, tuple(ids.get(key, ())))
                   for key, (start, end, label) in spans.items()),
                  key=lambda m: (m.start, -m.end))


def _brat_span(columns: list[str], text: str, fail: Any) -> tuple[int, int, str]:
    if len(columns) < 2:
        raise fail("a text-bound annotation is T<n><TAB>LABEL START END<TAB>TEXT")
    label, _, offsets = columns[1].partition(" ")
    try:
        pieces = [tuple(int(x) for x in piece.split()) for piece in offsets.split(";")]
    except ValueError:
        raise fail(f"{offsets!r} are not START END offsets") from None
    if not label or not all(len(p) == 2 for p in pieces):
        raise fail(f"{columns[1]!r} is not LABEL START END")
    start, end = pieces[0][0], pieces[-1][1]
    if not 0 <= start < end <= len(text):
        raise fail(f"the span {start}-{end} is not within the text ({len(text)} characters)")
    return start, end, label
