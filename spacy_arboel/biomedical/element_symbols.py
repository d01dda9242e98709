"""A chemical element's symbol, alone or with its charge, read as the element's name.

"Pb", "Ca(2+)", "Na+", "K(+)", "Cl-": MeSH and most KBs name the element ("Lead",
"Calcium", "Chlorides") but not its symbol, and an uncased encoder cannot tell "Co" (cobalt)
from "CO" (carbon monoxide) or "No" from "NO", so the symbol is matched here, with its case,
before the encoder reads the mention. Symbols and names come from the ``periodictable``
package (public domain).

What is read as an element, so that codes and a document's own one-letter abbreviations are
not:

- stable elements only (atomic number at most 83, not Tc or Pm): the heavier symbols ("Rg",
  "No", "Md", "Es") are codes and words far more often than elements in biomedical text;
- a one-letter symbol only with a charge ("K+", "I-", "H(+)"): "P", "N", "H" alone are
  mostly abbreviations their document defines ("paracetamol (P)");
- digits only as a charge's ("Ca2+", "Ca(2+)", and "Ca(2" where a tokenizer cut the span):
  "Rb1" and "Rg1" (ginsenosides) are left alone;
- a halogen with a negative charge is its anion ("Cl-": chloride).

Registered as the mention normaliser ``element_symbols`` (``ELEMENT_SYMBOLS``; it needs
``periodictable``, installed with the ``mesh`` extra).
"""

from __future__ import annotations

import re
from functools import cache

from ..encoders.normalisers import MentionNormaliser

# the last stable element (bismuth); technetium and promethium have no stable isotope
HEAVIEST_STABLE = 83
UNSTABLE = frozenset({"Tc", "Pm"})
HALOGENS = frozenset({"F", "Cl", "Br", "I"})
_SYMBOL = re.compile(r"(?P<symbol>[A-Z][a-z]?)(?P<charge>\d*[+-]+|\(\d*[+-]*\)?|)")


@cache
def element_names() -> dict[str, str]:
    """Symbol to name ("Pb": "lead") of the stable elements (the American names: "aluminum",
    "cesium", "sulfur", as MeSH spells them)."""
    import periodictable

    return {element.symbol: element.name for element in periodictable.elements
            if 0 < element.number <= HEAVIEST_STABLE and element.symbol not in UNSTABLE}


def element_name(text: str) -> str | None:
    """The element ``text`` names by its symbol ("Ca(2+)": "calcium", "Cl-": "chloride"),
    or None when it is no element's symbol by the rules above."""
    match = _SYMBOL.fullmatch(text)
    if match is None:
        return None
    symbol, charge = match.group("symbol"), match.group("charge")
    name = element_names().get(symbol)
    if name is None or (len(symbol) == 1 and not re.search(r"[+-]", charge)):
        return None
    if symbol in HALOGENS and "-" in charge:
        return name[: -len("ine")] + "ide"
    return name


def read_element_symbol(text: str) -> str:
    """``text`` read as its element's name where it is an element's symbol, else as it is."""
    return element_name(text) or text


ELEMENT_SYMBOLS = MentionNormaliser(read_element_symbol, requires=("periodictable",),
                                    extra="mesh")
