"""Linking a corpus of shards, in one process or on Ray (issue 19)."""
