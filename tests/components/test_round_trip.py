"""Issue 40: load and save never change what a pipeline links. Every component, with each
setting that changes what it links, is saved with the README's relative ``kb_path`` and
loaded back from another working folder, one that holds another ``kb.jsonl``: by
``spacy.load``, ``nlp.from_disk``, ``nlp.from_bytes`` and after a second save. Each way gives
the same ents, ``kb_id_``, candidates, scores and clusters as the pipeline that was saved."""

import json
import warnings

import pytest
import spacy

from spacy_arboel.errors import is_coded
from spacy_arboel.extensions import CANDIDATES_EXT, CLUSTER_EXT, RAW_SCORES_EXT
from tests.conftest import TOY_ENTITIES

LINKER = "arbo_entity_linker"
TYPES = {"Chemical": ["Chemical"], "Disease": ["Disease"]}
RAW_TEXT_LINKER = {"threshold": 0.0, "top_k": 3, "passage_length": 48, "passage_stride": 40}
TEXTS = ["Aspirin induced cough in patients.", "Fever was caused by aspirin.",
         "Coughing and pyrexia in patients with cardiac failure."]


def _policy(**settings) -> dict:
    """A linker config setting its candidate policy (``get_candidates``)."""
    return {"get_candidates": settings}


# (name, [(factory, config)], whether nlp.initialize gets the gold examples)
PIPELINES = [
    ("linker-defaults", [(LINKER, {})], False),
    ("linker-threshold", [(LINKER, {"threshold": 0.3})], False),
    ("linker-raw-threshold", [(LINKER, {**_policy(scores="raw"), "threshold": 0.2})], False),
    ("linker-top-k", [(LINKER, {"top_k": 2})], False),
    ("linker-restrict", [(LINKER, _policy(label_types=TYPES, type_rule="restrict"))], False),
    ("linker-prefer", [(LINKER, {**_policy(label_types=TYPES, type_rule="prefer"),
                                 "top_k": 3})], False),
    ("linker-lexical", [(LINKER, _policy(lexical_weight=0.5))], False),
    ("linker-alias-rows", [(LINKER, {"entity_granularity": "alias"})], False),
    ("linker-blink-inputs", [(LINKER, {"inputs": "blink"})], False),
    ("linker-int8", [(LINKER, {"quantize": True})], False),
    ("linker-hnsw", [(LINKER, {"index_kind": "hnsw"})], False),
    ("linker-nil-id", [(LINKER, {"nil_id": "UNLINKED", "threshold": 0.5})], False),
    ("linker-trained", [(LINKER, {"threshold": 0.2})], True),
    ("linker-coref", [(LINKER, _policy(label_types=TYPES, type_rule="clusters")),
                      ("arbo_coref", {"k": 2, "threshold": None})], False),
    ("linker-coref-state", [(LINKER, {}), ("arbo_coref", {"keep_state": True})], False),
    ("linker-reranker", [(LINKER, {"top_k": 4}),
                         ("arbo_reranker", {"top_k": 3, "train_top_k": 3})], True),
    ("raw-text-linker", [("arbo_linker", RAW_TEXT_LINKER)], False),
    ("raw-text-linker-labels", [("arbo_linker", {**RAW_TEXT_LINKER,
                                                 **_policy(label_types=TYPES)})], False),
    ("raw-text-linker-no-dictionary", [("arbo_linker", {**RAW_TEXT_LINKER,
                                                        "dictionary_spans": "never"})], False),
]


def _build(tiny_encoder, components, train, examples):
    nlp = spacy.blank("xx")
    for factory, config in components:
        model = {"model": {"encoder_name": tiny_encoder}} if factory != "arbo_coref" else {}
        kb = {"kb_path": "kb.jsonl"} if factory in (LINKER, "arbo_linker") else {}
        nlp.add_pipe(factory, config={**kb, **model, **config})
    nlp.initialize(lambda: examples if train else [])
    return nlp


def _links(nlp, gold_docs):
    """What the pipeline links in the texts (arbo_linker) or in the gold ents (the others),
    floats rounded to 5 places."""
    if "arbo_linker" in nlp.pipe_names:
        docs = list(nlp.pipe(TEXTS))
    else:
        docs = [doc.copy() for doc in gold_docs]
        for doc in docs:
            for ent in doc.ents:  # the gold ids are not the pipeline's
                for token in ent:
                    token.ent_kb_id_ = ""
        docs = list(nlp.pipe(docs))
    return [[(e.start_char, e.end_char, e.label_, e.kb_id_,
              [(i, round(s, 5)) for i, s in e._.get(CANDIDATES_EXT) or []],
              [round(s, 5) for s in (e._.get(RAW_SCORES_EXT) or [])],
              e._.get(CLUSTER_EXT)) for e in doc.ents] for doc in docs]


@pytest.mark.parametrize("name,components,train", PIPELINES, ids=[p[0] for p in PIPELINES])
def test_every_way_of_loading_links_as_the_saved_pipeline(
        tiny_encoder, toy_examples, tmp_path, monkeypatch, name, components, train):
    home, elsewhere, third = (tmp_path / d for d in ("home", "elsewhere", "third"))
    for folder in (home, elsewhere, third):
        folder.mkdir()
    (home / "kb.jsonl").write_text("\n".join(json.dumps(e) for e in TOY_ENTITIES) + "\n")
    # another KB under the same relative name, which the saved kb_path names there
    (elsewhere / "kb.jsonl").write_text("\n".join(json.dumps(e) for e in TOY_ENTITIES[:3])
                                        + "\n")
    gold = [eg.reference for eg in toy_examples]
    monkeypatch.chdir(home)
    nlp = _build(tiny_encoder, components, train, toy_examples)
    nlp.to_disk(home / "pipeline")  # before linking: a coref memory starts empty everywhere
    expected = _links(nlp, gold)
    assert any(expected), "the pipeline links nothing: the test would not see a change"
    data = nlp.to_bytes()

    monkeypatch.chdir(elsewhere)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        loaded = spacy.load(home / "pipeline")
    # neither W004 (a swapped KB) nor any other of ours
    assert not [w for w in caught if is_coded(str(w.message))]
    assert _links(loaded, gold) == expected
    from_disk = spacy.blank("xx").from_config(loaded.config).from_disk(home / "pipeline")
    assert _links(from_disk, gold) == expected
    from_bytes = spacy.blank("xx").from_config(nlp.config).from_bytes(data)
    assert _links(from_bytes, gold) == expected

    # saved again (what add-coref, tune-lexical, build-index and distill-mentions do after
    # loading) and loaded from a third folder
    spacy.load(home / "pipeline").to_disk(elsewhere / "again")
    monkeypatch.chdir(third)
    assert _links(spacy.load(elsewhere / "again"), gold) == expected
