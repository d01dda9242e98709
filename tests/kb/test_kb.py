"""The JSONL knowledge base and its registered loader."""

from __future__ import annotations

import json

import pytest
import spacy

from spacy_arboel.kb import Entity, KnowledgeBase, KnowledgeBaseError
from spacy_arboel.kb.readers import KBSource

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
    loaded = create_loader(path)(spacy.blank("xx"))
    assert isinstance(loaded, KnowledgeBase)
    assert loaded.fingerprint() == kb.fingerprint()


def test_loader_resolves_from_config(kb, tmp_path):
    path = tmp_path / "kb.jsonl"
    kb.to_jsonl(path)
    config = {"kb": {"@misc": "spacy_arboel.JsonlKB.v1", "path": str(path)}}
    resolved = spacy.registry.resolve(config)
    assert len(resolved["kb"](spacy.blank("xx"))) == 3


def test_with_aliases_can_put_new_aliases_first():
    kb = KnowledgeBase([Entity("D1", "Cough", aliases=("tussis",))])
    assert kb.with_aliases({"D1": ["coughing", "Cough"]})["D1"].aliases == ("tussis", "coughing")
    first = kb.with_aliases({"D1": ["coughing", "TUSSIS"]}, first=True)
    assert first["D1"].aliases == ("coughing", "TUSSIS")


@pytest.mark.parametrize("line, reason", [
    ('{"id": null, "name": "Null"}', '"id" must be a string, got null'),
    ('{"id": "D2", "name": ["Two"]}', '"name" must be a string'),
    ('{"id": "D2", "name": "Two", "aliases": [null, 5]}', '"aliases" must be a list of strings'),
    ('{"id": "D2", "name": "Two", "types": ["Disease", 1]}', '"types" must be a list of str'),
    ('{"id": "D2", "name": "Two", "description": 3}', '"description" must be a string'),
    ('{"id": true, "name": "Two"}', '"id" must be a string'),
    ('{"id": "D2", "name": "Two", "mention_counts": ["two"]}', '"mention_counts" must be an obj'),
    ('{"id": "D2", "name": "Two", "mention_counts": {"two": -1}}', '"mention_counts" must be'),
    ('{"id": "D2", "name": "Two", "mention_counts": {"two": 1.5}}', '"mention_counts" must be'),
    ('{"id": "D2", "name": "Two", "mention_counts": {"two": true}}', '"mention_counts" must be'),
])
def test_values_of_the_wrong_type_are_not_coerced(tmp_path, line, reason):
    path = tmp_path / "kb.jsonl"
    path.write_text('{"id": "D1", "name": "One"}\n' + line + "\n", encoding="utf8")
    with pytest.raises(KnowledgeBaseError, match=r"E001\] .*kb\.jsonl:2: .*" + reason):
        KnowledgeBase.from_jsonl(path)


@pytest.mark.parametrize("entity_id", ["NIL", "D1|D2"])
def test_reserved_ids_are_refused(tmp_path, entity_id):
    path = tmp_path / "kb.jsonl"
    path.write_text(json.dumps({"id": entity_id, "name": "X"}) + "\n", encoding="utf8")
    with pytest.raises(KnowledgeBaseError, match=r"E035\] .*kb\.jsonl:1: .*reserved"):
        KnowledgeBase.from_jsonl(path)
    with pytest.raises(KnowledgeBaseError, match="E035"):
        KnowledgeBase([Entity(entity_id, "X")])


def test_bytes_that_are_not_utf8_name_the_line(tmp_path):
    path = tmp_path / "kb.jsonl"
    path.write_bytes(b'{"id": "D1", "name": "One"}\n{"id": "D2", "name": "T\xe9o"}\n')
    with pytest.raises(KnowledgeBaseError, match=r"kb\.jsonl:2: .*not UTF-8 text: byte 0xe9"):
        KnowledgeBase.from_jsonl(path)


def test_an_empty_kb_is_refused_when_read_and_when_written(tmp_path):
    path = tmp_path / "kb.jsonl"
    path.write_text("\n \n", encoding="utf8")
    with pytest.raises(KnowledgeBaseError, match="E036"):
        KnowledgeBase.from_jsonl(path)
    with pytest.raises(KnowledgeBaseError, match="E036"):
        KnowledgeBase().to_jsonl(tmp_path / "out.jsonl")
    assert not (tmp_path / "out.jsonl").exists()


@pytest.mark.parametrize("source", ["--jsonl", "--mesh-descriptors"])
def test_build_kb_refuses_an_empty_kb(tmp_path, source, cli):
    """An empty input KB, or MeSH descriptors without rows (an empty KB built): a coded
    message that names a real file, no traceback, nothing written."""
    path = tmp_path / ("source.jsonl" if source == "--jsonl" else "desc.csv")
    path.write_text("\n" if source == "--jsonl" else "id,subject\n", encoding="utf8")
    result = cli("build-kb", tmp_path / "kb.jsonl", source, path)
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit)  # no traceback
    named = path if source == "--jsonl" else tmp_path / "kb.jsonl"
    assert f"[E036] {named}: " in " ".join(result.output.split())
    assert ".tmp-" not in result.output
    assert list(tmp_path.iterdir()) == [path]


def test_the_fingerprint_follows_additions(kb):
    before = kb.fingerprint()
    kb.add(Entity("D9", "Nine"))
    assert kb.fingerprint() != before


@pytest.mark.parametrize("line, reason", [
    ('{"id": "D1", "name": "  "}', "whitespace-only id or name"),
    ('{"id": " ", "name": "One"}', "whitespace-only id or name"),
    ('{"id": " D1 ", "name": "One"}', "whitespace around it"),
    ('{"id": "D1\\t", "name": "One"}', "whitespace around it"),
])
def test_blank_names_and_ids_with_whitespace_around_are_E001(tmp_path, line, reason):
    """Gold ids are read stripped (data.ids): an id " D1 " could never be linked, and "A"
    and " A " would be two entities for one gold id."""
    path = tmp_path / "kb.jsonl"
    path.write_text('{"id": "D0", "name": "Zero"}\n' + line + "\n", encoding="utf8")
    with pytest.raises(KnowledgeBaseError, match=rf"\[E001\] .*kb\.jsonl:2: .*{reason}"):
        KnowledgeBase.from_jsonl(path)


def test_build_kb_refuses_an_id_and_the_same_id_with_whitespace(tmp_path, cli):
    path = tmp_path / "source.jsonl"
    path.write_text('{"id": "A", "name": "One"}\n{"id": " A ", "name": "One again"}\n',
                    encoding="utf8")
    result = cli("build-kb", tmp_path / "kb.jsonl", "--jsonl", path)
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit)
    assert "[E001]" in result.output and "whitespace around it" in result.output
    assert not (tmp_path / "kb.jsonl").exists()


def test_a_kb_path_that_is_a_folder_is_E230_not_a_traceback(tmp_path, cli):
    (tmp_path / "kb").mkdir()
    with pytest.raises(KnowledgeBaseError, match=r"\[E230\] .*kb cannot be read as a "
                                                 r"knowledge-base JSONL file"):
        KnowledgeBase.from_jsonl(tmp_path / "kb")
    result = cli("build-kb", tmp_path / "out.jsonl", "--jsonl", tmp_path / "kb")
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit)
    assert "[E230]" in result.output


def test_alt_ids_and_xrefs_round_trip_and_resolve(tmp_path):
    """Alternate ids resolve to their entity; both lists survive the JSONL round trip and
    are written only where an entity has them (other KBs keep their lines)."""
    kb = KnowledgeBase([Entity("HP:1", "One", alt_ids=("HP:9",), xrefs=("UMLS:C1",)),
                        Entity("HP:2", "Two")])
    path = tmp_path / "kb.jsonl"
    kb.to_jsonl(path)
    lines = [json.loads(line) for line in path.read_text(encoding="utf8").splitlines()]
    assert lines[0]["alt_ids"] == ["HP:9"] and lines[0]["xrefs"] == ["UMLS:C1"]
    assert "alt_ids" not in lines[1] and "xrefs" not in lines[1]
    loaded = KnowledgeBase.from_jsonl(path)
    assert list(loaded) == list(kb) and loaded.fingerprint() == kb.fingerprint()
    assert loaded.resolve("HP:9") == "HP:1" and loaded.resolve("HP:2") == "HP:2"
    # an alternate id is one id with its entity's everywhere: `in`, kb[...], position
    assert "HP:9" in loaded and loaded["HP:9"].id == "HP:1"
    assert loaded.position("HP:9") == loaded.position("HP:1") == 0
    assert loaded.resolve_ids(["HP:9", "HP:1", "HP:7"]) == ("HP:1", "HP:7")
    assert loaded.is_alternate_id("HP:9") and not loaded.is_alternate_id("HP:1")
    assert loaded.ids == ["HP:1", "HP:2"]
    with pytest.raises(KeyError, match="E005"):
        loaded.resolve("HP:3")
    assert Entity("D1", "One").to_dict() == {"id": "D1", "name": "One", "description": "",
                                             "aliases": [], "types": []}


@pytest.mark.parametrize("entities, message", [
    ([Entity("A", "a", alt_ids=("B",)), Entity("B", "b")], "'B' is the id of 'B' and already "
     "an alternate id of 'A'"),
    ([Entity("A", "a"), Entity("B", "b", alt_ids=("A",))], "'A' is an alternate id of 'B' and "
     "already the id of 'A'"),
    ([Entity("A", "a", alt_ids=("X",)), Entity("B", "b", alt_ids=("X",))], "'X' is an "
     "alternate id of 'B' and already an alternate id of 'A'"),
])
def test_an_id_that_would_resolve_to_two_entities_is_E235(entities, message):
    with pytest.raises(KnowledgeBaseError, match=rf"\[E235\] <kb>:2: {message}"):
        KnowledgeBase(entities)


def test_alt_ids_follow_the_rules_of_ids():
    with pytest.raises(KnowledgeBaseError, match="E035"):
        KnowledgeBase([Entity("A", "a", alt_ids=("NIL",))])
    with pytest.raises(KnowledgeBaseError, match="whitespace around it"):
        KnowledgeBase([Entity("A", "a", alt_ids=(" B",))])


def test_scispacy_jsonl_is_read_as_it_is_and_written(tmp_path):
    """A scispaCy KB line (concept_id, canonical_name, aliases, types, definition) is read
    by the one reader, beside lines of ours, and written back in scispaCy's keys."""
    path = tmp_path / "umls_kb.jsonl"
    path.write_text(
        '{"concept_id": "C0010200", "canonical_name": "Coughing", "aliases": ["Cough"], '
        '"types": ["T184"], "definition": "Expulsion of air."}\n'
        '{"concept_id": "C0000005", "canonical_name": "(131)I-MAA", "aliases": [], '
        '"types": ["T116"]}\n'
        '{"id": "D1", "name": "Ours"}\n', encoding="utf8")
    kb = KnowledgeBase.from_jsonl(path)
    assert kb["C0010200"] == Entity("C0010200", "Coughing", "Expulsion of air.", ("Cough",),
                                    ("T184",))
    assert kb.ids == ["C0010200", "C0000005", "D1"] and kb["C0000005"].description == ""
    out = tmp_path / "out.jsonl"
    kb.to_jsonl(out, format="scispacy")
    lines = [json.loads(line) for line in out.read_text(encoding="utf8").splitlines()]
    assert lines[0] == {"concept_id": "C0010200", "canonical_name": "Coughing",
                        "aliases": ["Cough"], "types": ["T184"],
                        "definition": "Expulsion of air."}
    assert lines[2] == {"concept_id": "D1", "canonical_name": "Ours", "aliases": [],
                        "types": [], "definition": None}
    assert list(KnowledgeBase.from_jsonl(out)) == list(kb)
    with pytest.raises(ValueError, match="E007"):
        kb.to_jsonl(tmp_path / "x.jsonl", format="umls")


def test_a_malformed_scispacy_line_names_the_line(tmp_path):
    path = tmp_path / "kb.jsonl"
    path.write_text('{"concept_id": "C1", "canonical_name": "One"}\n'
                    '{"concept_id": "C2", "aliases": ["two"]}\n'
                    '{"concept_id": "C3", "canonical_name": "Three", "types": "T1"}\n',
                    encoding="utf8")
    with pytest.raises(KnowledgeBaseError, match=r"kb\.jsonl:2: .*canonical_name"):
        KnowledgeBase.from_jsonl(path)
    path.write_text('{"concept_id": "C3", "canonical_name": "Three", "types": "T1"}\n',
                    encoding="utf8")
    with pytest.raises(KnowledgeBaseError, match=r"kb\.jsonl:1: .*\"types\" must be a list"):
        KnowledgeBase.from_jsonl(path)


def test_link_counts_round_trip_and_give_the_mention_prior(tmp_path):
    """p(e | m) from the link counts: texts compared in lower case, whitespace collapsed."""
    kb = KnowledgeBase([
        Entity("D1", "Common Cold", mention_counts=(("cold", 3),)),
        Entity("D2", "Cold Temperature", mention_counts=(("Cold", 1), ("low  temperature", 2))),
        Entity("D3", "Fever"),
    ])
    path = tmp_path / "kb.jsonl"
    kb.to_jsonl(path)
    lines = path.read_text(encoding="utf8").splitlines()
    assert json.loads(lines[1])["mention_counts"] == {"Cold": 1, "low  temperature": 2}
    assert "mention_counts" not in json.loads(lines[2])  # none: the line as before
    again = KnowledgeBase.from_jsonl(path)
    assert again.fingerprint() == kb.fingerprint()
    # smoothed by one link to an unseen entity: 3 and 1 of 4 links -> 3/5 and 1/5, and a
    # text seen twice is no certainty (issue 62)
    assert again.mention_prior(" COLD") == {"D1": 0.6, "D2": 0.2}
    assert again.mention_prior("low temperature") == {"D2": pytest.approx(2 / 3)}
    assert again.mention_prior("fever") == {}  # a name is no link count
    assert KnowledgeBase([Entity("D1", "Cold", mention_counts=(("cold", 0),))]
                         ).mention_prior("cold") == {}


def test_link_counts_are_summed_by_merges_and_corpus_aliases():
    from spacy_arboel.kb.build import merge_kbs

    first = KnowledgeBase([Entity("D1", "Cold", mention_counts=(("cold", 2),))])
    second = KnowledgeBase([Entity("D1", "Cold", mention_counts=(("COLD", 1), ("chill", 1)))])
    merged, shared = merge_kbs(first, second)
    assert shared == 1
    assert merged["D1"].mention_counts == (("cold", 3), ("chill", 1))
    grown = first.with_aliases({"D1": ["a cold"]}, first=True, counts={"D1": {"a cold": 4}})
    assert grown["D1"].aliases == ("a cold",)
    assert grown["D1"].mention_counts == (("cold", 2), ("a cold", 4))
    assert grown.mention_prior("a cold") == {"D1": 0.8}


def test_a_clash_names_where_both_entities_were_read(tmp_path):
    """E002 and E235 name the file and line of both entries, within a file and across the
    sources ``build-kb`` merges (the old messages said "entry 1" and "<kb>:3")."""
    from spacy_arboel.kb.build import build_kb

    first = tmp_path / "first.jsonl"
    first.write_text('{"id": "A", "name": "One"}\n\n{"id": "B", "name": "Two"}\n'
                     '{"id": "A", "name": "One again"}\n', encoding="utf8")
    with pytest.raises(KnowledgeBaseError, match=rf"first at {first}:1, again at {first}:4"):
        KnowledgeBase.from_jsonl(first)
    first.write_text('{"id": "A", "name": "One"}\n\n{"id": "B", "name": "Two"}\n',
                     encoding="utf8")
    second = tmp_path / "second.jsonl"
    second.write_text('{"id": "C", "name": "Three"}\n{"id": "D", "name": "Four", '
                      '"alt_ids": ["B"]}\n', encoding="utf8")
    with pytest.raises(KnowledgeBaseError, match=rf"\[E235\] {second}:2: 'B' is an alternate "
                                                 rf"id of 'D' and already the id of 'B' "
                                                 rf"\({first}:3\)"):
        build_kb([KBSource("jsonl", first), KBSource("jsonl", second)])


def test_sources_given_as_generators_are_read(tmp_path):
    """The check before the read must not use up an iterator of paths (the KB was empty)."""
    from spacy_arboel.spacy_data.aliases import build_kb_with_corpus_aliases

    path = tmp_path / "kb.jsonl"
    path.write_text('{"id": "A", "name": "One"}\n', encoding="utf8")
    kb, _ = build_kb_with_corpus_aliases(sources=(KBSource("jsonl", p) for p in [path]))
    assert kb.ids == ["A"]
