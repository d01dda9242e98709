"""The distilled mention encoder (fast CPU setting): layers kept, the loss, training, and the
distill-mentions command's saved pipeline."""

import json

import numpy as np
import pytest
import spacy
import torch

from spacy_arboel.components.common import gold_mentions
from spacy_arboel.linking.mention_distiller import (
    DistillSettings,
    MentionDistiller,
    distillation_terms,
    kept_layers,
    shrink_encoder,
)


def _exits(result, code=0):
    assert result.exit_code == code, result.output
    return result


def test_kept_layers_are_evenly_spaced_with_first_and_last():
    assert kept_layers(6, 3) == [0, 2, 5]
    assert kept_layers(12, 6) == [0, 2, 4, 7, 9, 11]
    assert kept_layers(6, 6) == list(range(6))
    assert kept_layers(6, 1) == [5]
    for bad in (0, 7):
        with pytest.raises(ValueError, match="E121"):
            kept_layers(6, bad)


def _linker(saved_linker):
    return spacy.load(saved_linker / "pipeline").get_pipe("arbo_entity_linker")


def test_shrink_keeps_the_chosen_layers_and_saves_loadable(saved_linker, tmp_path):
    from transformers import AutoModel

    teacher = _linker(saved_linker).retriever.encoders["mention"]
    student = shrink_encoder(teacher, 1)
    assert len(student.transformer.encoder.layer) == 1
    assert student.transformer.config.num_hidden_layers == 1
    assert len(teacher.transformer.encoder.layer) == 2  # the teacher is not changed
    last = teacher.transformer.encoder.layer[1].state_dict()
    for key, value in student.transformer.encoder.layer[0].state_dict().items():
        assert torch.equal(value, last[key])
    student.transformer.save_pretrained(tmp_path / "student")
    loaded = AutoModel.from_pretrained(tmp_path / "student")
    ids = torch.tensor([[2, 5, 6, 3]])
    mask = torch.ones_like(ids)
    student.eval()
    with torch.no_grad():
        assert torch.allclose(loaded(input_ids=ids, attention_mask=mask)[0],
                              student.transformer(input_ids=ids, attention_mask=mask)[0],
                              atol=1e-6)


def test_loss_is_zero_only_when_the_student_matches():
    torch.manual_seed(0)
    teacher = torch.randn(4, 8)
    rows = torch.randn(4, 5, 8)
    valid = torch.ones(4, 5, dtype=torch.bool)
    valid[0, 3:] = False
    same = distillation_terms(teacher.clone(), teacher, rows, valid, 2.0, 1.0)
    assert float(same) == pytest.approx(0.0, abs=1e-6)
    student = (teacher + 0.5 * torch.randn(4, 8)).requires_grad_()
    worse = distillation_terms(student, teacher, rows, valid, 2.0, 1.0)
    assert worse > same
    worse.backward()
    assert student.grad.abs().sum() > 0
    only_soft = distillation_terms(student, teacher, rows, valid, 2.0, 0.0)
    assert 0 < only_soft < worse


def test_settings_are_checked():
    with pytest.raises(ValueError, match="E011"):
        DistillSettings(layers=0)
    with pytest.raises(ValueError, match="E011"):
        DistillSettings(temperature=0)


def test_fit_moves_the_student_towards_the_teacher(saved_linker, toy_examples):
    linker = _linker(saved_linker)
    retriever = linker.retriever
    texts, spans, _ = gold_mentions(eg.reference for eg in toy_examples)
    student = shrink_encoder(retriever.encoders["mention"], 1)
    distiller = MentionDistiller(retriever, student, DistillSettings(
        layers=1, epochs=60, batch_size=4, learning_rate=3e-3, top_k=5))  # alias rows: 60
    sequences = retriever.builder.mention_ids(texts, spans)
    teacher, rows = distiller.targets(sequences)
    with torch.no_grad():
        before = float(distiller.batch_loss(sequences, teacher, rows))
    history = distiller.fit(texts, spans)
    with torch.no_grad():
        after = float(distiller.batch_loss(sequences, teacher, rows))
    assert len(history) == 60 and after < 0.5 * before
    assert not student.training
    # the teacher is untouched: its vectors are the same
    assert np.allclose(distiller.targets(sequences)[0], teacher)


def test_shared_weights_cannot_be_distilled(tiny_encoder, toy_kb_path, toy_examples):
    nlp = spacy.blank("xx")
    nlp.add_pipe("arbo_entity_linker", config={
        "kb_path": str(toy_kb_path),
        "model": {"encoder_name": tiny_encoder, "share_weights": True}})
    nlp.initialize(lambda: toy_examples)
    retriever = nlp.get_pipe("arbo_entity_linker").retriever
    student = shrink_encoder(retriever.encoders["mention"], 1)
    with pytest.raises(ValueError, match="E123"):
        MentionDistiller(retriever, student)
    with pytest.raises(ValueError, match="E123"):
        nlp.get_pipe("arbo_entity_linker").use_mention_encoder(student)


def test_distill_command_saves_a_fast_pipeline(saved_linker, toy_examples, cli):
    out = saved_linker / "fast"
    _exits(cli("distill-mentions", saved_linker / "pipeline", saved_linker / "gold.spacy",
               "--output", out, "--layers", 1, "--epochs", 2, "--batch-size", 4, "--top-k", 5,
               "--mention-max-length", 16))
    config = json.loads((out / "arbo_entity_linker" / "mention_encoder" / "config.json")
                        .read_text())
    assert config["num_hidden_layers"] == 1
    teacher = spacy.load(saved_linker / "pipeline")
    fast = spacy.load(out)
    linker = fast.get_pipe("arbo_entity_linker")
    assert fast.config["components"]["arbo_entity_linker"]["quantize"] is True
    assert linker.retriever.settings.quantize
    # the fast setting's shorter mention window is in the saved config, and links with it
    assert fast.config["components"]["arbo_entity_linker"]["mention_max_length"] == 16
    assert linker.retriever.builder.mention_max_length == 16
    # the entity side and its index are the teacher's
    saved = saved_linker / "pipeline" / "arbo_entity_linker" / "index" / "embeddings.npy"
    assert np.array_equal(np.load(out / "arbo_entity_linker" / "index" / "embeddings.npy"),
                          np.load(saved))
    docs = [fast(eg.predicted.copy()) for eg in toy_examples]
    assert all(e._.kb_candidates for d in docs for e in d.ents)
    # saved and loaded again: the same candidates
    fast.to_disk(saved_linker / "again")
    again = spacy.load(saved_linker / "again")
    for doc, eg in zip(docs, toy_examples, strict=True):
        redone = again(eg.predicted.copy())
        assert [e._.kb_candidates for e in redone.ents] == [e._.kb_candidates for e in doc.ents]
    assert teacher.get_pipe("arbo_entity_linker").retriever.settings.quantize is False


def test_distill_command_refuses_to_overwrite_its_input(saved_linker, cli):
    result = _exits(cli("distill-mentions", saved_linker / "pipeline", saved_linker / "gold.spacy",
                        "--output", saved_linker / "pipeline"), code=1)
    assert "E040" in result.output


def test_distilling_a_pipeline_with_coref_clears_its_memory(saved_linker, toy_examples, cli):
    """arbo_coref's remembered mentions were embedded by the teacher: the distilled pipeline
    forgets them (else it would not load: E015) and says to tune the coref again."""
    nlp = spacy.load(saved_linker / "pipeline")
    nlp.add_pipe("arbo_coref", config={"keep_state": True})
    list(nlp.pipe(eg.predicted.copy() for eg in toy_examples))
    assert len(nlp.get_pipe("arbo_coref").state) > 0
    nlp.to_disk(saved_linker / "with_coref")
    result = _exits(cli("distill-mentions", saved_linker / "with_coref",
                        saved_linker / "gold.spacy", "--output", saved_linker / "fast",
                        "--layers", 1, "--epochs", 1, "--top-k", 5))
    assert "tune-coref" in result.output
    fast = spacy.load(saved_linker / "fast")
    assert len(fast.get_pipe("arbo_coref").state) == 0
    doc = fast(toy_examples[0].predicted.copy())
    assert all(e._.kb_candidates for e in doc.ents)


def test_distill_command_refuses_a_window_without_room(saved_linker, cli):
    result = _exits(cli("distill-mentions", saved_linker / "pipeline", saved_linker / "gold.spacy",
                        "--output", saved_linker / "fast", "--mention-max-length", 4), code=1)
    assert "E011" in result.output and "--mention-max-length" in result.output
    assert not (saved_linker / "fast").exists()


def test_distill_command_names_a_missing_linker(saved_linker, cli):
    result = _exits(cli("distill-mentions", saved_linker / "pipeline", saved_linker / "gold.spacy",
                        "--output", saved_linker / "fast", "--component", "nope"), code=1)
    assert "component 'nope'" in " ".join(result.output.split())
