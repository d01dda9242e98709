"""The arbo_coref component (components/arbo_coref.py): annotations, thresholds, streaming
state, save and load, bad input."""

import numpy as np
import pytest
import spacy
import srsly

from spacy_arboel.extensions import CLUSTER_EXT


def _nlp(tiny_encoder, kb_path, **coref):
    nlp = spacy.blank("xx")
    nlp.add_pipe("arbo_entity_linker", config={
        "kb_path": str(kb_path), "model": {"encoder_name": tiny_encoder}})
    nlp.add_pipe("arbo_coref", config=coref)
    nlp.get_pipe("arbo_entity_linker").ensure_ready()  # no initialize: from kb_path
    return nlp


def _docs(examples):
    return [eg.predicted.copy() for eg in examples]


def _ids(docs):
    return [[e._.get(CLUSTER_EXT) for e in doc.ents] for doc in docs]


def test_every_mention_gets_a_cluster_and_kb_id_follows_it(tiny_encoder, toy_kb_path,
                                                          toy_examples):
    nlp = _nlp(tiny_encoder, toy_kb_path, threshold=None)
    docs = list(nlp.pipe(_docs(toy_examples)))
    kb = nlp.get_pipe("arbo_entity_linker").kb
    ids = [i for row in _ids(docs) for i in row]
    assert len(ids) == sum(len(d.ents) for d in docs) and all(ids)
    # with no threshold every mention keeps the edge from its nearest entity
    assert all(i in kb for i in ids)
    assert all(e.kb_id_ == e._.get(CLUSTER_EXT) for d in docs for e in d.ents)
    # deterministic
    assert _ids(nlp.pipe(_docs(toy_examples))) == _ids(docs)


def test_a_threshold_below_every_edge_leaves_singleton_discovered_clusters(
    tiny_encoder, toy_kb_path, toy_examples
):
    nlp = _nlp(tiny_encoder, toy_kb_path, threshold=-1e9)
    docs = list(nlp.pipe(_docs(toy_examples)))
    ids = [i for row in _ids(docs) for i in row]
    assert all(i.startswith("NIL_") for i in ids) and len(set(ids)) == len(ids)
    assert {e.kb_id_ for d in docs for e in d.ents} == {"NIL"}


@pytest.mark.parametrize("directed", [True, False])
def test_clusters_span_documents_and_hold_one_entity(tiny_encoder, toy_kb_path, toy_examples,
                                                     directed):
    nlp = _nlp(tiny_encoder, toy_kb_path, directed=directed, k=3, threshold=None)
    docs = list(nlp.pipe(_docs(toy_examples)))
    by_cluster = {}
    for number, doc in enumerate(docs):
        for ent in doc.ents:
            by_cluster.setdefault(ent._.get(CLUSTER_EXT), set()).add(number)
    assert any(len(numbers) > 1 for numbers in by_cluster.values())


def test_remembered_mentions_give_the_ids_of_joint_clustering(
    tiny_encoder, toy_kb_path, toy_examples, tmp_path
):
    threshold = -0.0  # some edges kept, some dropped by the random encoder's scores
    joint = _nlp(tiny_encoder, toy_kb_path, threshold=threshold)
    joint_ids = _ids(joint.pipe(_docs(toy_examples)))
    first, second = toy_examples[:3], toy_examples[3:]
    streaming = _nlp(tiny_encoder, toy_kb_path, threshold=threshold, keep_state=True)
    assert _ids(streaming.pipe(_docs(first))) == joint_ids[:3]
    streaming.to_disk(tmp_path / "pipeline")
    reloaded = spacy.load(tmp_path / "pipeline")
    assert len(reloaded.get_pipe("arbo_coref").state) == sum(len(eg.reference.ents)
                                                            for eg in first)
    assert _ids(reloaded.pipe(_docs(second))) == joint_ids[3:]
    from_bytes = spacy.blank("xx").from_config(streaming.config)
    from_bytes.from_bytes(streaming.to_bytes())
    assert _ids(from_bytes.pipe(_docs(second))) == joint_ids[3:]


def test_state_from_another_kb_is_an_error(tiny_encoder, toy_kb_path, toy_examples, tmp_path):
    nlp = _nlp(tiny_encoder, toy_kb_path, keep_state=True)
    list(nlp.pipe(_docs(toy_examples)))
    nlp.to_disk(tmp_path / "pipeline")
    smaller = tmp_path / "smaller.jsonl"
    smaller.write_text("\n".join(toy_kb_path.read_text().splitlines()[:-1]) + "\n")
    other = spacy.blank("xx")
    other.add_pipe("arbo_entity_linker", config={
        "kb_path": str(smaller), "model": {"encoder_name": tiny_encoder}})
    other.add_pipe("arbo_coref", config={"keep_state": True})
    with pytest.raises(ValueError, match="another KB or mention encoder"):
        other.get_pipe("arbo_coref").from_disk(tmp_path / "pipeline" / "arbo_coref")


def test_bad_input(tiny_encoder, toy_kb_path, toy_examples):
    nlp = _nlp(tiny_encoder, toy_kb_path)
    empty = [nlp.make_doc(""), nlp.make_doc("No mentions here.")]
    assert [len(d.ents) for d in nlp.pipe(empty)] == [0, 0]
    single = _docs(toy_examples[4:5])
    assert len(_ids(nlp.pipe(single))[0]) == 1
    alone = spacy.blank("xx")
    alone.add_pipe("arbo_coref")
    with pytest.raises(ValueError, match="not in the pipeline"):
        alone(_docs(toy_examples)[0])
    coref_only = nlp.get_pipe("arbo_coref")
    with pytest.raises(ValueError, match="without a mention vector"):
        coref_only(_docs(toy_examples)[0])
    with pytest.raises(ValueError, match="k.*PositiveInt"):  # confection's, naming it
        _nlp(tiny_encoder, toy_kb_path, k=0)
    with pytest.raises(ValueError, match="E011.*`k` must be an integer >= 1"):
        coref_only.configure(k=0)
    with pytest.raises(ValueError, match="E011.*`threshold` must be a finite number"):
        coref_only.configure(threshold=float("nan"))
    with pytest.raises(ValueError, match="E007.*arbo_coref setting 'kk'"):
        coref_only.configure(kk=2)


def test_spacy_evaluate_reports_coref_scores(tiny_encoder, toy_kb_path, toy_examples):
    nlp = _nlp(tiny_encoder, toy_kb_path)
    scores = nlp.evaluate(toy_examples)
    for key in ("coref_nmi", "coref_ari", "coref_b3_f", "coref_conll_f1", "coref_link_acc"):
        assert scores[key] is not None
    assert -1 <= scores["coref_ari"] <= 1 and 0 <= scores["coref_conll_f1"] <= 1


def test_identical_mentions_and_mentions_without_candidates(tiny_encoder, toy_kb_path,
                                                            toy_examples):
    nlp = _nlp(tiny_encoder, toy_kb_path, threshold=None, k=2)
    same = [toy_examples[4].predicted.copy() for _ in range(3)]  # identical docs and vectors
    ids = _ids(nlp.pipe(same))
    assert ids[0] == ids[1] == ids[2]
    with nlp.select_pipes(disable=["arbo_coref"]):
        docs = list(nlp.pipe(_docs(toy_examples)))
    for ent in docs[0].ents:
        ent._.kb_candidates = []  # retrieved no entity: no entity edge
    nlp.get_pipe("arbo_coref").cluster(docs)
    assert all(e._.get(CLUSTER_EXT) for d in docs for e in d.ents)


@pytest.mark.parametrize("setting", [{"k": 0}, {"buffer_size": 0},
                                     {"threshold": float("nan")}, {"directed": None, "x": 1}])
def test_settings_out_of_range_are_rejected(tiny_encoder, toy_kb_path, setting):
    with pytest.raises(ValueError, match="must be|Unknown"):
        nlp = _nlp(tiny_encoder, toy_kb_path)
        nlp.get_pipe("arbo_coref").configure(**setting)


def test_a_kb_change_refuses_the_remembered_mentions(tiny_encoder, toy_kb_path, toy_examples,
                                                     tmp_path):
    from spacy_arboel.kb import KnowledgeBase

    nlp = _nlp(tiny_encoder, toy_kb_path, keep_state=True)
    list(nlp.pipe(_docs(toy_examples[:3])))
    coref, linker = nlp.get_pipe("arbo_coref"), nlp.get_pipe("arbo_entity_linker")
    remembered = coref.state.fingerprints
    smaller = KnowledgeBase(list(linker.kb)[:-1])
    linker.set_kb(smaller)
    with pytest.raises(ValueError, match="E034"):
        list(nlp.pipe(_docs(toy_examples[3:])))
    # the memory is untouched, so saving it keeps the fingerprints it was made with
    assert coref.state.fingerprints == remembered
    nlp.to_disk(tmp_path / "stale")
    with pytest.raises(ValueError, match="E015"):  # kb_path null: the saved (smaller) KB
        spacy.load(tmp_path / "stale",
                   config={"components.arbo_entity_linker.kb_path": None})
    coref.clear_state()
    ids = _ids(nlp.pipe(_docs(toy_examples[3:])))
    assert all(i for row in ids for i in row)
    assert coref.state.fingerprints["kb"] == smaller.fingerprint()
    nlp.to_disk(tmp_path / "fresh")
    fresh = spacy.load(tmp_path / "fresh",
                       config={"components.arbo_entity_linker.kb_path": None})
    assert len(fresh.get_pipe("arbo_coref").state) == len(coref.state)


def test_docs_fed_again_are_remembered_once_and_keep_their_ids(tiny_encoder, toy_kb_path,
                                                               toy_examples):
    nlp = _nlp(tiny_encoder, toy_kb_path, keep_state=True, threshold=-0.0)
    first = _ids(nlp.pipe(_docs(toy_examples)))
    size = len(nlp.get_pipe("arbo_coref").state)
    assert size == sum(len(eg.reference.ents) for eg in toy_examples)
    assert _ids(nlp.pipe(_docs(toy_examples))) == first
    assert _ids(nlp.pipe(_docs(toy_examples[2:4]))) == first[2:4]
    assert len(nlp.get_pipe("arbo_coref").state) == size


class _CountingDoc:
    """A Doc that counts how often its ents are built (``doc.ents`` makes a new tuple)."""

    def __init__(self, doc):
        self.doc, self.reads = doc, 0

    @property
    def ents(self):
        self.reads += 1
        return self.doc.ents

    def __getattr__(self, name):
        return getattr(self.doc, name)


def test_annotation_reads_the_ents_of_a_doc_a_fixed_number_of_times(tiny_encoder, toy_kb_path):
    # a doc with many ents: annotation must stay linear in them (it was quadratic)
    nlp = _nlp(tiny_encoder, toy_kb_path)
    doc = nlp.make_doc(" ".join(["aspirin and fever ."] * 100))
    doc.ents = [doc.char_span(t.idx, t.idx + len(t), label="X") for t in doc
                if t.text in ("aspirin", "fever")]
    with nlp.select_pipes(disable=["arbo_coref"]):
        doc = nlp(doc)
    counting = _CountingDoc(doc)
    nlp.get_pipe("arbo_coref").cluster([counting])
    assert counting.reads <= 3
    assert all(e._.get(CLUSTER_EXT) for e in doc.ents)


def test_mentions_without_content_are_not_linked_nor_clustered(tiny_encoder, toy_kb_path):
    nlp = _nlp(tiny_encoder, toy_kb_path)
    doc = nlp.make_doc("Aspirin \x00\x00 and   fever.")
    doc.ents = [doc.char_span(0, 7, label="Chemical"), doc.char_span(8, 10, label="X"),
                doc.char_span(15, 17, label="X"), doc.char_span(17, 22, label="Disease")]
    doc = nlp(doc)
    nul, spaces = doc.ents[1], doc.ents[2]
    assert [nul.kb_id_, spaces.kb_id_] == ["NIL", "NIL"]
    assert nul._.kb_candidates == [] and nul._.get(CLUSTER_EXT) is None
    assert doc.ents[0]._.kb_candidates and doc.ents[0]._.get(CLUSTER_EXT)


def _remembering(tiny_encoder, kb_path, examples):
    """A pipeline whose arbo_coref remembers the mentions of ``examples``."""
    nlp = _nlp(tiny_encoder, kb_path, keep_state=True, threshold=-0.0)
    list(nlp.pipe(_docs(examples)))
    return nlp, nlp.get_pipe("arbo_coref")


def _same_state(found, expected):
    assert len(found) == len(expected) > 0
    assert found.keys == expected.keys and found.doc_keys == expected.doc_keys
    assert found.cluster_ids == expected.cluster_ids
    assert found.fingerprints == expected.fingerprints
    for name in ("vectors", "entity_positions", "entity_scores"):
        np.testing.assert_array_equal(getattr(found, name), getattr(expected, name))


def test_to_disk_from_disk_round_trip_honours_exclude(tiny_encoder, toy_kb_path, toy_examples,
                                                      tmp_path):
    nlp, coref = _remembering(tiny_encoder, toy_kb_path, toy_examples)
    saved = coref.state
    coref.to_disk(tmp_path / "full")
    assert sorted(p.name for p in (tmp_path / "full").iterdir()) == ["manifest.json", "state"]
    coref.clear_state()
    coref.from_disk(tmp_path / "full", exclude=["state"])
    assert len(coref.state) == 0  # left out: the memory stays as it was
    coref.from_disk(tmp_path / "full")
    _same_state(coref.state, saved)
    # saved without the state: nothing is written, and loading leaves the memory alone
    coref.to_disk(tmp_path / "full", exclude=["state"])
    assert list((tmp_path / "full").iterdir()) == []
    coref.from_disk(tmp_path / "full")
    _same_state(coref.state, saved)
    # the remembered mentions after a reload cluster new docs as before
    before = _ids(nlp.pipe(_docs(toy_examples[:2])))
    coref.to_disk(tmp_path / "again")
    coref.clear_state()
    coref.from_disk(tmp_path / "again")
    assert _ids(nlp.pipe(_docs(toy_examples[:2]))) == before


def test_to_bytes_from_bytes_round_trip_honours_exclude(tiny_encoder, toy_kb_path,
                                                        toy_examples):
    _, coref = _remembering(tiny_encoder, toy_kb_path, toy_examples)
    saved = coref.state
    data = coref.to_bytes()
    coref.clear_state()
    coref.from_bytes(data, exclude=["state"])
    assert len(coref.state) == 0
    coref.from_bytes(data)
    _same_state(coref.state, saved)
    empty = coref.to_bytes(exclude=["state"])
    assert srsly.msgpack_loads(empty) == {}
    coref.from_bytes(empty)
    _same_state(coref.state, saved)
    with pytest.raises(ValueError, match=r"E030.*expected a map of state"):
        coref.from_bytes(srsly.msgpack_dumps({"state": data, "other": b""}))
    _same_state(coref.state, saved)  # a refused load changes nothing


def test_a_missing_or_damaged_folder_is_refused(tiny_encoder, toy_kb_path, toy_examples,
                                                tmp_path):
    _, coref = _remembering(tiny_encoder, toy_kb_path, toy_examples)
    with pytest.raises(ValueError, match="E030.*does not exist"):
        coref.from_disk(tmp_path / "nowhere")
    coref.to_disk(tmp_path / "saved")
    (tmp_path / "saved" / "state" / "memory.json").write_text("{}")
    with pytest.raises(ValueError, match="E030.*memory.json"):
        coref.from_disk(tmp_path / "saved")


def test_the_linkers_type_rule_holds_in_the_clusters(tiny_encoder, toy_kb_path, toy_examples):
    """Untrained, the tiny linker ranks entities of both types; with ``label_types`` neither
    its candidates nor the clusters give a mention an entity of another type, and every
    mention keeps the linker's own link in ``linker_kb_id``."""
    from spacy_arboel.extensions import CANDIDATES_EXT, LINKER_ID_EXT

    rule = {"Chemical": ["Chemical"], "Disease": ["Disease"]}
    free = _nlp(tiny_encoder, toy_kb_path, k=3, threshold=None)
    kb = free.get_pipe("arbo_entity_linker").kb

    def misfits(docs):  # links and candidates of another type
        return sum(1 for d in docs for e in d.ents
                   for i in [e.kb_id_, *(c for c, _ in e._.get(CANDIDATES_EXT))]
                   if i in kb and e.label_ not in kb[i].types)

    assert misfits(free.pipe(_docs(toy_examples))) > 0  # the test can fail
    nlp = spacy.blank("xx")
    nlp.add_pipe("arbo_entity_linker", config={
        "kb_path": str(toy_kb_path), "model": {"encoder_name": tiny_encoder},
        "get_candidates": {"label_types": rule}})
    nlp.add_pipe("arbo_coref", config={"k": 3, "threshold": None})
    nlp.get_pipe("arbo_entity_linker").ensure_ready()
    docs = list(nlp.pipe(_docs(toy_examples)))
    assert misfits(docs) == 0
    for doc in docs:
        for ent in doc.ents:
            assert all(ent.label_ in kb[i].types for i, _ in ent._.get(CANDIDATES_EXT))
            assert ent._.get(LINKER_ID_EXT) == ent._.get(CANDIDATES_EXT)[0][0]
    # clusters: the linker's candidates as they are, the clusters still by the rule
    clusters = spacy.blank("xx")
    clusters.add_pipe("arbo_entity_linker", config={
        "kb_path": str(toy_kb_path), "model": {"encoder_name": tiny_encoder},
        "get_candidates": {"label_types": rule, "type_rule": "clusters"}})
    clusters.add_pipe("arbo_coref", config={"k": 3, "threshold": None})
    clusters.get_pipe("arbo_entity_linker").ensure_ready()
    free_docs = list(free.pipe(_docs(toy_examples)))
    for doc, free_doc in zip(clusters.pipe(_docs(toy_examples)), free_docs, strict=True):
        for ent, free_ent in zip(doc.ents, free_doc.ents, strict=True):
            assert ent._.get(CANDIDATES_EXT) == free_ent._.get(CANDIDATES_EXT)
            assert ent.kb_id_ not in kb or ent.label_ in kb[ent.kb_id_].types
    # prefer: the other type's entities stay, ranked last
    prefer = spacy.blank("xx")
    prefer.add_pipe("arbo_entity_linker", config={
        "kb_path": str(toy_kb_path), "model": {"encoder_name": tiny_encoder},
        "get_candidates": {"label_types": rule, "type_rule": "prefer"}})
    prefer.get_pipe("arbo_entity_linker").ensure_ready()
    for doc in prefer.pipe(_docs(toy_examples)):
        for ent in doc.ents:
            fits = [ent.label_ in kb[i].types for i, _ in ent._.get(CANDIDATES_EXT)]
            assert len(fits) == len(kb) and fits == sorted(fits, reverse=True)
