"""Dictionary spans beyond exact names (issue 60): variants of a name (plurals, word order,
"abnormality of the X", hyphens, words the KB's synonyms make one), names distributed over a
coordination, nested and overlapping names all in the span group ``arbo_concepts``, the best
non-overlapping ones in ``doc.ents``; the scorer reads either."""

import json

import spacy
from spacy.training import Example

from spacy_arboel.components.dictionary_spans import DictionarySpans
from spacy_arboel.evaluation.end_to_end import score_end_to_end
from spacy_arboel.extensions import SPANS_KEY
from spacy_arboel.kb import Entity, KnowledgeBase

ENTITIES = [
    ("HP:1", "Nail hypoplasia", ["Hypoplastic nails"]), ("HP:2", "Aplastic nails", []),
    ("HP:3", "Renal cyst", []), ("HP:4", "Abnormality of the kidney", []),
    ("HP:5", "Renal agenesis", []), ("HP:6", "Renal hypoplasia", []),
    ("HP:7", "Preauricular pit", []), ("HP:8", "Colitis", []),
    ("HP:9", "Ulcerative colitis", []), ("HP:10", "Cleft palate", []),
    ("HP:11", "Cleft lip", []), ("HP:12", "Papule", []), ("HP:13", "Heart failure", []),
    ("HP:14", "Acute heart", []), ("HP:15", "Thumb abnormality", []),
    ("D1", "L-Arg", []), ("D2", "D-Penicillamine", []), ("D3", "Factor Nine", []),
    ("D4", "Rapidal", []),
]


def _kb() -> KnowledgeBase:
    return KnowledgeBase([Entity(id=i, name=n, aliases=a) for i, n, a in ENTITIES])


def _spans(text: str, nested: bool = False) -> list[tuple[str, list[str], bool]]:
    """The matches of ``text``; without ``nested``, not those inside a contiguous one."""
    nlp = spacy.blank("en")
    kb = _kb()
    spans = DictionarySpans(nlp.tokenizer.pipe, kb, 24, stop_words=nlp.Defaults.stop_words)
    return [(m.text, sorted(kb.entity_at(e.position).id for e in m.entries), m.gapped)
            for m in spans(nlp.make_doc(text)) if nested or not m.inside]


def test_variants_of_a_name_are_found():
    assert _spans("Renal cysts and abnormalities of the kidneys, kidney abnormality.") == [
        ("Renal cysts", ["HP:3"], False),
        ("abnormalities of the kidneys", ["HP:4"], False),
        ("kidney abnormality", ["HP:4"], False)]
    assert _spans("pre-auricular pits, abnormal thumbs") == [
        ("pre-auricular pits", ["HP:7"], False), ("abnormal thumbs", ["HP:15"], False)]
    # a stop word the names never hold inside ends a span
    assert _spans("papules are cutaneous") == [("papules", ["HP:12"], False)]


def test_names_are_not_read_into_other_words():
    # a hyphenated name of a one-letter part reads as written (lowercased), not glued
    assert _spans("large doses of l-arg and D-penicillamine") == [
        ("l-arg", ["D1"], False), ("D-penicillamine", ["D2"], False)]
    # a one-word name reads as its plurals only; stop words stay in a name of one word more
    assert _spans("factor nine, rapidly") == [("factor nine", ["D3"], False)]


def test_nested_and_coordinated_names_are_all_found():
    assert _spans("aplastic or hypoplastic nails") == [
        ("aplastic or hypoplastic nails", ["HP:2"], True),
        ("hypoplastic nails", ["HP:1"], False)]
    assert _spans("renal hypoplasia and agenesis") == [
        ("renal hypoplasia", ["HP:6"], False),
        ("renal hypoplasia and agenesis", ["HP:5"], True)]
    assert _spans("ulcerative colitis; cleft lip and palate") == [
        ("ulcerative colitis", ["HP:9"], False),
        ("cleft lip", ["HP:11"], False), ("cleft lip and palate", ["HP:10"], True)]
    # a name inside a longer contiguous one, when asked for
    assert _spans("ulcerative colitis", nested=True) == [
        ("ulcerative colitis", ["HP:9"], False), ("colitis", ["HP:8"], False)]
    # a coordination's parts end where the phrase does
    assert ("acute heart failure and heart", ["HP:14"], True) not in _spans(
        "acute heart failure and heart failure")


def _nlp(encoder, tmp_path, **config):
    path = tmp_path / "kb.jsonl"
    path.write_text("".join(json.dumps({"id": i, "name": n, "aliases": a}) + "\n"
                            for i, n, a in ENTITIES))
    nlp = spacy.blank("en")
    nlp.add_pipe("arbo_linker", config={"kb_path": str(path), "passage_length": 48,
                                        "passage_stride": 40, **config,
                                        "model": {"encoder_name": encoder}})
    nlp.initialize()
    return nlp


def test_the_span_group_keeps_every_link_and_the_ents_the_longest(tiny_encoder, tmp_path):
    nlp = _nlp(tiny_encoder, tmp_path)
    doc = nlp("Aplastic or hypoplastic nails and ulcerative colitis.")
    group = [(s.text, s.kb_id_) for s in doc.spans[SPANS_KEY]]
    assert group == [("Aplastic or hypoplastic nails", "HP:2"), ("hypoplastic nails", "HP:1"),
                     ("ulcerative colitis", "HP:9")]
    assert [(e.text, e.kb_id_) for e in doc.ents] == [
        ("Aplastic or hypoplastic nails", "HP:2"), ("ulcerative colitis", "HP:9")]
    assert all(s._.kb_candidates[0][0] == s.kb_id_ for s in doc.spans[SPANS_KEY])
    # the scorer reads the group when given its key, the ents otherwise
    reference = nlp.make_doc(doc.text)
    reference.spans[SPANS_KEY] = [reference.char_span(0, 29, label="P", kb_id="HP:2"),
                                  reference.char_span(12, 29, label="P", kb_id="HP:1"),
                                  reference.char_span(45, 52, label="P", kb_id="HP:8")]
    reference.ents = [reference.char_span(0, 29, label="P", kb_id="HP:2")]
    example = Example(doc, reference)
    group_scores = score_end_to_end([example], spans_key=SPANS_KEY)
    assert (group_scores["e2e_tp"], group_scores["e2e_n_predicted"],
            group_scores["e2e_n_gold"]) == (2, 3, 3)
    ents_scores = score_end_to_end([example])
    assert (ents_scores["e2e_tp"], ents_scores["e2e_n_predicted"],
            ents_scores["e2e_n_gold"]) == (1, 2, 1)
    registered = spacy.registry.scorers.get("spacy_arboel.end_to_end_scorer.v1")
    assert registered(spans_key=SPANS_KEY)([example])["e2e_tp"] == 2
    # names inside a longer one, when asked for
    nlp = _nlp(tiny_encoder, tmp_path, nested_names=True)
    doc = nlp("ulcerative colitis")
    assert [s.text for s in doc.spans[SPANS_KEY]] == ["ulcerative colitis", "colitis"]
    # no key: no group
    nlp = _nlp(tiny_encoder, tmp_path, spans_key=None)
    assert SPANS_KEY not in nlp("ulcerative colitis").spans


def test_a_trained_linker_pointed_at_another_kb_keeps_its_dictionary(tiny_encoder, tmp_path,
                                                                     toy_kb_path, toy_examples):
    """Issue 60, item 6: trained on one corpus and KB, then swapped to an ontology
    (``swap_kb``), ``dictionary_spans = "always"`` proposes the new KB's names and their
    variants beside the heads' spans; the default ``"untrained"`` proposes the heads'
    alone."""
    from thinc.api import Adam

    from spacy_arboel.pipeline import swap_kb

    for mode, found in (("always", True), ("untrained", False)):
        nlp = spacy.blank("en")
        nlp.add_pipe("arbo_linker", config={
            "kb_path": str(toy_kb_path), "passage_length": 48, "passage_stride": 40,
            "dictionary_spans": mode, "threshold": 0.99,
            "model": {"encoder_name": tiny_encoder}})
        nlp.initialize(lambda: toy_examples)
        nlp.update(toy_examples, sgd=Adam(0.001))
        swap_kb(nlp, _kb(), "arbo_linker")
        doc = nlp("Aplastic or hypoplastic nails and renal cysts.")
        group = {(s.text, s.kb_id_) for s in doc.spans[SPANS_KEY]}
        wanted = {("Aplastic or hypoplastic nails", "HP:2"), ("hypoplastic nails", "HP:1"),
                  ("renal cysts", "HP:3")}
        assert (wanted <= group) is found, (mode, group)


def test_a_saved_pipeline_keeps_its_span_group_and_settings(tiny_encoder, tmp_path):
    """Saved and loaded elsewhere, the pipeline writes the same group under the same key
    with the same ``nested_names`` (they are its config)."""
    nlp = _nlp(tiny_encoder, tmp_path, spans_key="concepts", nested_names=True)
    text = "Aplastic or hypoplastic nails and ulcerative colitis."

    def group(pipeline):
        doc = pipeline(text)
        return [(s.start_char, s.end_char, s.kb_id_, s._.kb_candidates)
                for s in doc.spans["concepts"]]

    expected = group(nlp)
    assert [(s, e, i) for s, e, i, _ in expected] == [
        (0, 29, "HP:2"), (12, 29, "HP:1"), (34, 52, "HP:9"), (45, 52, "HP:8")]
    nlp.to_disk(tmp_path / "saved")
    (tmp_path / "kb.jsonl").unlink()  # the saved KB is read, not the file it came from
    loaded = spacy.load(tmp_path / "saved")
    assert group(loaded) == expected
    assert SPANS_KEY not in loaded(text).spans
