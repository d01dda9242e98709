"""``prepare``: the corpora and KB of one dataset (toy, BC5CDR, NCBI-disease) for project.yml."""

from __future__ import annotations

import json
from dataclasses import replace
from enum import StrEnum
from pathlib import Path

import spacy
import typer
from spacy.tokens import DocBin
from wasabi import msg

from ..data.convert import docs_to_docbin, pubtator_to_docs
from ..data.discovery import choose_heldout, without_ids
from ..data.pubtator import PubtatorDocument
from ..data.readers import read_pubtator_documents
from ..errors import Errors
from ..kb.build import without_entities
from ..kb.knowledge_base import KnowledgeBase
from .app import app
from .data_commands import SYNONYMS_HELP, parse_synonym_sources, save_kb, write_kb
from .outputs import atomic_file, check_outputs, write_text_atomic
from .train_commands import SETTINGS, read_datasets

SPLITS = ("train", "dev", "test")
# NCBI-disease has no public test file here: its development set is the test set and the
# last NCBI_DEV_FRACTION of the training documents become the dev set.
NCBI_DEV_FRACTION = 0.1

# NCBI-disease annotates four mention classes; the standard NCBI-disease NER task (BioBERT,
# BLURB) and `prepare ncbi` by default collapse them into one: a transformer `ner` does not
# learn the four on this CPU budget (BENCHMARKS.md, issue 17), and linking ignores labels.
NCBI_CLASSES = ("SpecificDisease", "DiseaseClass", "Modifier", "CompositeMention")
NCBI_LABEL = "Disease"

MESH_DESCRIPTORS = "mesh/mesh_descriptors_2026.csv"
MESH_SYNONYMS = "mesh/mesh_disease_synonyms.tsv"


class Dataset(StrEnum):
    toy = "toy"
    bc5cdr = "bc5cdr"
    ncbi = "ncbi"


DATA_FOLDERS = {Dataset.bc5cdr: "bc5cdr", Dataset.ncbi: "ncbi_disease"}


PREPARE_HELP = (
    "Write train.spacy, dev.spacy, test.spacy and kb.jsonl for a dataset to OUTPUT_DIR.\n\n"
    "toy: assets/toy/; the KB is assets/toy/kb.jsonl plus aliases from train and dev.\n\n"
    "bc5cdr: the BC5CDR training, development and test sets; the KB is the MeSH descriptors "
    "with the MeSH disease synonyms, plus aliases from train and dev.\n\n"
    "ncbi: NCBI-disease has no test file, so its development set is the test set and the last "
    "10% of its training documents are the dev set; the KB is MeSH as for bc5cdr, plus aliases "
    "from the training file (train and dev). Its four mention classes (SpecificDisease, "
    "DiseaseClass, Modifier, CompositeMention) become one label, Disease, as in the standard "
    "NCBI-disease NER task, unless --keep-ncbi-classes."
)


@app.command("prepare", help=PREPARE_HELP)
def prepare_command(
    dataset: Dataset = typer.Argument(..., help="toy, bc5cdr or ncbi"),
    output_dir: Path = typer.Argument(..., help="Folder for train/dev/test.spacy and kb.jsonl"),
    data_dir: Path = typer.Option(Path("../shared/data"), "--data-dir",
                                  help="Folder holding bc5cdr/, ncbi_disease/ and mesh/"),
    assets_dir: Path = typer.Option(Path("assets"), "--assets-dir",
                                    help="Folder holding toy/"),
    holdout: float = typer.Option(
        0.0, "--holdout", help="Discovery setting: hold this fraction of the entities "
        "mentioned in test, and of those mentioned in dev, out of the KB and of the train "
        "gold ids (0: none)"),
    seed: int = typer.Option(0, "--seed", help="Seed of the held-out entity sample"),
    remove_types: list[str] = typer.Option(
        [], "--remove-types", help="NIL setting of PEL §5.3: remove the KB entities of these "
        "types (e.g. Chemical) from the KB and from the train gold ids; their dev and test "
        "mentions become NILs"),
    synonyms: list[str] = typer.Option(
        [], "--synonyms", help=f"bc5cdr, ncbi: {SYNONYMS_HELP} (as build-kb), or default: "
        "the dataset's `synonyms` in --settings"),
    settings: Path = typer.Option(SETTINGS, "--settings",
                                  help="The datasets' settings (for --synonyms default)"),
    keep_ncbi_classes: bool = typer.Option(
        False, "--keep-ncbi-classes", help="ncbi: keep the four mention classes as labels "
        "instead of one Disease label"),
) -> None:
    """Write the corpora (.spacy) and the KB (JSONL) of a dataset (see ``PREPARE_HELP``)."""
    dataset = Dataset(dataset)
    if dataset is Dataset.toy:
        check_outputs({"--assets-dir": assets_dir / "toy"}, {"OUTPUT_DIR": output_dir})
    else:
        check_outputs({"--data-dir": [data_dir / DATA_FOLDERS[dataset], data_dir / "mesh"]},
                      {"OUTPUT_DIR": output_dir})
    splits, kb_sources = _sources(dataset, data_dir, assets_dir)

    def dataset_synonyms() -> list[str]:
        try:
            described = read_datasets(settings).get(dataset.value) or {}
        except ValueError as err:  # E153: the settings file cannot be read
            msg.fail(str(err), exits=1)
        return list(described.get("synonyms", []))

    sources = parse_synonym_sources(synonyms, default=dataset_synonyms)
    if sources and dataset is Dataset.toy:
        msg.fail(Errors.E190.format(dataset=dataset.value), exits=1)
    if sources:
        kb_sources["synonym_sources"] = sources
    if dataset is Dataset.ncbi and not keep_ncbi_classes:
        splits = {split: relabel(docs, dict.fromkeys(NCBI_CLASSES, NCBI_LABEL))
                  for split, docs in splits.items()}
        msg.info(f"NCBI-disease's mention classes ({', '.join(NCBI_CLASSES)}) are labelled "
                 f"{NCBI_LABEL} (--keep-ncbi-classes keeps them)")
    output_dir.mkdir(parents=True, exist_ok=True)
    nlp = spacy.blank("en")
    rows = []
    for split in SPLITS:
        summary = docs_to_docbin(pubtator_to_docs(splits[split], nlp),
                                 output_dir / f"{split}.spacy")
        rows.append((split, summary["docs"], summary["mentions"], summary["ents"],
                     summary["dropped_overlaps"], summary["misaligned"]))
    msg.good(f"{dataset.value}: saved {', '.join(f'{s}.spacy' for s in SPLITS)} to {output_dir}")
    msg.table(rows, header=("", "docs", "mentions", "ents", "dropped overlaps", "misaligned"),
              aligns=("l", "r", "r", "r", "r", "r"))
    write_kb(output_dir / "kb.jsonl",
             alias_corpus=[output_dir / "train.spacy", output_dir / "dev.spacy"], **kb_sources)
    if holdout:
        hold_out_entities(output_dir, holdout, seed, nlp)
    if remove_types:
        remove_entity_types(output_dir, remove_types, nlp)


def remove_entity_types(output_dir: Path, types: list[str], nlp) -> None:
    """PEL's NIL setting: drop every KB entity typed with one of ``types`` from kb.jsonl and
    from the gold ids of train.spacy (ids go to removed_ids.json). Only typed entities can be
    removed: the MeSH KB types those that the corpora or the disease synonyms type."""
    kb = KnowledgeBase.from_jsonl(output_dir / "kb.jsonl")
    removed = sorted(e.id for e in kb if set(e.types) & set(types))
    if not removed:
        known = sorted({t for e in kb for t in e.types})
        msg.fail(Errors.E113.format(types=", ".join(types), known=", ".join(known) or "none"),
                 exits=1)
    _drop_entities(output_dir, set(removed), nlp)
    write_text_atomic(output_dir / "removed_ids.json", json.dumps(
        {"types": types, "ids": removed}, indent=2) + "\n")
    msg.good(f"Removed the {len(removed)} KB entities of type {', '.join(types)} from the KB "
             f"and the train gold ids: {output_dir}/removed_ids.json")


def _drop_entities(output_dir: Path, ids: set[str], nlp) -> None:
    kb = KnowledgeBase.from_jsonl(output_dir / "kb.jsonl")
    save_kb(without_entities(kb, ids), output_dir / "kb.jsonl")
    train = [without_ids(doc, ids)
             for doc in DocBin().from_disk(output_dir / "train.spacy").get_docs(nlp.vocab)]
    with atomic_file(output_dir / "train.spacy") as temp:
        DocBin(docs=train, store_user_data=True).to_disk(temp)


def hold_out_entities(output_dir: Path, fraction: float, seed: int, nlp) -> None:
    """The discovery setting of arboEL-discovery §4: remove a sample of the entities mentioned
    in test, and one of those mentioned in dev, from kb.jsonl and from the gold ids of
    train.spacy. Dev and test keep their gold ids, so that dev tuning (λ, k) sees mentions
    whose entity is missing from the KB, as test does. The ids go to heldout_ids.json."""
    kb = KnowledgeBase.from_jsonl(output_dir / "kb.jsonl")

    def split_docs(split: str) -> list:
        return list(DocBin().from_disk(output_dir / f"{split}.spacy").get_docs(nlp.vocab))

    test_ids = choose_heldout(split_docs("test"), kb, fraction, seed)
    dev_ids = choose_heldout(split_docs("dev"), kb, fraction, seed)
    heldout = sorted(set(test_ids) | set(dev_ids))
    _drop_entities(output_dir, set(heldout), nlp)
    write_text_atomic(output_dir / "heldout_ids.json", json.dumps(
        {"fraction": fraction, "seed": seed, "ids": heldout, "test_ids": test_ids,
         "dev_ids": dev_ids}, indent=2) + "\n")
    msg.good(f"Held out {len(test_ids)} of the test set's and {len(dev_ids)} of the dev set's "
             f"KB entities ({fraction:.0%}, seed {seed}; {len(heldout)} in all) from the KB "
             f"and the train gold ids: {output_dir}/heldout_ids.json")


def _sources(
    dataset: Dataset, data_dir: Path, assets_dir: Path
) -> tuple[dict[str, list[PubtatorDocument]], dict]:
    """The documents of each split and the KB sources (keyword arguments of ``build_kb``)."""
    if dataset is Dataset.toy:
        root = _require(assets_dir / "toy", "folder", "toy")
        files = {split: _require(root / f"{split}.txt", "file", "toy") for split in SPLITS}
        splits = {split: _read(path) for split, path in files.items()}
        return splits, {"jsonl": [_require(root / "kb.jsonl", "file", "toy")]}
    _require(data_dir, "folder", dataset.value)
    root = _require(data_dir / DATA_FOLDERS[dataset], "folder", dataset.value)
    mesh = {
        "mesh_descriptors": _require(data_dir / MESH_DESCRIPTORS, "file", "mesh"),
        "disease_synonyms": _require(data_dir / MESH_SYNONYMS, "file", "mesh"),
    }
    if dataset is Dataset.bc5cdr:
        names = {"train": "Training", "dev": "Development", "test": "Test"}
        files = {split: _require(root / f"CDR_{name}Set.PubTator.txt", "file", "bc5cdr")
                 for split, name in names.items()}
        return {split: _read(path) for split, path in files.items()}, mesh
    train = _read(_require(root / "NCBItrainset_corpus.txt", "file", "ncbi"))
    test = _read(_require(root / "NCBIdevelopset_corpus.txt", "file", "ncbi"))
    n_dev = max(1, round(len(train) * NCBI_DEV_FRACTION))
    msg.info(f"NCBI-disease has no test file: its development set ({len(test)} docs) is the "
             f"test set, the last {n_dev} of its {len(train)} training docs the dev set")
    return {"train": train[:-n_dev], "dev": train[-n_dev:], "test": test}, mesh


def relabel(documents: list[PubtatorDocument],
            labels: dict[str, str]) -> list[PubtatorDocument]:
    """The documents with each mention label found in ``labels`` replaced by its value."""
    return [replace(document, mentions=[replace(m, label=labels.get(m.label, m.label))
                                        for m in document.mentions])
            for document in documents]


def _read(path: Path) -> list[PubtatorDocument]:
    return list(read_pubtator_documents(path))


def _require(path: Path, kind: str, origin: str) -> Path:
    exists = path.is_dir() if kind == "folder" else path.is_file()
    if not exists:
        msg.fail(Errors.E104.format(path=path.resolve(), kind=kind,
                                    origin=getattr(Errors, f"E104_{origin.upper()}")), exits=1)
    return path
