"""Documents cut into overlapping passages of wordpieces, for a retriever-reader linker.

BEER² §3.4 (after EntQA) splits each document into passages of T_t = 32 wordpieces; the
retriever encodes ``[CLS] passage [SEP]`` and the reader reads ``[CLS] passage [SEP] entity
[SEP]``. We let passages overlap (a stride below the length), so a mention cut by one
passage's boundary is whole in the next. Offsets are kept for every wordpiece, so spans found
in a passage map back to characters of the document.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import Errors
from .inputs import leading_ids, pad_pairs, special_ids, truncate_entity
from .loading import TITLE

CHUNK_CHARS = 10_000  # the tokenizer never sees a longer string
CHUNKS_PER_CALL = 64


@dataclass(frozen=True)
class Passage:
    """A window of a document's wordpieces."""

    doc_index: int
    piece_ids: tuple[int, ...]
    piece_starts: tuple[int, ...]
    piece_ends: tuple[int, ...]

    @property
    def start_char(self) -> int:
        return self.piece_starts[0]

    @property
    def end_char(self) -> int:
        return self.piece_ends[-1]


def _check_window(length: int, stride: int) -> None:
    if not 1 <= stride <= length:
        raise ValueError(Errors.E011.format(
            name="passage_stride", condition=f"between 1 and passage_length ({length})",
            value=stride,
        ))


def cut_passages(
    doc_index: int,
    ids: Sequence[int],
    starts: Sequence[int],
    ends: Sequence[int],
    length: int = 32,
    stride: int = 24,
) -> list[Passage]:
    """Windows of ``length`` wordpieces starting every ``stride`` pieces.

    The last window ends at the last piece and is full length when the document is long
    enough, so it may start before a multiple of ``stride``; it always reaches past the
    previous window. A document without wordpieces gives no passages.
    """
    _check_window(length, stride)
    if not len(ids) == len(starts) == len(ends):
        raise ValueError(Errors.E107.format(n_ids=len(ids), n_starts=len(starts),
                                            n_ends=len(ends)))
    n = len(ids)
    if n == 0:
        return []
    offsets = list(range(0, n - length, stride)) + [max(0, n - length)]
    return [
        Passage(doc_index, tuple(ids[s : s + length]), tuple(starts[s : s + length]),
                tuple(ends[s : s + length]))
        for s in offsets
    ]


def _chunks(text: str, size: int = CHUNK_CHARS) -> Iterator[tuple[int, str]]:
    """(offset, piece) of ``text`` in pieces of at most ``size`` characters, cut before a
    whitespace character where there is one (a word is only split if it is longer)."""
    start, n = 0, len(text)
    while start < n:
        end = min(start + size, n)
        if end < n:
            cut = end
            while cut > start and not text[cut].isspace():
                cut -= 1
            end = cut if cut > start else end
        yield start, text[start:end]
        start = end


class PassageBuilder:
    """Passages of documents and the id sequences of the retriever and the reader."""

    def __init__(
        self,
        tokenizer,
        passage_length: int = 32,
        passage_stride: int = 24,
        entity_max_length: int = 32,
    ):
        if passage_length < 4:
            raise ValueError(Errors.E011.format(
                name="passage_length", condition=">= 4", value=passage_length
            ))
        _check_window(passage_length, passage_stride)
        pair_special = tokenizer.num_special_tokens_to_add(pair=True)
        # room for at least one title and one description wordpiece besides [TITLE]
        if entity_max_length < pair_special + 3:
            raise ValueError(Errors.E011.format(
                name="entity_max_length", condition=f">= {pair_special + 3}",
                value=entity_max_length,
            ))
        self.tokenizer = tokenizer
        self.passage_length = passage_length
        self.passage_stride = passage_stride
        self.entity_max_length = entity_max_length
        self.open_ids, self.close_ids = special_ids(tokenizer)
        self.title_id = tokenizer.convert_tokens_to_ids(TITLE)
        self.pad_id = tokenizer.pad_token_id or 0
        self._entity_budget = entity_max_length - pair_special - 1

    # --- passages --------------------------------------------------------------------------

    def passages(self, texts: Sequence[str]) -> list[Passage]:
        """Tokenise each text once, with character offsets, and cut it into passages.

        Long texts are tokenised in chunks of at most ``CHUNK_CHARS`` characters; wordpieces
        with an empty character span are dropped. Empty or blank texts give no passages.
        """
        pieces: list[tuple[list[int], list[int], list[int]]] = [([], [], []) for _ in texts]
        chunks = [(i, shift, chunk) for i, text in enumerate(texts)
                  for shift, chunk in _chunks(text) if not chunk.isspace()]
        for at in range(0, len(chunks), CHUNKS_PER_CALL):
            group = chunks[at : at + CHUNKS_PER_CALL]
            batch = self.tokenizer(
                [chunk for _, _, chunk in group], add_special_tokens=False,
                return_offsets_mapping=True, verbose=False,
            )
            for (i, shift, _), row_ids, row_offsets in zip(
                group, batch["input_ids"], batch["offset_mapping"], strict=True
            ):
                ids, starts, ends = pieces[i]
                for piece_id, (start, end) in zip(row_ids, row_offsets, strict=True):
                    if end > start:
                        ids.append(piece_id)
                        starts.append(start + shift)
                        ends.append(end + shift)
        result = []
        for i, (ids, starts, ends) in enumerate(pieces):
            result.extend(cut_passages(i, ids, starts, ends, self.passage_length,
                                       self.passage_stride))
        return result

    def passage_ids(self, passage: Passage) -> list[int]:
        """``[CLS] passage [SEP]``: the retriever's input."""
        return self.open_ids + list(passage.piece_ids) + self.close_ids

    @property
    def passage_offset(self) -> int:
        """Position of a passage's first wordpiece in ``passage_ids`` and ``reader_ids``."""
        return len(self.open_ids)

    # --- entities and the reader -----------------------------------------------------------

    def entity_text_ids(
        self, titles: Sequence[str], descriptions: Sequence[str]
    ) -> list[list[int]]:
        """``title [TITLE] description`` without special tokens, truncated so that with the
        pair's special tokens it fits ``entity_max_length``; the title gets at most half
        when there is a description (as ``InputBuilder.entity_ids``)."""
        budget = self._entity_budget
        title_ids = leading_ids(self.tokenizer, titles, budget)
        desc_ids = leading_ids(self.tokenizer, descriptions, budget)
        result = []
        for title, desc in zip(title_ids, desc_ids, strict=True):
            title, desc = truncate_entity(title, desc, budget)
            result.append(title + [self.title_id] + desc)
        return result

    def reader_ids(
        self, passage: Passage, entity_text: Sequence[int]
    ) -> tuple[list[int], list[int]]:
        """``[CLS] passage [SEP] entity [SEP]`` and its token type ids."""
        first, second = list(passage.piece_ids), list(entity_text)
        return (
            self.tokenizer.build_inputs_with_special_tokens(first, second),
            self.tokenizer.create_token_type_ids_from_sequences(first, second),
        )

    def pad_pairs(
        self, pairs: Sequence[tuple[Sequence[int], Sequence[int]]]
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(input_ids, attention_mask, token_type_ids) as int64 arrays, right-padded."""
        return pad_pairs(pairs, self.pad_id)

    # --- spans -----------------------------------------------------------------------------

    @staticmethod
    def piece_span(passage: Passage, start_char: int, end_char: int) -> tuple[int, int] | None:
        """(first, last) wordpieces of the passage covering ``[start_char, end_char)``.

        None when the mention has no wordpiece in the passage or reaches past its first or
        last wordpiece (the passage cannot tell whether the document has a wordpiece there,
        so a mention running past it is taken to be cut).
        """
        if start_char < passage.start_char or end_char > passage.end_char:
            return None
        first = bisect.bisect_right(passage.piece_ends, start_char)
        last = bisect.bisect_left(passage.piece_starts, end_char) - 1
        if first > last:
            return None
        return first, last

    @staticmethod
    def char_span(passage: Passage, first: int, last: int) -> tuple[int, int]:
        """Character offsets of wordpieces ``first`` to ``last`` (inclusive)."""
        if not 0 <= first <= last < len(passage.piece_ids):
            raise IndexError(Errors.E108.format(first=first, last=last,
                                                n_pieces=len(passage.piece_ids)))
        return passage.piece_starts[first], passage.piece_ends[last]
