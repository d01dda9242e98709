"""Passages of wordpieces for the retriever-reader linker: windows, offsets, reader inputs."""

from __future__ import annotations

import pytest

from spacy_arboel.encoders import load_tokenizer
from spacy_arboel.encoders.passages import (
    CHUNK_CHARS,
    Passage,
    PassageBuilder,
    _chunks,
    cut_passages,
)


@pytest.fixture(scope="module")
def tokenizer(tiny_encoder):
    return load_tokenizer(tiny_encoder)


@pytest.fixture
def builder(tokenizer):
    return PassageBuilder(tokenizer, passage_length=32, passage_stride=24, entity_max_length=16)


def _windows(passages: list[Passage]) -> list[tuple[int, int]]:
    return [(p.piece_ids[0], p.piece_ids[-1] + 1) for p in passages]


def _cut(n: int, length: int, stride: int) -> list[Passage]:
    pieces = list(range(n))
    return cut_passages(0, pieces, pieces, [i + 1 for i in pieces], length, stride)


def _check_offsets(tokenizer, text: str, passages: list[Passage]) -> None:
    """Every wordpiece's character span lies in the text and reads as its token."""
    for passage in passages:
        tokens = tokenizer.convert_ids_to_tokens(list(passage.piece_ids))
        spans = zip(passage.piece_starts, passage.piece_ends, strict=True)
        for token, (start, end) in zip(tokens, spans, strict=True):
            assert 0 <= start < end <= len(text)
            piece = text[start:end]
            if token == "[UNK]":
                assert piece.strip() == piece and piece
            else:
                assert piece.lower() == token.removeprefix("##")


# --- windows --------------------------------------------------------------------------------


def test_windows_of_a_70_piece_doc():
    passages = _cut(70, 32, 24)
    assert _windows(passages) == [(0, 32), (24, 56), (38, 70)]
    assert all(len(p.piece_ids) == 32 for p in passages)
    assert passages[1].start_char == 24 and passages[1].end_char == 56
    assert all(p.doc_index == 0 for p in passages)


@pytest.mark.parametrize("length", [4, 7, 32])
@pytest.mark.parametrize("stride_part", [1, 2, 3])
def test_windows_cover_the_doc_and_always_move_on(length, stride_part):
    stride = max(1, length * stride_part // 3)
    for n in range(1, 3 * length + 2):
        windows = _windows(_cut(n, length, stride))
        assert windows[0][0] == 0 and windows[-1][1] == n
        assert all(end - start == min(n, length) for start, end in windows)
        for (s1, e1), (s2, e2) in zip(windows, windows[1:], strict=False):
            assert s1 < s2 <= s1 + stride and e2 > e1  # no window inside the previous one
            assert s2 <= e1  # no wordpiece left out between windows


def test_short_and_empty_docs(builder):
    text = "Aspirin induced cough."
    (passage,) = builder.passages([text])
    assert passage.start_char == 0 and passage.end_char == len(text)
    assert len(passage.piece_ids) == 4
    assert builder.passages(["", "   \n\t ", ""]) == []
    assert _cut(0, 32, 24) == []
    # doc indices follow the input, blank docs included
    assert {p.doc_index for p in builder.passages(["", "cough", " "])} == {1}


@pytest.mark.parametrize("stride", [0, -1, 33])
def test_bad_stride_raises(tokenizer, stride):
    with pytest.raises(ValueError, match="passage_stride"):
        _cut(10, 32, stride)
    with pytest.raises(ValueError, match="passage_stride"):
        PassageBuilder(tokenizer, passage_length=32, passage_stride=stride)


def test_bad_lengths_raise(tokenizer):
    with pytest.raises(ValueError, match="passage_length"):
        PassageBuilder(tokenizer, passage_length=3, passage_stride=2)
    with pytest.raises(ValueError, match="entity_max_length"):
        PassageBuilder(tokenizer, entity_max_length=4)
    with pytest.raises(ValueError, match="one entry per wordpiece"):
        cut_passages(0, [1, 2], [0, 1], [1])


def test_every_wordpiece_is_in_some_passage(builder, tokenizer):
    text = " ".join(["Aspirin-induced cough in patients with heart failure (HF)."] * 12)
    encoded = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    expected = set(zip(encoded["input_ids"], encoded["offset_mapping"], strict=True))
    passages = builder.passages([text])
    assert len(passages) > 3
    found = {(i, (s, e)) for p in passages
             for i, s, e in zip(p.piece_ids, p.piece_starts, p.piece_ends, strict=True)}
    assert found == {(i, tuple(o)) for i, o in expected}


# --- offsets --------------------------------------------------------------------------------


def _find(text: str, mention: str, after: int = 0) -> tuple[int, int]:
    start = text.index(mention, after)
    return start, start + len(mention)


def test_mentions_map_back_to_their_characters(tokenizer):
    text = ("Aspirin-induced cough, i.e. acute pain (α-tocopherol) was caused by "
            "the drug 5-HT3 in patients.")
    builder = PassageBuilder(tokenizer, passage_length=128, passage_stride=96)
    (passage,) = builder.passages([text])
    _check_offsets(tokenizer, text, [passage])
    for mention in ("Aspirin", "Aspirin-induced cough", "i.e.", "α-tocopherol", "5-HT3",
                    "(α-tocopherol)", "patients."):
        start, end = _find(text, mention)
        span = builder.piece_span(passage, start, end)
        assert span is not None, mention
        assert builder.char_span(passage, *span) == (start, end), mention
    # mentions without a wordpiece, or outside the passage, have no span
    assert builder.piece_span(passage, 7, 7) is None
    assert builder.piece_span(passage, len(text) - 1, len(text) + 5) is None
    with pytest.raises(IndexError):
        builder.char_span(passage, 3, 2)


def test_mention_at_a_passage_boundary_is_whole_in_the_next(builder):
    words = ["the"] * 70
    words[30:34] = ["heart", "failure", "with", "cough"]  # pieces 30-33 cross piece 32
    text = " ".join(words)
    first, second, third = builder.passages([text])
    start = len(" ".join(words[:30])) + 1
    end = start + len("heart failure with cough")
    assert text[start:end] == "heart failure with cough"
    assert builder.piece_span(first, start, end) is None  # cut by the first passage's end
    assert builder.piece_span(second, start, end) == (30 - 24, 33 - 24)
    assert builder.char_span(second, 6, 9) == (start, end)
    assert builder.piece_span(third, start, end) is None  # third starts at piece 38
    # a mention cut by a passage's start
    start = len(" ".join(words[:23])) + 1
    end = start + len("the the")
    assert builder.piece_span(second, start, end) is None
    assert builder.piece_span(first, start, end) == (23, 24)


def test_control_characters_and_emoji_keep_offsets(builder, tokenizer):
    text = "Cough\x00 in\x07 patients\u200b with\tfever 🤒 and pain 😀x."
    (passage,) = builder.passages([text])
    _check_offsets(tokenizer, text, [passage])
    tokens = tokenizer.convert_ids_to_tokens(list(passage.piece_ids))
    assert tokens.count("[UNK]") == 2  # the two emoji
    for mention in ("Cough", "patients", "fever 🤒", "🤒", "pain 😀x"):
        start, end = _find(text, mention)
        span = builder.piece_span(passage, start, end)
        assert span is not None and builder.char_span(passage, *span) == (start, end), mention


def test_wordpieces_without_characters_are_dropped(tokenizer):
    class EmptySpans:
        def __getattr__(self, name):
            return getattr(tokenizer, name)

        def __call__(self, texts, **kwargs):
            batch = tokenizer(texts, **kwargs)
            return {"input_ids": [[7, *row] for row in batch["input_ids"]],
                    "offset_mapping": [[(0, 0), *row] for row in batch["offset_mapping"]]}

    text = "cough and fever"
    (passage,) = PassageBuilder(EmptySpans()).passages([text])
    assert passage.piece_ids == tuple(tokenizer(text, add_special_tokens=False)["input_ids"])


def test_long_text_is_tokenised_in_chunks(tokenizer):
    sentence = "Aspirin-induced cough in patients with heart failure, i.e. fever. "
    copies = 120_000 // len(sentence) + 1
    text = sentence * copies
    assert len(text) >= 120_000
    encoded = tokenizer(sentence, add_special_tokens=False, return_offsets_mapping=True)
    per_sentence = len(encoded["input_ids"])

    seen: list[int] = []

    class Spy:
        def __getattr__(self, name):
            return getattr(tokenizer, name)

        def __call__(self, texts, **kwargs):
            seen.extend(len(t) for t in texts)
            return tokenizer(texts, **kwargs)

    builder = PassageBuilder(Spy(), passage_length=32, passage_stride=24)
    passages = builder.passages(["short doc", text])
    assert max(seen) <= CHUNK_CHARS and len(seen) >= 13
    long_passages = [p for p in passages if p.doc_index == 1]
    pieces = {}
    for p in long_passages:
        for i, s, e in zip(p.piece_ids, p.piece_starts, p.piece_ends, strict=True):
            pieces[s] = (e, i)
    assert len(pieces) == per_sentence * copies
    assert long_passages[-1].end_char == len(text) - 1  # before the final space
    _check_offsets(tokenizer, text, long_passages[::7])
    # each wordpiece is the one of its copy of the sentence, at that copy's offsets
    for j, (start, (end, piece_id)) in enumerate(sorted(pieces.items())):
        copy, k = divmod(j, per_sentence)
        shift = copy * len(sentence)
        assert piece_id == encoded["input_ids"][k]
        assert (start - shift, end - shift) == tuple(encoded["offset_mapping"][k])


def test_chunks_cut_before_whitespace():
    text = ("word " * 5000) + "x" * 25_000 + " tail"
    chunks = list(_chunks(text))
    assert "".join(chunk for _, chunk in chunks) == text
    assert all(len(chunk) <= CHUNK_CHARS for _, chunk in chunks)
    assert [offset for offset, _ in chunks] == [
        sum(len(c) for _, c in chunks[:k]) for k in range(len(chunks))
    ]
    assert chunks[1][1][0] == " "  # the cut in the words falls before a space
    assert list(_chunks("")) == []


# --- inputs ---------------------------------------------------------------------------------


def test_retriever_and_reader_inputs(builder, tokenizer):
    (passage,) = builder.passages(["Aspirin induced cough in patients."])
    cls, sep = tokenizer.cls_token_id, tokenizer.sep_token_id
    assert builder.passage_offset == 1
    assert builder.passage_ids(passage) == [cls, *passage.piece_ids, sep]

    entity = builder.entity_text_ids(["Cough"], ["coughing"])[0]
    assert tokenizer.convert_ids_to_tokens(entity)[:2] == ["cough", "[TITLE]"]
    ids, types = builder.reader_ids(passage, entity)
    n = len(passage.piece_ids)
    offset = builder.passage_offset
    assert ids == [cls, *passage.piece_ids, sep, *entity, sep]
    assert ids[offset : offset + n] == list(passage.piece_ids)
    assert types == [0] * (n + 2) + [1] * (len(entity) + 1)


def test_entity_text_is_truncated_like_entity_ids(builder, tokenizer):
    long = "heart failure " * 20
    title_id = tokenizer.convert_tokens_to_ids("[TITLE]")
    budget = 16 - tokenizer.num_special_tokens_to_add(pair=True) - 1  # 12
    with_desc, without_desc, empty = builder.entity_text_ids([long, long, "cough"],
                                                             [long, "", ""])
    assert len(with_desc) == budget + 1 and with_desc.index(title_id) == budget // 2
    assert len(without_desc) == budget + 1 and without_desc[-1] == title_id
    assert empty == [tokenizer.convert_tokens_to_ids("cough"), title_id]
    assert tokenizer.cls_token_id not in with_desc + without_desc


def test_pad_pairs(builder):
    short, long = builder.passages(["cough", "the " * 40])[:2]
    entity = builder.entity_text_ids(["Fever"], ["pyrexia"])[0]
    pairs = [builder.reader_ids(short, entity), builder.reader_ids(long, entity)]
    ids, mask, types = builder.pad_pairs(pairs)
    width = len(pairs[1][0])
    assert ids.shape == mask.shape == types.shape == (2, width)
    assert ids.dtype == mask.dtype == types.dtype == "int64"
    assert mask.sum(1).tolist() == [len(pairs[0][0]), width]
    assert ids[0, len(pairs[0][0]) :].tolist() == [0] * (width - len(pairs[0][0]))
    assert types[0].tolist() == pairs[0][1] + [0] * (width - len(pairs[0][1]))
    assert types[1].tolist() == pairs[1][1]
    assert [a.shape for a in builder.pad_pairs([])] == [(0, 1)] * 3
