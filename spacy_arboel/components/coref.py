"""``arbo_coref``: cross-document coreference and entity discovery by arboEL's graph partition."""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
from spacy.language import Language
from spacy.pipeline import Pipe
from spacy.tokens import Doc, Span
from spacy.training import Example
from spacy.util import ensure_path, minibatch

from ..artefacts import check_folder, clear_saved, reading, write_manifest
from ..coref.graph import build_graph, nearest_mentions
from ..coref.partition import partition_graph
from ..errors import Errors
from ..evaluation.coref_scorer import score_coref
from ..extensions import CANDIDATES_EXT, VECTOR_EXT
from .concurrency import in_worker_process, one_thread_at_a_time

CLUSTER_EXT = "cluster_id"
SETTINGS = ("linker", "k", "threshold", "directed", "same_doc_only", "buffer_size",
            "nil_prefix", "keep_state")


@Language.factory(
    "arbo_coref",
    requires=["doc.ents", f"span._.{VECTOR_EXT}", f"span._.{CANDIDATES_EXT}"],
    assigns=["token.ent_kb_id", f"span._.{CLUSTER_EXT}"],
    default_config={
        "linker": "arbo_entity_linker",
        "k": 8,
        "threshold": None,
        "directed": True,
        "same_doc_only": False,
        "buffer_size": 1000,
        "nil_prefix": "NIL_",
        "keep_state": False,
        "scorer": {"@scorers": "spacy_arboel.coref_scorer.v1"},
    },
    default_score_weights={"coref_conll_f1": 1.0, "coref_nmi": 0.0, "coref_ari": 0.0,
                           "coref_link_acc": 0.0},
)
def make_coref(
    nlp: Language,
    name: str,
    linker: str,
    k: int,
    threshold: float | None,
    directed: bool,
    same_doc_only: bool,
    buffer_size: int,
    nil_prefix: str,
    keep_state: bool,
    scorer: Callable | None,
) -> ArboCoref:
    """Create an ``arbo_coref``; see the class for what each setting does."""
    return ArboCoref(nlp, name, linker=linker, k=k, threshold=threshold, directed=directed,
                     same_doc_only=same_doc_only, buffer_size=buffer_size,
                     nil_prefix=nil_prefix, keep_state=keep_state, scorer=scorer)


class ArboCoref(Pipe):
    """Clusters the mentions of many docs and links each cluster to at most one entity.

    The mention vectors and nearest entities come from the ``linker`` component earlier in
    the pipeline. The graph holds, for each mention, edges from its ``k`` nearest mentions
    (across all buffered docs, or within its doc with ``same_doc_only``) and from its nearest
    entity, weighted by negative dot product; edges above ``threshold`` (λ) are dropped and
    the graph is partitioned so that each cluster holds at most one entity (arboEL §2.3,
    ``directed`` or undirected). Every mention gets ``span._.cluster_id``: the KB id of its
    cluster's entity, or ``nil_prefix`` + a hash for a cluster with no entity (a discovered
    entity); ``kb_id_`` becomes the cluster's entity or the linker's NIL id (arboEL eq. 8).

    ``nlp.pipe`` clusters up to ``buffer_size`` docs together. With ``keep_state``, the
    mentions of every clustered batch are remembered (and saved with ``to_disk``), and later
    batches are clustered together with them, so that cluster ids stay stable. A mention
    fed again (same document text, same offsets) is not remembered twice: it takes the
    current cluster id of its remembered copy. The memory belongs to the KB and mention
    encoder it was made with: after a change of either, clustering refuses (E034) until
    ``clear_state()``. Worker processes of ``nlp.pipe(n_process > 1)`` are refused (E033):
    they would each cluster their own docs.
    """

    def __init__(
        self,
        nlp: Language,
        name: str = "arbo_coref",
        *,
        linker: str = "arbo_entity_linker",
        k: int = 8,
        threshold: float | None = None,
        directed: bool = True,
        same_doc_only: bool = False,
        buffer_size: int = 1000,
        nil_prefix: str = "NIL_",
        keep_state: bool = False,
        scorer: Callable | None = score_coref,
    ) -> None:
        self.nlp = nlp
        self.name = name
        self.scorer = scorer
        self.cfg: dict[str, Any] = {}
        self.configure(
            linker=linker, k=k, threshold=threshold, directed=directed,
            same_doc_only=same_doc_only, buffer_size=buffer_size, nil_prefix=nil_prefix,
            keep_state=keep_state,
        )
        self.state = MentionMemory()
        self._pid = os.getpid()  # the process that may cluster (see _check_process)
        if not Span.has_extension(CLUSTER_EXT):
            Span.set_extension(CLUSTER_EXT, default=None)

    def configure(self, **settings: Any) -> None:
        """Change settings (as in the config) of a created component, e.g. after tuning."""
        unknown = set(settings) - set(SETTINGS)
        if unknown:
            raise ValueError(Errors.E007.format(what="arbo_coref setting",
                                                value=", ".join(sorted(unknown)),
                                                options=", ".join(SETTINGS)))
        for key in ("k", "buffer_size"):
            if key in settings and settings[key] < 1:
                raise ValueError(Errors.E011.format(name=key, condition=">= 1",
                                                    value=settings[key]))
        threshold = settings.get("threshold")
        if threshold is not None and not math.isfinite(threshold):
            raise ValueError(Errors.E011.format(name="threshold",
                                                condition="a finite number or null",
                                                value=threshold))
        self.cfg.update(settings)

    @property
    def linker(self):
        if self.cfg["linker"] not in self.nlp.pipe_names:
            raise ValueError(Errors.E013.format(name=self.name, linker=self.cfg["linker"],
                                                pipes=", ".join(self.nlp.pipe_names)))
        return self.nlp.get_pipe(self.cfg["linker"])

    def __call__(self, doc: Doc) -> Doc:
        return self.cluster([doc])[0]

    def pipe(self, stream: Iterable[Doc], *, batch_size: int | None = None) -> Iterator[Doc]:
        """Cluster the docs ``buffer_size`` at a time (``batch_size`` is spaCy's, ignored)."""
        del batch_size
        # before the first doc is pulled, so that a worker process stops before any work
        self._check_process()
        for docs in minibatch(stream, self.cfg["buffer_size"]):
            yield from self.cluster(docs)

    def _check_process(self) -> None:
        """Refuse to run in a worker process of ``nlp.pipe(n_process > 1)`` (a
        multiprocessing child that did not create this component): each worker would
        cluster only its own docs. A pipeline loaded inside a process clusters there."""
        if in_worker_process(self._pid):
            raise RuntimeError(Errors.E033.format(name=self.name))

    def clear_state(self) -> None:
        """Forget the remembered mentions (``keep_state``): cluster ids start anew."""
        self.state = MentionMemory()

    # --- clustering --------------------------------------------------------------------------

    @one_thread_at_a_time
    def cluster(self, docs: list[Doc]) -> list[Doc]:
        """Cluster the ents of ``docs`` (with the remembered mentions) and annotate them."""
        self._check_process()
        linker = self.linker
        batch = MentionMemory.from_docs(docs, linker, self.name)
        if not len(batch):
            return docs
        fingerprints = linker_fingerprints(linker)
        memory = self.state if self.cfg["keep_state"] else MentionMemory()
        if len(memory) and memory.fingerprints != fingerprints:
            raise ValueError(Errors.E034.format(name=self.name, saved=memory.fingerprints,
                                                found=fingerprints))
        mentions, slots = memory.merged(batch)
        ids = self._cluster_ids(mentions, len(memory))
        nil_id = linker.cfg["nil_id"]
        prefix = self.cfg["nil_prefix"]
        ents = [doc.ents for doc in docs]  # doc.ents builds a new tuple at every access
        for (doc_index, ent_index), slot in zip(batch.spans, slots, strict=True):
            ent = ents[doc_index][ent_index]
            ent._.set(CLUSTER_EXT, ids[slot])
            kb_id = nil_id if ids[slot].startswith(prefix) else ids[slot]
            for token in ent:
                token.ent_kb_id_ = kb_id
        if self.cfg["keep_state"]:
            # remembered mentions take their current cluster ids (a discovered cluster may
            # have met its entity since); the docs already returned keep theirs
            mentions.cluster_ids = list(ids)
            mentions.fingerprints = fingerprints
            self.state = mentions
        return docs

    def _cluster_ids(self, mentions: MentionMemory, n_remembered: int) -> list[str]:
        kb = self.linker.kb
        neighbours, scores = nearest_mentions(
            mentions.vectors, self.cfg["k"],
            groups=mentions.doc_keys_codes() if self.cfg["same_doc_only"] else None,
        )
        graph = build_graph(neighbours, scores, mentions.entity_positions, mentions.entity_scores)
        part = partition_graph(
            graph.n_nodes, np.arange(graph.n_entities), graph.sources, graph.targets,
            graph.weights, directed=self.cfg["directed"], threshold=self.cfg["threshold"],
        )
        ids: list[str] = []
        nil_ids: dict[int, str] = {}
        for mention in range(len(mentions)):
            node = graph.mention_node(mention)
            entity_node = int(part.entity[node])
            if entity_node >= 0:
                ids.append(kb.entity_at(int(graph.entity_positions[entity_node])).id)
                continue
            cluster = int(part.cluster[node])
            if cluster not in nil_ids:
                # a cluster is named after its first mention: a remembered one keeps its id
                first = cluster - graph.n_entities
                earlier = mentions.cluster_ids[first] if first < n_remembered else None
                if earlier is not None and earlier.startswith(self.cfg["nil_prefix"]):
                    nil_ids[cluster] = earlier
                else:
                    nil_ids[cluster] = self.cfg["nil_prefix"] + mentions.keys[first]
            ids.append(nil_ids[cluster])
        return ids

    # --- scoring and serialisation -----------------------------------------------------------

    def score(self, examples: Iterable[Example], **kwargs) -> dict[str, Any]:
        return self.scorer(examples, nil_prefix=self.cfg["nil_prefix"])

    def to_disk(self, path, *, exclude: Iterable[str] = tuple()) -> None:
        path = ensure_path(path)
        path.mkdir(parents=True, exist_ok=True)
        clear_saved(path, ["state"])
        self.state.to_disk(path / "state")
        write_manifest(path, ["state"])

    def from_disk(self, path, *, exclude: Iterable[str] = tuple()) -> ArboCoref:
        """Load the remembered mentions, checked for damage (E030) and against the
        linker's KB and mention encoder (E015)."""
        path = ensure_path(path)
        check_folder(path, self.name, [])
        if (path / "state").exists():
            with reading(path / "state", self.name):
                state = MentionMemory.from_disk(path / "state")
            self._use_state(state, path / "state")
        return self

    def to_bytes(self, *, exclude: Iterable[str] = tuple()) -> bytes:
        return self.state.to_bytes()

    def from_bytes(self, bytes_data: bytes, *, exclude: Iterable[str] = tuple()) -> ArboCoref:
        with reading("<bytes>", self.name):
            state = MentionMemory.from_bytes(bytes_data)
        self._use_state(state, "<bytes>")
        return self

    def _use_state(self, state: MentionMemory, where) -> None:
        if len(state):
            linker = self.linker
            found = linker_fingerprints(linker)
            if state.fingerprints != found:
                raise ValueError(Errors.E015.format(where=where, saved=state.fingerprints,
                                                    found=found))
            with reading(where, self.name):
                state.validate(len(linker.kb), linker.retriever.vector_width)
        self.state = state


def linker_fingerprints(linker) -> dict[str, str]:
    """What remembered mentions depend on: the linker's KB and mention encoder."""
    linker.ensure_ready()
    return {"kb": linker.kb.fingerprint(), "encoder": linker.retriever.fingerprint("mention")}


ARRAYS = ("vectors", "entity_positions", "entity_scores")


class MentionMemory:
    """Mentions to cluster: vectors, nearest entity (KB position and score), a stable key
    and, once clustered, their cluster ids."""

    def __init__(
        self,
        vectors: np.ndarray | None = None,
        entity_positions: np.ndarray | None = None,
        entity_scores: np.ndarray | None = None,
        keys: list[str] | None = None,
        doc_keys: list[str] | None = None,
        cluster_ids: list[str | None] | None = None,
        fingerprints: dict[str, str] | None = None,
    ) -> None:
        self.vectors = np.zeros((0, 0), "float32") if vectors is None else vectors
        self.entity_positions = (np.zeros(0, "int64") if entity_positions is None
                                 else entity_positions)
        self.entity_scores = (np.zeros(0, "float32") if entity_scores is None
                              else entity_scores)
        self.keys = keys or []
        self.doc_keys = doc_keys or []
        self.cluster_ids = cluster_ids or [None] * len(self.keys)
        self.fingerprints = fingerprints or {}
        self.spans: list[tuple[int, int]] = []  # (doc, ent) of each mention of a batch

    def __len__(self) -> int:
        return len(self.keys)

    @classmethod
    def from_docs(cls, docs: list[Doc], linker, component: str) -> MentionMemory:
        """The ents of ``docs`` as annotated by the linker (vector and candidates)."""
        vectors, positions, scores, keys, doc_keys, spans = [], [], [], [], [], []
        for doc_index, doc in enumerate(docs):
            doc_key = hashlib.sha1(doc.text.encode("utf8")).hexdigest()[:12]
            for ent_index, ent in enumerate(doc.ents):
                vector = ent._.get(VECTOR_EXT)
                candidates = ent._.get(CANDIDATES_EXT)
                if vector is None and candidates == []:
                    continue  # the linker found nothing to encode (whitespace): not clustered
                if vector is None or candidates is None:
                    raise ValueError(Errors.E014.format(name=component, text=ent.text,
                                                        linker=linker.name))
                vectors.append(vector)
                if candidates:
                    positions.append(linker.kb.position(candidates[0][0]))
                    scores.append(candidates[0][1])
                else:
                    positions.append(-1)
                    scores.append(0.0)
                keys.append(f"{doc_key}_{ent.start_char}_{ent.end_char}")
                doc_keys.append(doc_key)
                spans.append((doc_index, ent_index))
        if not keys:
            return cls()
        memory = cls(
            np.asarray(vectors, dtype="float32"),
            np.asarray(positions, dtype="int64"), np.asarray(scores, dtype="float32"),
            keys, doc_keys,
        )
        memory.spans = spans
        return memory

    def merged(self, batch: MentionMemory) -> tuple[MentionMemory, list[int]]:
        """These mentions followed by those of ``batch`` not already here (by key), and the
        position of each mention of ``batch`` in the result."""
        slot_of = {key: i for i, key in enumerate(self.keys)}
        new: list[int] = []
        slots = []
        for i, key in enumerate(batch.keys):
            if key not in slot_of:
                slot_of[key] = len(self) + len(new)
                new.append(i)
            slots.append(slot_of[key])
        if not len(self) and len(new) == len(batch):
            return batch, slots
        merged = MentionMemory(
            np.concatenate([self.vectors, batch.vectors[new]]) if len(self)
            else batch.vectors[new],
            np.concatenate([self.entity_positions, batch.entity_positions[new]]),
            np.concatenate([self.entity_scores, batch.entity_scores[new]]),
            self.keys + [batch.keys[i] for i in new],
            self.doc_keys + [batch.doc_keys[i] for i in new],
            self.cluster_ids + [batch.cluster_ids[i] for i in new], self.fingerprints,
        )
        return merged, slots

    def doc_keys_codes(self) -> np.ndarray:
        codes: dict[str, int] = {}
        return np.array([codes.setdefault(key, len(codes)) for key in self.doc_keys])

    # --- serialisation: numpy arrays and JSON ------------------------------------------------

    def _meta(self) -> dict[str, Any]:
        return {"keys": self.keys, "doc_keys": self.doc_keys, "cluster_ids": self.cluster_ids,
                "fingerprints": self.fingerprints}

    def to_disk(self, path: Path) -> None:
        path.mkdir(parents=True, exist_ok=True)
        for name in ARRAYS:
            np.save(path / f"{name}.npy", getattr(self, name), allow_pickle=False)
        (path / "memory.json").write_text(json.dumps(self._meta()))

    @classmethod
    def from_disk(cls, path: Path) -> MentionMemory:
        meta = json.loads((path / "memory.json").read_text())
        arrays = {name: np.load(path / f"{name}.npy", allow_pickle=False) for name in ARRAYS}
        return cls._from_parts(arrays, meta)

    def to_bytes(self) -> bytes:
        import srsly

        return srsly.msgpack_dumps({"meta": self._meta(),
                                    **{name: getattr(self, name) for name in ARRAYS}})

    @classmethod
    def from_bytes(cls, data: bytes) -> MentionMemory:
        import srsly

        msg = srsly.msgpack_loads(data)
        if not isinstance(msg, dict) or set(msg) != {"meta", *ARRAYS}:
            raise ValueError(f"expected a map of meta, {', '.join(ARRAYS)}")
        return cls._from_parts({name: msg[name] for name in ARRAYS}, msg["meta"])

    @classmethod
    def _from_parts(cls, arrays: dict[str, Any], meta: Any) -> MentionMemory:
        fields = ("keys", "doc_keys", "cluster_ids", "fingerprints")
        if not isinstance(meta, dict) or set(meta) != set(fields):
            raise ValueError(f"the memory's metadata must hold exactly {', '.join(fields)}")
        if not (all(isinstance(meta[f], list) for f in fields[:3])
                and isinstance(meta["fingerprints"], dict)):
            raise ValueError("keys, doc_keys and cluster_ids must be lists, fingerprints a map")
        if not all(isinstance(a, np.ndarray) for a in arrays.values()):
            raise ValueError(f"{', '.join(ARRAYS)} must be arrays")
        return cls(**arrays, **meta)

    def validate(self, n_entities: int, width: int) -> None:
        """Raise a ValueError unless the arrays and lists agree with each other, with a KB of
        ``n_entities`` and with mention vectors of ``width`` (a truncated or foreign state)."""
        n = len(self.keys)
        problems = []
        if self.vectors.dtype != np.float32 or self.vectors.shape != (n, width):
            problems.append(f"vectors are {self.vectors.dtype} {self.vectors.shape}, "
                            f"expected float32 ({n}, {width})")
        positions, scores = self.entity_positions, self.entity_scores
        if positions.dtype.kind not in "iu" or positions.shape != (n,):
            problems.append(f"entity_positions are {positions.dtype} {positions.shape}")
        elif n and (positions.min() < -1 or positions.max() >= n_entities):
            problems.append(f"entity_positions point outside the KB of {n_entities}")
        if scores.dtype.kind != "f" or scores.shape != (n,):
            problems.append(f"entity_scores are {scores.dtype} {scores.shape}")
        if len(self.doc_keys) != n or len(self.cluster_ids) != n:
            problems.append(f"{len(self.doc_keys)} doc keys and {len(self.cluster_ids)} "
                            f"cluster ids for {n} mentions")
        if not all(isinstance(k, str) for k in [*self.keys, *self.doc_keys]) or not all(
                c is None or isinstance(c, str) for c in self.cluster_ids):
            problems.append("keys and cluster ids must be strings")
        if problems:
            raise ValueError("; ".join(problems))
