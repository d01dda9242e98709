"""CLI commands for data: ``convert`` (PubTator -> .spacy) and ``build-kb`` (-> KB JSONL)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import spacy
import typer
from spacy.language import Language
from spacy.tokens import Doc, DocBin
from wasabi import msg

from ..data.convert import docs_to_docbin, pubtator_to_docs
from ..data.readers import read_pubtator_documents
from ..errors import Errors
from ..kb.aliases import harvest_aliases, types_from_docs
from ..kb.entity import Entity
from ..kb.knowledge_base import KnowledgeBase
from ..kb.mesh import build_mesh_kb, dedupe_aliases
from .app import app


@app.command("convert")
def convert_command(
    input_path: Path = typer.Argument(..., help="PubTator file (or folder of .txt files)",
                                      exists=True),
    output_path: Path = typer.Argument(..., help="Output .spacy file"),
    lang: str = typer.Option("en", "--lang", help="Language of the blank tokenizer"),
    limit: int = typer.Option(0, "--limit", help="Convert at most N documents (0: all)"),
) -> None:
    """Convert a PubTator corpus to a spaCy DocBin (.spacy) with gold entities and kb_ids."""
    nlp = spacy.blank(lang)
    documents = read_pubtator_documents(input_path, limit)
    summary = docs_to_docbin(pubtator_to_docs(documents, nlp), output_path)
    msg.good(f"Saved {summary['docs']} docs to {output_path}")
    msg.table([(key.replace("_", " "), value) for key, value in summary.items()],
              header=("", "count"), aligns=("l", "r"))


@app.command("build-kb")
def build_kb_command(
    output_path: Path = typer.Argument(..., help="Output KB JSONL file"),
    mesh_descriptors: Path | None = typer.Option(
        None, "--mesh-descriptors", exists=True, help="MeSH descriptor CSV"),
    disease_synonyms: Path | None = typer.Option(
        None, "--disease-synonyms", exists=True, help="MeSH disease-synonym TSV"),
    alias_corpus: list[Path] = typer.Option(
        [], "--alias-corpus", exists=True,
        help="Corpus (.spacy or PubTator .txt) whose gold mentions add aliases; repeatable"),
    jsonl: list[Path] = typer.Option(
        [], "--jsonl", exists=True, help="Existing KB JSONL to include; repeatable"),
) -> None:
    """Build a KB JSONL from MeSH and/or JSONL files, with aliases harvested from corpora."""
    if mesh_descriptors is None and not jsonl:
        msg.fail(Errors.E101, exits=1)
    kb = KnowledgeBase()
    n_merged = 0
    if mesh_descriptors is not None:
        stats: dict[str, Any] = {}
        kb = build_mesh_kb(mesh_descriptors, disease_synonyms, stats)
        msg.info(f"MeSH: {stats['entities']} entities, {stats.get('aliases_added', 0)} synonym "
                 f"aliases, {stats.get('skipped', 0)} synonym rows without a MeSH id skipped")
    for path in jsonl:
        kb, merged = merge_kbs(kb, KnowledgeBase.from_jsonl(path))
        n_merged += merged
        msg.info(f"{path}: merged ({merged} ids already present, aliases combined)")
    n_aliases = n_typed = 0
    absent: set[str] = set()
    if alias_corpus:
        nlp = spacy.blank("en")
        docs = list(read_corpus_docs(alias_corpus, nlp))
        aliases = harvest_aliases(docs)
        labels = types_from_docs(docs)
        absent = {entity_id for entity_id in aliases if entity_id not in kb}
        before = sum(len(entity.aliases) for entity in kb)
        kb = kb.with_aliases(aliases, first=True)
        n_aliases = sum(len(entity.aliases) for entity in kb) - before
        kb, n_typed = add_missing_types(kb, labels)
    kb.to_jsonl(output_path)
    msg.good(f"Saved {len(kb)} entities to {output_path}")
    msg.table(
        [("entities", len(kb)), ("ids merged from several sources", n_merged),
         ("corpus aliases added", n_aliases), ("entities typed from corpora", n_typed),
         ("corpus ids absent from the KB", len(absent))],
        header=("", "count"), aligns=("l", "r"),
    )
    if absent:
        msg.text(f"e.g. absent: {', '.join(sorted(absent)[:10])}")


def read_corpus_docs(paths: Iterable[Path], nlp: Language) -> Iterator[Doc]:
    """Gold docs from ``.spacy`` DocBins or PubTator ``.txt`` files (or folders of them)."""
    for path in paths:
        files = [path]
        if path.is_dir():
            files = sorted(p for p in path.iterdir() if p.suffix in (".spacy", ".txt"))
        for file_path in files:
            if file_path.suffix == ".spacy":
                yield from DocBin().from_disk(file_path).get_docs(nlp.vocab)
            elif file_path.suffix == ".txt":
                yield from pubtator_to_docs(read_pubtator_documents(file_path), nlp)
            else:
                raise typer.BadParameter(Errors.E102.format(path=file_path))


def merge_kbs(first: KnowledgeBase, second: KnowledgeBase) -> tuple[KnowledgeBase, int]:
    """Append ``second`` to ``first``; an id in both keeps the first entry, aliases and types
    are combined. Returns the merged KB and the number of shared ids."""
    entities = {entity.id: entity for entity in first}
    shared = 0
    for entity in second:
        old = entities.get(entity.id)
        if old is None:
            entities[entity.id] = entity
            continue
        shared += 1
        aliases = dedupe_aliases(old.name, [*old.aliases, entity.name, *entity.aliases])
        types = tuple(dict.fromkeys([*old.types, *entity.types]))
        entities[entity.id] = Entity(old.id, old.name, old.description or entity.description,
                                     aliases, types)
    return KnowledgeBase(entities.values()), shared


def add_missing_types(
    kb: KnowledgeBase, labels: Mapping[str, Counter[str]]
) -> tuple[KnowledgeBase, int]:
    """Give entities without types the corpus labels of their id (most frequent first)."""
    entities, typed = [], 0
    for entity in kb:
        counter = labels.get(entity.id)
        if not entity.types and counter:
            entity = Entity(entity.id, entity.name, entity.description, entity.aliases,
                            tuple(label for label, _ in counter.most_common()))
            typed += 1
        entities.append(entity)
    return KnowledgeBase(entities), typed
