"""``arbo_coref``: cross-document coreference and entity discovery by arboEL's graph
partition. A thin adapter over ``spacy_arboel.coref`` (``MentionMemory``, ``cluster_mentions``):
the linker's annotations become plain mentions, and their cluster ids annotations."""

import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, fields, replace
from pathlib import Path
from typing import Any

import srsly
from spacy.language import Language
from spacy.pipeline import Pipe
from spacy.tokens import Doc
from spacy.training import Example
from spacy.util import ensure_path, from_disk, minibatch, to_bytes, to_disk

from ..artefacts import MANIFEST, check_folder, clear_saved, reading, write_manifest
from ..coref import (
    ClusterSettings,
    MemoryFormatError,
    Mention,
    MentionMemory,
    cluster_link,
    cluster_mentions,
    text_key,
)
from ..errors import Errors
from ..extensions import (
    CANDIDATES_EXT,
    CLUSTER_EXT,
    LINKER_ID_EXT,
    RAW_SCORES_EXT,
    VECTOR_EXT,
    register_extensions,
)
from ..factories import COREF, ENTITY_LINKER
from ..settings import ComponentSettings, Finite, PositiveInt, component_settings, taken
from .concurrency import in_worker_process, one_thread_at_a_time

ArboCorefSettings = component_settings(
    "ArboCorefSettings", __name__, """The settings of ``arbo_coref`` (its factory's,
    defaults included): the ``linker`` whose vectors and candidates it clusters, the
    clustering's (``ClusterSettings``), the docs clustered together (``buffer_size``) and
    whether batches are remembered (``keep_state``).""",
    [("linker", str, ENTITY_LINKER), *taken(ClusterSettings), ("buffer_size", PositiveInt, 1000),
     ("keep_state", bool, False)], base=ComponentSettings)
SAVED = ("state",)  # what to_disk and to_bytes write (the remembered mentions)


@Language.factory(
    COREF,
    requires=["doc.ents", f"span._.{VECTOR_EXT}", f"span._.{CANDIDATES_EXT}"],
    assigns=["token.ent_kb_id", f"span._.{CLUSTER_EXT}", f"span._.{LINKER_ID_EXT}"],
    default_config={**ArboCorefSettings.config(),
                    "scorer": {"@scorers": "spacy_arboel.coref_scorer.v1"}},
    default_score_weights={"coref_conll_f1": 1.0, "coref_nmi": 0.0, "coref_ari": 0.0,
                           "coref_link_acc": 0.0},
)
def make_coref(
    nlp: Language, name: str, linker: str, k: PositiveInt, threshold: Finite | None,
    directed: bool, same_doc_only: bool, nil_prefix: str, buffer_size: PositiveInt,
    keep_state: bool, scorer: Callable | None,
) -> "ArboCoref":
    """Create an ``arbo_coref``; ``ArboCorefSettings`` says what each setting is."""
    return ArboCoref(nlp, name, settings=ArboCorefSettings.from_arguments(locals()),
                     scorer=scorer)


class ArboCoref(Pipe):
    """Clusters the mentions of many docs and links each cluster to at most one entity.

    The mention vectors and nearest entities come from the ``linker`` component earlier in
    the pipeline. The graph holds, for each mention, edges from its ``k`` nearest mentions
    (across all buffered docs, or within its doc with ``same_doc_only``) and from its nearest
    entity, weighted by negative dot product; edges above ``threshold`` (λ) are dropped and
    the graph is partitioned so that each cluster holds at most one entity (arboEL §2.3,
    ``directed`` or undirected). Every mention gets ``span._.cluster_id``: the KB id of its
    cluster's entity, or ``nil_prefix`` + a hash for a cluster with no entity (a discovered
    entity); ``kb_id_`` becomes the cluster's entity or the linker's NIL id (arboEL eq. 8),
    and ``span._.linker_kb_id`` keeps the linker's own link, so that a link the clustering
    changed shows it. The linker's type rule (its ``label_types``) holds here too: no edge
    joins mentions of incompatible labels, and a mention whose cluster's entity does not fit
    its label keeps the linker's link (``coref.cluster_link``).

    ``nlp.pipe`` clusters up to ``buffer_size`` docs together. With ``keep_state``, the
    mentions of every batch are remembered (``state``, saved with ``to_disk``) and later
    batches are clustered with them, so that cluster ids stay stable; a mention fed again
    (same text and offsets) takes the current id of its remembered copy. The memory belongs
    to the linker's KB and mention encoder: after a change of either, clustering refuses
    (E034) until ``clear_state()``. Worker processes of ``nlp.pipe(n_process > 1)`` are
    refused (E033): each would cluster its own docs. ``settings``: ``ArboCorefSettings``.
    """

    def __init__(self, nlp: Language, name: str = COREF, *, settings: Any,
                 scorer: Callable | None) -> None:
        self.nlp, self.name, self.scorer = nlp, name, scorer
        self.settings = settings
        self.state = MentionMemory()
        self._pid = os.getpid()  # the process that may cluster (see _check_process)
        register_extensions()

    def configure(self, **settings: Any) -> None:
        """Change settings (as in the config) of a created component, e.g. while tuning
        (checked as the config's: E007, E011)."""
        names = [f.name for f in fields(self.settings)]
        unknown = set(settings) - set(names)
        if unknown:
            raise ValueError(Errors.E007.format(what="arbo_coref setting",
                                                value=", ".join(sorted(unknown)),
                                                options=", ".join(names)))
        self.settings = replace(self.settings, **settings)

    @property
    def linker(self):
        """The linker component named by the ``linker`` setting (E013 if absent)."""
        if self.settings.linker not in self.nlp.pipe_names:
            raise ValueError(Errors.E013.format(name=self.name, linker=self.settings.linker,
                                                pipes=", ".join(self.nlp.pipe_names)))
        return self.nlp.get_pipe(self.settings.linker)

    def __call__(self, doc: Doc) -> Doc:
        return self.cluster([doc])[0]

    def pipe(self, stream: Iterable[Doc], *, batch_size: int | None = None) -> Iterator[Doc]:
        """Cluster the docs ``buffer_size`` at a time (``batch_size`` is spaCy's, ignored)."""
        del batch_size
        # before the first doc is pulled, so that a worker process stops before any work
        self._check_process()
        for docs in minibatch(stream, self.settings.buffer_size):
            yield from self.cluster(docs)

    def _check_process(self) -> None:
        """Refuse to run in a worker process of ``nlp.pipe(n_process > 1)`` (a child process
        that did not create this component); a pipeline loaded inside a process runs there."""
        if in_worker_process(self._pid):
            raise RuntimeError(Errors.E033.format(name=self.name))

    def clear_state(self) -> None:
        """Forget the remembered mentions (``keep_state``): cluster ids start anew."""
        self.state = MentionMemory()

    @one_thread_at_a_time
    def cluster(self, docs: list[Doc]) -> list[Doc]:
        """Cluster the ents of ``docs`` (with the remembered mentions) and annotate them."""
        self._check_process()
        linker = self.linker
        mentions, spans = doc_mentions(docs, linker, self.name)
        if not mentions:
            return docs
        fingerprints = linker_fingerprints(linker)
        memory = self.state if self.settings.keep_state else MentionMemory()
        if len(memory) and memory.fingerprints != fingerprints:
            raise ValueError(Errors.E034.format(name=self.name, saved=memory.fingerprints,
                                                found=fingerprints))
        rule, clustering = linker.get_candidates.rule, self.settings.of(ClusterSettings)
        clustered, slots = cluster_mentions(
            memory, MentionMemory.from_mentions(mentions),
            lambda position: linker.kb.entity_at(position).id, **asdict(clustering),
            compatible=rule.compatible if rule is not None else None)
        ents = [doc.ents for doc in docs]  # doc.ents builds a new tuple at every access
        for (doc_index, ent_index), slot in zip(spans, slots, strict=True):
            ent = ents[doc_index][ent_index]
            own = ent.kb_id_  # the linker's own link
            fits = None if rule is None else (
                lambda kb_id, label=ent.label_: rule.fits(label, linker.kb[kb_id].types))
            cluster_id, kb_id = cluster_link(clustered.cluster_ids[slot], own,
                                             linker.linking.nil_id, clustering.nil_prefix, fits)
            ent._.set(CLUSTER_EXT, cluster_id)
            ent._.set(LINKER_ID_EXT, own)
            for token in ent:
                token.ent_kb_id_ = kb_id
        if self.settings.keep_state:
            # remembered mentions take their current cluster ids (a discovered cluster may
            # have met its entity since); the docs already returned keep theirs
            clustered.fingerprints = fingerprints
            self.state = clustered
        return docs

    def score(self, examples: Iterable[Example], **kwargs) -> dict[str, Any]:
        return self.scorer(examples, nil_prefix=self.settings.nil_prefix, kb=self.linker.kb)

    # --- serialisation: the remembered mentions (numpy, JSON, msgpack; no pickle) -------------

    def to_disk(self, path, *, exclude: Iterable[str] = tuple()) -> None:
        """Save the remembered mentions in ``state/`` with a manifest; ``exclude=["state"]``
        leaves them out (the folder is then empty)."""
        path = ensure_path(path)
        writers = {"state": self.state.to_disk}
        clear_saved(path, SAVED)
        to_disk(path, writers, exclude)
        if any((path / name).exists() for name in SAVED):
            write_manifest(path, SAVED)

    def from_disk(self, path, *, exclude: Iterable[str] = tuple()) -> "ArboCoref":
        """Load the remembered mentions unless ``exclude`` names ``state``, checked for damage
        (E030) and against the linker (E015); saved without them, the memory stays."""
        path = ensure_path(path)
        if not path.is_dir() or any((path / name).exists() for name in (MANIFEST, *SAVED)):
            check_folder(path, self.name, [])
        from_disk(path, {"state": lambda p: self._load_state(
            lambda: MentionMemory.from_disk(p) if p.exists() else None, p)}, exclude)
        return self

    def to_bytes(self, *, exclude: Iterable[str] = tuple()) -> bytes:
        """A msgpack map of the remembered mentions (``state``) unless excluded."""
        return to_bytes({"state": self.state.to_bytes}, exclude)

    def from_bytes(self, bytes_data: bytes, *, exclude: Iterable[str] = tuple()) -> "ArboCoref":
        """Load what ``to_bytes`` wrote, checked as ``from_disk`` checks a folder."""

        def load() -> MentionMemory | None:
            msg = srsly.msgpack_loads(bytes_data)
            if not isinstance(msg, dict) or not set(msg) <= set(SAVED):
                raise MemoryFormatError(Errors.E060_MAP.format(fields=", ".join(SAVED)))
            skip = "state" not in msg or "state" in exclude
            return None if skip else MentionMemory.from_bytes(msg["state"])

        self._load_state(load, "<bytes>")
        return self

    def _load_state(self, load: Callable[[], MentionMemory | None], where: str | Path) -> None:
        """Take the mentions ``load`` reads (None: keep the memory), checked for damage
        (unreadable or malformed: E030) and against the linker's KB and encoder (E015)."""
        try:
            with reading(where, self.name):
                state = load()
            if state is None:
                return
            if len(state):
                linker = self.linker
                found = linker_fingerprints(linker)
                if state.fingerprints != found:
                    raise ValueError(Errors.E015.format(where=where, saved=state.fingerprints,
                                                        found=found))
                state.validate(len(linker.kb), linker.retriever.vector_width)
        except MemoryFormatError as err:
            raise ValueError(Errors.E030.format(component=self.name, path=where,
                                                problem=err.problem)) from err
        self.state = state


def linker_fingerprints(linker) -> dict[str, str]:
    """What remembered mentions depend on: the linker's KB and mention encoder."""
    linker.ensure_ready()
    return {"kb": linker.kb.fingerprint(), "encoder": linker.retriever.mention_fingerprint()}


def doc_mentions(docs: list[Doc], linker, component: str) -> tuple[list[Mention], list]:
    """The ents of ``docs`` as the linker annotated them (vector, nearest candidate), and
    the (doc, ent) index of each; an ent the linker found nothing to encode in (whitespace)
    is left out, one it did not see is an error (E014)."""
    mentions, spans = [], []
    for doc_index, doc in enumerate(docs):
        doc_key = text_key(doc.text)
        for ent_index, ent in enumerate(doc.ents):
            vector, candidates = ent._.get(VECTOR_EXT), ent._.get(CANDIDATES_EXT)
            if vector is None and candidates == []:
                continue
            if vector is None or candidates is None:
                raise ValueError(Errors.E014.format(name=component, text=ent.text,
                                                    linker=linker.name))
            # the entity edge weighs the raw score (a dot product, as the mention edges),
            # not the probability kb_candidates may hold
            raw = ent._.get(RAW_SCORES_EXT) or [score for _, score in candidates]
            best = ((linker.kb.position(candidates[0][0]), raw[0]) if candidates
                    else (-1, 0.0))
            mentions.append(Mention(doc_key, ent.start_char, ent.end_char, vector, *best,
                                    ent.label_))
            spans.append((doc_index, ent_index))
    return mentions, spans
