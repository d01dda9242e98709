"""Clustering the mentions of a corpus across documents with a pipeline's ``arbo_coref``
(what ``cluster`` does with a DocBin)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from spacy.language import Language
from spacy.tokens import Doc, DocBin

from ..extensions import CLUSTER_EXT, VECTOR_EXT
from ..factories import NER, find_components
from ..spacy_data.readers import with_gold_mentions


@dataclass
class ClusteredDocs:
    """The clustered docs (their user data holds each ent's cluster id and candidates),
    their number of mentions, and their cluster ids."""

    docs: DocBin
    mentions: int = 0
    clusters: set[str] = field(default_factory=set)


def cluster_docs(nlp: Language, docs: Iterable[Doc], component: str, *,
                 gold_mentions: bool = True) -> ClusteredDocs:
    """Run ``nlp`` over the texts of ``docs`` and cluster their mentions with its coref
    ``component``: the docs' own ents with ``gold_mentions`` (its ``ner`` skipped), else
    those its ``ner`` finds. Mention vectors are dropped from the clustered docs."""
    out = ClusteredDocs(DocBin(store_user_data=True))
    disable = find_components(nlp, NER) if gold_mentions else []
    with nlp.select_pipes(disable=disable):
        for doc in nlp.pipe(with_gold_mentions(nlp.make_doc(d.text), d) if gold_mentions
                            else nlp.make_doc(d.text) for d in docs):
            for ent in doc.ents:
                out.clusters.add(ent._.get(CLUSTER_EXT))
                ent._.set(VECTOR_EXT, None)  # not worth storing
                out.mentions += 1
            out.docs.add(doc)
    return out


def discovered_clusters(nlp: Language, component: str, clusters: Iterable[str]) -> int:
    """How many of ``clusters`` have no KB entity (their id has the coref's NIL prefix)."""
    prefix = nlp.get_pipe(component).settings.nil_prefix
    return sum(1 for cluster in clusters if cluster and cluster.startswith(prefix))
