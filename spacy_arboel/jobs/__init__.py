"""Sharded, resumable work beside the model core: one engine interface that runs a worker
over tasks in this process, in spawned processes or on Ray actors (``engines``), one
ledger of what is done with its digest (``ledger``), and the build-index job that embeds a
KB shard by shard (``kb_vectors``, ``build_index``). ``corpus.link_corpus`` is the other
job on these engines. No spaCy here."""
