"""What each writing command checks before it writes, what it refuses to replace, and what
a second run on the same output gets (issue 40, items 3, 5 and 6)."""

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from spacy_arboel.cli import app

PUBTATOR = ("1|t|Aspirin induced cough.\n1|a|Fever was caused by aspirin.\n"
            "1\t0\t7\tAspirin\tChemical\tD001241\n1\t16\t21\tcough\tDisease\tD003371\n\n")


def _invoke(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


def _refused(result, code: str) -> None:
    assert result.exit_code == 1, result.output
    assert f"[{code}]" in result.output, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file()}


@pytest.fixture
def converted(tmp_path):
    """A PubTator file and the good corpus converted from it."""
    (tmp_path / "gold.txt").write_text(PUBTATOR)
    assert _invoke("convert", tmp_path / "gold.txt", tmp_path / "gold.spacy").exit_code == 0
    return tmp_path


@pytest.mark.parametrize("case", ["empty folder", "brat given a jsonl file", "blank file",
                                  "jsonl of no documents"])
def test_convert_reading_no_documents_keeps_the_old_corpus(converted, case):
    """A convert that reads nothing used to write a corpus of 0 documents over a good one,
    exit 0."""
    tmp_path = converted
    (tmp_path / "empty").mkdir()
    (tmp_path / "docs.jsonl").write_text(json.dumps({"text": "Aspirin.", "spans": []}) + "\n")
    (tmp_path / "blank.txt").write_text("\n\n")
    (tmp_path / "none.jsonl").write_text("")
    args = {"empty folder": [tmp_path / "empty"],
            "brat given a jsonl file": [tmp_path / "docs.jsonl", "--format", "brat"],
            "blank file": [tmp_path / "blank.txt"],
            "jsonl of no documents": [tmp_path / "none.jsonl"]}[case]
    before = (tmp_path / "gold.spacy").read_bytes()
    result = _invoke("convert", args[0], tmp_path / "gold.spacy", *args[1:])
    _refused(result, "E243")
    assert str(args[0]) in result.output.replace("\n", " ")
    assert (tmp_path / "gold.spacy").read_bytes() == before


def test_convert_given_a_folder_as_output_is_a_coded_error(converted):
    (converted / "out").mkdir()
    _refused(_invoke("convert", converted / "gold.txt", converted / "out"), "E241")
    assert not any((converted / "out").iterdir())
