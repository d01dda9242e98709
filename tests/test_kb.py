"""The JSONL knowledge base and its registered loader."""

from __future__ import annotations

import json

import pytest
import spacy

from spacy_arboel.kb import Entity, KnowledgeBase, KnowledgeBaseError

ENTITIES = [
    Entity("D003371", "Cough", "A sudden expulsion of air.", ("coughing",), ("Disease",)),
    Entity("D015738", "Famotidine", aliases=("Pepcid",), types=("Chemical",)),
    Entity("C000001", "Ünïcode Compound"),
]


@pytest.fixture
def kb() -> KnowledgeBase:
    return KnowledgeBase(ENTITIES)


def test_lookup(kb):
    assert len(kb) == 3
    assert "D003371" in kb and "D000000" not in kb
    assert kb["D015738"].name == "Famotidine"
    assert kb.position("C000001") == 2
    assert kb.ids == ["D003371", "D015738", "C000001"]
    with pytest.raises(KeyError, match="D000000"):
        kb["D000000"]


def test_jsonl_round_trip(kb, tmp_path):
    path = tmp_path / "sub" / "kb.jsonl"
    kb.to_jsonl(path)
    loaded = KnowledgeBase.from_jsonl(path)
    assert list(loaded) == ENTITIES
    assert loaded.fingerprint() == kb.fingerprint()
    assert "Ünïcode" in path.read_text(encoding="utf8")


def test_jsonl_minimal_lines_and_blank_lines(tmp_path):
    path = tmp_path / "kb.jsonl"
    path.write_text('{"id": "D1", "name": "One"}\n\n{"id": 2, "name": "Two"}\n', encoding="utf8")
    kb = KnowledgeBase.from_jsonl(path)
    assert kb.ids == ["D1", "2"]
    assert kb["D1"].aliases == () and kb["D1"].types == ()


@pytest.mark.parametrize(
    "bad_line",
    ['{"id": "D2", "name": ', '{"id": "D2"}', '["D2", "Two"]', '{"id": "D2", "name": "Two", '
     '"aliases": "two"}'],
)
def test_malformed_jsonl_names_the_line(tmp_path, bad_line):
    path = tmp_path / "kb.jsonl"
    path.write_text('{"id": "D1", "name": "One"}\n\n' + bad_line + "\n", encoding="utf8")
    with pytest.raises(KnowledgeBaseError, match=r"kb\.jsonl:3:"):
        KnowledgeBase.from_jsonl(path)


def test_duplicate_id_names_the_id(tmp_path):
    path = tmp_path / "kb.jsonl"
    lines = [{"id": "D1", "name": "One"}, {"id": "D7", "name": "Seven"},
             {"id": "D7", "name": "Seven again"}]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf8")
    with pytest.raises(KnowledgeBaseError, match="D7") as info:
        KnowledgeBase.from_jsonl(path)
    assert "kb.jsonl:3" in str(info.value)
    with pytest.raises(KnowledgeBaseError, match="D1"):
        KnowledgeBase([Entity("D1", "One"), Entity("D1", "Uno")])


def test_empty_id_or_name_is_an_error():
    with pytest.raises(KnowledgeBaseError):
        KnowledgeBase([Entity("", "Nameless id")])
    with pytest.raises(KnowledgeBaseError):
        KnowledgeBase([Entity("D1", "")])


def test_with_aliases(kb):
    extended = kb.with_aliases({"D003371": ["Coughing", "tussis", "tussis"],
                                "D015738": ["famotidine"], "D999999": ["ghost"]})
    assert extended["D003371"].aliases == ("coughing", "tussis")
    assert extended["D015738"].aliases == ("Pepcid",)
    assert "D999999" not in extended
    assert extended["D003371"].types == ("Disease",)
    assert kb["D003371"].aliases == ("coughing",)  # the original is unchanged


def test_fingerprint_changes_with_an_alias(kb):
    same = KnowledgeBase(ENTITIES)
    assert same.fingerprint() == kb.fingerprint()
    changed = kb.with_aliases({"D015738": ["famotidina"]})
    assert changed.fingerprint() != kb.fingerprint()
    reordered = KnowledgeBase([ENTITIES[1], ENTITIES[0], ENTITIES[2]])
    assert reordered.fingerprint() != kb.fingerprint()


def test_registered_jsonl_loader(kb, tmp_path):
    path = tmp_path / "kb.jsonl"
    kb.to_jsonl(path)
    create_loader = spacy.registry.misc.get("spacy_arboel.JsonlKB.v1")
    loaded = create_loader(path)(spacy.blank("en"))
    assert isinstance(loaded, KnowledgeBase)
    assert loaded.fingerprint() == kb.fingerprint()


def test_loader_resolves_from_config(kb, tmp_path):
    path = tmp_path / "kb.jsonl"
    kb.to_jsonl(path)
    config = {"kb": {"@misc": "spacy_arboel.JsonlKB.v1", "path": str(path)}}
    resolved = spacy.registry.resolve(config)
    assert len(resolved["kb"](spacy.blank("en"))) == 3


def test_with_aliases_can_put_new_aliases_first():
    kb = KnowledgeBase([Entity("D1", "Cough", aliases=("tussis",))])
    assert kb.with_aliases({"D1": ["coughing", "Cough"]})["D1"].aliases == ("tussis", "coughing")
    first = kb.with_aliases({"D1": ["coughing", "TUSSIS"]}, first=True)
    assert first["D1"].aliases == ("coughing", "TUSSIS")
