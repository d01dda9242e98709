"""Where an ``arbo_linker``'s reader starts from besides the base encoder: a saved
``arbo_entity_linker`` (BEER² starts its retriever from BLINK's bi-encoder) or a saved
span-reader ``arbo_linker`` to train on from. The rules of what may start a reader are the
cores' (``check_linker_source``, ``can_train_on``); this reads the saved pipelines."""

from collections.abc import Callable
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path
from typing import Any

from ..errors import Errors
from ..factories import ENTITY_LINKER, LINKER
from ..kb.knowledge_base import KnowledgeBase
from ..linking.reader_base import check_linker_source
from ..linking.span_reader import SpanReader, can_train_on
from .common import saved_component


@dataclass
class ReaderStart:
    """What a reader is set up with: its KB, tokenizer and modules (``load``; None: the
    base encoder's tokenizer and modules), the index to reuse (``(kb, index)``; None: build
    one) and whether its heads are trained."""

    kb: KnowledgeBase
    tokenizer: Any = None
    load: Callable | None = None
    index: tuple[KnowledgeBase, Any] | None = None
    trained: bool = False


def start_from_linker(path: Path, kb: KnowledgeBase | None, core_class: type, settings: Any,
                      name: str) -> ReaderStart:
    """The encoders, tokenizer, KB (unless ``kb``) and index of the ``arbo_entity_linker``
    saved at ``path`` (E021: none there; E022/E056: ``check_linker_source``)."""
    linker = saved_component(path, ENTITY_LINKER)
    if linker is None:
        raise ValueError(Errors.E021.format(path=path))
    retriever = linker.retriever
    check_linker_source(settings, retriever.settings, linker.model.attrs["pooling"], name, path)
    linker.ensure_ready()
    return ReaderStart(kb or retriever.kb, retriever.tokenizer,
                       partial(core_class.modules_from, retriever, settings),
                       (retriever.kb, retriever.index))


def start_from_reader(path: Path, kb: KnowledgeBase | None, core_class: type, settings: Any,
                      name: str) -> ReaderStart:
    """The trained modules and heads of the span-reader ``arbo_linker`` saved at ``path``,
    its index where the entity inputs agree (E029: none there, or one of other settings)."""
    source = saved_component(path, LINKER)
    found = source.reader if source is not None else None
    if not can_train_on(found, core_class, settings):
        raise ValueError(Errors.E029.format(name=name, problem=f"reader_path '{path}' "
                                            f"({found and asdict(found.settings)})"))
    same_entities = found.settings.entity_max_length == settings.entity_max_length
    return ReaderStart(kb or found.kb, found.tokenizer,
                       partial(SpanReader.modules_from_reader, found, settings),
                       (found.kb, found.entities.ready_index()) if same_entities else None,
                       trained=source.trained)


def saved_start(linker_path: str | None, reader_path: str | None, kb: KnowledgeBase | None,
                core_class: type, settings: Any, name: str) -> ReaderStart | None:
    """The start from ``reader_path`` or ``linker_path`` (None without either; E029 with
    both), on ``kb`` when given, else the saved component's KB."""
    if linker_path and reader_path:
        raise ValueError(Errors.E029.format(name=name, problem="both linker_path and "
                                            "reader_path"))
    if not (linker_path or reader_path):
        return None
    start = start_from_reader if reader_path else start_from_linker
    return start(Path(reader_path or linker_path), kb, core_class, settings, name)
