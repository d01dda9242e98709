"""The spaCy-free dense retriever: linking from texts and spans, saving and loading."""


import numpy as np
import pytest

from spacy_arboel.encoders.inputs import MentionSpan
from spacy_arboel.kb import KnowledgeBase
from spacy_arboel.linking import DenseRetriever, RetrieverSettings

TEXTS = ["Aspirin induced cough.", "   "]
SPANS = [MentionSpan(0, 0, 7), MentionSpan(0, 16, 21), MentionSpan(1, 0, 3)]


def test_links_saves_and_loads_without_spacy(tiny_encoder, toy_kb_path, tmp_path):
    retriever = DenseRetriever.from_pretrained(
        KnowledgeBase.from_jsonl(toy_kb_path), tiny_encoder,
        RetrieverSettings(entity_granularity="alias", share_weights=True))
    with pytest.raises(RuntimeError, match="E050"):
        retriever.link(TEXTS, SPANS, k=3)  # no index yet
    retriever.entities.refresh()
    scores, positions, vectors = retriever.link(TEXTS, SPANS, k=3)
    candidates = retriever.candidates(scores, positions)
    assert [len(c) for c in candidates] == [3, 3, 0]  # whitespace: nothing to encode
    assert not vectors[2].any() and vectors.shape[1] == retriever.vector_width
    assert sorted(retriever.save(tmp_path / "r")) == sorted(
        ["kb.jsonl", "tokenizer", "mention_encoder", "index", "retriever.json"])
    loaded = DenseRetriever.load(tmp_path / "r", batch_size=2)
    assert loaded.settings.batch_size == 2 and loaded.settings.share_weights
    found = loaded.candidates(*loaded.link(TEXTS, SPANS, k=3)[:2])
    assert [[i for i, _ in c] for c in found] == [[i for i, _ in c] for c in candidates]
    np.testing.assert_allclose([s for c in found for _, s in c],
                               [s for c in candidates for _, s in c], rtol=1e-5)
    retriever.entities.changed()  # trained since: the index is stale until refreshed
    assert not retriever.entities.is_current




@pytest.mark.parametrize("dedupe", [0.97, 0.5, None])
def test_set_kb_embeds_only_new_rows_and_indexes_as_a_full_rebuild(tiny_encoder, toy_kb_path,
                                                                   dedupe):
    """Issue 62 item 5: after ``set_kb`` the rows of unchanged text keep their vectors;
    the index equals one built from scratch for the new KB (rows, owners, vectors)."""
    from dataclasses import replace

    kb = KnowledgeBase.from_jsonl(toy_kb_path)
    entities = list(kb)
    edited = KnowledgeBase([
        replace(entities[0], aliases=(*entities[0].aliases, "acetylsalicylic acid", "ASA")),
        replace(entities[1], aliases=entities[1].aliases[1:]),  # an alias removed
        *entities[3:],  # an entity removed
        replace(entities[2], id="NEW:1"),  # and one added (same names, other id)
    ])
    settings = RetrieverSettings(entity_granularity="alias", share_weights=True,
                                 row_dedupe_threshold=dedupe)
    retriever = DenseRetriever.from_pretrained(kb, tiny_encoder, settings)
    retriever.entities.refresh()
    embedded = []
    forward = retriever.entities.forward
    retriever.entities.forward = lambda ids, mask: embedded.append(len(ids)) or forward(ids,
                                                                                        mask)
    retriever.entities.set_kb(edited)
    retriever.entities.refresh()
    fresh = DenseRetriever.from_pretrained(edited, tiny_encoder, settings)
    fresh.entities.refresh()
    new, full = retriever.entities.index, fresh.entities.index
    np.testing.assert_array_equal(new.rows, full.rows)
    np.testing.assert_array_equal(new.owners, full.owners)
    np.testing.assert_allclose(new.embeddings, full.embeddings, atol=1e-5)
    # the two new aliases (the added entity's names are known), and where the old index
    # left rows of the changed entities out as near duplicates, those rows again
    changed_rows = len(entities[0].names) + 2 + len(entities[1].names) - 1
    assert sum(embedded) == 2 if dedupe != 0.5 else 2 < sum(embedded) <= changed_rows
    scores, positions, _ = retriever.link(TEXTS, SPANS, k=3)
    np.testing.assert_array_equal(positions, fresh.link(TEXTS, SPANS, k=3)[1])
    retriever.entities.changed()  # other weights: nothing carries over
    retriever.entities.set_kb(kb)
    retriever.entities.refresh()
    assert sum(embedded) > 2
