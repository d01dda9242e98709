"""Schwartz-Hearst abbreviation definitions and their use in mention inputs."""

import pytest

from spacy_arboel.data.abbreviations import (
    best_long_form,
    expand_short_forms,
    find_abbreviations,
    first_letter_long_form,
    initials_long_form,
    is_short_form,
    part_definitions,
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
    "aspirin (a)",  # one character, not a capital
    "the drug (A)",  # one capital the word before does not start with
    "aspirin (12)",  # no letter
    "a (AB) b",  # long form no longer than the short form
    # a quantity is no long form: BC5CDR test read "LNNA" as "g/L in drinking water"
    "rats given LNNA (0.5 g/L in drinking water) for 4 weeks",
    "the rate (145 ml.s-1, relative humidity) was high",
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


HPT_JT = ("Hereditary hyperparathyroidism-jaw tumor syndrome (HPT-JT) is dominant. Patients "
          "with adult onset globoid cell leukodystrophy (Krabbe disease; AO-GLD) were typed.")


def test_a_later_part_of_a_parenthesis_may_be_the_short_form():
    """NCBI-disease writes "(Krabbe disease; AO-GLD)": the first part is no short form, the
    second is; each part is tried in order."""
    found = find_abbreviations(HPT_JT)
    assert found["AO-GLD"] == "adult onset globoid cell leukodystrophy"
    # the first part still wins where both could be one
    assert find_abbreviations("heart attack (HA; AH) was seen") == {"HA": "heart attack"}


def test_a_dose_after_a_colon_and_a_plural_s_leave_the_short_form_defined():
    """BC5CDR's dev split writes "phenobarbital (PB: 15 mg per rat)" and "ventricular septal
    defects (VSDs)"; the plural defines the singular too."""
    text = ("We gave phenobarbital (PB: 15 mg per rat) to rats with ventricular septal "
            "defects (VSDs). Excited delirium (EDDs) was seen.")
    assert find_abbreviations(text) == {
        "PB": "phenobarbital", "VSDs": "ventricular septal defects",
        "VSD": "ventricular septal defects", "EDDs": "Excited delirium",
        "EDD": "Excited delirium"}


def test_a_plural_keeps_its_s_where_the_long_form_has_one():
    assert find_abbreviations("sequence-tagged sites (STSs) were mapped") == {
        "STSs": "sequence-tagged sites", "STS": "sequence-tagged sites"}


def test_initials_in_order_come_before_a_match_inside_fewer_words():
    """"combined oral contraceptives (COCs)": Schwartz & Hearst's match finds C, O, C inside
    "contraceptives"; initials in another order do not take precedence ("plus epinephrine
    (EP)")."""
    assert find_abbreviations("women on combined oral contraceptives (COCs) and") == {
        "COCs": "combined oral contraceptives", "COC": "combined oral contraceptives"}
    assert find_abbreviations("Hereditary hemochromatosis (HH) is common") == {
        "HH": "Hereditary hemochromatosis"}
    assert find_abbreviations("lidocaine plus epinephrine (EP) was given") == {
        "EP": "epinephrine"}


@pytest.mark.parametrize("text", [
    # after a comma, or a later part that does not look like a short form
    "single-agent paclitaxel (Taxol; Bristol-Myers Squibb Company, Princeton, NJ) reported",
    "using a scale from 0 to 3 (not at all; slight; a lot) was",
    # a long form left open across the parentheses
    "the drug (given daily) and other agent (DAOA) were",
])
def test_later_parts_and_open_parentheses_define_nothing(text):
    assert find_abbreviations(text) == {}


def test_one_capital_is_defined_by_the_word_before_it_only():
    """BC5CDR's dev split: "methylprednisolone (M), or triamcinolone (T)"; a word with another
    first letter defines nothing ("postnatal day (P) 20"), nor does the other order, and a
    mention is not rewritten where the letter is part of a word ("T-cell")."""
    text = ("saline (C), methylprednisolone (M), or triamcinolone (T) on postnatal day (P) 20; "
            "T (triamcinolone acetonide) was given")
    found = find_abbreviations(text)
    assert found == {"M": "methylprednisolone", "T": "triamcinolone"}
    assert expand_short_forms("T-cell M", found) is None


def test_a_long_form_does_not_reach_across_another_parenthesis():
    """"carboplatin (CBDCA) over cisplatin (CDDP)": Schwartz & Hearst's match would take
    "carboplatin (CBDCA) over cisplatin"; the first-letter rule gives "cisplatin". A bracket
    inside a name's word stays."""
    text = "carboplatin (CBDCA) over cisplatin (CDDP) and [(3)H]saxitoxin (STX) binding"
    assert find_abbreviations(text) == {
        "CBDCA": "carboplatin", "CDDP": "cisplatin", "STX": "[(3)H]saxitoxin"}


def test_the_parts_of_a_hyphenated_short_form_are_defined_by_their_words():
    assert part_definitions("HPT-JT", "hyperparathyroidism-jaw tumor syndrome") == {
        "JT": "jaw tumor syndrome", "HPT": "hyperparathyroidism"}
    found = find_abbreviations(HPT_JT)
    assert found["GLD"] == "globoid cell leukodystrophy" and found["AO"] == "adult onset"
    assert found["HPT"] == "hyperparathyroidism" and found["JT"] == "jaw tumor syndrome"


@pytest.mark.parametrize("short, long", [
    ("5-FU", "5-fluorouracil"),  # "5" is no short form
    ("CCK", "cholecystokinin"),  # no hyphen
    ("XY-JT", "hyperparathyroidism-jaw tumor syndrome"),  # X and Y are not in the words left
    ("AB-JT", "the abc-jaw tumor syndrome"),  # words before the first part's
])
def test_parts_are_defined_only_when_every_part_covers_its_words(short, long):
    assert part_definitions(short, long) == {}


def test_a_defined_short_form_inside_a_mention_is_expanded():
    found = find_abbreviations(HPT_JT)
    assert expand_short_forms("primary HPT", found) == "primary hyperparathyroidism"
    # hyphen-joined to an undefined prefix, and the longest short form first
    assert expand_short_forms("IF-GLD", found) == "IF-globoid cell leukodystrophy"
    assert expand_short_forms("AO-GLD cases", found) == (
        "adult onset globoid cell leukodystrophy cases")
    # whole words only, with their case
    assert expand_short_forms("hpt or HPTX or GLDs", found) is None


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
    """The biomedical normalisers, where a setting names them (none by default)."""
    tokenizer = load_tokenizer(tiny_encoder)
    plain = InputBuilder(tokenizer, inputs="names")
    reading = InputBuilder(tokenizer, inputs="names", expand_abbreviations=True,
                           normalisers=("element_symbols", "american_spelling"))
    general = InputBuilder(tokenizer, inputs="names", expand_abbreviations=True)

    def read(builder, mention, text="Pb and Ca(2+) raised oestrogen ; NO did not"):
        start = text.rindex(mention)
        [ids] = builder.mention_ids([text], [MentionSpan(0, start, start + len(mention))])
        return ids

    assert read(reading, "Pb") == read(plain, "lead", "lead") != read(plain, "Pb")
    assert read(reading, "Ca(2+)") == read(plain, "calcium", "calcium")
    assert read(reading, "oestrogen") == read(plain, "estrogen", "estrogen") != read(
        plain, "oestrogen")
    assert read(reading, "NO") == read(plain, "NO")
    # without normalisers (a general KB's default) each is read as written
    for mention in ("Pb", "Ca(2+)", "oestrogen"):
        assert read(general, mention) == read(plain, mention)
    # a document's own abbreviation comes before an element's symbol
    assert read(reading, "Pb", "polybutadiene (Pb) was used . Pb again") == read(
        plain, "polybutadiene", "polybutadiene")


def test_a_mention_holding_a_short_form_is_read_with_it_expanded(tiny_encoder):
    tokenizer = load_tokenizer(tiny_encoder)
    plain = InputBuilder(tokenizer, inputs="names")
    reading = InputBuilder(tokenizer, inputs="names", expand_abbreviations=True)
    start = HPT_JT.index("Patients")
    text = HPT_JT[:start] + "Primary HPT is rare."
    mention = text.index("Primary HPT")
    [ids] = reading.mention_ids([text], [MentionSpan(0, mention, mention + 11)])
    assert ids == plain.mention_ids(["Primary hyperparathyroidism"], [MentionSpan(0, 0, 27)])[0]


def test_short_forms_found_in_one_pass_as_one_by_one():
    """``short_forms_spans`` (one regex pass for all of a document's short forms, linear in
    the text) finds what ``short_form_spans`` finds for each, short forms that read from one
    place ("A" and "A.B") and hyphen-joined words included."""
    from spacy_arboel.data.abbreviations import short_form_spans, short_forms_spans

    text = ("A.B and A, A-B, AB; the A.B.C trial (A.B) and B. X-A.B AB-A A.BB "
            "DOX, DOXs, pre-DOX and DOX") * 3
    shorts = ["A", "A.B", "AB", "B", "DOX", "A.B.C", "Q"]
    assert short_forms_spans(text, shorts) == {s: short_form_spans(text, s) for s in shorts}
    assert short_forms_spans(text, []) == {}


def test_a_long_sentence_is_read_from_its_tail():
    """A parenthesis reads only the last words of its sentence: one with thousands of words
    before it (no sentence end) defines what the short sentence does."""
    from spacy_arboel.data.abbreviations import find_abbreviations

    for tail in ("patients with chronic kidney disease (CKD) were seen",
                 "cyclophosphamide (CTX) was given", "a b c (ABC)"):
        assert find_abbreviations("word " * 3000 + tail) == find_abbreviations(tail)
        assert find_abbreviations("x" * 5000 + " " + tail) == find_abbreviations(tail)
