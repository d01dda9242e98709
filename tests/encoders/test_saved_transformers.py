"""One saved copy of transformers with the same weights (issue 62, item 4)."""

from __future__ import annotations

import json

import pytest
import torch

from spacy_arboel.encoders.loading import load_transformer
from spacy_arboel.encoders.saved_transformers import (
    SAME_AS,
    same_weights,
    transformer_writers,
    weights_folder,
)


def _write(writers, folder):
    for name, write in writers.items():
        write(folder / name)


def test_a_twin_is_saved_as_a_reference_and_loads_its_own_copy(tiny_encoder, tmp_path):
    first = load_transformer(tiny_encoder, 0)
    second = load_transformer(tiny_encoder, 0)
    assert first is not second and same_weights(first, second)
    _write(transformer_writers({"mention_encoder": first, "entity_encoder": second}), tmp_path)
    assert (tmp_path / "mention_encoder" / "model.safetensors").is_file()
    assert [p.name for p in (tmp_path / "entity_encoder").iterdir()] == [SAME_AS]
    assert weights_folder(tmp_path, "entity_encoder") == tmp_path / "mention_encoder"
    assert weights_folder(tmp_path, "mention_encoder") == tmp_path / "mention_encoder"
    loaded = load_transformer(str(weights_folder(tmp_path, "entity_encoder")), 0)
    assert same_weights(loaded, second)
    # weights that differ in one value are saved in full
    with torch.no_grad():
        next(second.parameters()).view(-1)[0] += 1.0
    assert not same_weights(first, second)
    _write(transformer_writers({"mention_encoder": first, "entity_encoder": second}),
           tmp_path / "apart")
    assert (tmp_path / "apart" / "entity_encoder" / "model.safetensors").is_file()


@pytest.mark.parametrize("content", ['{"folder": "entity_encoder"}', '{"folder": "../x"}',
                                     '{"folder": "missing"}', "not json", '{"other": 1}'])
def test_a_reference_to_no_folder_beside_it_is_a_damaged_save(tmp_path, content):
    (tmp_path / "mention_encoder").mkdir()
    (tmp_path / "entity_encoder").mkdir()
    (tmp_path / "entity_encoder" / SAME_AS).write_text(content)
    with pytest.raises(ValueError, match=r"\[E030\]"):
        weights_folder(tmp_path, "entity_encoder")


def test_a_reference_to_a_reference_is_refused(tmp_path):
    for name, target in (("a", "b"), ("b", "c")):
        (tmp_path / name).mkdir()
        (tmp_path / name / SAME_AS).write_text(json.dumps({"folder": target}))
    (tmp_path / "c").mkdir()
    with pytest.raises(ValueError, match=r"\[E030\]"):
        weights_folder(tmp_path, "a")
