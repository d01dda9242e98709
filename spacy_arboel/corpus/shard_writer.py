"""Writing one linked shard: its outputs in input order and its errors file, each atomically,
so that an interrupted run leaves no half-written shard."""

from __future__ import annotations

import json
from collections.abc import Iterable
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


def write_shard(shard: Shard, outcomes: Iterable[Outcome], fmt: str,
                vectors: bool = False) -> dict[str, int]:
    """Write the linked documents of ``shard`` in their input order to its output (JSONL
    lines, or one DocBin), with ``vectors`` their mention vectors first (one float16 row per
    entity, in the output's order), and the ones that raised to its errors file (JSONL: id,
    position, error; removed when none did). Returns the counts: docs, mentions, errors."""
    ordered = sorted(outcomes, key=lambda o: o.position)
    linked = [o for o in ordered if o.error is None]
    failed = [o for o in ordered if o.error is not None]
    if vectors:
        write_vectors(shard, [read_vectors(o.vectors) for o in linked])
    if fmt == "jsonl":
        write_text_atomic(shard.output, "".join(f"{o.payload}\n" for o in linked))
    else:
        from spacy.tokens import DocBin

        merged = DocBin(store_user_data=True)
        for outcome in linked:
            merged.merge(DocBin(store_user_data=True).from_bytes(outcome.payload))
        with atomic_file(shard.output) as temp:
            merged.to_disk(temp)
    if failed:
        write_text_atomic(shard.errors, "".join(
            json.dumps({"id": o.id, "position": o.position, "error": o.error},
                       ensure_ascii=False) + "\n" for o in failed))
    else:
        shard.errors.unlink(missing_ok=True)
    return {"docs": len(linked), "mentions": sum(o.mentions for o in linked),
            "errors": len(failed)}


def write_vectors(shard: Shard, parts: list[np.ndarray]) -> None:
    """One matrix of the documents' mention vectors (documents without a vector-giving
    entity have width 0: their rows become zeros)."""
    dim = max((p.shape[1] for p in parts), default=0)
    matrix = np.zeros((sum(len(p) for p in parts), dim), dtype="float16")
    row = 0
    for part in parts:
        matrix[row:row + len(part), :part.shape[1]] = part
        row += len(part)
    with atomic_file(shard.vectors) as temp:
        np.save(temp, matrix, allow_pickle=False)
