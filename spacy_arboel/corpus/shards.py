"""The shards of a corpus to link and what is done (issue 19): one output shard per input
file, written atomically, an errors file beside it, and a manifest of the finished shards (a
``jobs.ledger.Ledger``) so that a rerun skips them. No spaCy here."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..data.documents import Document
from ..data.inputs import document_files, read_documents
from ..errors import Errors
from ..jobs.ledger import MANIFEST, Ledger, LedgerError, changed, stamp

OUTPUT_FORMATS = ("jsonl", "spacy")
MANIFEST_NAME = MANIFEST
ERRORS_SUFFIX = ".errors.jsonl"
VECTORS_SUFFIX = ".vectors.npy"
# manifest settings recorded for the reader, not compared on resume
INFORMATIONAL = ("model",)
SOURCE = "source_"  # the prefix of a shard's source stamp in its manifest entry


@dataclass(frozen=True)
class Shard:
    """One input file, the output shard it becomes and the file of its documents that
    raised."""

    source: Path
    output: Path
    errors: Path

    @property
    def name(self) -> str:
        return self.output.name

    @property
    def vectors(self) -> Path:
        """The mention vectors of the output's entities, in their order (``--vectors``)."""
        return vectors_path(self.output)


def vectors_path(output: Path) -> Path:
    """The mention vectors file beside the output shard ``output``."""
    return output.with_name(f"{output.stem}{VECTORS_SUFFIX}")


def plan_shards(input_path: str | Path, output_dir: str | Path, fmt: str) -> list[Shard]:
    """The shards of ``input_path`` (a file or a folder of .jsonl, .txt, .pubtator, .spacy;
    E114 otherwise), each written to ``output_dir/<stem>.<fmt>``, with its errors and
    vectors files beside it (E125 when a file of one shard would be a file of another, as
    for inputs ``a.jsonl`` and ``a.txt``, or ``a.errors.jsonl``, whose output would be
    ``a.jsonl``'s errors file)."""
    if fmt not in OUTPUT_FORMATS:
        raise ValueError(Errors.E007.format(what="--format", value=fmt,
                                            options=", ".join(OUTPUT_FORMATS)))
    output_dir = Path(output_dir)
    shards: list[Shard] = []
    owners: dict[str, Shard] = {}
    for source in document_files(input_path):
        shard = Shard(source, output_dir / f"{source.stem}.{fmt}",
                      output_dir / f"{source.stem}{ERRORS_SUFFIX}")
        for path in (shard.output, shard.errors, shard.vectors):
            other = owners.setdefault(path.name, shard)
            if other is not shard:
                raise ValueError(Errors.E125.format(
                    names=f"{other.source.name} and {source.name}", output=path))
        shards.append(shard)
    return shards


def shard_documents(source: Path) -> Iterator[Document]:
    """The documents of the input shard ``source``, read as texts to link
    (``data.inputs.read_documents``, lenient); a ``.spacy`` one through spaCy
    (``spacy_data.readers``, imported for it alone: the rest needs no spaCy)."""
    if source.suffix.lower() == ".spacy":
        from ..spacy_data.readers import read_docbin_documents

        return read_docbin_documents(source)
    return read_documents(source, strict=False)


def open_manifest(output_dir: str | Path, settings: dict[str, Any],
                  shards: list[Shard] = ()) -> Ledger:
    """The ledger of ``output_dir`` (``manifest.json``: the settings of the run and, per
    finished shard under ``shards``, its source's size and SHA-256 and what linking it
    gave). A new one when there is none (E130 when then some output of ``shards`` exists
    already: not ours to replace); E126 when it is malformed, E127 when it was written with
    other ``settings`` (all but the informational ``model`` path: the pipeline is compared
    by its fingerprint)."""
    path = Path(output_dir) / MANIFEST_NAME
    if not path.exists():
        found = [s.output.name for s in shards if s.output.exists() or s.errors.exists()]
        if found:
            raise ValueError(Errors.E130.format(path=output_dir, names=", ".join(found[:5])))
    try:
        return Ledger.open(path, "shards", settings, INFORMATIONAL)
    except LedgerError as err:
        if not err.keys:
            raise ValueError(Errors.E126.format(path=path, problem=err.problem)) from None
        given = json.loads(json.dumps(settings))
        raise ValueError(Errors.E127.format(
            path=path, keys=", ".join(err.keys), saved={k: err.saved.get(k) for k in err.keys},
            given={k: given.get(k) for k in err.keys}, folder=output_dir)) from None


def is_done(manifest: Ledger, shard: Shard) -> bool:
    """Whether ``shard`` is listed as linked from its source as it is now, and its output
    exists."""
    entry = manifest.entries.get(shard.name)
    return (entry is not None and shard.output.exists()
            and changed(entry, shard.source, shard.source.name, SOURCE) is None)


def mark_done(manifest: Ledger, shard: Shard, summary: dict[str, Any]) -> None:
    """Record ``shard`` as linked (after its output was written), with its source's stamp
    and ``summary`` (docs, mentions, errors)."""
    manifest.mark(shard.name, {"source": shard.source.name,
                               **stamp(shard.source, SOURCE), **summary})
