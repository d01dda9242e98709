"""arbo_linker before its heads are trained: the KB's names and aliases found in the text,
linked by the zero-shot encoder (``dictionary_spans``), deterministic, saved and loaded;
the heads take over after the first update."""

import json
import warnings

import pytest
import spacy
import srsly
import torch
from confection import ConfigValidationError
from thinc.api import Adam

from spacy_arboel.components.dictionary_linker import DictionaryLinker
from spacy_arboel.linking.indexed_kb import IndexedKB
from spacy_arboel.linking.reader_spans import DocLinks, LinkedSpan

TEXT = ("Aspirin induced coughing; patients with Heart Failure took acetylsalicylic acid "
        "for PYREXIA.")
EXPECTED = [("Aspirin", "Chemical", "D001241"), ("coughing", "Disease", "D003371"),
            ("Heart Failure", "Disease", "D006333"),
            ("acetylsalicylic acid", "Chemical", "D001241"), ("PYREXIA", "Disease", "D005334")]


def _kb(tmp_path, entities, name="kb.jsonl"):
    path = tmp_path / name
    path.write_text("\n".join(json.dumps(e) for e in entities) + "\n")
    return path


def _nlp(encoder, kb_path, initialize=True, model=None, **config):
    """A pipeline with an arbo_linker (the default span reader) over ``kb_path``, set up by
    ``nlp.initialize()`` alone: the headline use."""
    nlp = spacy.blank("xx")
    nlp.add_pipe("arbo_linker", config={
        "kb_path": str(kb_path), "passage_length": 48, "passage_stride": 40, **config,
        "model": {"encoder_name": encoder, **(model or {})}})
    if initialize:
        nlp.initialize()
    return nlp


def _links(doc):
    return [(e.text, e.label_, e.kb_id_) for e in doc.ents]


def _full(docs):
    """The ents with their candidates, scores to 4 decimals (the mentions batched with
    others move them by float noise)."""
    return [[(e.start_char, e.end_char, e.label_, e.kb_id_,
              [(i, round(s, 4)) for i, s in e._.kb_candidates]) for e in doc.ents]
            for doc in docs]


def test_untrained_linker_links_the_names_in_the_text(tiny_encoder, toy_kb_path):
    nlp = _nlp(tiny_encoder, toy_kb_path)
    linker = nlp.get_pipe("arbo_linker")
    assert linker.uses_dictionary and not linker.uses_heads and not linker.trained
    doc = nlp(TEXT)
    assert _links(doc) == EXPECTED  # case-insensitive, aliases too, never ";"
    for ent in doc.ents:
        candidates = ent._.kb_candidates
        assert candidates[0][0] == ent.kb_id_ and len(candidates) == 5  # top_k > 5 entities
        assert all(type(s) is float for _, s in candidates)
        assert candidates[0][1] > 0.97 - 1e-4  # its own name (or a near-duplicate row)
    (start, end, merged), = doc._.passage_candidates
    assert (start, end) == (0, len(TEXT)) and {i for i, _ in merged} >= {e[2] for e in EXPECTED}
    # a short form the text defines takes its long form's link
    doc = nlp("Cardiac failure (CF) was seen; CF was treated.")
    assert _links(doc) == [("Cardiac failure", "Disease", "D006333"),
                           ("CF", "Disease", "D006333"), ("CF", "Disease", "D006333")]
    assert all(e._.kb_candidates[0][0] == "D006333" for e in doc.ents)


def test_the_longest_match_wins_and_overlaps_are_resolved(tiny_encoder, tmp_path):
    kb = _kb(tmp_path, [
        {"id": "H1", "name": "Heart"}, {"id": "F1", "name": "Failure"},
        {"id": "HF", "name": "Heart Failure", "types": ["Disease"]},
        {"id": "AH", "name": "acute heart"}, {"id": "CHF", "name": "congestive heart failure"}])
    nlp = _nlp(tiny_encoder, kb)
    doc = nlp("Congestive heart failure, acute heart failure and heart failure.")
    # nested: the longest; crossing spans of one length: the earlier, then what is left
    assert _links(doc) == [("Congestive heart failure", "ENTITY", "CHF"),
                           ("acute heart", "ENTITY", "AH"), ("failure", "ENTITY", "F1"),
                           ("heart failure", "Disease", "HF")]


def test_acronyms_symbols_and_punctuation(tiny_encoder, tmp_path):
    kb = _kb(tmp_path, [
        {"id": "K1", "name": "Potassium", "aliases": ["K"]},
        {"id": "ALL1", "name": "Precursor Cell Lymphoblastic Leukemia", "aliases": ["ALL"]},
        {"id": "P1", "name": ";", "aliases": ["(+)", "   "]},
        {"id": "A1", "name": "Adenine", "aliases": ["A"]}])
    with pytest.warns(UserWarning, match=r"W013.*3 name"):
        nlp = _nlp(tiny_encoder, kb)
    doc = nlp("Potassium; K and k levels in all patients with ALL; a dose (+) of adenine.")
    # names without a lowercase letter, and one-character names, only as written
    assert _links(doc) == [("Potassium", "ENTITY", "K1"), ("K", "ENTITY", "K1"),
                           ("ALL", "ENTITY", "ALL1"), ("adenine", "ENTITY", "A1")]
    assert nlp(";;; (+) ;").ents == ()


def test_deterministic_across_fresh_pipelines_and_seeds(tiny_encoder, toy_kb_path,
                                                        toy_examples):
    texts = [eg.reference.text for eg in toy_examples] + [TEXT]
    runs, heads = [], []
    for seed in (1, 2):
        torch.manual_seed(seed)
        runs.append(_full(_nlp(tiny_encoder, toy_kb_path).pipe(texts)))
        torch.manual_seed(seed)  # the heads too are seeded: "never" links alike
        heads.append(_full(_nlp(tiny_encoder, toy_kb_path, dictionary_spans="never",
                                threshold=0.0, model={"span_threshold": 0.0}).pipe(texts)))
    assert runs[0] == runs[1] and any(runs[0])
    assert heads[0] == heads[1] and any(heads[0])
    assert runs[0] != heads[0]
    # setting up a linker leaves the caller's random state alone
    torch.manual_seed(5)
    expected = torch.rand(3)
    torch.manual_seed(5)
    _nlp(tiny_encoder, toy_kb_path)
    assert torch.equal(torch.rand(3), expected)


def test_save_and_load_give_the_same_links(tiny_encoder, toy_kb_path, toy_examples, tmp_path,
                                           monkeypatch):
    texts = [eg.reference.text for eg in toy_examples] + [TEXT]
    nlp = _nlp(tiny_encoder, toy_kb_path)
    expected = _full(nlp.pipe(texts))
    nlp.to_disk(tmp_path / "pipeline")
    folder = tmp_path / "pipeline" / "arbo_linker"
    assert (folder / "names_index").is_dir()
    assert srsly.read_json(folder / "cfg.json")["trained"] is False
    listed = srsly.read_json(folder / "manifest.json")["files"]
    assert any(name.startswith("names_index/") for name in listed)
    with monkeypatch.context() as patch:  # the saved indexes are loaded, not rebuilt
        patch.setattr(IndexedKB, "refresh",
                      lambda *a, **k: pytest.fail("an index built again"))
        loaded = spacy.load(tmp_path / "pipeline")
        assert _full(loaded.pipe(texts)) == expected
        linker = nlp.get_pipe("arbo_linker")
        restored = spacy.blank("xx").add_pipe("arbo_linker", config={
            "passage_length": 48, "passage_stride": 40,
            "model": {"encoder_name": tiny_encoder}}).from_bytes(linker.to_bytes())
    make_doc = spacy.blank("xx").make_doc
    assert _full(restored(make_doc(t)) for t in texts) == expected
    # without the saved index it is built again, alike
    linker.to_disk(tmp_path / "no_index", exclude=["index"])
    assert not (tmp_path / "no_index" / "names_index").exists()
    again = spacy.blank("xx").add_pipe("arbo_linker", config={
        "passage_length": 48, "passage_stride": 40, "model": {"encoder_name": tiny_encoder}}
    ).from_disk(tmp_path / "no_index", exclude=["index"])
    assert _full(again(make_doc(t)) for t in texts) == expected


def _spy(monkeypatch, linker):
    calls = {"heads": 0, "dictionary": 0}
    heads, link = linker.reader.scored_spans, DictionaryLinker.link

    def scored(texts, threshold=None):
        calls["heads"] += 1
        return heads(texts, threshold)

    def dictionary(self, docs):
        calls["dictionary"] += 1
        return link(self, docs)

    monkeypatch.setattr(linker.reader, "scored_spans", scored)
    monkeypatch.setattr(DictionaryLinker, "link", dictionary)
    return calls


def test_never_links_with_the_heads_only(tiny_encoder, toy_kb_path, tmp_path, monkeypatch):
    nlp = _nlp(tiny_encoder, toy_kb_path, dictionary_spans="never", threshold=0.0,
               model={"span_threshold": 0.0})
    linker = nlp.get_pipe("arbo_linker")
    assert linker.dictionary is None and linker.uses_heads and not linker.uses_dictionary
    calls = _spy(monkeypatch, linker)
    assert nlp(TEXT).ents and calls == {"heads": 1, "dictionary": 0}
    nlp.to_disk(tmp_path / "never")
    assert not (tmp_path / "never" / "arbo_linker" / "names_index").exists()
    with pytest.raises(ConfigValidationError,
                       match=r"dictionary_spans.*'untrained', 'always', 'never'"):
        _nlp(tiny_encoder, toy_kb_path, initialize=False, dictionary_spans="sometimes")


def test_the_first_update_hands_over_to_the_heads(tiny_encoder, toy_kb_path, toy_examples,
                                                  tmp_path, monkeypatch):
    nlp = _nlp(tiny_encoder, toy_kb_path, initialize=False)
    nlp.initialize(lambda: toy_examples)  # training follows: no dictionary built yet
    linker = nlp.get_pipe("arbo_linker")
    assert linker.dictionary is None
    assert _links(nlp(TEXT)) == EXPECTED  # built when docs are first processed
    calls = _spy(monkeypatch, linker)
    nlp.update(toy_examples, sgd=Adam(0.001))
    assert linker.trained and linker.dictionary is None
    nlp(TEXT)
    assert calls == {"heads": 1, "dictionary": 0}
    nlp.to_disk(tmp_path / "trained")
    folder = tmp_path / "trained" / "arbo_linker"
    assert not (folder / "names_index").exists()
    assert srsly.read_json(folder / "cfg.json")["trained"] is True
    loaded = spacy.load(tmp_path / "trained").get_pipe("arbo_linker")
    assert loaded.trained and loaded.dictionary is None and loaded.uses_heads


def test_always_adds_dictionary_spans_the_heads_did_not_find(tiny_encoder, toy_kb_path,
                                                             toy_examples, monkeypatch):
    nlp = _nlp(tiny_encoder, toy_kb_path, initialize=False, dictionary_spans="always")
    nlp.initialize(lambda: toy_examples)
    nlp.update(toy_examples, sgd=Adam(0.001))
    linker = nlp.get_pipe("arbo_linker")
    assert linker.uses_heads and linker.uses_dictionary
    text = "Aspirin induced cough in patients."

    def heads(texts, threshold=None):  # the heads find (0, 7), linked to Fever
        return [[LinkedSpan(0, 7, "D005334", 0.5)] for _ in texts], [DocLinks() for _ in texts]

    monkeypatch.setattr(linker.reader, "scored_spans", heads)
    doc = nlp(text)
    assert _links(doc) == [("Aspirin", "Disease", "D005334"), ("cough", "Disease", "D003371")]


@pytest.mark.parametrize("text", ["", "   \n ", "The of and patients.", "\x00\u200b 🙂"])
def test_empty_text_and_text_without_names(tiny_encoder, toy_kb_path, text):
    nlp = _nlp(tiny_encoder, toy_kb_path)
    assert nlp(text).ents == ()


def test_one_entity_and_names_of_one_and_ten_thousand_characters(tiny_encoder, tmp_path):
    nlp = _nlp(tiny_encoder, _kb(tmp_path, [{"id": "only", "name": "Aspirin"}]))
    assert _links(nlp("aspirin.")) == [("aspirin", "ENTITY", "only")]
    long_token = "x" * 10_000
    kb = _kb(tmp_path, [{"id": "S", "name": "Q"}, {"id": "L", "name": long_token},
                        {"id": "W", "name": " ".join(["word"] * 30)}], "odd.jsonl")
    with pytest.warns(UserWarning, match=r"W012.*1 name.*30 tokens"):
        nlp = _nlp(tiny_encoder, kb)
    text = f"Q and q and {long_token} and {' '.join(['word'] * 30)}."
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=r"\[W\d+\]")  # no W002 for the long mention
        doc = nlp(text)
    assert [(e.start_char, e.kb_id_) for e in doc.ents] == [(0, "S"), (12, "L")]


def test_the_toy_corpus_is_linked_without_training(tiny_encoder, toy_kb_path, toy_examples):
    """Every gold mention of the toy corpus is a KB name or alias: all found and linked."""
    from spacy_arboel.evaluation.end_to_end_eval import evaluate_end_to_end

    nlp = _nlp(tiny_encoder, toy_kb_path)
    metrics = evaluate_end_to_end(nlp, [eg.reference for eg in toy_examples])
    assert metrics["in_kb"]["f1"] == 1.0 and metrics["in_kb"]["n_gold"] == 11
    assert metrics["retriever_final"]["mention_recall"] == 1.0
    assert "retriever_spans" not in metrics  # the heads' retrieval is not what linked


def test_an_edited_kb_embeds_only_its_new_names(tiny_encoder, toy_kb_path, tmp_path):
    """Issue 62 item 5: after swap_kb, and at load with another kb_path, both indexes of an
    untrained arbo_linker (its entity index and its dictionary's names index) embed only the
    names the old KB lacked, and link as a pipeline built over the edited KB."""
    from spacy_arboel.kb import KnowledgeBase
    from spacy_arboel.pipeline import swap_kb

    entities = [json.loads(line) for line in toy_kb_path.read_text().splitlines()]
    entities[1] = {**entities[1], "aliases": [*entities[1]["aliases"], "tussis"]}
    edited = _kb(tmp_path, entities, "edited.jsonl")
    text = "Aspirin induced tussis; patients with Heart Failure took acetylsalicylic acid."
    fresh = _full([_nlp(tiny_encoder, edited)(text)])
    nlp = _nlp(tiny_encoder, toy_kb_path)
    nlp(text)  # the dictionary built for the old KB
    nlp.to_disk(tmp_path / "saved")
    embedded = []
    forward = IndexedKB.forward
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(IndexedKB, "forward", lambda self, ids, mask: embedded.append(
            len(ids)) or forward(self, ids, mask))
        swap_kb(nlp, KnowledgeBase.from_jsonl(edited), "arbo_linker")
        assert _full([nlp(text)]) == fresh
        assert sum(embedded) == 2  # "tussis", once in each index
        embedded.clear()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # W004: another KB than the saved one
            loaded = spacy.load(tmp_path / "saved", config={
                "components.arbo_linker.kb_path": str(edited)})
        assert _full([loaded(text)]) == fresh
        assert sum(embedded) == 2
