"""The words and affixes that put a name on one side of a scale, by language.

"Tall stature" / "short stature", "hypertelorism" / "narrow-set eyes", "tachycardia" / "slow
heart rate", "overweight" / "underweight": a term and its opposite share every word but the
one that says which side, so a mention encoder rates them close. Each marker is given a
*scale* and a *sign*; two markers of opposite signs on one scale say opposite things
(``linking.opposites``). The scales: size (large / small, macro- / micro-), length (long,
tall / short), width (wide, broad / narrow), thickness, rate (fast, tachy- / slow, brady-),
presence (present / absent), timing (late, delayed / early, premature) and direction (up /
down); and ``GENERIC``, the words of degree (increased / decreased, high / low, hyper- /
hypo-, over- / under-), which oppose the markers of every scale but ``UNGRADED``'s ("small
head" / *Macrocephaly*, "absent reflexes" / *Hyperreflexia*, "narrow-set eyes" /
*Hypertelorism*), while "broad" and "short" say nothing of each other.

Prefixes count when the rest of the word is long enough (``MIN_REST``) that the word is more
than the prefix ("hypoxia", "overgrowth"; not "upper", "overt").
"""

from __future__ import annotations

Marker = tuple[str, int]  # (scale, sign)
GENERIC = "degree"
UNGRADED = frozenset({"timing", "direction"})


def _scale(scale: str, more: tuple[str, ...], less: tuple[str, ...]) -> dict[str, Marker]:
    return {**dict.fromkeys(more, (scale, 1)), **dict.fromkeys(less, (scale, -1))}


# whole words (lowercased; a hyphenated word is read as its parts: "narrow-set")
WORDS: dict[str, dict[str, Marker]] = {"en": {
    **_scale(GENERIC, ("increased", "increase", "increasing", "high", "elevated", "elevation",
                       "raised", "excess", "excessive", "more", "amplified",
                       "amplification", "hyper"),
             ("decreased", "decrease", "decreasing", "low", "reduced", "reduction",
              "diminished", "diminishment", "deficiency", "deficient", "less", "fewer",
              "poor", "poorly", "scant", "scanty", "hypo")),
    **_scale("size", ("large", "big", "giant", "enlarged", "enlargement", "dilated",
                      "dilatation", "dilation"), ("small",)),
    **_scale("length", ("long", "tall", "prolonged", "elongated", "elongation",
                        "lengthened"), ("short", "shortened")),
    **_scale("width", ("wide", "widened", "widening", "widely", "broad"),
             ("narrow", "narrowed", "narrowing", "narrowness")),
    **_scale("thickness", ("thick", "thickened"), ("thin", "thinned")),
    **_scale("rate", ("fast", "rapid", "rapidly", "accelerated"), ("slow", "slowly",
                                                                  "slowed")),
    **_scale("presence", ("present", "presence"), ("absent", "absence", "missing", "lacking")),
    **_scale("timing", ("late", "delayed", "delay"), ("early", "premature", "precocious")),
    **_scale("direction", ("upward", "upwards"), ("downward", "downwards")),
}}

# prefixes of a word (lowercased) -> marker, and the letters a word needs after the prefix
PREFIXES: dict[str, dict[str, Marker]] = {"en": {
    **_scale(GENERIC, ("hyper", "over", "poly"), ("hypo", "under", "oligo")),
    **_scale("size", ("macro",), ("micro",)),
    **_scale("length", (), ("brachy",)),
    **_scale("rate", ("tachy",), ("brady",)),
    **_scale("direction", ("up",), ("down",)),
}}
MIN_REST: dict[str, int] = {"over": 4, "under": 4, "up": 5, "down": 5, "poly": 4}

# a marker word followed by one of these words names a thing, not a side ("long bone",
# "low-density lipoprotein", "high-molecular-weight kininogen")
NAMING: dict[str, dict[str, frozenset[str]]] = {"en": {
    "long": frozenset({"bone", "bones", "term"}),
    "low": frozenset({"density", "molecular"}),
    "high": frozenset({"density", "molecular"}),
    "short": frozenset({"term"}),
}}
DEFAULT_MIN_REST = 3


def one_scale(first: str, second: str) -> bool:
    """Whether markers of the scales ``first`` and ``second`` speak of one thing: one scale,
    or a word of degree beside a graded scale."""
    return first == second or (GENERIC in (first, second)
                               and not UNGRADED & {first, second})
