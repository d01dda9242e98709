"""Mention normalisers (issue 63, item 2): registered readings of a mention that a linker's
``normalisers`` setting turns on, none by default; a new one is one function and one
registration, and a bad name or a missing package is refused when the pipe is made."""

import catalogue
import pytest

from spacy_arboel.encoders.normalisers import (
    MentionNormaliser,
    Reading,
    get_normaliser,
    mention_normalisers,
)
from spacy_arboel.linking import RerankerSettings, RetrieverSettings


@pytest.fixture
def registered():
    """Made-up normalisers: one reading "XYZ" as "Aspirin", one needing a missing module."""
    names = {"test-xyz": MentionNormaliser(lambda text: "Aspirin" if text == "XYZ" else text),
             "test-missing": MentionNormaliser(str.lower, requires=("no_such_module_q",),
                                               extra="made-up")}
    for name, normaliser in names.items():
        mention_normalisers.register(name, func=normaliser)
    yield names
    for name in names:  # the registry as it was
        catalogue._remove((*mention_normalisers.namespace, name))


def test_the_packaged_normalisers_are_registered_and_read_in_order():
    assert {"american_spelling", "element_symbols"} <= set(mention_normalisers.get_all())
    assert Reading(["element_symbols", "american_spelling"])("Ca(2+)") == "calcium"
    assert Reading(["american_spelling"])("Ischaemic oedema") == "Ischemic edema"
    assert Reading([])("oestrogen") == "oestrogen"


def test_no_normaliser_by_default():
    """A general KB gets none of the biomedical readings unless a config names them."""
    import spacy

    assert RetrieverSettings().normalisers == () == RerankerSettings().normalisers
    nlp = spacy.blank("en")
    assert nlp.add_pipe("arbo_entity_linker").settings.normalisers == ()
    assert nlp.add_pipe("arbo_reranker").settings.normalisers == ()


def test_a_bad_name_or_a_missing_package_is_refused_when_the_pipe_is_made(registered):
    import spacy

    nlp = spacy.blank("en")
    with pytest.raises(ValueError, match=r"E264.*'spelling'.*american_spelling, "
                                         r"element_symbols.*spacy_arboel_mention_normalisers"):
        nlp.add_pipe("arbo_entity_linker", config={"normalisers": ["spelling"]})
    with pytest.raises(ValueError, match=r"E265.*'test-missing'.*no_such_module_q.*"
                                         r"pip install no_such_module_q.*made-up"):
        nlp.add_pipe("arbo_reranker", config={"normalisers": ["test-missing"]})
    with pytest.raises(ValueError, match="E011.*normalisers.*list of registered"):
        RetrieverSettings(normalisers="american_spelling")
    assert nlp.pipe_names == []
    with pytest.raises(ValueError, match="E264"):
        get_normaliser("spelling")


def test_a_registered_normaliser_reads_the_mentions_of_a_saved_linker(
        registered, tiny_encoder, toy_kb_path, tmp_path):
    """One function and one registration: the linker reads "XYZ" as "Aspirin", the names
    it keeps as a tuple (a config's list), and a saved pipeline reads the same."""
    import spacy

    nlp = spacy.blank("en")
    pipe = nlp.add_pipe("arbo_entity_linker", config={
        "kb_path": str(toy_kb_path), "normalisers": ["test-xyz", "american_spelling"],
        "model": {"encoder_name": tiny_encoder}})
    nlp.initialize()
    assert pipe.settings.normalisers == ("test-xyz", "american_spelling")
    builder = pipe.retriever.builder
    assert builder.read_as("XYZ", {}) == "Aspirin" and builder.read_as("anaemia", {}) == "anemia"
    assert builder.read_as("fever", {}) is None

    def linked(nlp, text):
        doc = nlp.make_doc(text)
        doc.ents = [doc.char_span(0, len(text), label="Chemical")]
        return nlp(doc).ents[0]._.kb_raw_scores

    assert linked(nlp, "XYZ") == linked(nlp, "Aspirin")
    nlp.to_disk(tmp_path / "saved")
    loaded = spacy.load(tmp_path / "saved")
    assert loaded.get_pipe("arbo_entity_linker").settings.normalisers == (
        "test-xyz", "american_spelling")
    assert linked(loaded, "XYZ") == linked(nlp, "XYZ")


def test_arbo_linkers_dictionary_reads_its_spans_with_the_normalisers(
        registered, tiny_encoder, toy_kb_path):
    """``arbo_linker``'s dictionary links the KB's names found in raw text with a zero-shot
    retriever, which reads each span with the component's normalisers (none by default)."""
    import spacy

    for names in ((), ("test-xyz",)):
        nlp = spacy.blank("en")
        pipe = nlp.add_pipe("arbo_linker", config={
            "kb_path": str(toy_kb_path), "normalisers": list(names), "passage_length": 48,
            "passage_stride": 40, "model": {"encoder_name": tiny_encoder, "max_spans": 4}})
        pipe.ensure_ready()
        retriever = pipe.dictionary.retriever
        assert retriever.settings.normalisers == names
        assert retriever.builder.read_as("XYZ", {}) == ("Aspirin" if names else None)
