"""Short forms linked through the link of their long form."""

from spacy_arboel.data.abbreviations import short_form_spans
from spacy_arboel.linking.abbreviation_links import link_abbreviations
from spacy_arboel.linking.reader_spans import LinkedSpan

TEXT = "Doxorubicin (DOX) causes cardiotoxicity. DOX-treated rats and DOXA were studied; DOX."


def test_short_forms_are_found_as_whole_words():
    assert short_form_spans(TEXT, "DOX") == [(13, 16), (81, 84)]


def test_short_forms_take_the_long_form_link():
    spans = [LinkedSpan(0, 11, "D004317", 0.9), LinkedSpan(0, 11, "D000001", 0.2),
             LinkedSpan(13, 16, "D999999", 0.5), LinkedSpan(25, 39, "D066126", 0.8)]
    linked = link_abbreviations(TEXT, spans)
    assert LinkedSpan(13, 16, "D999999", 0.5) not in linked
    assert LinkedSpan(13, 16, "D004317", 0.9) in linked
    assert LinkedSpan(81, 84, "D004317", 0.9) in linked  # found although never scored
    assert LinkedSpan(25, 39, "D066126", 0.8) in linked and len(linked) == 5


def test_nothing_changes_without_a_definition_or_a_linked_long_form():
    spans = [LinkedSpan(13, 16, "D999999", 0.5)]
    assert link_abbreviations(TEXT, spans) == spans  # the long form was not linked
    assert link_abbreviations("No abbreviation here.", spans) == spans
