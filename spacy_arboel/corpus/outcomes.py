"""Linking a batch of documents so that one that raises costs only itself, and the JSON
record of a linked document. The pipeline (``nlp``) is duck-typed: no spaCy import here."""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..data.documents import Document
from ..extensions import CANDIDATES_EXT, CLUSTER_EXT, VECTOR_EXT


@dataclass(frozen=True)
class Outcome:
    """What linking one document gave: ``payload`` (a JSON line, or the bytes of a one-doc
    DocBin) and its counts, or the ``error`` it raised. ``position``: its place in the shard;
    ``vectors``: its entities' mention vectors (``mention_vectors``) when asked for."""

    position: int
    id: str
    payload: str | bytes | None = None
    mentions: int = 0
    error: str | None = None
    vectors: bytes | None = None

    def as_row(self) -> dict[str, Any]:
        return {"position": self.position, "id": self.id, "payload": self.payload,
                "mentions": self.mentions, "error": self.error, "vectors": self.vectors}


def mention_vectors(doc: Any) -> bytes:
    """The mention vector of each of ``doc.ents`` (in order) as a float16 matrix in .npy
    bytes (no pickle); an entity the linker gave no vector (arbo_linker, or nothing to
    encode) gets a row of zeros, which ``cluster`` leaves out."""
    found = [getattr(span._, VECTOR_EXT, None) for span in doc.ents]
    dim = max((len(v) for v in found if v is not None), default=0)
    matrix = np.zeros((len(found), dim), dtype="float16")
    for row, vector in enumerate(found):
        if vector is not None:
            matrix[row] = vector
    out = io.BytesIO()
    np.save(out, matrix, allow_pickle=False)
    return out.getvalue()


def read_vectors(data: bytes) -> np.ndarray:
    return np.load(io.BytesIO(data), allow_pickle=False)


def entity_record(span: Any, top_k: int) -> dict[str, Any]:
    """An entity as JSON: character offsets, text, label, ``kb_id``, the score of its
    best candidate, its ``top_k`` candidates and, with arbo_coref, its cluster."""
    candidates = getattr(span._, CANDIDATES_EXT, None) or []
    record = {"start": span.start_char, "end": span.end_char, "text": span.text,
              "label": span.label_, "kb_id": span.kb_id_,
              "score": round(float(candidates[0][1]), 4) if candidates else None,
              "candidates": [[kb_id, round(float(score), 4)]
                             for kb_id, score in candidates[:top_k]]}
    cluster = getattr(span._, CLUSTER_EXT, None)
    if cluster is not None:
        record["cluster"] = cluster
    return record


def doc_record(doc: Any, doc_id: str, top_k: int) -> dict[str, Any]:
    return {"id": doc_id, "entities": [entity_record(span, top_k) for span in doc.ents]}


def link_documents(nlp: Any, documents: Sequence[Document], start: int, fmt: str,
                   top_k: int = 5, to_bytes: Callable[[Any, str], bytes] | None = None,
                   vectors: bool = False) -> list[Outcome]:
    """Link ``documents`` (positions ``start``, ``start + 1``, … in their shard) with
    ``nlp.pipe``; when the batch raises, each document is linked alone so that only the ones
    that raise get an error. ``fmt``: ``jsonl`` (payload: a JSON line) or ``spacy``
    (payload: ``to_bytes(doc, id)``); ``vectors``: keep the mention vectors too."""
    def outcome(position: int, document: Document, doc: Any) -> Outcome:
        payload = (json.dumps(doc_record(doc, document.id, top_k), ensure_ascii=False)
                   if fmt == "jsonl" else to_bytes(doc, document.id))
        return Outcome(position, document.id, payload, len(doc.ents),
                       vectors=mention_vectors(doc) if vectors else None)

    try:
        docs = list(nlp.pipe(d.text for d in documents))
        return [outcome(start + i, document, doc) for i, (document, doc)
                in enumerate(zip(documents, docs, strict=True))]
    except Exception:  # noqa: BLE001 - find the documents that raise, one by one
        pass
    outcomes = []
    for i, document in enumerate(documents):
        try:
            outcomes.append(outcome(start + i, document, nlp(document.text)))
        except Exception as err:  # noqa: BLE001 - recorded in the shard's errors file
            outcomes.append(Outcome(start + i, document.id,
                                    error=f"{type(err).__name__}: {err}"))
    return outcomes
