"""The shards of a corpus to link and what is done (issue 19): one output shard per input
file, written atomically, an errors file beside it, and a manifest of the finished shards so
that a rerun skips them. No spaCy here."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..atomic import write_text_atomic
from ..data.texts import input_files
from ..errors import Errors
from ..parsing import parse_json

OUTPUT_FORMATS = ("jsonl", "spacy")
MANIFEST_NAME = "manifest.json"
ERRORS_SUFFIX = ".errors.jsonl"
VECTORS_SUFFIX = ".vectors.npy"
# manifest settings recorded for the reader, not compared on resume
INFORMATIONAL = ("model",)


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
    for source in input_files(input_path):
        shard = Shard(source, output_dir / f"{source.stem}.{fmt}",
                      output_dir / f"{source.stem}{ERRORS_SUFFIX}")
        for path in (shard.output, shard.errors, shard.vectors):
            other = owners.setdefault(path.name, shard)
            if other is not shard:
                raise ValueError(Errors.E125.format(
                    names=f"{other.source.name} and {source.name}", output=path))
        shards.append(shard)
    return shards


def file_digest(path: Path) -> str:
    with path.open("rb") as file_:
        return hashlib.file_digest(file_, "sha256").hexdigest()


class Manifest:
    """``manifest.json`` of an output folder: the settings of the run (``model``, ``format``)
    and, per finished shard, its source's size and SHA-256 and what linking it gave. A shard
    is done when it is listed with its source unchanged and its output exists."""

    def __init__(self, path: Path, settings: dict[str, Any],
                 shards: dict[str, dict[str, Any]] | None = None) -> None:
        self.path, self.settings, self.shards = path, settings, shards or {}

    @classmethod
    def open(cls, output_dir: str | Path, settings: dict[str, Any],
             shards: list[Shard] = ()) -> Manifest:
        """The manifest of ``output_dir`` (a new one when there is none, E130 when then some
        output of ``shards`` exists already: not ours to replace); E126 when it is
        malformed, E127 when it was written with other ``settings`` (all but the
        informational ``model`` path: the pipeline is compared by its fingerprint)."""
        path = Path(output_dir) / MANIFEST_NAME
        settings = json.loads(json.dumps(settings))  # as it is saved: tuples become lists
        if not path.exists():
            found = [s.output.name for s in shards if s.output.exists() or s.errors.exists()]
            if found:
                raise ValueError(Errors.E130.format(path=output_dir,
                                                    names=", ".join(found[:5])))
            return cls(path, settings)
        try:
            saved = parse_json(path.read_bytes())
            shards, saved_settings = saved["shards"], saved["settings"]
            if not isinstance(shards, dict) or not isinstance(saved_settings, dict):
                raise TypeError("shards and settings must be maps")
        except (ValueError, KeyError, TypeError) as err:
            raise ValueError(Errors.E126.format(path=path, problem=err)) from None
        differ = sorted(key for key in {*saved_settings, *settings} - set(INFORMATIONAL)
                        if saved_settings.get(key) != settings.get(key))
        if differ:
            raise ValueError(Errors.E127.format(
                path=path, keys=", ".join(differ),
                saved={k: saved_settings.get(k) for k in differ},
                given={k: settings.get(k) for k in differ}, folder=output_dir))
        return cls(path, settings, shards)

    def is_done(self, shard: Shard) -> bool:
        entry = self.shards.get(shard.name)
        return (entry is not None and shard.output.exists()
                and entry.get("source_size") == shard.source.stat().st_size
                and entry.get("source_sha256") == file_digest(shard.source))

    def mark_done(self, shard: Shard, summary: dict[str, Any]) -> None:
        """Record ``shard`` as finished (after its output was written) and save the
        manifest atomically."""
        self.shards[shard.name] = {"source": shard.source.name,
                                   "source_size": shard.source.stat().st_size,
                                   "source_sha256": file_digest(shard.source), **summary}
        write_text_atomic(self.path, json.dumps(
            {"settings": self.settings, "shards": self.shards}, indent=1) + "\n")
