"""Gold ids (``data.ids``): the composite convention and a prepared dataset's held-out ids."""

import json

import pytest

from spacy_arboel.data.ids import gold_ids, join_ids, read_heldout_ids


def test_gold_ids_and_join_ids_are_inverse():
    assert gold_ids(" D1 | D2 |D1") == ("D1", "D2")
    assert join_ids(gold_ids("D1|D2")) == "D1|D2"


def test_held_out_ids_are_read_or_E152(tmp_path):
    path = tmp_path / "heldout_ids.json"
    path.write_text(json.dumps({"fraction": 0.1, "ids": ["D1", "D2"]}))
    assert read_heldout_ids(path) == {"D1", "D2"}
    path.write_text(json.dumps({"ids": ["D1"], "alt_ids": ["D9"]}))  # an older release's id
    assert read_heldout_ids(path) == {"D1", "D9"}
    for content, problem in (({"ids": "D1"}, "not a list of strings"), ({}, "KeyError"),
                             ([], "TypeError"), ({"ids": [1]}, "not a list of strings")):
        path.write_text(json.dumps(content))
        with pytest.raises(ValueError, match=f"E152.*heldout_ids.json.*{problem}"):
            read_heldout_ids(path)
    with pytest.raises(ValueError, match="E152.*FileNotFoundError"):
        read_heldout_ids(tmp_path / "missing.json")
