"""What the component adapters share: gold mentions out of ``Doc`` objects, the KB of a
component's config, the settings a factory's arguments hold, and saving a folder."""

from collections.abc import Callable, Iterable, Mapping
from dataclasses import fields
from pathlib import Path
from typing import Any, TypeVar

from spacy.tokens import Doc
from spacy.util import to_disk

from ..artefacts import clear_saved, write_manifest
from ..data.ids import gold_ids
from ..encoders.inputs import MentionSpan
from ..errors import Errors
from ..kb.knowledge_base import KnowledgeBase

S = TypeVar("S")


def gold_mentions(docs: Iterable[Doc]) -> tuple[list[str], list[MentionSpan], list[list[str]]]:
    """The texts of ``docs``, their ents as spans and each ent's gold ids (may be none)."""
    texts: list[str] = []
    spans: list[MentionSpan] = []
    ids: list[list[str]] = []
    for doc in docs:
        for ent in doc.ents:
            spans.append(MentionSpan(len(texts), ent.start_char, ent.end_char))
            ids.append(gold_ids(ent.kb_id_))
        texts.append(doc.text)
    return texts, spans, ids


def config_kb(kb_path: str | None, name: str) -> KnowledgeBase:
    """The KB at the component's ``kb_path`` (E008 when it has none)."""
    if not kb_path:
        raise ValueError(Errors.E008.format(name=name))
    return KnowledgeBase.from_jsonl(kb_path)


def settings_from(settings_class: type[S], values: Mapping[str, Any]) -> S:
    """The core's settings dataclass from the factory's arguments (those it has fields for)."""
    names = {f.name for f in fields(settings_class)}
    return settings_class(**{k: v for k, v in values.items() if k in names})


def write_folder(path: Path, writers: dict[str, Callable[[Path], Any]],
                 saved_files: Iterable[str], exclude: Iterable[str]) -> None:
    """Replace a component's saved entries by ``writers`` (minus ``exclude``, as
    ``spacy.util.to_disk`` does) and list what was written in the manifest."""
    clear_saved(path, saved_files)
    to_disk(path, writers, exclude)
    write_manifest(path, writers)
