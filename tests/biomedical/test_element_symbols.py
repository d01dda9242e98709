import pytest

from spacy_arboel.biomedical.element_symbols import element_name, element_names


@pytest.mark.parametrize("text, name", [
    ("Pb", "lead"), ("Hg", "mercury"), ("Na", "sodium"),
    ("Na+", "sodium"), ("K+", "potassium"), ("K(+)", "potassium"), ("Fe3+", "iron"),
    ("Ca2+", "calcium"), ("Ca(2+)", "calcium"),
    # a tokenizer that keeps "(2+)" to its token cuts the span there
    ("Ca(2", "calcium"), ("K(+", "potassium"),
    # a halogen's anion
    ("Cl-", "chloride"), ("I-", "iodide"), ("Cl", "chlorine"),
    ("Al", "aluminum"),
])
def test_symbols_with_and_without_charges(text, name):
    assert element_name(text) == name


@pytest.mark.parametrize("text", [
    "NO", "CO", "MD",  # codes and abbreviations: the case decides
    "P", "N", "H", "K",  # a one-letter symbol without a charge
    "Rb1", "Rg1", "Ca2", "O2",  # digits that are no charge
    "Rg", "No", "Es", "Tc",  # heavy and unstable elements
    "Pbx", "pb", "", "Ca(2+)x",
])
def test_what_is_no_element(text):
    assert element_name(text) is None


def test_the_table_holds_the_stable_elements():
    names = element_names()
    assert len(names) == 81 and names["Bi"] == "bismuth" and "Po" not in names
