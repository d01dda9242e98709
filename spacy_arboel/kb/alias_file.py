"""A plain alias file, the quickest way to curate a KB (issue 62): one ``id<TAB>alias`` a
line, read by ``build-kb --aliases`` (names that join their entity) and
``build-kb --remove-aliases`` (names taken out of it, with their link counts). Blank lines
and lines starting with ``#`` are skipped; an id may be an alternate id of its entity."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from ..errors import Errors
from .entity import name_key
from .knowledge_base import KnowledgeBase


def read_alias_file(path: str | Path, option: str = "--aliases") -> dict[str, list[str]]:
    """The aliases of ``path`` by id, in file order (E259 for a line that is not
    ``id<TAB>alias``, naming the file, the line and ``option``)."""
    aliases: dict[str, list[str]] = {}
    with Path(path).open(encoding="utf8", errors="strict") as file_:
        try:
            for number, line in enumerate(file_, start=1):
                text = line.rstrip("\r\n")
                if not text.strip() or text.lstrip().startswith("#"):
                    continue
                entity_id, tab, alias = text.partition("\t")
                entity_id, alias = entity_id.strip(), " ".join(alias.split())
                if not tab or not entity_id or not alias:
                    raise ValueError(Errors.E259.format(
                        where=f"{path}:{number}", option=option, line=text[:80]))
                aliases.setdefault(entity_id, []).append(alias)
        except UnicodeDecodeError as err:
            raise ValueError(Errors.E259.format(
                where=str(path), option=option, line=f"not UTF-8 ({err.reason})")) from None
    return aliases


def unknown_ids(kb: KnowledgeBase, aliases: Mapping[str, Sequence[str]], path: Path,
                option: str) -> None:
    """E260 when an id of the alias file ``path`` is no entity (or alternate id) of ``kb``:
    a typo would otherwise change nothing, silently."""
    missing = [entity_id for entity_id in aliases if entity_id not in kb]
    if missing:
        raise ValueError(Errors.E260.format(path=path, option=option, n=len(missing),
                                            ids=", ".join(missing[:5])))


def without_aliases(kb: KnowledgeBase, removed: Mapping[str, Iterable[str]]
                    ) -> tuple[KnowledgeBase, int, list[tuple[str, str]]]:
    """A copy of ``kb`` without the aliases ``removed`` (per id, compared by ``name_key``:
    case and spaces aside) and their link counts; returns it, how many aliases went, and
    the (id, alias) pairs it did not hold. An entity's preferred name is refused (E261):
    an entity keeps a name."""
    by_entity = kb.by_entity({i: list(texts) for i, texts in removed.items()})
    entities, n_removed, absent = [], 0, []
    for entity in kb:
        gone = {name_key(text): text for text in by_entity.get(entity.id, ())}
        if name_key(entity.name) in gone:
            raise ValueError(Errors.E261.format(entity_id=entity.id, name=entity.name))
        aliases = tuple(a for a in entity.aliases if name_key(a) not in gone)
        held = {name_key(a) for a in entity.aliases}
        absent.extend((entity.id, text) for key, text in gone.items() if key not in held)
        n_removed += len(entity.aliases) - len(aliases)
        if gone:
            entity = replace(entity, aliases=aliases, mention_counts=tuple(
                (text, count) for text, count in entity.mention_counts
                if name_key(text) not in gone))
        entities.append(entity)
    return KnowledgeBase(entities), n_removed, absent
