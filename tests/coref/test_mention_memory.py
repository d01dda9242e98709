"""The coreference core (coref/mention_memory.py): plain mentions, merging, saving, checks
and clustering, without spaCy."""

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import srsly

from spacy_arboel.coref import (
    MemoryFormatError,
    Mention,
    MentionMemory,
    cluster_mentions,
    text_key,
)

SETTINGS = {"k": 1, "threshold": None, "directed": True, "same_doc_only": False,
            "nil_prefix": "NIL_"}


def _entity_id(position: int) -> str:
    return f"E{position}"


def _mentions() -> list[Mention]:
    """m0 retrieves entity 0 and is close to m1; m2 and m3 are close to each other and
    retrieve nothing."""
    return [Mention("a", 0, 3, [1.0, 0.0, 0.0, 0.0], 0, 0.9),
            Mention("a", 5, 9, [0.9, 0.1, 0.0, 0.0]),
            Mention("b", 0, 4, [0.0, 1.0, 0.0, 0.0]),
            Mention("c", 2, 6, [0.0, 0.95, 0.05, 0.0])]


def _memory() -> MentionMemory:
    return MentionMemory.from_mentions(_mentions())


def test_importing_the_core_loads_neither_spacy_nor_thinc():
    code = textwrap.dedent("""
        import sys
        import spacy_arboel.coref as coref
        memory = coref.MentionMemory.from_mentions(
            [coref.Mention("d", 0, 1, [1.0, 0.0]), coref.Mention("d", 2, 3, [0.0, 1.0], 0, 1.0)])
        clustered, _ = coref.cluster_mentions(
            coref.MentionMemory(), memory, str, k=1, threshold=None, directed=True,
            same_doc_only=False, nil_prefix="NIL_")
        assert clustered.cluster_ids[1] == "0", clustered.cluster_ids
        print(sorted(m for m in ("spacy", "thinc") if m in sys.modules))
    """)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True)
    assert result.stdout.strip() == "[]"


def test_from_mentions_keeps_keys_vectors_and_nearest_entities():
    memory = _memory()
    assert len(memory) == 4
    assert memory.keys == ["a_0_3", "a_5_9", "b_0_4", "c_2_6"]  # the saved key format
    assert memory.doc_keys == ["a", "a", "b", "c"]
    assert memory.cluster_ids == [None] * 4
    assert memory.vectors.dtype == np.float32 and memory.vectors.shape == (4, 4)
    assert memory.entity_positions.tolist() == [0, -1, -1, -1]
    assert memory.entity_scores.dtype == np.float32
    np.testing.assert_allclose(memory.entity_scores, [0.9, 0, 0, 0])
    assert memory.doc_codes().tolist() == [0, 0, 1, 2]
    assert len(MentionMemory.from_mentions([])) == 0


def test_from_mentions_refuses_vectors_of_different_shapes():
    with pytest.raises(ValueError, match="E061"):
        MentionMemory.from_mentions([Mention("a", 0, 1, [1.0, 0.0]), Mention("a", 2, 3, [1.0])])
    with pytest.raises(ValueError, match="E061"):
        MentionMemory.from_mentions([Mention("a", 0, 1, [[1.0, 0.0]])])


def test_text_key_depends_on_the_text_only():
    assert text_key("Aspirin and fever.") == text_key("Aspirin and fever.")
    assert text_key("Aspirin and fever.") != text_key("Aspirin and fever")
    assert len(text_key("x")) == 12


def test_merged_appends_new_mentions_once_and_changes_neither_input():
    memory = MentionMemory.from_mentions(_mentions()[:2])
    memory.cluster_ids = ["E0", "E0"]
    memory.fingerprints = {"kb": "k"}
    batch = MentionMemory.from_mentions([_mentions()[3], _mentions()[1], _mentions()[3]])
    merged, slots = memory.merged(batch)
    assert slots == [2, 1, 2]
    assert merged.keys == ["a_0_3", "a_5_9", "c_2_6"]
    assert merged.cluster_ids == ["E0", "E0", None]
    assert merged.fingerprints == {"kb": "k"}
    np.testing.assert_array_equal(merged.vectors[2], batch.vectors[0])
    assert len(memory) == 2 and len(batch) == 3 and memory.cluster_ids == ["E0", "E0"]
    alone, slots = MentionMemory().merged(batch)
    assert slots == [0, 1, 0] and alone is not batch and len(alone) == 2


def test_cluster_mentions_links_clusters_to_their_entity_and_names_discovered_ones():
    batch = _memory()
    clustered, slots = cluster_mentions(MentionMemory(), batch, _entity_id, **SETTINGS)
    assert slots == [0, 1, 2, 3]
    assert clustered.cluster_ids == ["E0", "E0", "NIL_b_0_4", "NIL_b_0_4"]
    assert batch.cluster_ids == [None] * 4  # the input is not changed
    # λ below every edge: every mention is a discovered singleton
    cut, _ = cluster_mentions(MentionMemory(), batch, _entity_id,
                              **{**SETTINGS, "threshold": -1e9, "nil_prefix": "NEW:"})
    assert cut.cluster_ids == ["NEW:" + key for key in batch.keys]
    # within documents only, m2 and m3 (documents b and c) have no neighbour
    apart, _ = cluster_mentions(MentionMemory(), batch, _entity_id,
                                **{**SETTINGS, "same_doc_only": True})
    assert apart.cluster_ids == ["E0", "E0", "NIL_b_0_4", "NIL_c_2_6"]


def test_a_type_rule_keeps_a_mention_out_of_another_types_cluster():
    """The issue's "A patient on lithium developed seizures": with k = 1 the Chemical
    mention's nearest mention is the Disease one, whose entity edge is the stronger."""
    from spacy_arboel.kb.type_rule import TypeRule

    mentions = [Mention("d", 13, 20, [1.0, 0.1], 0, 0.2, "Chemical"),  # lithium -> E0
                Mention("d", 31, 39, [1.0, 0.0], 1, 0.9, "Disease")]   # seizures -> E1
    batch = MentionMemory.from_mentions(mentions)
    joined, _ = cluster_mentions(MentionMemory(), batch, _entity_id, **SETTINGS)
    assert joined.cluster_ids == ["E1", "E1"]  # lithium moved to the Disease entity
    rule = TypeRule.from_settings({"Chemical": ["Chemical"], "Disease": ["Disease"]})
    apart, _ = cluster_mentions(MentionMemory(), batch, _entity_id, **SETTINGS,
                                compatible=rule.compatible)
    assert apart.cluster_ids == ["E0", "E1"]
    assert apart.labels == ["Chemical", "Disease"]


def test_a_remembered_discovered_cluster_keeps_its_id():
    first, _ = cluster_mentions(MentionMemory(), MentionMemory.from_mentions(_mentions()[2:3]),
                                _entity_id, **SETTINGS)
    assert first.cluster_ids == ["NIL_b_0_4"]
    first.cluster_ids = ["NIL_earlier"]
    later, slots = cluster_mentions(first, MentionMemory.from_mentions(_mentions()[3:]),
                                    _entity_id, **SETTINGS)
    assert slots == [1] and later.cluster_ids == ["NIL_earlier", "NIL_earlier"]
    assert first.cluster_ids == ["NIL_earlier"] and len(first) == 1
    # an id that is not a discovered one (another prefix) is not kept
    first.cluster_ids = ["OLD_earlier"]
    renamed, _ = cluster_mentions(first, MentionMemory.from_mentions(_mentions()[3:]),
                                  _entity_id, **SETTINGS)
    assert renamed.cluster_ids == ["NIL_b_0_4", "NIL_b_0_4"]


@pytest.mark.parametrize("directed", [True, False])
def test_clustering_in_two_batches_partitions_as_one(directed):
    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((30, 8))
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    mentions = [Mention(f"doc{i % 3}", i, i + 1, vectors[i], int(rng.integers(-1, 4)),
                        float(rng.uniform(0.3, 1.0))) for i in range(30)]
    settings = {**SETTINGS, "k": 3, "threshold": -0.6, "directed": directed}
    joint, _ = cluster_mentions(MentionMemory(), MentionMemory.from_mentions(mentions),
                                _entity_id, **settings)
    first, _ = cluster_mentions(MentionMemory(), MentionMemory.from_mentions(mentions[:12]),
                                _entity_id, **settings)
    both, slots = cluster_mentions(first, MentionMemory.from_mentions(mentions[12:]),
                                   _entity_id, **settings)
    assert slots == list(range(12, 30))

    def groups(ids):
        return sorted(sorted(i for i, c in enumerate(ids) if c == cluster) for cluster in set(ids))

    # entities and discovered clusters both occur, so the comparison can fail
    assert len({c for c in joint.cluster_ids if c.startswith("E")}) > 1
    assert any(c.startswith("NIL_") for c in joint.cluster_ids)
    assert groups(both.cluster_ids) == groups(joint.cluster_ids)
    assert [c if c.startswith("E") else None for c in both.cluster_ids] == [
        c if c.startswith("E") else None for c in joint.cluster_ids]


def _clustered() -> MentionMemory:
    memory, _ = cluster_mentions(MentionMemory(), _memory(), _entity_id, **SETTINGS)
    memory.fingerprints = {"kb": "abc", "encoder": "def"}
    return memory


def _assert_same(found: MentionMemory, expected: MentionMemory) -> None:
    assert found.keys == expected.keys and found.doc_keys == expected.doc_keys
    assert found.cluster_ids == expected.cluster_ids
    assert found.fingerprints == expected.fingerprints
    for name in ("vectors", "entity_positions", "entity_scores"):
        np.testing.assert_array_equal(getattr(found, name), getattr(expected, name))
        assert getattr(found, name).dtype == getattr(expected, name).dtype


def test_to_disk_from_disk_round_trip_in_the_saved_format(tmp_path):
    memory = _clustered()
    memory.to_disk(tmp_path / "state")
    assert sorted(p.name for p in (tmp_path / "state").iterdir()) == [
        "entity_positions.npy", "entity_scores.npy", "memory.json", "vectors.npy"]
    meta = json.loads((tmp_path / "state" / "memory.json").read_text())
    assert meta == {"keys": memory.keys, "doc_keys": memory.doc_keys,
                    "cluster_ids": memory.cluster_ids, "fingerprints": memory.fingerprints,
                    "labels": memory.labels}
    loaded = MentionMemory.from_disk(tmp_path / "state")
    _assert_same(loaded, memory)
    loaded.validate(n_entities=1, width=4)
    # the labels are part of the saved state: without them it is malformed, never guessed
    (tmp_path / "state" / "memory.json").write_text(json.dumps({**meta, "labels": []}))
    with pytest.raises(MemoryFormatError, match=r"E060.*and 0 labels for 4 mentions"):
        MentionMemory.from_disk(tmp_path / "state").validate(n_entities=1, width=4)
    del meta["labels"]
    (tmp_path / "state" / "memory.json").write_text(json.dumps(meta))
    with pytest.raises(MemoryFormatError, match=r"E060.*metadata must hold exactly.*labels"):
        MentionMemory.from_disk(tmp_path / "state")


def test_to_bytes_from_bytes_round_trip():
    memory = _clustered()
    _assert_same(MentionMemory.from_bytes(memory.to_bytes()), memory)
    empty = MentionMemory.from_bytes(MentionMemory().to_bytes())
    assert len(empty) == 0 and empty.fingerprints == {}


@pytest.mark.parametrize("change, problem", [
    (lambda msg: msg.pop("vectors"), "expected a map of meta"),
    (lambda msg: msg["meta"].pop("fingerprints"), "metadata must hold exactly"),
    (lambda msg: msg["meta"].pop("labels"), "metadata must hold exactly"),
    (lambda msg: msg["meta"].update(labels="abcd"), "must be lists"),
    (lambda msg: msg["meta"].update(keys="abcd"), "must be lists"),
    (lambda msg: msg.update(vectors=[1, 2]), "must be arrays"),
])
def test_malformed_bytes_are_refused(change, problem):
    msg = srsly.msgpack_loads(_clustered().to_bytes())
    change(msg)
    with pytest.raises(MemoryFormatError, match=f"E060.*{problem}") as info:
        MentionMemory.from_bytes(srsly.msgpack_dumps(msg))
    assert problem in info.value.problem
    with pytest.raises(MemoryFormatError, match="expected a map"):
        MentionMemory.from_bytes(srsly.msgpack_dumps([1]))


def test_validate_names_every_disagreement():
    memory = _clustered()
    memory.validate(n_entities=1, width=4)
    with pytest.raises(MemoryFormatError, match=r"expected float32 \(4, 8\)"):
        memory.validate(n_entities=1, width=8)
    with pytest.raises(MemoryFormatError, match="outside the KB of 0"):
        memory.validate(n_entities=0, width=4)
    broken = _clustered()
    broken.vectors = broken.vectors[:-1]
    broken.entity_scores = broken.entity_scores.astype("int64")
    broken.cluster_ids = broken.cluster_ids[:2]
    broken.doc_keys[0] = 3
    with pytest.raises(MemoryFormatError) as info:
        broken.validate(n_entities=1, width=4)
    assert info.value.problem.split("; ") == [
        "vectors are float32 (3, 4), expected float32 (4, 4)", "entity_scores are int64 (4,)",
        "4 doc keys, 2 cluster ids and 4 labels for 4 mentions",
        "keys and cluster ids must be strings"]
