"""Writing one linked shard: its outcomes go to spill files beside the output as they
arrive (in any order), so that a shard costs little memory however many documents it
holds; when the last one is in, the output (JSONL lines, or one DocBin), the vectors and
the errors file are written in input order, each atomically, so that an interrupted run
leaves no half-written shard."""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from ..atomic import atomic_file, write_text_atomic
from .outcomes import Outcome, read_vectors
from .shards import Shard


def docbin_bytes(doc: Any, doc_id: str) -> bytes:
    """A one-document DocBin (with user data, and the id in ``user_data["id"]``) as bytes."""
    from spacy.tokens import DocBin

    doc.user_data["id"] = doc_id
    return DocBin(docs=[doc], store_user_data=True).to_bytes()


class ShardWriter:
    """The outcomes of one shard, spilled to disk as they come: payloads (and vectors)
    appended to hidden files beside the output, with in memory only where each one lies
    (a few numbers per document) and the errors. :meth:`finish` writes the shard in input
    order; :meth:`discard` removes the spill files of a shard that will not finish."""

    def __init__(self, shard: Shard, fmt: str, vectors: bool = False) -> None:
        self.shard, self.fmt = shard, fmt
        token = secrets.token_hex(4)
        folder = shard.output.parent
        folder.mkdir(parents=True, exist_ok=True)
        self._payloads_path = folder / f".{shard.output.name}.spill-{token}"
        self._vectors_path = folder / f".{shard.output.name}.vectors-spill-{token}"
        self._payloads = self._payloads_path.open("w+b")
        self._vector_rows = self._vectors_path.open("w+b") if vectors else None
        # position -> (payload offset, payload length, mentions, vector offset, rows, width)
        self._where: dict[int, tuple[int, int, int, int, int, int]] = {}
        self._failed: list[Outcome] = []

    def add(self, outcomes: Iterable[Outcome]) -> None:
        """Spill ``outcomes`` (each document once: an engine delivers one result a task)."""
        for outcome in outcomes:
            if outcome.error is not None:
                self._failed.append(outcome)
                continue
            payload = (outcome.payload.encode("utf8") if isinstance(outcome.payload, str)
                       else outcome.payload)
            offset = self._payloads.seek(0, 2)
            self._payloads.write(payload)
            vector_offset, rows, width = 0, 0, 0
            if self._vector_rows is not None:
                matrix = read_vectors(outcome.vectors).astype("float16", copy=False)
                rows, width = matrix.shape
                vector_offset = self._vector_rows.seek(0, 2)
                self._vector_rows.write(np.ascontiguousarray(matrix).tobytes())
            self._where[outcome.position] = (offset, len(payload), outcome.mentions,
                                             vector_offset, rows, width)
        self._payloads.flush()  # a batch at a time: memory holds no more than one
        if self._vector_rows is not None:
            self._vector_rows.flush()

    def _payload(self, position: int) -> bytes:
        offset, length = self._where[position][:2]
        self._payloads.seek(offset)
        return self._payloads.read(length)

    def finish(self) -> dict[str, int]:
        """Write the shard's output, vectors (one float16 row per entity, in the output's
        order; documents without a vector-giving entity have width 0: zeros) and errors
        file (JSONL: id, position, error; removed when none raised). Returns the counts:
        docs, mentions, errors."""
        positions = sorted(self._where)  # add() flushed the spills
        try:
            if self._vector_rows is not None:
                self._write_vectors(positions)
            if self.fmt == "jsonl":
                with atomic_file(self.shard.output) as temp, temp.open("wb") as out:
                    for position in positions:
                        out.write(self._payload(position) + b"\n")
            else:
                from spacy.tokens import DocBin

                merged = DocBin(store_user_data=True)
                for position in positions:
                    merged.merge(DocBin(store_user_data=True).from_bytes(
                        self._payload(position)))
                with atomic_file(self.shard.output) as temp:
                    merged.to_disk(temp)
            failed = sorted(self._failed, key=lambda o: o.position)
            if failed:
                write_text_atomic(self.shard.errors, "".join(
                    json.dumps({"id": o.id, "position": o.position, "error": o.error},
                               ensure_ascii=False) + "\n" for o in failed))
            else:
                self.shard.errors.unlink(missing_ok=True)
        finally:
            self.discard()
        return {"docs": len(positions),
                "mentions": sum(self._where[p][2] for p in positions),
                "errors": len(self._failed)}

    def _write_vectors(self, positions: list[int]) -> None:
        """The .npy file written row block by row block (no memory map: its written pages
        would count as the process's memory until the kernel writes them back)."""
        dim = max((self._where[p][5] for p in positions), default=0)
        total = sum(self._where[p][4] for p in positions)
        header = {"descr": np.lib.format.dtype_to_descr(np.dtype("float16")),
                  "fortran_order": False, "shape": (total, dim)}
        with atomic_file(self.shard.vectors) as temp, temp.open("wb") as out:
            np.lib.format.write_array_header_1_0(out, header)
            for position in positions:
                _, _, _, offset, rows, width = self._where[position]
                self._vector_rows.seek(offset)
                part = np.frombuffer(self._vector_rows.read(rows * width * 2),
                                     dtype="float16").reshape(rows, width)
                if width < dim:  # a document without vectors: rows of zeros
                    part = np.pad(part, ((0, 0), (0, dim - width)))
                out.write(part.tobytes())

    def discard(self) -> None:
        for file_, path in ((self._payloads, self._payloads_path),
                            (self._vector_rows, self._vectors_path)):
            if file_ is not None:
                file_.close()
                Path(path).unlink(missing_ok=True)
