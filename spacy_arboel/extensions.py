"""The custom attributes our components set, named and registered in one place.

- ``span._.kb_candidates``: ranked ``(kb_id, score)`` list (arbo_entity_linker, arbo_reranker,
  arbo_linker);
- ``span._.kb_raw_scores``: the raw scores of ``kb_candidates``, in their order
  (arbo_entity_linker: the bi-encoder's dot products or cosines, whose probabilities
  ``kb_candidates`` holds; read by arbo_coref);
- ``span._.mention_vector``: the mention's vector (arbo_entity_linker; read by arbo_coref);
- ``span._.cluster_id``: the mention's cluster, a KB id or a discovered entity's id,
  ``nil_prefix`` + a hash (``NIL_…`` by default; arbo_coref);
- ``span._.linker_kb_id``: the linker's own link of the mention, kept by arbo_coref when the
  clustering sets ``kb_id_`` (where the two differ, the clustering changed the link);
- ``doc._.passage_candidates``: per passage, ``(start_char, end_char, [(kb_id, p), …])``
  (arbo_linker's retriever).
"""

from __future__ import annotations

CANDIDATES_EXT = "kb_candidates"
RAW_SCORES_EXT = "kb_raw_scores"
VECTOR_EXT = "mention_vector"
CLUSTER_EXT = "cluster_id"
LINKER_ID_EXT = "linker_kb_id"
PASSAGE_CANDIDATES_EXT = "passage_candidates"
# the span group of arbo_linker's every linked span, nested ones too (its ``spans_key``)
SPANS_KEY = "arbo_concepts"

SPAN_EXTENSIONS = (CANDIDATES_EXT, RAW_SCORES_EXT, VECTOR_EXT, CLUSTER_EXT, LINKER_ID_EXT)
DOC_EXTENSIONS = (PASSAGE_CANDIDATES_EXT,)


def register_extensions() -> None:
    """Register every extension (default ``None``); safe to call again. (spaCy is imported
    here, so that the names above can be used by spaCy-free code.)"""
    from spacy.tokens import Doc, Span

    for name in SPAN_EXTENSIONS:
        if not Span.has_extension(name):
            Span.set_extension(name, default=None)
    for name in DOC_EXTENSIONS:
        if not Doc.has_extension(name):
            Doc.set_extension(name, default=None)
