"""KB sources behind one signature (issue 63, item 2): every format is a registered
``KBReader``; ``build_kb`` checks each source, reads it with its reader and merges; a new
format is one reader and one registration, and ``build-kb --source NAME:PATH`` reads it."""

import catalogue
import pytest

from spacy_arboel.kb.build import build_kb
from spacy_arboel.kb.entity import Entity
from spacy_arboel.kb.knowledge_base import KnowledgeBase
from spacy_arboel.kb.readers import KBReader, KBSource, get_reader, kb_readers


def _read_tsv(path, stats, prefix="T:"):
    """A made-up format: ``id<TAB>name`` a line."""
    kb = KnowledgeBase()
    for line in path.read_text(encoding="utf8").splitlines():
        entity_id, name = line.split("\t")
        kb.add(Entity(prefix + entity_id, name))
    stats["entities"] = len(kb)
    return kb


@pytest.fixture
def tsv_reader():
    kb_readers.register("test-tsv", func=KBReader(
        what="test TSV", read=_read_tsv,
        notes=lambda path, stats: [f"{path.name}: {stats['entities']} rows"]))
    yield "test-tsv"
    catalogue._remove((*kb_readers.namespace, "test-tsv"))  # the registry as it was


def test_the_packaged_readers_are_registered():
    assert {"jsonl", "obo", "umls", "mesh"} <= set(kb_readers.get_all())
    assert get_reader("umls").folder and not get_reader("obo").folder


def test_a_new_format_is_one_reader_and_one_registration(tmp_path, tsv_reader, toy_kb_path):
    (tmp_path / "terms.tsv").write_text("1\tshort stature\n2\ttall stature\n", encoding="utf8")
    kb, report = build_kb([KBSource("jsonl", toy_kb_path),
                           KBSource(tsv_reader, tmp_path / "terms.tsv", {"prefix": "HP:"})])
    assert kb["HP:1"].name == "short stature" and len(kb) == len(
        KnowledgeBase.from_jsonl(toy_kb_path)) + 2
    assert "terms.tsv: 2 rows" in report.notes()
    assert report.merged[-1] == (tmp_path / "terms.tsv", 0)


def test_a_source_is_checked_before_any_is_read(tmp_path, tsv_reader, monkeypatch):
    with pytest.raises(ValueError, match=r"E263.*'tsv'.*jsonl, mesh, obo.*test-tsv"):
        build_kb([KBSource("tsv", tmp_path / "terms.tsv")])
    (tmp_path / "first.tsv").write_text("1\tfirst\n", encoding="utf8")
    read = []
    monkeypatch.setattr("spacy_arboel.kb.build.read_source", lambda *a: read.append(a))
    with pytest.raises(ValueError, match=r"E230.*missing.tsv.*test TSV"):
        build_kb([KBSource(tsv_reader, tmp_path / "first.tsv"),
                  KBSource(tsv_reader, tmp_path / "missing.tsv")])
    assert read == []  # the first was not read either


def test_build_kb_reads_a_registered_source_from_the_command_line(tmp_path, tsv_reader, cli):
    (tmp_path / "terms.tsv").write_text("7\tmacrocephaly\n", encoding="utf8")
    out = tmp_path / "kb.jsonl"
    result = cli("build-kb", out, "--source", f"{tsv_reader}:{tmp_path / 'terms.tsv'}")
    assert result.exit_code == 0, result.output
    assert KnowledgeBase.from_jsonl(out)["T:7"].name == "macrocephaly"
    for bad, code in ((f"nothing:{tmp_path / 'terms.tsv'}", "E263"), ("terms.tsv", "E007")):
        result = cli("build-kb", tmp_path / "other.jsonl", "--source", bad)
        assert result.exit_code == 1 and f"[{code}]" in result.output, result.output
        assert not (tmp_path / "other.jsonl").exists()
