"""The span getter: which spans a linker links (``doc.ents``, span groups) and how a link is
written back where its span came from."""

import spacy
from spacy.tokens import Span, SpanGroup
from spacy.training import Example

from spacy_arboel.components.common import gold_mentions
from spacy_arboel.spacy_data.spans import SpanGetter, make_span_getter


def _doc():
    nlp = spacy.blank("xx")
    doc = nlp("aspirin induced cough and fever in patients")
    doc.ents = [Span(doc, 0, 1, label="Chemical")]
    doc.spans["sc"] = SpanGroup(doc, name="sc", attrs={"source": "spancat"},
                                spans=[Span(doc, 0, 1, label="Chemical"),
                                       Span(doc, 2, 3, label="Disease"),
                                       Span(doc, 4, 5, label="Disease")])
    return doc


def test_the_default_gets_the_ents_only():
    doc = _doc()
    assert [s.text for s in make_span_getter()(doc)] == ["aspirin"]
    assert make_span_getter() == SpanGetter()


def test_ents_and_groups_each_offset_once_and_a_missing_group_is_none():
    doc = _doc()
    both = SpanGetter(ents=True, spans_keys=("sc", "absent"))
    assert [s.text for s in both(doc)] == ["aspirin", "cough", "fever"]
    assert [s.text for s in SpanGetter(ents=False, spans_keys=("sc",))(doc)] == [
        "aspirin", "cough", "fever"]
    assert SpanGetter(ents=False, spans_keys=("absent",))(doc) == []


def test_a_link_is_written_where_its_span_came_from():
    doc = _doc()
    getter = SpanGetter(ents=True, spans_keys=("sc",))
    getter.write(doc, {(0, 7): "D001241", (16, 21): "D003371"})
    assert [e.kb_id_ for e in doc.ents] == ["D001241"]
    group = doc.spans["sc"]
    assert [s.kb_id_ for s in group] == ["D001241", "D003371", ""]
    assert [s.label_ for s in group] == ["Chemical", "Disease", "Disease"]
    assert group.attrs == {"source": "spancat"} and group.name == "sc"
    # ents alone: the groups are left as they are
    other = _doc()
    SpanGetter().write(other, {(0, 7): "D1", (16, 21): "D2"})
    assert [s.kb_id_ for s in other.spans["sc"]] == ["", "", ""]


def test_the_linker_links_a_span_group(tiny_encoder, toy_kb_path):
    """``span_getter`` with ``spans_keys = ["sc"]``: the group's spans get their links and
    candidates, the ents none; training reads the same spans' gold ids."""
    nlp = spacy.blank("xx")
    nlp.add_pipe("arbo_entity_linker", config={
        "kb_path": str(toy_kb_path), "model": {"encoder_name": tiny_encoder},
        "span_getter": {"@misc": "spacy_arboel.span_getter.v1", "ents": False,
                        "spans_keys": ["sc"]}})
    linker = nlp.get_pipe("arbo_entity_linker")
    linker.ensure_ready()
    doc = nlp.make_doc("aspirin induced cough")
    doc.spans["sc"] = [Span(doc, 0, 1, label="Chemical"), Span(doc, 2, 3, label="Disease")]
    doc = nlp(doc)
    assert all(s.kb_id_ for s in doc.spans["sc"]) and not doc.ents
    assert all(s._.kb_candidates for s in doc.spans["sc"])
    gold = nlp.make_doc("aspirin induced cough")
    gold.spans["sc"] = [Span(gold, 0, 1, label="Chemical", kb_id="D001241")]
    predicted = nlp.make_doc("aspirin induced cough")
    predicted.spans["sc"] = [Span(predicted, 0, 1, label="Chemical")]
    assert gold_mentions([gold], linker.span_getter)[2] == [("D001241",)]
    assert gold_mentions([gold])[2] == []  # the ents: none
    loss, _ = linker.get_loss([Example(predicted, gold)], linker.predict([predicted]))
    assert loss > 0.0
