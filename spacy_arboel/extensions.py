"""The custom attributes our components set, named and registered in one place.

- ``span._.candidates``: the ranked ``Candidate`` records ``(id, score, raw)``
  (``linking.candidates``; arbo_entity_linker, arbo_reranker, arbo_linker);
- ``span._.kb_candidates``: a view of them, the ranked ``(kb_id, score)`` list (setting it
  sets records whose raw scores are the scores);
- ``span._.kb_raw_scores``: a view of their raw scores, in their order (arbo_entity_linker:
  the bi-encoder's dot products or cosines, whose probabilities ``kb_candidates`` holds; read
  by arbo_coref);
- ``span._.mention_vector``: the mention's vector (arbo_entity_linker; read by arbo_coref);
- ``span._.cluster_id``: the mention's cluster, a KB id or a discovered entity's id,
  ``nil_prefix`` + a hash (``NIL_…`` by default; arbo_coref);
- ``span._.linker_kb_id``: the linker's own link of the mention, kept by arbo_coref when the
  clustering sets ``kb_id_`` (where the two differ, the clustering changed the link);
- ``doc._.passage_candidates``: per passage, ``(start_char, end_char, [(kb_id, p), …])``
  (arbo_linker's retriever).
"""

from __future__ import annotations

from typing import NamedTuple

from .errors import Errors


class Candidate(NamedTuple):
    """One candidate entity of a mention, the items of ``span._.candidates``: its KB ``id``,
    its ``score`` on the linker's scale (p(e | m), joined with the mention prior under
    ``incl_prior``; the raw score on the ``raw`` scale) and its ``raw`` score (the
    bi-encoder's dot product or cosine; a re-ranker's or a reader's own score where that is
    all there is)."""

    id: str
    score: float
    raw: float


RECORDS_EXT = "candidates"
CANDIDATES_EXT = "kb_candidates"
RAW_SCORES_EXT = "kb_raw_scores"
VECTOR_EXT = "mention_vector"
CLUSTER_EXT = "cluster_id"
LINKER_ID_EXT = "linker_kb_id"
PASSAGE_CANDIDATES_EXT = "passage_candidates"
# the span group of arbo_linker's every linked span, nested ones too (its ``spans_key``)
SPANS_KEY = "arbo_concepts"

SPAN_EXTENSIONS = (RECORDS_EXT, VECTOR_EXT, CLUSTER_EXT, LINKER_ID_EXT)
# the candidate records and their two views: what writing a span's candidates assigns
CANDIDATE_ATTRS = tuple(f"span._.{name}" for name in (RECORDS_EXT, CANDIDATES_EXT,
                                                      RAW_SCORES_EXT))
DOC_EXTENSIONS = (PASSAGE_CANDIDATES_EXT,)


def _records(span) -> list | None:
    """A span's candidate records (a saved ``DocBin`` gives them back as lists)."""
    return getattr(span._, RECORDS_EXT)


def _pairs(span) -> list[tuple[str, float]] | None:
    records = _records(span)
    return None if records is None else [(c[0], c[1]) for c in records]


def _set_pairs(span, pairs) -> None:
    span._.set(RECORDS_EXT, None if pairs is None else
               [Candidate(i, float(s), float(s)) for i, s in pairs])


def _raw(span) -> list[float] | None:
    records = _records(span)
    return None if records is None else [c[2] for c in records]


def _set_raw(span, raw) -> None:
    records = _records(span) or []
    if raw is None or len(raw) != len(records):
        raise ValueError(Errors.E262.format(n=len(records), got=raw if raw is None
                                            else f"{len(raw)} scores"))
    span._.set(RECORDS_EXT, [Candidate(c[0], c[1], float(r))
                             for c, r in zip(records, raw, strict=True)])


def register_extensions() -> None:
    """Register every extension (default ``None``; ``kb_candidates`` and ``kb_raw_scores``
    as views of ``candidates``); safe to call again. (spaCy is imported here, so that the
    names above can be used by spaCy-free code.)"""
    from spacy.tokens import Doc, Span

    for name in SPAN_EXTENSIONS:
        if not Span.has_extension(name):
            Span.set_extension(name, default=None)
    for name, getter, setter in ((CANDIDATES_EXT, _pairs, _set_pairs),
                                 (RAW_SCORES_EXT, _raw, _set_raw)):
        if not Span.has_extension(name):
            Span.set_extension(name, getter=getter, setter=setter)
    for name in DOC_EXTENSIONS:
        if not Doc.has_extension(name):
            Doc.set_extension(name, default=None)
