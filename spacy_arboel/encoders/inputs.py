"""The encoders' input formats, as wordpiece id sequences.

``blink`` (BLINK §3.1, arboEL eq. 4): mention ``[CLS] left [START] mention [END] right [SEP]``
with the window centred on the mention; entity ``[CLS] name [TITLE] description [SEP]``.
``names``: the mention's own text ``[CLS] mention [SEP]`` against one row per entity name or
alias ``[CLS] name [SEP]``, the input a sentence encoder or a self-aligned one (SapBERT §2)
was trained on: what an encoder never trained on a corpus links best with.
Documents are tokenised once with character offsets, so every mention of a document reuses
the same wordpieces instead of re-tokenising its context.
"""

from __future__ import annotations

import bisect
import unicodedata
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from ..data.abbreviations import expand_short_forms, find_abbreviations
from ..errors import Errors, Warnings
from ..kb.entity import Entity, name_key
from ..settings import at_least, check_value, choices
from .loading import MENTION_END, MENTION_START, TITLE
from .normalisers import Reading

ALIAS_SEPARATOR = " ; "
INPUT_FORMATS = ("blink", "names")


@dataclass(frozen=True)
class MentionSpan:
    """A mention by character offsets into its document's text."""

    doc_index: int
    start_char: int
    end_char: int


def special_ids(tokenizer) -> tuple[list[int], list[int]]:
    """The model's own opening and closing special tokens ([CLS]/[SEP], <s>/</s>, ...)."""
    with_special = tokenizer.build_inputs_with_special_tokens([-1])
    split = with_special.index(-1)
    return with_special[:split], with_special[split + 1 :]


def has_content(text: str) -> bool:
    """Whether a mention has anything to encode: a character that is neither whitespace nor
    a control, format or unassigned one (a ruler can match spans of spaces or NULs)."""
    return any(not ch.isspace() and unicodedata.category(ch)[0] != "C" for ch in text)


def clip_text(text: str, limit: int) -> str:
    """The first ``limit`` characters of ``text``, cut back to a whitespace so that no word
    is split: its wordpieces are then a prefix of those of the whole text."""
    if len(text) <= limit:
        return text
    cut = text[:limit]
    space = max(cut.rfind(" "), cut.rfind("\n"), cut.rfind("\t"))
    return cut[:space] if space > 0 else cut


def wordpiece_ids(tokenizer, texts: Sequence[str]) -> list[list[int]]:
    """The wordpiece ids of each text, without special tokens. A fast tokenizer's Rust
    backend is called directly, its truncation and padding turned off first as
    transformers' own call turns them off (the same ids; building transformers'
    ``BatchEncoding`` took 60% of tokenising a 244k-name KB)."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        return tokenizer(list(texts), add_special_tokens=False, verbose=False)["input_ids"]
    if backend.truncation is not None:
        backend.no_truncation()
    if backend.padding is not None:
        backend.no_padding()
    return [e.ids for e in backend.encode_batch(list(texts), add_special_tokens=False)]


def leading_ids(tokenizer, texts: Sequence[str], n: int) -> list[list[int]]:
    """The first ``n`` wordpiece ids of each text, without tokenising more of a long text
    than that needs (an 11 MB description costs no more than a short one)."""
    result: list[list[int]] = [[] for _ in texts]
    todo, limit = list(range(len(texts))), max(64, 16 * n)
    while todo:
        clipped = [clip_text(texts[i], limit) for i in todo]
        retry = []
        for i, text, ids in zip(todo, clipped, wordpiece_ids(tokenizer, clipped), strict=True):
            if len(ids) >= n or len(text) == len(texts[i]):
                result[i] = ids[:n]
            else:  # mostly spaces or very long words: read further
                retry.append(i)
        todo, limit = retry, limit * 4
    return result


def mention_window(
    left: Sequence[int], mention: Sequence[int], right: Sequence[int], budget: int
) -> tuple[list[int], list[int], list[int]]:
    """Centre the mention in ``budget`` wordpieces; context a side lacks goes to the other."""
    mention = list(mention[:budget])
    rest = budget - len(mention)
    left_quota = rest // 2
    right_quota = rest - left_quota
    if len(left) < left_quota:
        right_quota += left_quota - len(left)
        left_quota = len(left)
    elif len(right) < right_quota:
        left_quota += right_quota - len(right)
        right_quota = len(right)
    left_part = list(left[len(left) - left_quota :]) if left_quota > 0 else []
    return left_part, mention, list(right[:right_quota])


def truncate_entity(title: list[int], description: list[int],
                    budget: int) -> tuple[list[int], list[int]]:
    """Fit ``title`` and ``description`` wordpieces into ``budget``; the title gets at most
    half of it when there is a description."""
    title = title[: max(1, budget // 2)] if description else title[:budget]
    return title, description[: budget - len(title)]


def pad_ids(sequences: Sequence[Sequence[int]], pad_id: int) -> tuple[np.ndarray, np.ndarray]:
    """Right-pad to the longest sequence: (input_ids, attention_mask) as int64 arrays."""
    width = max((len(s) for s in sequences), default=1)
    ids = np.full((len(sequences), width), pad_id, dtype="int64")
    mask = np.zeros((len(sequences), width), dtype="int64")
    for row, seq in enumerate(sequences):
        ids[row, : len(seq)] = seq
        mask[row, : len(seq)] = 1
    return ids, mask


def pad_pairs(pairs: Sequence[tuple[Sequence[int], Sequence[int]]],
              pad_id: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Right-pad ``(ids, token_type_ids)`` pairs: (input_ids, attention_mask,
    token_type_ids) as int64 arrays."""
    ids, mask = pad_ids([seq for seq, _ in pairs], pad_id)
    types = np.zeros_like(ids)
    for row, (_, seq_types) in enumerate(pairs):
        types[row, : len(seq_types)] = seq_types
    return ids, mask, types


class InputBuilder:
    """Turns documents' mentions and KB entities into padded id arrays for the encoders."""

    def __init__(
        self,
        tokenizer,
        mention_max_length: int = 32,
        entity_max_length: int = 32,
        expand_abbreviations: bool = False,
        inputs: str = "blink",
        normalisers: Sequence[str] = (),
    ):
        check_value("inputs", inputs, choices(INPUT_FORMATS))
        check_value("mention_max_length", mention_max_length, at_least(8))
        check_value("entity_max_length", entity_max_length, at_least(4))
        self.tokenizer = tokenizer
        self.mention_max_length = mention_max_length
        self.entity_max_length = entity_max_length
        self.start_id = tokenizer.convert_tokens_to_ids(MENTION_START)
        self.end_id = tokenizer.convert_tokens_to_ids(MENTION_END)
        self.title_id = tokenizer.convert_tokens_to_ids(TITLE)
        self.open_ids, self.close_ids = special_ids(tokenizer)
        self.pad_id = tokenizer.pad_token_id or 0
        self.expand_abbreviations = expand_abbreviations
        self._normalise = Reading(normalisers)
        self.inputs = inputs

    @property
    def marker_ids(self) -> tuple[int, int]:
        """The ids of [START] and [END] (for ``mention`` pooling)."""
        return self.start_id, self.end_id

    # --- mentions --------------------------------------------------------------------------

    def mention_ids(self, texts: Sequence[str], spans: Iterable[MentionSpan]) -> list[list[int]]:
        """Wordpiece ids of each mention in its context window (``names`` inputs: of the
        mention alone).

        With ``expand_abbreviations``, a mention that is an abbreviation defined in its
        document ("cholecystokinin octapeptide (CCK-8)") is encoded as its long form, in
        its own context. Then each of ``normalisers`` reads the mention (or its long form)
        in turn (``normalisers``: "oestrogen" as "estrogen", "Pb" as "lead").
        """
        spans = list(spans)
        needed = sorted({s.doc_index for s in spans})
        encoded = {}
        long_forms: dict[int, dict[str, str]] = {}
        if needed:
            batch = self.tokenizer(
                [texts[i] for i in needed], add_special_tokens=False,
                return_offsets_mapping=True, verbose=False,
            )
            for row, doc_index in enumerate(needed):
                ids = batch["input_ids"][row]
                offsets = batch["offset_mapping"][row]
                encoded[doc_index] = (ids, [o[0] for o in offsets], [o[1] for o in offsets])
                if self.expand_abbreviations:
                    long_forms[doc_index] = find_abbreviations(texts[doc_index])
        expanded: dict[str, list[int]] = {}
        names = self.inputs == "names"
        budget = (self.mention_max_length - len(self.open_ids) - len(self.close_ids)
                  - (0 if names else 2))
        result = []
        long_mentions: list[tuple[MentionSpan, int]] = []
        for span in spans:
            ids, starts, ends = encoded[span.doc_index]
            # wordpieces overlapping [start_char, end_char)
            first = bisect.bisect_right(ends, span.start_char)
            last = bisect.bisect_left(starts, span.end_char)
            mention = ids[first:last]
            long_form = self.read_as(texts[span.doc_index][span.start_char : span.end_char],
                                     long_forms.get(span.doc_index, {}))
            if long_form is not None:
                if long_form not in expanded:
                    expanded[long_form] = self.tokenizer(long_form, add_special_tokens=False)[
                        "input_ids"
                    ]
                mention = expanded[long_form]
            if not mention:
                piece = texts[span.doc_index][span.start_char : span.end_char]
                mention = self.tokenizer(piece, add_special_tokens=False)["input_ids"]
            if len(mention) > budget:
                long_mentions.append((span, len(mention)))
            if names:
                result.append(self.open_ids + list(mention[:budget]) + self.close_ids)
                continue
            left, mention, right = mention_window(ids[:first], mention, ids[last:], budget)
            result.append(
                self.open_ids + left + [self.start_id] + mention + [self.end_id] + right
                + self.close_ids
            )
        if long_mentions:
            span, n_pieces = long_mentions[0]
            warnings.warn(
                Warnings.W002.format(
                    n=len(long_mentions), n_pieces=n_pieces,
                    text=texts[span.doc_index][span.start_char : span.end_char][:80],
                    max_length=self.mention_max_length,
                ),
                stacklevel=2,
            )
        return result

    def read_as(self, text: str, long_forms: dict[str, str]) -> str | None:
        """What the mention ``text`` is encoded as when not as written: its long form in
        ``long_forms`` (its document's abbreviations, under ``expand_abbreviations``; a
        defined short form among the mention's words is expanded in place), read by the
        ``normalisers``; None when it is read as written."""
        form = None
        if self.expand_abbreviations:
            form = long_forms.get(text) or expand_short_forms(text, long_forms)
        read = form or text
        normalised = self._normalise(read)
        return normalised if normalised != read else form

    # --- entities --------------------------------------------------------------------------

    @staticmethod
    def entity_description(entity: Entity) -> str:
        """The text after [TITLE]: the description, else the aliases (BLINK §3.1, arboEL)."""
        parts = [entity.description] if entity.description else []
        parts.extend(entity.aliases)
        return ALIAS_SEPARATOR.join(parts)

    def entity_ids(self, titles: Sequence[str], descriptions: Sequence[str]) -> list[list[int]]:
        """``[CLS] title [TITLE] description [SEP]`` truncated to ``entity_max_length``
        (``names`` inputs: ``[CLS] title [SEP]``)."""
        budget = self.entity_max_length - len(self.open_ids) - len(self.close_ids) - 1
        title_ids = leading_ids(self.tokenizer, titles, budget)
        if self.inputs == "names":
            return [self.open_ids + title + self.close_ids for title in title_ids]
        desc_ids = leading_ids(self.tokenizer, descriptions, budget)
        result = []
        for title, desc in zip(title_ids, desc_ids, strict=True):
            title, desc = truncate_entity(title, desc, budget)
            result.append(self.open_ids + title + [self.title_id] + desc + self.close_ids)
        return result

    # --- padding ---------------------------------------------------------------------------

    def sorted_batches(
        self, sequences: Sequence[Sequence[int]], size: int
    ) -> tuple[np.ndarray, list[tuple[np.ndarray, np.ndarray]]]:
        """Padded batches of ``size`` in length order, and that order (to restore the input's)."""
        order = np.argsort([len(s) for s in sequences], kind="stable")
        batches = [self.pad([sequences[i] for i in order[start : start + size]])
                   for start in range(0, len(order), size)]
        return order, batches

    def pad(self, sequences: Sequence[Sequence[int]]) -> tuple[np.ndarray, np.ndarray]:
        """Right-pad to the longest sequence: (input_ids, attention_mask) as int64 arrays."""
        return pad_ids(sequences, self.pad_id)


def shadowed_aliases(entities: Sequence[Entity]) -> set[str]:
    """The ``name_key`` of every entity's preferred name: an alias of another entity with
    that text is ambiguous, and the entity it names first wins it (``entity_rows``)."""
    return {name_key(entity.name) for entity in entities}


# the rows of a KB: each row's text, its description, and the position of its entity
RowLayout = tuple[list[str], list[str], np.ndarray]


def entity_rows(
    entities: Sequence[Entity], granularity: str = "entity", drop_shadowed: bool = False
) -> RowLayout:
    """The texts the entity encoder embeds, and the entity position behind each row.

    ``entity`` (BLINK): one row per entity, ``name [TITLE] description-or-aliases``.
    ``alias`` (our extension, see BENCHMARKS.md): one row per name and per alias,
    ``alias [TITLE] name ; description``; an entity scores as its best row.
    ``drop_shadowed``: leave out an alias row whose text is another entity's preferred name
    (MeSH's synonym lists give "seizures" to "Kindling, Neurologic" as well as to
    "Seizures": with name-only rows the two would tie, and the preferred name wins).
    """
    shadowed = shadowed_aliases(entities) if drop_shadowed else set()
    titles: list[str] = []
    descriptions: list[str] = []
    owners: list[int] = []
    for position, entity in enumerate(entities):
        if granularity == "entity":
            titles.append(entity.name)
            descriptions.append(InputBuilder.entity_description(entity))
            owners.append(position)
        elif granularity == "alias":
            base = ALIAS_SEPARATOR.join(p for p in (entity.description,) if p)
            titles.append(entity.name)
            descriptions.append(base)
            owners.append(position)
            own = name_key(entity.name)
            for alias in entity.aliases:
                if shadowed and name_key(alias) in shadowed and name_key(alias) != own:
                    continue
                titles.append(alias)
                descriptions.append(ALIAS_SEPARATOR.join(p for p in (entity.name, base) if p))
                owners.append(position)
        else:
            raise ValueError(Errors.E007.format(what="entity granularity", value=granularity,
                                                options="entity, alias"))
    return titles, descriptions, np.asarray(owners, dtype="int64")
