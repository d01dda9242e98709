"""Name variants: when a span of text and a KB name are one name written otherwise.

Dictionary tools for ontologies match a name's words rather than its string (FastHPOCR's
morphological clusters; PhenoTagger's dictionary distantly supervised from the ontology).
``NameKeys`` gives a name, a sequence of words, a *key* under which its variants meet:

* each word is case-folded and stemmed by the Snowball stemmer of the language (plurals and
  inflections: "cysts" / "cyst", "abnormalities" / "abnormality"), in American spelling;
* a stem is replaced by the representative of its class of *equivalent words*, learnt from the
  KB itself: two names of one entity that differ in one word only ("renal cyst" / "kidney
  cyst", "hypoplastic nails" / "nail hypoplasia") make those words equivalent once
  ``min_support`` entities say so, with one or two shared words to vouch for the pair. Rounds
  repeat until nothing new is learnt; a pair joins a word to a class only while one of them
  is in none, classes stay small, and two words of one name are never one;
* function words ("of", "the") are left out, except those the KB needs to tell two entities
  apart: a stop word is kept when, in enough of the names with it, the name without it is
  another entity's name ("back pain" / "pain");
* the key is the sorted multiset of what is left, so word order does not matter ("abnormality
  of the kidney" / "kidney abnormality");
* a name of one content word is kept from false friends: alone, it reads only as its plurals
  (``Stemmer.light``: "sedation" is no *Sedatives*, "short" no member of its class); among
  stop words, it keeps them ("factor nine" is no *Factor*, "all clear" no "clearly").

Nothing here knows an ontology: the classes and the kept stop words come from the names given.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cache

import snowballstemmer

from ..data.spelling import american_spelling

Key = tuple[str, ...]
MIN_SUPPORT = 3
MAX_ROUNDS = 4
MAX_CACHED = 1 << 18
MAX_CLASS = 4
NEEDED_SHARE = 0.04
MAX_PAIR_CONTEXT = 2
INNER_SHARE = 5e-5  # HPO: 5 of its 100k names


# spaCy's language codes -> Snowball's stemmers
SNOWBALL = {"ar": "arabic", "ca": "catalan", "cs": "czech", "da": "danish", "de": "german",
            "el": "greek", "en": "english", "es": "spanish", "eu": "basque", "fi": "finnish",
            "fr": "french", "ga": "irish", "hi": "hindi", "hu": "hungarian", "hy": "armenian",
            "id": "indonesian", "it": "italian", "lt": "lithuanian", "nb": "norwegian",
            "ne": "nepali", "nl": "dutch", "pl": "polish", "pt": "portuguese",
            "ro": "romanian", "ru": "russian", "sr": "serbian", "sv": "swedish",
            "ta": "tamil", "tr": "turkish", "yi": "yiddish"}


class Stemmer:
    """A word's stem: lowercased, in American spelling (English: ``american_spelling``),
    stemmed by the Snowball stemmer of ``language`` (a spaCy language code; a language
    Snowball lacks is only lowercased); cached, and pickled as its language alone (a
    pipeline's processes each build their own)."""

    def __init__(self, language: str = "en") -> None:
        self.language = language
        self._set_up()

    def _set_up(self) -> None:
        name = SNOWBALL.get(self.language)
        self._stem_word = snowballstemmer.stemmer(name).stemWord if name else str
        self._cache: dict[str, str] = {}
        self._light: dict[str, str] = {}

    def __getstate__(self) -> dict:
        return {"language": self.language}

    def __setstate__(self, state: dict) -> None:
        self.language = state["language"]
        self._set_up()

    def light(self, word: str) -> str:
        """A word alone, lowercased, in American spelling and, in English, without a plural
        ending (Snowball's step 1a: "sses" -> "ss", "ies" -> "i", "s" after a vowel-bearing
        stem; not "us", "ss", "is"): a one-word name reads only as its inflections."""
        light = self._light.get(word)
        if light is None:
            light = word.lower()
            if self.language == "en":
                light = american_spelling(light)
                if light.endswith("sses"):
                    light = light[:-2]
                elif light.endswith(("ied", "ies")):
                    light = light[:-3] + ("i" if len(light) > 4 else "ie")
                elif (light.endswith("s") and not light.endswith(("us", "ss", "is"))
                      and any(ch in "aeiouy" for ch in light[:-2])):
                    light = light[:-1]
            if len(self._light) < MAX_CACHED:
                self._light[word] = light
        return light

    def __call__(self, word: str) -> str:
        stem = self._cache.get(word)
        if stem is None:
            lower = word.lower()
            if self.language == "en":
                lower = american_spelling(lower)
            if self.language == "en" and lower.endswith("itis"):  # Snowball: gingiv
                stem = lower[:-2]
            else:
                stem = self._stem_word(lower)
            if len(self._cache) < MAX_CACHED:
                self._cache[word] = stem
        return stem


def has_letter_or_digit(text: str) -> bool:
    """Whether a token is a word of a name (it has a letter or digit; punctuation is not)."""
    return any(ch.isalnum() for ch in text)


@cache
def shared_stemmer(language: str) -> Stemmer:
    """The one ``Stemmer`` of a language in this process, its caches kept between KBs: a KB
    learnt again after an edit (``NameKeys.learn``) stems only its new words."""
    return Stemmer(language)


@dataclass
class NameKeys:
    """Keys of names and spans (see the module): ``stem`` of a lowercased word, ``ignorable``
    words (lowercased) left out, ``canonical``: a stem -> its class's representative."""

    stem: Stemmer
    ignorable: frozenset[str] = frozenset()
    canonical: dict[str, str] = field(default_factory=dict)
    # the ignorable words names have inside them ("of", "the": "abnormality of the kidney"),
    # in ``INNER_SHARE`` of the names at least; others end a span ("papules are cutaneous")
    inner: frozenset[str] = frozenset()

    def is_ignorable(self, word: str) -> bool:
        return word.lower() in self.ignorable

    def key(self, words: Iterable[str]) -> Key:
        """The key of a name's words (punctuation left out; see ``key_of``)."""
        words = [w for w in words if has_letter_or_digit(w)]
        content = [w for w in words if not self.is_ignorable(w)]
        return self.key_of([self.stem(w) for w in content], [self.stem(w) for w in words],
                           self.stem.light(content[0]) if len(content) == 1 else "")

    def key_of(self, content: Sequence[str], every: Sequence[str], light: str = "") -> Key:
        """The key of a name from the stems of its ``content`` words (no ignorable word),
        of ``every`` word, and the ``light`` form of its one content word, if one: two
        content words or more give their class representatives, sorted; one content word
        among stop words keeps them all ("factor nine" is no "factor", "all clear" no
        "clearly"), their stems sorted; one word alone its ``light`` form, plurals only
        ("dyskinesias" is "dyskinesia", "sedation" no "sedatives", and no other word of its
        class reads as it: "short" is no "brachydactyly", though "short fingers" is)."""
        if len(content) >= 2:
            return tuple(sorted(self.canonical.get(s, s) for s in content))
        if len(every) >= 2:
            return tuple(sorted(every))
        return (light,) if light else ()

    @classmethod
    def learn(cls, names: Sequence[Sequence[Sequence[str]]], stop_words: Iterable[str],
              language: str = "en", min_support: int = MIN_SUPPORT) -> NameKeys:
        """The keys of a KB: ``names`` per entity, each name its words (tokens);
        ``stop_words``: the language's function words, the candidates for leaving out;
        ``language``: a spaCy language code (the stemmer's)."""
        stem = shared_stemmer(language)
        stemmed = [[tuple(stem(w) for w in name if has_letter_or_digit(w)) for name in entity]
                   for entity in names]
        ignorable = _ignorable(stemmed, {w.lower() for w in stop_words}, stem)
        canonical = _equivalent_words(stemmed, {stem(w) for w in stop_words},
                                       min_support)
        inside: dict[str, int] = defaultdict(int)
        for entity in names:
            for name in entity:
                for word in {w.lower() for w in name[1:-1]} & ignorable:
                    inside[word] += 1
        least = max(1, math.ceil(INNER_SHARE * sum(map(len, names))))
        inner = frozenset(w for w, n in inside.items() if n >= least)
        return cls(stem, frozenset(ignorable), canonical, inner)


def _ignorable(stemmed: list[list[Key]], stop_words: set[str], stem) -> set[str]:
    """The stop words that tell few names apart: a stop word is kept as a word of the key
    when, in at least ``NEEDED_SHARE`` of the names (two or more) with it, the name without it
    is another entity's name ("first": "hypoplastic first rib" / "short ribs" is no
    abbreviation; "of": 9 of HPO's 9,811 names with it)."""
    by_stem = defaultdict(set)
    for word in stop_words:
        by_stem[stem(word)].add(word)
    owners: dict[Key, set[int]] = defaultdict(set)
    for position, entity in enumerate(stemmed):
        for name in entity:
            owners[tuple(sorted(name))].add(position)
    used: dict[str, int] = defaultdict(int)
    apart: dict[str, int] = defaultdict(int)
    for position, entity in enumerate(stemmed):
        for name in entity:
            if len(name) < 2:
                continue
            for word in set(name) & by_stem.keys():
                used[word] += 1
                rest = list(name)
                rest.remove(word)
                if owners.get(tuple(sorted(rest)), set()) - {position}:
                    apart[word] += 1
    needed = {w for w, n in apart.items() if n >= 2 and n >= NEEDED_SHARE * used[w]}
    return {w for s, words in by_stem.items() if s not in needed for w in words}


def _equivalent_words(stemmed: list[list[Key]], stop_words: set[str],
                      min_support: int) -> dict[str, str]:
    """Classes of equivalent stems (see the module), as stem -> representative (the class's
    first member); only stems in a class of two or more. Pairs are taken by decreasing
    support; a pair joins a word to a class only while one of the two is in no class yet and
    the class is under ``MAX_CLASS`` words, and never two words of one name, so that no chain
    of pairs makes a class of unrelated words ("small" ~ "short" ~ "hypoplastic" ~
    "absent"). Stop words join none."""
    canonical: dict[str, str] = {}
    members: dict[str, list[str]] = {}
    together = {(a, b) for entity in stemmed for name in entity
                for a in name for b in name if a < b}

    def form(word: str) -> str:
        return canonical.get(word, word)

    for _ in range(MAX_ROUNDS):
        support: dict[tuple[str, str], int] = defaultdict(int)
        for entity in stemmed:
            keys = {tuple(sorted(form(w) for w in name if w not in stop_words))
                    for name in entity}
            pairs = {pair for one in keys for other in keys if one < other
                     for pair in [_one_word_apart(one, other)] if pair is not None}
            for pair in pairs:
                support[pair] += 1
        merged = 0
        for (a, b), n in sorted(support.items(), key=lambda item: (-item[1], item[0])):
            if n < min_support:
                break
            if (a, b) in together:  # words of one name are not one word
                continue
            if (a in members) == (b in members):  # both alone, or both in classes
                if a in members:
                    continue
                members[a] = [a]
                canonical[a] = a
            head, word = (a, b) if a in members else (b, a)
            if len(members[head]) >= MAX_CLASS:
                continue
            members[head].append(word)
            canonical[word] = head
            merged += 1
        if not merged:
            break
    return {w: r for w, r in canonical.items() if w != r}


def _one_word_apart(one: Key, other: Key) -> tuple[str, str] | None:
    """The two words that alone tell two keys (sorted multisets) apart, in order, if any:
    keys of one word share no word to vouch for the pair ("atherosclerosis" / "disease"),
    keys of more than ``MAX_PAIR_CONTEXT`` shared words tell little of the two ("... consisting
    of foam cells" / "renal ... foam cells")."""
    if len(one) != len(other) or not 2 <= len(one) <= MAX_PAIR_CONTEXT + 1 or one == other:
        return None
    left, right = list(one), list(other)
    for word in one:
        if word in right:
            right.remove(word)
            left.remove(word)
    if len(left) == 1 and len(right) == 1:
        return tuple(sorted((left[0], right[0])))
    return None
