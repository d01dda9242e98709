"""Saving and loading a linking core (safetensors, JSON, numpy; no pickle), written once for
``DenseRetriever``, the readers and ``CrossEncoderReranker``: a folder of the core's
``writers()`` entries (its KB as ``kb.jsonl``, its ``tokenizer``, its modules) and its state
file (``STATE_FILE``: the settings, and what a core adds to them)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any, Self

from ..encoders.loading import load_tokenizer
from ..kb.knowledge_base import KnowledgeBase


class SavedCore:
    """A core made as ``cls(kb, tokenizer, modules, settings)`` and saved as a folder.

    Subclasses set ``STATE_FILE`` and ``SETTINGS`` (the settings dataclass) and write
    ``writers`` and ``load_modules``; ``saved_state``, ``loaded_settings`` and ``restore``
    say what else the state file holds and how it is read back.
    """

    STATE_FILE: str
    SETTINGS: type
    settings: Any

    def writers(self) -> dict[str, Callable[[Path], Any]]:
        """What ``save`` writes besides the state file, by entry name."""
        raise NotImplementedError

    @staticmethod
    def load_modules(path: Path, tokenizer, settings: Any) -> Any:
        """The modules (the constructor's third argument) that ``writers`` saved in
        ``path``."""
        raise NotImplementedError

    def saved_state(self) -> dict[str, Any]:
        """What the state file holds: the settings."""
        return asdict(self.settings)

    @classmethod
    def loaded_settings(cls, saved: dict[str, Any], overrides: dict[str, Any],
                        path: Path) -> Any:
        """The settings of the state file ``saved`` (of the folder ``path``) with
        ``overrides``."""
        return cls.SETTINGS(**{**saved, **overrides})

    def restore(self, saved: dict[str, Any], path: Path) -> None:
        """What ``load`` restores after making the core: nothing else by default."""

    def save(self, path: str | Path) -> list[str]:
        """Write ``writers()`` and ``saved_state()`` (``STATE_FILE``) into ``path``; returns
        the names written."""
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        writers = self.writers()
        writers[self.STATE_FILE] = lambda p: p.write_text(json.dumps(self.saved_state()))
        for name, write in writers.items():
            write(path / name)
        return list(writers)

    @classmethod
    def load(cls, path: str | Path, **overrides: Any) -> Self:
        """A core saved by ``save``; ``overrides`` change its inference settings
        (``loaded_settings`` refuses those it was trained with, where a core has any)."""
        path = Path(path)
        saved = json.loads((path / cls.STATE_FILE).read_text())
        settings = cls.loaded_settings(saved, overrides, path)
        tokenizer = load_tokenizer(str(path / "tokenizer"))
        core = cls(KnowledgeBase.from_jsonl(path / "kb.jsonl"), tokenizer,
                   cls.load_modules(path, tokenizer, settings), settings)
        core.restore(saved, path)
        return core
