"""Every parser of text from outside turns a hostile line (JSON nested too deeply for the
parser, bytes that are not UTF-8, a field over csv's limit) into its coded error naming the
file and line, never a RecursionError or UnicodeDecodeError traceback (issue 29, item 4)."""

import json

import numpy as np
import pytest

from spacy_arboel.artefacts import check_folder
from spacy_arboel.biomedical.mesh import build_mesh_kb, read_mesh_descriptors
from spacy_arboel.cli.coref_commands import tuned_settings
from spacy_arboel.corpus.shards import open_manifest
from spacy_arboel.data.ids import read_heldout_ids
from spacy_arboel.data.inputs import read_documents
from spacy_arboel.data.pubtator import read_pubtator
from spacy_arboel.evaluation.report import read_metrics
from spacy_arboel.jobs.kb_vectors import EmbeddingPlan, ShardStore
from spacy_arboel.kb.knowledge_base import KnowledgeBase, KnowledgeBaseError
from spacy_arboel.parsing import parse_json
from spacy_arboel.spacy_data.readers import read_corpus_documents

DEEP = "[" * 100_000 + "]" * 100_000  # json.loads raises RecursionError on it
NOT_UTF8 = b'{"text": "caf\xe9"}'

# the vector settings of the plans below (issue 29: a resume checks them too)
SAME = {"similarity": "dot", "mixed_precision": False}


def test_parse_json_raises_value_errors_only():
    for text, problem in ((DEEP, "nested too deeply"), (NOT_UTF8, "byte 0xe9 at column 14"),
                          (b'{}\n"\xff"', "line 2, column 2"), ("{", "not JSON"),
                          ("1" * 5000, "not JSON")):
        with pytest.raises(ValueError, match=problem):
            parse_json(text)
    assert parse_json(b'{"a": [1]}') == {"a": [1]}


def test_kb_jsonl_with_a_deeply_nested_line(tmp_path):
    path = tmp_path / "kb.jsonl"
    path.write_text('{"id": "D1", "name": "One"}\n' + DEEP + "\n")
    with pytest.raises(KnowledgeBaseError, match=r"E001\] .*kb\.jsonl:2: .*nested too deeply"):
        KnowledgeBase.from_jsonl(path)


@pytest.mark.parametrize("line, problem", [(DEEP.encode(), "nested too deeply"),
                                           (NOT_UTF8, "not UTF-8 text: byte 0xe9")])
def test_corpus_jsonl_with_a_hostile_line(tmp_path, line, problem):
    (tmp_path / "bad.jsonl").write_bytes(b'{"text": "fine"}\n' + line + b"\n")
    with pytest.raises(ValueError, match=f"E115.*bad.jsonl, line 2: .*{problem}"):
        list(read_documents(tmp_path / "bad.jsonl", strict=False))


def test_plain_text_and_docbin_documents_that_cannot_be_read(tmp_path):
    (tmp_path / "doc.txt").write_bytes(b"Fine text\nthen caf\xe9.")
    with pytest.raises(ValueError, match="E154.*doc.txt: .*byte 0xe9 at line 2, column 9"):
        list(read_documents(tmp_path / "doc.txt"))
    (tmp_path / "docs.spacy").write_bytes(b"not a DocBin")
    with pytest.raises(ValueError, match="E155.*docs.spacy"):
        list(read_corpus_documents(tmp_path / "docs.spacy"))


def test_pubtator_bytes_that_are_not_utf8_name_the_line(tmp_path):
    path = tmp_path / "docs.pubtator"
    path.write_bytes(b"1|t|Cough.\n1|a|Caf\xe9.\n\n")
    with pytest.raises(ValueError, match=r"E010.*docs.pubtator: .* line 2: not UTF-8"):
        list(read_pubtator(path))
    (tmp_path / "docs.txt").write_bytes(b"1|t|Cough.\n1|a|Caf\xe9.\n\n")  # detected as PubTator
    with pytest.raises(ValueError, match=r"E010.*docs.txt: .* line 2: not UTF-8"):
        list(read_documents(tmp_path / "docs.txt"))


def test_mesh_files_with_a_hostile_line(tmp_path):
    csv_path = tmp_path / "mesh.csv"
    csv_path.write_bytes(b"id,scheme,subject\nhttps://x/D1,MeSH,One\nhttps://x/D2,MeSH,T\xe9o\n")
    with pytest.raises(ValueError, match=r"E150.*mesh.csv, line 3: not UTF-8"):
        read_mesh_descriptors(csv_path)
    good_csv = tmp_path / "good.csv"
    good_csv.write_text("id,scheme,subject\nhttps://x/D000001,MeSH,One\n")
    tsv_path = tmp_path / "synonyms.tsv"
    tsv_path.write_text("mesh_id\tname\tsynonyms\nD000001\tOne\ta|b\n"
                        f"D000002\tTwo\t{'x' * 200_000}\n")
    with pytest.raises(ValueError, match=r"E150.*synonyms.tsv, line 3: field larger"):
        build_mesh_kb(good_csv, tsv_path)


def test_hostile_manifests_are_coded_errors(tmp_path):
    (tmp_path / "manifest.json").write_text(DEEP)
    with pytest.raises(ValueError, match="E126.*nested too deeply"):
        open_manifest(tmp_path, {"model": "m", "format": "jsonl"})
    (tmp_path / "component").mkdir()
    (tmp_path / "component" / "manifest.json").write_text(DEEP)
    with pytest.raises(ValueError, match="E030.*nested too deeply"):
        check_folder(tmp_path / "component", "thing", [])


def test_a_build_index_work_folder_with_a_hostile_ledger(tmp_path):
    name = "manifest.json"
    plan = EmbeddingPlan.cut(np.arange(6), 2, kb_fingerprint="k", encoder_fingerprint="e", **SAME,
                             granularity="entity", dim=4)
    ShardStore(tmp_path / "work", plan)
    (tmp_path / "work" / name).write_text(DEEP)
    with pytest.raises(ValueError, match=f"E132.*{name} that cannot be read.*nested"):
        ShardStore(tmp_path / "work", plan)
    (tmp_path / "work" / name).write_bytes(b'["\xff"]')
    with pytest.raises(ValueError, match=f"E132.*{name} that cannot be read.*UTF-8"):
        ShardStore(tmp_path / "work", plan)


def test_settings_files_with_a_hostile_line(tmp_path, capsys):
    metrics = tmp_path / "e2e.json"
    metrics.write_text(DEEP)
    with pytest.raises(ValueError, match="E111.*nested too deeply"):
        read_metrics(metrics)
    with pytest.raises(SystemExit):
        tuned_settings(metrics)
    assert "E151" in capsys.readouterr().out
    with pytest.raises(ValueError, match="E152.*nested too deeply"):
        read_heldout_ids(metrics)
    (tmp_path / "tuned.json").write_text(json.dumps({"best": [1]}))
    with pytest.raises(SystemExit):
        tuned_settings(tmp_path / "tuned.json")
    assert "E151" in capsys.readouterr().out
