"""The data as spaCy sees it: documents as ``Doc`` objects and ``DocBin`` files
(``convert``), corpora with their ``.spacy`` DocBins and spaCy's corpus readers
(``readers``: ``read_corpus_documents``, ``read_corpus_docs``,
``spacy_arboel.PubtatorCorpus.v1``, ``spacy_arboel.GoldMentionsCorpus.v1``), the KB loader of
``[initialize]`` (``kb_loaders``: ``spacy_arboel.JsonlKB.v1``), aliases and entity types
harvested from a corpus's docs (``aliases``) and held-out entities chosen over docs
(``discovery``). The spaCy-free readers and documents are in ``spacy_arboel.data``."""
