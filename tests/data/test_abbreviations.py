"""Schwartz-Hearst abbreviation definitions and their use in mention inputs."""

import pytest

from spacy_arboel.data.abbreviations import (
    best_long_form,
    find_abbreviations,
    first_letter_long_form,
    initials_long_form,
    is_short_form,
)
from spacy_arboel.encoders import InputBuilder, MentionSpan, load_tokenizer


def test_long_form_then_short_form_in_parentheses():
    text = ("Patients given 5-fluorouracil (5-FU) and vancomycin (VCM) had restless legs "
            "syndrome (RLS). The RLS was severe.")
    assert find_abbreviations(text) == {
        "5-FU": "5-fluorouracil", "VCM": "vancomycin", "RLS": "restless legs syndrome",
    }


def test_short_form_then_long_form_in_parentheses():
    assert find_abbreviations("We gave VCM (vancomycin given daily) to rats.") == {
        "VCM": "vancomycin given daily"}


def test_text_after_a_separator_and_other_sentences_are_ignored():
    text = "Nitric oxide synthase (NOS; EC 1.14.13.39) was high. Oxide (NO) was low."
    assert find_abbreviations(text) == {"NOS": "Nitric oxide synthase"}


@pytest.mark.parametrize("text", [
    "cholecystokinin octapeptide (CCK-8)",  # the 8 is nowhere in the long form
    "the dose (n = 5) was given",  # not a short form, no long form inside either
    "aspirin (A)",  # one character
    "aspirin (12)",  # no letter
    "a (AB) b",  # long form no longer than the short form
])
def test_non_definitions_are_rejected(text):
    assert find_abbreviations(text) == {}


def test_initials_in_another_order_define_a_short_form():
    """NCBI-disease writes "Myotonic dystrophy (DM)" (dystrophia myotonica): Schwartz &
    Hearst's order-keeping match finds no long form, the initials rule does."""
    assert best_long_form("DM", "Myotonic dystrophy") is None
    text = "Myotonic dystrophy (DM) is dominant. DM patients and diabetes mellitus (DM)."
    assert find_abbreviations(text) == {"DM": "Myotonic dystrophy"}
    assert initials_long_form("DM", "in dystrophia myotonica") == "dystrophia myotonica"


@pytest.mark.parametrize("short, candidate", [
    ("TD", "we studied the disease"),  # a function word among the words
    ("DMX", "myotonic dystrophy"),  # fewer words than letters
    ("Dm", "myotonic dystrophy"),  # not all capitals
    ("DA", "myotonic dystrophy"),  # other letters
    ("ABCDE", "e d c b a"),  # longer than 4 letters
])
def test_the_initials_rule_defines_nothing_else(short, candidate):
    assert initials_long_form(short, candidate) is None


def test_a_code_whose_letters_the_name_lacks_is_defined_by_the_word_before_it():
    """BC5CDR writes "cyclophosphamide (CTX)": no T or X in the name, so neither Schwartz &
    Hearst's match nor the initials rule defines it; the first-letter rule takes the one
    word before the parentheses, and only in that order."""
    assert best_long_form("CTX", "with cyclophosphamide") is None
    text = ("Rats given cyclophosphamide (CTX) and acetaminophen (APAP) were studied. CTX "
            "was toxic; therapy (CDDP) and CTX (cyclophosphamide given daily) were not.")
    assert find_abbreviations(text) == {"CTX": "cyclophosphamide", "APAP": "acetaminophen"}
    assert first_letter_long_form("CTX", "oxidized cyclophosphamide") == "cyclophosphamide"


@pytest.mark.parametrize("short, candidate", [
    ("CTX", "the cyclophosphamide therapy"),  # the word before is not the name
    ("Ctx", "cyclophosphamide"),  # one capital
    ("C TX", "cyclophosphamide"),  # a space
    ("2CT", "cyclophosphamide"),  # no letter first
    ("AT", "given at"),  # a function word
    ("CTX", ""),  # no word
])
def test_the_first_letter_rule_defines_nothing_else(short, candidate):
    assert first_letter_long_form(short, candidate) is None


def test_first_character_must_start_a_word():
    assert best_long_form("HA", "the hyaluronic acid") == "hyaluronic acid"
    assert best_long_form("XA", "the hyaluronic acid") is None
    assert is_short_form("L-NNA") and not is_short_form("five words of it")


def test_first_definition_wins():
    text = "heart attack (HA) ... hyaluronic acid (HA)"
    assert find_abbreviations(text) == {"HA": "heart attack"}


def test_mention_of_a_defined_abbreviation_is_encoded_as_its_long_form(tiny_encoder):
    tokenizer = load_tokenizer(tiny_encoder)
    plain = InputBuilder(tokenizer, mention_max_length=32)
    expanding = InputBuilder(tokenizer, mention_max_length=32, expand_abbreviations=True)
    text = "the aspirin cough syndrome (ACS) was seen . ACS again"
    start = text.rindex("ACS")
    span = [MentionSpan(0, start, start + 3)]
    [before] = plain.mention_ids([text], span)
    [after] = expanding.mention_ids([text], span)

    def marked(ids):
        tokens = tokenizer.convert_ids_to_tokens(ids)
        return tokens[tokens.index("[START]") + 1 : tokens.index("[END]")]

    assert marked(after) == tokenizer.tokenize("aspirin cough syndrome")
    assert marked(before) == tokenizer.tokenize("ACS")
    # the same context surrounds it (the window is re-centred on the longer mention)
    left_after = after[1 : after.index(expanding.start_id)]
    left_before = before[1 : before.index(plain.start_id)]
    assert left_after and left_before[-len(left_after) :] == left_after
    # a span that is not the defined short form is left alone
    other = text.index("cough")
    assert (expanding.mention_ids([text], [MentionSpan(0, other, other + 5)])
            == plain.mention_ids([text], [MentionSpan(0, other, other + 5)]))


def test_element_symbols_and_british_spellings_are_read_as_the_kb_writes_them(tiny_encoder):
    tokenizer = load_tokenizer(tiny_encoder)
    plain = InputBuilder(tokenizer, inputs="names")
    reading = InputBuilder(tokenizer, inputs="names", expand_abbreviations=True,
                           american_spelling=True)

    def read(builder, mention, text="Pb and Ca(2+) raised oestrogen ; NO did not"):
        start = text.rindex(mention)
        [ids] = builder.mention_ids([text], [MentionSpan(0, start, start + len(mention))])
        return ids

    assert read(reading, "Pb") == read(plain, "lead", "lead") != read(plain, "Pb")
    assert read(reading, "Ca(2+)") == read(plain, "calcium", "calcium")
    assert read(reading, "oestrogen") == read(plain, "estrogen", "estrogen") != read(
        plain, "oestrogen")
    assert read(reading, "NO") == read(plain, "NO")
    # a document's own abbreviation comes before an element's symbol
    assert read(reading, "Pb", "polybutadiene (Pb) was used . Pb again") == read(
        plain, "polybutadiene", "polybutadiene")
