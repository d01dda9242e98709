"""The reader of the retriever-reader linker (EntQA / BEER² §2.1.2): span decoding."""
