"""The adapter base of the components that drive a core over a KB (``arbo_entity_linker``,
``arbo_linker``, ``arbo_reranker``): the setup verbs they share (``ensure_ready``,
``set_kb``), written once."""

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import srsly
from spacy.pipeline import TrainablePipe
from spacy.tokens import Doc
from spacy.util import ensure_path, from_disk

from ..artefacts import SavedAsFolder, check_folder, reading
from ..errors import Errors
from ..kb.knowledge_base import KnowledgeBase, kb_override
from ..parsing import parse_json
from .common import config_kb, write_folder
from .concurrency import one_thread_at_a_time


class KBComponent(SavedAsFolder, TrainablePipe):
    """A trainable pipe over a core that holds a KB (``core``: a ``DenseRetriever``, a
    reader or a ``CrossEncoderReranker``, None until set up).

    Subclasses set ``core_attribute`` (the public name of their core) and ``saved_files``,
    and write ``_set_up`` (the core over a KB, by default with the base encoder) and
    ``_make_current`` (what ``ensure_ready`` brings up to date once set up); ``_check_kb``
    and ``_kb_holder`` say how ``set_kb`` checks a KB and what takes it.
    """

    core_attribute: str = "core"
    saved_files: tuple[str, ...] = ()

    @property
    def core(self) -> Any:
        return getattr(self, self.core_attribute)

    @property
    def kb(self) -> KnowledgeBase | None:
        return self.core.kb if self.core is not None else None

    def _require(self, what: str) -> Any:
        """The core, or E051 naming ``what`` is missing when the component is not set up."""
        if self.core is None:
            raise ValueError(Errors.E051.format(name=self.name, what=what))
        return self.core

    def _config_kb(self) -> KnowledgeBase:
        """The KB at the config's ``kb_path`` (E008 when it has none)."""
        return config_kb(self.settings.kb_path, self.name)

    def _initial_kb(self, kb_loader: Callable[[Any], KnowledgeBase | None] | None,
                    nlp: Any) -> KnowledgeBase:
        """``initialize``'s KB: ``kb_loader``'s (spaCy's setting), else ``kb_path``'s."""
        kb = kb_loader(nlp) if kb_loader is not None else None
        return kb if kb is not None else self._config_kb()

    def ensure_ready(self) -> None:
        """Set up a component used without ``initialize`` or ``from_disk`` (the KB from
        ``kb_path``, the base encoder), then bring what it links with up to date."""
        if self.core is None:
            self._set_up_from_config()
        self._make_current()

    def _set_up_from_config(self) -> None:
        """The core over the KB at ``kb_path``, with the base encoder."""
        self._set_up(self._config_kb())

    def _set_up(self, kb: KnowledgeBase) -> None:
        raise NotImplementedError

    def set_kb(self, kb: KnowledgeBase) -> None:
        """Link with another knowledge base (checked by ``_check_kb``; E051 before the
        component is set up); what depends on it (an index) is built by ``ensure_ready()``."""
        if self.core is None:
            raise ValueError(Errors.E051.format(name=self.name, what="knowledge base"))
        self._kb_holder().set_kb(self._check_kb(kb))

    def _check_kb(self, kb: KnowledgeBase) -> KnowledgeBase:
        """``kb`` if the component can link with it (any KB by default)."""
        return kb

    def _kb_holder(self) -> Any:
        """What holds the core's KB: the ``IndexedKB`` of a core over one (``entities``)."""
        return self.core.entities

    def _make_current(self) -> None:
        """Nothing by default."""

    @one_thread_at_a_time
    def _before_docs(self) -> None:
        """What ``__call__`` and ``pipe`` bring up to date before docs are processed, so that
        ``predict`` itself never builds or changes anything: by default ``_make_current``
        once the component is set up."""
        if self.core is not None:
            self._make_current()

    def __call__(self, doc: Doc) -> Doc:
        self._before_docs()
        return super().__call__(doc)

    def pipe(self, stream: Iterable[Doc], *, batch_size: int = 128) -> Iterator[Doc]:
        self._before_docs()
        yield from super().pipe(stream, batch_size=batch_size)

    def _write(self, path, state: Callable[[], dict[str, Any]], exclude: Iterable[str],
               extra: Callable[[], dict[str, Callable[[Path], Any]]] | None = None) -> None:
        """``to_disk``: set up if needed, then write ``state()`` (``cfg.json``), the core's
        files and the ``extra()`` entries, minus ``exclude``, with the folder's manifest."""
        self.ensure_ready()
        write_folder(ensure_path(path), {
            "cfg.json": lambda p: srsly.write_json(p, {"kb_path": self.settings.kb_path,
                                                       **state()}),
                                         **self.core.writers(), **(extra() if extra else {})},
                     self.saved_files, exclude)

    @contextmanager
    def _reading(self, path: Path, exclude: set[str], required: Iterable[str],
                 readers: dict[str, Callable[[Path], Any]] | None = None,
                 cfg_keys: Iterable[str] = ()) -> Iterator[dict[str, Any]]:
        """``from_disk``'s frame: the ``required`` files not excluded are checked first (E030,
        as ``verify_files`` says); inside, a problem reading them is E030 too. Yields the
        state read: ``cfg`` (``cfg.json``, {} when excluded), ``kb`` (the saved KB, else the
        config's), ``tokenizer`` (its saved folder or None) and what ``readers`` (by entry
        name) put in it. A ``cfg.json`` without one of ``cfg_keys`` is damaged (E030)."""
        check_folder(path, self.name, [n for n in required if n.split(".")[0] not in exclude],
                     self.settings.verify_files)
        state: dict[str, Any] = {"cfg": {}, "tokenizer": None}
        with reading(path, self.name):
            from_disk(path, {
                # the standard library's reader: srsly's reads 0.020036 as
                # 0.020035999999999998, and a saved threshold must load as it was saved
                "cfg.json": lambda p: state.update(cfg=parse_json(Path(p).read_bytes())),
                "kb.jsonl": lambda p: state.update(kb=KnowledgeBase.from_jsonl(p)),
                "tokenizer": lambda p: state.update(tokenizer=p),
                **(readers or {}),
            }, exclude)
            lacking = [key for key in cfg_keys if key not in state["cfg"]]
            if "cfg" not in exclude and lacking:
                raise ValueError(Errors.E030.format(
                    component=self.name, path=path,
                    problem=f"cfg.json lacks {' and '.join(map(repr, lacking))}"))
            if "kb" not in state:
                state["kb"] = self._config_kb()
            yield state

    def forget_kb_path(self) -> None:
        """Link with the KB it holds from now on: ``kb_path`` cleared (and saved so), so that a
        path to an older KB file never brings that KB back when the pipeline is loaded."""
        self.settings = replace(self.settings, kb_path=None)

    def _kb_override(self, saved_cfg: dict[str, Any]) -> KnowledgeBase | None:
        """After loading: the KB at ``kb_path`` when it was given at load time and names
        another KB than the saved one (W004; no such file: E221), else None. A ``kb_path``
        equal to the one ``saved_cfg`` (the saved ``cfg.json``) records is inherited from the
        saved config and never replaces the saved KB: a relative ``kb.jsonl`` would name
        another file in every working folder."""
        kb_path = self.settings.kb_path
        if not kb_path or kb_path == saved_cfg.get("kb_path", kb_path):
            return None
        return kb_override(kb_path, self.kb, self.name)
