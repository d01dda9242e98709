"""The document every reader gives (``data.documents``)."""

from spacy_arboel.data.documents import Document, Mention


def test_gold_links_are_the_mentions_with_ids_their_ids_joined():
    document = Document("d", "Aspirin induced cough and fever.", [
        Mention(0, 7, "Aspirin", "Chemical", ("D001241",)),
        Mention(16, 21, "cough", "Disease"),
        Mention(26, 31, "fever", "Disease", ("D005334", "D010146"))])
    assert document.gold_links == ((0, 7, "D001241"), (26, 31, "D005334|D010146"))
    assert Document("e", "No mentions.").gold_links == ()
