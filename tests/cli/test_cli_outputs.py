"""Commands refuse an output that is one of their inputs, create output folders first and
write atomically (issue 14, item 6)."""

import errno
import os
import stat
from contextlib import contextmanager
from pathlib import Path

import pytest
import spacy
from spacy.tokens import DocBin

from spacy_arboel.outputs import atomic_file, atomic_folder
from spacy_arboel.pipeline.loading import save_pipeline

ROOT = Path(__file__).resolve().parents[2]
PUBTATOR = ("1|t|Aspirin induced cough.\n1|a|Fever was caused by aspirin.\n"
            "1\t0\t7\tAspirin\tChemical\tD001241\n1\t16\t21\tcough\tDisease\tD003371\n\n")


def _refused(result, code: str = "E040") -> None:
    assert result.exit_code != 0
    assert f"[{code}]" in result.output, result.output


@pytest.fixture
def files(tmp_path, toy_examples):
    """A PubTator file, a gold corpus, a metrics JSON, a KB and a pipeline folder that
    cannot be loaded (so a refusal shows that the check runs before loading)."""
    (tmp_path / "dev.txt").write_text(PUBTATOR)
    DocBin(docs=[eg.reference for eg in toy_examples]).to_disk(tmp_path / "dev.spacy")
    (tmp_path / "run.json").write_text('{"all": {"n": 1}}\n')
    (tmp_path / "kb.jsonl").write_text('{"id": "D1", "name": "Cough"}\n')
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.cfg").write_text("[nlp]\n")
    return tmp_path


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file()}


# each command with an output that is (or lies in, or contains) one of its inputs
CLASHES = [
    ("convert", "{d}/dev.txt", "{d}/dev.txt"),
    ("build-kb", "{d}/kb.jsonl", "--jsonl", "{d}/kb.jsonl"),
    ("compare-runs", "{d}/run.json", "--markdown", "{d}/run.json"),
    ("compare-runs", "{d}/run.json", "--markdown", "{d}/t.md", "--plot", "{d}/t.md"),
    ("evaluate", "{d}/model", "{d}/dev.spacy", "--output", "{d}/dev.spacy"),
    ("evaluate-e2e", "{d}/model", "{d}/dev.spacy", "--output", "{d}/dev.spacy"),
    ("evaluate-rerank", "{d}/model", "{d}/dev.spacy", "--output", "{d}/dev.spacy"),
    ("tune-e2e", "{d}/model", "{d}/dev.spacy", "--output-model", "{d}/model"),
    ("tune-nil", "{d}/model", "{d}/dev.spacy", "--plot", "{d}/dev.spacy"),
    ("tune-nil", "{d}/model", "{d}/dev.spacy", "--test", "{d}/dev.spacy", "--output",
     "{d}/dev.spacy"),
    ("evaluate-coref", "{d}/model", "{d}/dev.spacy", "--output", "{d}/dev.spacy"),
    ("tune-coref", "{d}/model", "{d}/dev.spacy", "--output", "{d}/dev.spacy"),
    ("cluster", "{d}/dev.spacy", "{d}/dev.spacy", "--model", "{d}/model"),
    ("cluster", "{d}/dev.spacy", "{d}/out.spacy", "--model", "{d}/out.spacy"),
]
NESTED = [
    ("evaluate", "{d}/model", "{d}/dev.spacy", "--output", "{d}/model/metrics.json"),
    ("tune-nil", "{d}/model", "{d}/dev.spacy", "--output-model", "{d}/model/nil"),
    ("add-coref", "{d}/model", "--output", "{d}/model/with_coref"),
    ("add-coref", "{d}/model", "--settings", "{d}/model/config.cfg"),  # in place
    ("convert", "{d}", "{d}/dev.spacy"),
]


@pytest.mark.parametrize("args", CLASHES, ids=lambda a: " ".join(a[:1] + a[-2:-1]))
def test_an_output_that_is_an_input_is_refused(files, args, cli):
    before = _snapshot(files)
    _refused(cli(*(a.format(d=files) for a in args)))
    assert _snapshot(files) == before


@pytest.mark.parametrize("args", NESTED, ids=lambda a: " ".join(a[:1] + a[-2:-1]))
def test_an_output_inside_an_input_folder_is_refused(files, args, cli):
    before = _snapshot(files)
    _refused(cli(*(a.format(d=files) for a in args)), "E041")
    assert _snapshot(files) == before


def test_missing_output_folders_are_created(saved_linker, cli):
    out = saved_linker / "new" / "folder" / "out.spacy"
    result = cli("cluster", saved_linker / "gold.spacy", out, "--model", saved_linker / "pipeline")
    assert result.exit_code == 0, result.output
    assert len(DocBin().from_disk(out)) == len(DocBin().from_disk(saved_linker / "gold.spacy"))
    saved = saved_linker / "other" / "folder" / "with_coref"
    result = cli("add-coref", saved_linker / "pipeline", "--output", saved)
    assert result.exit_code == 0, result.output
    assert spacy.load(saved).pipe_names == ["arbo_entity_linker", "arbo_coref"]
    assert not [p for p in saved.parent.iterdir() if p.name.startswith(".")]


def test_add_coref_in_place_replaces_the_pipeline(saved_linker, cli):
    result = cli("add-coref", saved_linker / "pipeline", "--components.arbo_coref.k", 3)
    assert result.exit_code == 0, result.output
    assert spacy.load(saved_linker / "pipeline").get_pipe("arbo_coref").settings.k == 3
    # an explicit --output equal to MODEL is the same update in place
    result = cli("add-coref", saved_linker / "pipeline", "--output", saved_linker / "pipeline",
                 "--components.arbo_coref.k", 4)
    assert result.exit_code == 0, result.output
    assert spacy.load(saved_linker / "pipeline").get_pipe("arbo_coref").settings.k == 4
    assert not [p for p in (saved_linker / "pipeline").iterdir() if p.name.startswith(".")]


def test_atomic_file_keeps_the_old_file_when_writing_fails(tmp_path):
    target = tmp_path / "metrics.json"
    target.write_text("old")
    with pytest.raises(RuntimeError), atomic_file(target) as temp:
        temp.write_text("half of the new")
        raise RuntimeError("interrupted")
    assert target.read_text() == "old"
    assert list(tmp_path.iterdir()) == [target]
    with atomic_file(target) as temp:
        temp.write_text("new")
    assert target.read_text() == "new"
    assert list(tmp_path.iterdir()) == [target]


CONFIG = "[nlp]\npipeline = []\n"


class _Pipeline:
    """Saves a config.cfg and meta.json, then fails when ``fail`` is set."""

    def __init__(self, text: str, fail: bool = False):
        self.text, self.fail = text, fail

    def to_disk(self, path: Path) -> None:
        path.mkdir()
        (path / "config.cfg").write_text(CONFIG)
        (path / "meta.json").write_text(self.text)
        if self.fail:
            raise OSError("disk full")


def test_folder_save_keeps_the_old_folder_when_saving_fails(tmp_path):
    target = tmp_path / "model"
    target.mkdir()
    (target / "config.cfg").write_text(CONFIG)
    (target / "meta.json").write_text("old")
    (target / "vocab").mkdir()
    (target / "vocab" / "strings.json").write_text("old")
    with pytest.raises(OSError, match="disk full"):
        save_pipeline(_Pipeline("new", fail=True), target)
    assert _snapshot(target) == {"config.cfg": CONFIG.encode(), "meta.json": b"old",
                                 "vocab/strings.json": b"old"}
    assert list(tmp_path.iterdir()) == [target]
    save_pipeline(_Pipeline("new"), target)
    assert _snapshot(target) == {"config.cfg": CONFIG.encode(), "meta.json": b"new"}
    assert list(tmp_path.iterdir()) == [target]


def test_a_folder_save_replaces_only_a_pipeline_or_an_empty_folder(tmp_path):
    documents = tmp_path / "Documents"
    documents.mkdir()
    (documents / "thesis.txt").write_text("years of work")
    (tmp_path / "file").write_text("a file")
    for target in (documents, tmp_path / "file"):
        before = _snapshot(tmp_path)
        with pytest.raises(ValueError, match=r"\[E046\]"), atomic_folder(target):
            pytest.fail("nothing may be written")
        with pytest.raises(ValueError, match=r"\[E046\]"):
            save_pipeline(_Pipeline("new"), target)
        assert _snapshot(tmp_path) == before
        assert sorted(p.name for p in tmp_path.iterdir()) == ["Documents", "file"]
    for name, files in (("empty", []), ("old_pipeline", ["config.cfg", "meta.json"])):
        target = tmp_path / name
        target.mkdir()
        for file_ in files:
            (target / file_).write_text(CONFIG)
        save_pipeline(_Pipeline("new"), target)
        assert _snapshot(target) == {"config.cfg": CONFIG.encode(), "meta.json": b"new"}


def _refuses_to_replace(target: Path) -> None:
    """atomic_folder and save_pipeline refuse ``target`` (E046) and change nothing."""
    before = _snapshot(target.parent)
    with pytest.raises(ValueError, match=r"\[E046\]"), atomic_folder(target):
        pytest.fail("nothing may be written")
    with pytest.raises(ValueError, match=r"\[E046\]"):
        save_pipeline(_Pipeline("new"), target)
    assert _snapshot(target.parent) == before


def _init_config(path: Path) -> None:
    """A valid spaCy config.cfg (of a pipeline with a ner), written in this process."""
    nlp = spacy.blank("xx")
    nlp.add_pipe("ner")
    nlp.config.to_disk(path)


def test_a_folder_with_a_pipeline_file_and_other_files_is_not_replaced(tmp_path):
    """Issue 29, item 3: a config.cfg (or meta.json) alone does not make a pipeline."""
    target = tmp_path / "project"
    target.mkdir()
    _init_config(target / "config.cfg")
    _refuses_to_replace(target)  # no meta.json
    (target / "notes.txt").write_text("my notes")
    _refuses_to_replace(target)
    (target / "meta.json").write_text("{}")
    _refuses_to_replace(target)  # notes.txt is no part of a pipeline
    assert (target / "notes.txt").read_text() == "my notes"
    (target / "notes.txt").unlink()
    (target / "config.cfg").write_text("not a config")
    _refuses_to_replace(target)  # a config.cfg that cannot be read


def test_only_a_saved_pipeline_that_holds_nothing_else_is_replaced(tmp_path):
    nlp = spacy.blank("xx")
    nlp.add_pipe("sentencizer")
    nlp.add_pipe("entity_ruler")
    nlp.to_disk(tmp_path / "model")
    save_pipeline(nlp, tmp_path / "model")  # a pipeline replaces the one it was loaded from
    assert spacy.load(tmp_path / "model").pipe_names == ["sentencizer", "entity_ruler"]
    save_pipeline(spacy.blank("xx"), tmp_path / "model")  # or another pipeline
    assert spacy.load(tmp_path / "model").pipe_names == []
    nlp.to_disk(tmp_path / "model")
    for extra in ("notes.txt", "other_component"):
        (tmp_path / "model" / extra).write_text("mine")
        _refuses_to_replace(tmp_path / "model")
        (tmp_path / "model" / extra).unlink()
    save_pipeline(nlp, tmp_path / "model")
    assert not [p for p in tmp_path.iterdir() if p.name != "model"]


@pytest.mark.parametrize("command", ["tune-nil", "tune-e2e"])
def test_an_output_model_over_a_folder_that_is_no_pipeline_is_refused(files, command, cli):
    (files / "Documents").mkdir()
    (files / "Documents" / "thesis.txt").write_text("years of work")
    before = _snapshot(files)
    # the model cannot be loaded: the refusal comes before any work
    _refused(cli(command, files / "model", files / "dev.spacy",
                 "--output-model", files / "Documents"), "E046")
    assert _snapshot(files) == before
    # a config.cfg does not make a pipeline of a folder with other files (issue 29, item 3)
    (files / "Documents" / "config.cfg").write_text("[nlp]\npipeline = []\n")
    (files / "Documents" / "meta.json").write_text("{}")
    before = _snapshot(files)
    _refused(cli(command, files / "model", files / "dev.spacy",
                 "--output-model", files / "Documents"), "E046")
    assert _snapshot(files) == before


def test_add_coref_does_not_replace_a_folder_with_a_config_and_other_files(saved_linker, cli):
    """Issue 29, item 3: add-coref --output DIR, DIR holding a config.cfg and notes.txt."""
    target = saved_linker / "project"
    target.mkdir()
    _init_config(target / "config.cfg")
    (target / "notes.txt").write_text("my notes")
    before = _snapshot(saved_linker)
    _refused(cli("add-coref", saved_linker / "pipeline", "--output", target), "E046")
    assert _snapshot(saved_linker) == before
    # the pipeline add-coref wrote is replaced by a second run
    result = cli("add-coref", saved_linker / "pipeline", "--output", saved_linker / "out")
    assert result.exit_code == 0, result.output
    result = cli("add-coref", saved_linker / "pipeline", "--output", saved_linker / "out",
                 "--components.arbo_coref.k", 2)
    assert result.exit_code == 0, result.output
    assert spacy.load(saved_linker / "out").get_pipe("arbo_coref").settings.k == 2


def test_atomic_file_syncs_the_file_before_renaming_it(tmp_path, monkeypatch):
    import os

    events = []
    monkeypatch.setattr(os, "fsync", lambda fd: events.append("fsync"))
    real_replace = os.replace
    monkeypatch.setattr(os, "replace", lambda a, b: (events.append("replace"),
                                                     real_replace(a, b)))
    with atomic_file(tmp_path / "out.json") as temp:
        temp.write_text("{}")
    assert events == ["fsync", "replace"]


@pytest.mark.parametrize("command", ["evaluate", "tune-nil"])
def test_a_coded_error_while_loading_is_printed_not_a_traceback(saved_linker, command, cli):
    """Issue 40, item 6: a setting refused at load (here a raw-score threshold of 45 on a
    probability linker, E011) reached the user as a traceback."""
    result = cli(command, saved_linker / "pipeline", saved_linker / "gold.spacy",
                 "--components.arbo_entity_linker.threshold", "45")
    assert result.exit_code == 1 and "[E011]" in result.output, result.output
    assert isinstance(result.exception, SystemExit)
    assert "Traceback" not in result.output


def test_a_plot_without_matplotlib_is_refused_before_anything_is_written(tmp_path,
                                                                          monkeypatch, cli):
    """matplotlib is the ``plots`` extra: `compare-runs --plot` without it says how to
    install it (E227) and writes nothing, not even its other outputs."""
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "matplotlib" else real(name, *a))
    metrics = tmp_path / "run.json"
    metrics.write_text('{"name": "run", "nel_inkb_recall@1": 0.5}')
    out = tmp_path / "out"
    result = cli("compare-runs", metrics, "--markdown", out / "table.md", "--plot", out / "r.png")
    assert result.exit_code == 1 and "[E227]" in result.output, result.output
    assert "pip install matplotlib" in result.output and not out.exists()


# --- issue 59: outputs that cannot be written, errors on a path, modes kept -----------------

KB_LINE = '{"id": "D1", "name": "Cough"}\n'


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@contextmanager
def _umask(mask: int):
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


def test_atomic_file_keeps_the_mode_of_the_file_it_replaces(tmp_path):
    """Issue 59, 5: a file kept 0600 (licensed UMLS strings) is not left 0644 by a rebuild;
    a new file follows the umask."""
    target = tmp_path / "kb.jsonl"
    target.write_text("old")
    for mode in (0o600, 0o640, 0o604):
        target.chmod(mode)
        with _umask(0o022), atomic_file(target) as temp:
            assert _mode(temp) == mode  # before anything is written: never world-readable
            temp.write_text("new")
        assert target.read_text() == "new" and _mode(target) == mode
    for mask, mode in ((0o077, 0o600), (0o022, 0o644)):
        new = tmp_path / f"new-{mask:o}.jsonl"
        with _umask(mask), atomic_file(new) as temp:
            temp.write_text("new")
        assert _mode(new) == mode


def test_atomic_folder_keeps_the_mode_of_the_folder_it_replaces(tmp_path):
    target = tmp_path / "model"
    target.mkdir()
    target.chmod(0o700)
    with _umask(0o022):
        save_pipeline(_Pipeline("new"), target)
    assert _mode(target) == 0o700 and (target / "meta.json").read_text() == "new"
    with _umask(0o077), atomic_folder(tmp_path / "fresh") as temp:
        temp.mkdir()
    assert _mode(tmp_path / "fresh") == 0o700
    # a file of the folder that replaces one of the same name keeps its mode (a saved
    # pipeline's or a prepared dataset's kb.jsonl); a new one has the umask's
    (target / "meta.json").chmod(0o600)
    with _umask(0o022), atomic_folder(target) as temp:
        temp.mkdir()
        (temp / "meta.json").write_text("newer")
        (temp / "config.cfg").write_text("[nlp]\npipeline = []\n")
    assert _mode(target / "meta.json") == 0o600 and _mode(target / "config.cfg") == 0o644


@pytest.fixture
def denied(monkeypatch):
    """``os.access`` that refuses writing to the paths added to the returned set (what a
    user who is not root meets; root passes every permission check)."""
    real, paths = os.access, set()

    def access(path, mode, *args, **kwargs):
        if mode & os.W_OK and Path(os.path.abspath(path)) in paths:
            return False
        return real(path, mode, *args, **kwargs)

    monkeypatch.setattr(os, "access", access)
    return paths


def test_check_writable_refuses_what_this_user_cannot_write(tmp_path, denied):
    """Issue 59, 4c, the check's logic whoever runs it (os.access stands for the user)."""
    from spacy_arboel.outputs import check_writable

    folder, kb = tmp_path / "out", tmp_path / "out" / "kb.jsonl"
    folder.mkdir()
    kb.write_text(KB_LINE)
    check_writable("OUTPUT", kb)
    check_writable("OUTPUT", folder / "new" / "deeper" / "kb.jsonl")
    check_writable("OUTPUT", folder, folder=True)
    denied.add(kb)
    with pytest.raises(ValueError, match=r"\[E255\] OUTPUT \(.*kb.jsonl\) is read-only"):
        check_writable("OUTPUT", kb)
    denied.add(folder)
    for path, is_folder in ((folder / "kb.jsonl", False), (folder / "a" / "b.json", False),
                            (folder / "model", True), (folder, True)):
        with pytest.raises(ValueError, match=rf"\[E254\] OUTPUT \({path}\) cannot be written: "
                                             rf"this user may not (create files|write) in "):
            check_writable("OUTPUT", path, folder=is_folder)
    check_writable("OUTPUT", folder)  # a file output that is a folder: E241, elsewhere
    (tmp_path / "notes.txt").write_text("")
    with pytest.raises(ValueError, match=r"\[E256\] .*notes.txt is a file, not a folder"):
        check_writable("OUTPUT", tmp_path / "notes.txt" / "sub" / "kb.jsonl")


def test_a_read_only_output_file_is_refused_not_replaced(tmp_path, cli):
    """A file with no write permission at all is the user's "keep this": refused even for
    root, whom the permission bits do not stop."""
    kb, output = tmp_path / "kb.jsonl", tmp_path / "out.jsonl"
    kb.write_text(KB_LINE)
    output.write_text('{"id": "OLD", "name": "Old"}\n')
    output.chmod(0o444)
    result = cli("build-kb", output, "--jsonl", kb)
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit), result.output
    assert "[E255]" in result.output and "mode 0444" in " ".join(result.output.split())
    assert "OLD" in output.read_text() and _mode(output) == 0o444


def test_an_unwritable_output_folder_is_refused_before_the_inputs_are_read(tmp_path, denied,
                                                                          monkeypatch, cli):
    from spacy_arboel.spacy_data import aliases

    def not_read(*args, **kwargs):
        raise AssertionError("an input was read before the output was checked")

    monkeypatch.setattr(aliases, "build_kb", not_read)
    kb, folder = tmp_path / "kb.jsonl", tmp_path / "locked"
    kb.write_text(KB_LINE)
    folder.mkdir()
    denied.add(folder)
    for output in (folder / "kb.jsonl", folder / "new" / "kb.jsonl"):
        result = cli("build-kb", output, "--jsonl", kb)
        assert result.exit_code == 1 and isinstance(result.exception, SystemExit), result.output
        assert "[E254]" in result.output and "chmod u+wx" in " ".join(result.output.split())
    assert not list(folder.iterdir())


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes whatever the permission bits say")
def test_an_unwritable_output_folder_is_refused_for_a_user(tmp_path, cli):
    kb, folder = tmp_path / "kb.jsonl", tmp_path / "locked"
    kb.write_text(KB_LINE)
    folder.mkdir()
    folder.chmod(0o555)
    try:
        result = cli("build-kb", folder / "kb.jsonl", "--jsonl", kb)
    finally:
        folder.chmod(0o755)
    assert result.exit_code == 1 and "[E254]" in result.output, result.output
    assert not list(folder.iterdir())


def test_an_os_error_on_a_named_path_is_printed_as_a_coded_error(tmp_path, monkeypatch, cli):
    """The commands' one boundary: an OSError on a path (a folder given for a corpus, a
    file that cannot be written) is E257 naming it; an OSError of no path stays a bug's
    traceback."""
    from spacy_arboel.kb import KnowledgeBase

    (tmp_path / "folder").mkdir()
    result = cli("evaluate", tmp_path / "folder", tmp_path / "folder")
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit), result.output
    assert "[E257]" in result.output and "Is a directory" in " ".join(result.output.split())
    kb = tmp_path / "kb.jsonl"
    kb.write_text(KB_LINE)

    def denied(self, path, **kwargs):
        raise PermissionError(errno.EACCES, "Permission denied", str(path))

    monkeypatch.setattr(KnowledgeBase, "to_jsonl", denied)
    result = cli("build-kb", tmp_path / "out.jsonl", "--jsonl", kb)
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit), result.output
    assert "[E257]" in result.output
    assert "out.jsonl: Permission denied" in " ".join(result.output.split())

    def bug(self, path, **kwargs):
        raise OSError("a bug of ours")

    monkeypatch.setattr(KnowledgeBase, "to_jsonl", bug)
    result = cli("build-kb", tmp_path / "out.jsonl", "--jsonl", kb)
    assert isinstance(result.exception, OSError) and "[E257]" not in result.output
