"""The README's examples, and those of docs/usage.md where the README's other recipes moved
(issue 62), run as written (with the tiny encoder and the toy KB substituted)."""

import contextlib
import io
import json
import multiprocessing
import re
import shutil
from pathlib import Path

import pytest
import spacy

from tests.conftest import TOY_ENTITIES

README = Path(__file__).resolve().parents[1] / "README.md"
DOCS = README.parent / "docs"
USAGE = DOCS / "usage.md"  # the recipes beyond the README's first page


def _python_block(heading: str, page: Path = README) -> str:
    """The first python block of ``page`` (the README, or a docs page) after ``heading``."""
    text = page.read_text()
    return re.search(r"```python\n(.*?)```", text[text.index(heading):], re.S)[1]


def test_the_own_pipeline_example_links(tiny_encoder, toy_kb_path):
    code = _python_block("### Use it in your own pipeline")
    given = 'linker = nlp.add_pipe("arbo_entity_linker", config={"kb_path": "kb.jsonl"})'
    assert given in code.splitlines()  # run, not commented out
    config = {"kb_path": str(toy_kb_path), "model": {"encoder_name": tiny_encoder}}
    code = code.replace(given, f'linker = nlp.add_pipe("arbo_entity_linker", config={config!r})')
    printed = io.StringIO()
    namespace: dict = {}
    with contextlib.redirect_stdout(printed):
        exec(code, namespace)
    doc = namespace["doc"]
    ids = {entity["id"] for entity in TOY_ENTITIES}
    assert [ent.text for ent in doc.ents] == ["Pepcid", "delirious", "lignocaine"]
    assert all(ent.kb_id_ in ids and ent._.kb_candidates for ent in doc.ents)
    assert len(printed.getvalue().splitlines()) == 3


def test_the_span_group_example_links_the_groups_spans(tiny_encoder, toy_kb_path):
    code = _python_block("### Link span groups, not only `doc.ents`", USAGE)
    given = '    "kb_path": "kb.jsonl",'
    assert given in code.splitlines()
    code = code.replace(given, f'    "kb_path": {str(toy_kb_path)!r}, "model": '
                               f'{{"encoder_name": {tiny_encoder!r}}},')
    printed = io.StringIO()
    namespace: dict = {"nlp": spacy.blank("en")}
    with contextlib.redirect_stdout(printed):
        exec(code, namespace)
    doc = namespace["doc"]
    ids = {entity["id"] for entity in TOY_ENTITIES}
    assert [s.text for s in doc.spans["sc"]] == ["Pepcid", "delirious"] and not doc.ents
    assert all(s.kb_id_ in ids and s._.kb_candidates for s in doc.spans["sc"])
    assert printed.getvalue().startswith("[('Pepcid', 'D")


def test_an_untrained_linker_not_set_up_says_what_to_call(tiny_encoder, toy_kb_path):
    """What docs/usage.md says happens without ensure_ready() or nlp.initialize()."""
    nlp = spacy.blank("en")
    nlp.add_pipe("arbo_entity_linker", config={"kb_path": str(toy_kb_path),
                                               "model": {"encoder_name": tiny_encoder}})
    doc = nlp.make_doc("Daily aspirin.")
    doc.ents = [doc.char_span(6, 13, label="Chemical")]
    with pytest.raises(ValueError, match=r"E051.*nlp\.initialize\(\).*ensure_ready\(\)"):
        nlp(doc)


def test_the_pipeline_api_example_swaps_the_kb(saved_linker, tmp_path, monkeypatch):
    """The "From Python" example, run in a folder holding its paths: a pipeline saved with
    a smaller KB that links only with it."""
    code = _python_block("## From Python: `spacy_arboel.pipeline`", DOCS / "cli.md")
    (tmp_path / "training").mkdir()
    (saved_linker / "pipeline").rename(tmp_path / "training" / "model-best")
    smaller = TOY_ENTITIES[:3]
    (tmp_path / "my_kb.jsonl").write_text("".join(json.dumps(e) + "\n" for e in smaller))
    monkeypatch.chdir(tmp_path)
    exec(code, {})
    nlp = spacy.load(tmp_path / "my-pipeline")
    linker = nlp.get_pipe("arbo_entity_linker")
    assert linker.kb.ids == [e["id"] for e in smaller] and linker.linking.top_k == 8
    doc = nlp.make_doc("Daily aspirin.")
    doc.ents = [doc.char_span(6, 13, label="Chemical")]
    assert nlp(doc).ents[0].kb_id_ in {e["id"] for e in smaller}


def test_a_sourced_linker_takes_another_kb_the_way_the_readme_says(saved_english_linker,
                                                                   tmp_path, monkeypatch):
    """docs/usage.md's way round spaCy ignoring `config=` when sourcing: load with the KB,
    then source from what was loaded."""
    code = _python_block("spaCy ignores `config=` when it sources a component", USAGE)
    (tmp_path / "training").mkdir()
    (saved_english_linker / "pipeline").rename(tmp_path / "training" / "model-best")
    smaller = TOY_ENTITIES[:3]
    (tmp_path / "my_kb.jsonl").write_text("".join(json.dumps(e) + "\n" for e in smaller))
    monkeypatch.chdir(tmp_path)
    namespace = {"nlp": spacy.blank("en"), "spacy": spacy}
    exec(code, namespace)
    linker = namespace["nlp"].get_pipe("arbo_entity_linker")
    assert sorted(linker.kb.ids) == sorted(e["id"] for e in smaller)
    # a path that names no file is an error, never ignored
    with pytest.raises(ValueError, match="E221"):
        spacy.load("training/model-best",
                   config={"components.arbo_entity_linker.kb_path": "no_such_kb.jsonl"})


def _bash_block(heading: str, page: Path = README) -> list[str]:
    """The command lines of the first bash block of ``page`` after ``heading``."""
    text = page.read_text()
    block = re.search(r"```bash\n(.*?)```", text[text.index(heading):], re.S)[1]
    return [line.split("  #")[0].strip() for line in block.splitlines()
            if line.strip() and not line.startswith("#")]


def _two_folders(tmp_path):
    """``home`` with the toy KB as kb.jsonl, and ``elsewhere`` with another kb.jsonl."""
    home, elsewhere = tmp_path / "home", tmp_path / "elsewhere"
    home.mkdir(), elsewhere.mkdir()
    (home / "kb.jsonl").write_text("".join(json.dumps(e) + "\n" for e in TOY_ENTITIES))
    (elsewhere / "kb.jsonl").write_text("".join(json.dumps(e) + "\n" for e in TOY_ENTITIES[3:]))
    return home, elsewhere


def _linked(doc):
    return [(e.text, e.kb_id_, e._.kb_candidates) for e in doc.ents]


def test_the_own_pipeline_recipe_links_alike_when_loaded_elsewhere(tiny_encoder, tmp_path,
                                                                   monkeypatch):
    """Issue 40: the README's own-pipeline recipe, saved with its relative "kb.jsonl" and
    loaded from a folder holding another kb.jsonl, links with the KB it was saved with."""
    home, elsewhere = _two_folders(tmp_path)
    code = _python_block("### Use it in your own pipeline")
    given = 'config={"kb_path": "kb.jsonl"}'
    assert given in code
    code = code.replace(given, f'config={{"kb_path": "kb.jsonl", '
                               f'"model": {{"encoder_name": {tiny_encoder!r}}}}}')
    monkeypatch.chdir(home)
    namespace: dict = {}
    with contextlib.redirect_stdout(io.StringIO()):
        exec(code, namespace)
    namespace["nlp"].to_disk("my_pipeline")
    expected = _linked(namespace["doc"])
    monkeypatch.chdir(elsewhere)
    nlp = spacy.load(home / "my_pipeline")
    assert _linked(nlp(namespace["doc"].text)) == expected
    assert nlp.get_pipe("arbo_entity_linker").kb.ids == [e["id"] for e in TOY_ENTITIES]


def test_the_own_corpus_recipe_links_alike_when_loaded_elsewhere(tiny_encoder, tmp_path,
                                                                 monkeypatch, cli):
    """The own-corpus recipe (docs/usage.md), run as written (relative paths, the tiny
    encoder added to init-config), then its model-best loaded from another folder."""
    from spacy.cli.train import train

    from tests.conftest import TOY_SENTENCES

    home, elsewhere = _two_folders(tmp_path)
    commands = _bash_block("### Bring your own corpus and train", USAGE)
    assert commands[-1] == "python -m spacy train linker.cfg --output training"
    monkeypatch.chdir(home)
    for split in ("train", "dev"):
        Path(f"{split}.jsonl").write_text("".join(json.dumps({"text": text, "spans": [
            {"start": s, "end": e, "label": label, "kb_id": kb} for s, e, label, kb in ents]})
            + "\n" for text, ents in TOY_SENTENCES))
    for command in commands[:-1]:
        args = command.split()[3:]  # python -m spacy_arboel ...
        if args[0] == "init-config":
            args += ["--encoder", tiny_encoder, "--lang", "xx"]
        result = cli(*args)
        assert result.exit_code == 0, (command, result.output)
    train(Path("linker.cfg"), Path("training"), overrides={
        "training.max_steps": 2, "training.eval_frequency": 2, "training.max_epochs": 0})
    nlp = spacy.load("training/model-best")

    def link(pipeline):
        doc = pipeline.make_doc("Aspirin induced cough.")
        doc.ents = [doc.char_span(0, 7, label="Chemical"),
                    doc.char_span(16, 21, label="Disease")]
        return _linked(pipeline(doc))

    expected = link(nlp)
    monkeypatch.chdir(elsewhere)
    moved = spacy.load(home / "training" / "model-best")
    assert link(moved) == expected
    assert len(moved.get_pipe("arbo_entity_linker").kb) == len(TOY_ENTITIES)


def test_the_own_kb_recipe_links_alike_when_loaded_elsewhere(tiny_encoder, tmp_path,
                                                             monkeypatch, cli):
    """The README's own-KB recipe (`pretrain-kb kb.jsonl out`, relative paths), its linker
    loaded from another folder."""
    home, elsewhere = _two_folders(tmp_path)
    command = "python -m spacy_arboel pretrain-kb kb.jsonl out"
    assert f"`{command}`" in README.read_text().replace("\n", " ")
    monkeypatch.chdir(home)
    result = cli(*command.split()[3:], "--encoder", tiny_encoder,
                 "--max-steps", "2", "--batch-size", "8")
    assert result.exit_code == 0, result.output

    def link(pipeline):
        doc = pipeline.make_doc("Aspirin induced cough.")
        doc.ents = [doc.char_span(0, 7, label="Chemical"),
                    doc.char_span(16, 21, label="Disease")]
        return _linked(pipeline(doc))

    expected = link(spacy.load("out/linker"))
    monkeypatch.chdir(elsewhere)
    assert link(spacy.load(home / "out" / "linker")) == expected


TOY_KB = README.parent / "assets" / "toy" / "kb.jsonl"
OWN_LINKER = 'config={"kb_path": "kb.jsonl"}'


def _in_toy_kb_folder(tmp_path: Path, monkeypatch) -> None:
    """Work in ``tmp_path`` with the project's toy KB as kb.jsonl, as the recipes say."""
    shutil.copy(TOY_KB, tmp_path / "kb.jsonl")
    monkeypatch.chdir(tmp_path)


def _with_encoder(code: str, encoder: str) -> str:
    """``code`` with its linker on ``encoder`` (the README's own ``kb_path`` config kept)."""
    assert OWN_LINKER in code
    return code.replace(OWN_LINKER, f'config={{"kb_path": "kb.jsonl", '
                                    f'"model": {{"encoder_name": {encoder!r}}}}}')


def _run(code: str, namespace: dict) -> str:
    """Execute ``code`` in ``namespace``; what it printed."""
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(code, namespace)
    return printed.getvalue()


def _expected(code: str) -> str:
    """The output a recipe states, the comment lines after its "with the project's ..." line."""
    lines = code.split("# with the project's assets/toy/kb.jsonl:\n")[1].splitlines()
    return "\n".join(line.removeprefix("# ") for line in lines) + "\n"


def test_the_negation_recipe_keeps_the_links_of_negated_mentions(tiny_encoder, tmp_path,
                                                                   monkeypatch):
    """Issue 43: negspacy's negex after the linker marks negated ents, links untouched."""
    _in_toy_kb_folder(tmp_path, monkeypatch)
    code = _with_encoder(_python_block("### Negation next to linking", USAGE), tiny_encoder)
    namespace: dict = {}
    # the links are the toy KB's names and aliases, found whatever the encoder
    assert _run(code, namespace) == _expected(code)
    nlp, doc = namespace["nlp"], namespace["doc"]
    assert nlp.pipe_names == ["sentencizer", "entity_ruler", "arbo_entity_linker", "negex"]
    with nlp.select_pipes(disable=["negex"]):
        plain = nlp(doc.text)
    assert _linked(doc) == _linked(plain) and doc.ents[2]._.kb_candidates


def _processes_recipe(namespace: dict) -> list:
    """Run the n_process recipe (docs/usage.md) in ``namespace`` (its ``nlp`` set); its docs."""
    code = _python_block("### Several processes: `nlp.pipe(n_process=2)`", USAGE)
    if "arbo_coref" in namespace["nlp"].pipe_names:
        added = 'nlp.add_pipe("arbo_coref")'
        assert code.startswith(added)
        code = code.replace(added, "", 1)
    printed = _run(code, namespace)
    docs = namespace["docs"]
    assert printed.startswith("200 [(") and len(docs) == 200
    return docs


def _clustered(docs) -> tuple[list, list]:
    """Each ent's text, link, candidate ids, cluster and linker link; apart, its candidate
    scores (a worker process may run another number of threads: float noise)."""
    ents = [e for doc in docs for e in doc.ents]
    return ([(e.text, e.kb_id_, [c[0] for c in e._.kb_candidates], e._.cluster_id,
              e._.linker_kb_id) for e in ents],
            [s for e in ents for _, s in e._.kb_candidates])


def _check_the_processes_recipe(nlp, namespace: dict) -> None:
    """The recipe's docs (linked in 2 processes, clustered here) are those of one process,
    and the whole pipeline refuses worker processes (E033) as the recipe says."""
    texts = namespace["texts"]
    (links, scores), (one_links, one_scores) = (_clustered(namespace["docs"]),
                                                _clustered(nlp.pipe(texts)))
    assert links == one_links
    assert scores == pytest.approx(one_scores, rel=1e-5)
    assert all(e.kb_id_ and e._.cluster_id for doc in namespace["docs"] for e in doc.ents)
    with pytest.raises(ValueError, match=r"E033.*n_process=2, disable=\['arbo_coref'\]"):
        list(nlp.pipe(texts[:4], n_process=2, batch_size=2))


def test_the_processes_recipe_links_in_two_processes_and_clusters_in_one(
        tiny_encoder, tmp_path, monkeypatch):
    """Issue 43: the own-pipeline recipe with arbo_coref, run by the n_process recipe."""
    _in_toy_kb_folder(tmp_path, monkeypatch)
    namespace: dict = {}
    _run(_with_encoder(_python_block("### Use it in your own pipeline"), tiny_encoder),
         namespace)
    _processes_recipe(namespace)
    _check_the_processes_recipe(namespace["nlp"], namespace)


def _save_every_component(encoder: str, folder: Path) -> Path:
    """A saved pipeline of the four components over the toy KB: arbo_linker (untrained: the
    KB's names in the text) finds the mentions, arbo_entity_linker links them again and
    gives coref its vectors, arbo_reranker (untrained) re-ranks, arbo_coref clusters."""
    nlp = spacy.blank("en")
    model = {"encoder_name": encoder}
    nlp.add_pipe("arbo_linker", config={"kb_path": str(TOY_KB), "passage_length": 48,
                                        "passage_stride": 40, "model": model})
    nlp.add_pipe("arbo_entity_linker", config={"kb_path": str(TOY_KB), "model": model})
    nlp.add_pipe("arbo_reranker", config={"model": model})
    nlp.add_pipe("arbo_coref")
    nlp.initialize()
    nlp.to_disk(folder)
    return folder


def test_the_processes_recipe_runs_a_saved_pipeline_of_every_component(tiny_encoder,
                                                                        tmp_path):
    """What the recipe says of a saved pipeline with all four components (forked workers)."""
    nlp = spacy.load(_save_every_component(tiny_encoder, tmp_path / "every"))
    namespace = {"nlp": nlp}
    docs = _processes_recipe(namespace)
    assert [e.text for e in docs[1].ents] == ["Lignocaine", "delirious"]
    _check_the_processes_recipe(nlp, namespace)


@pytest.mark.slow
def test_the_processes_recipe_runs_in_spawned_workers(tiny_encoder, tmp_path):
    """As on macOS and Windows: each worker gets the pipeline pickled, not forked."""
    nlp = spacy.load(_save_every_component(tiny_encoder, tmp_path / "every"))
    method = multiprocessing.get_start_method()
    multiprocessing.set_start_method("spawn", force=True)
    try:
        namespace = {"nlp": nlp}
        _processes_recipe(namespace)
        assert _clustered(namespace["docs"]) == _clustered(nlp.pipe(namespace["texts"]))
    finally:
        multiprocessing.set_start_method(method, force=True)


def test_the_evaluate_recipe_reports_the_linkers_scores(tiny_encoder, tmp_path, monkeypatch):
    """Issue 43: nlp.evaluate gives the linker's registered scores, and `spacy evaluate
    --per-component` writes them, as docs/usage.md says."""
    from spacy.cli.evaluate import evaluate
    from spacy.tokens import DocBin

    from spacy_arboel.evaluation.metrics import KS

    _in_toy_kb_folder(tmp_path, monkeypatch)
    namespace: dict = {}
    _run(_with_encoder(_python_block("### Use it in your own pipeline"), tiny_encoder),
         namespace)
    code = _python_block("### Our scores in `nlp.evaluate`", USAGE)
    assert _run(code, namespace) == _expected(code)
    nlp, scores = namespace["nlp"], namespace["scores"]
    weights = nlp.get_pipe_meta("arbo_entity_linker").default_score_weights
    assert "nel_inkb_recall@1" in weights and set(weights) <= set(scores)
    assert {f"nel_inkb_recall@{k}" for k in KS} | {"nel_seen_acc", "nel_unseen_acc",
                                                   "nel_nil_acc", "nel_per_type"} <= set(scores)
    nlp.to_disk("pipeline")
    DocBin(docs=[namespace["gold"]]).to_disk("test.spacy")
    evaluate("pipeline", Path("test.spacy"), Path("scores.json"), per_component=True)
    written = json.loads(Path("scores.json").read_text())["arbo_entity_linker"]
    assert round(written["nel_inkb_recall@1"], 2) == 0.67 and written["nel_micro_f"] == 1.0


def test_the_own_kb_commands_run_as_written(tmp_path, monkeypatch, cli):
    """The README's build-kb commands, one per format a user holds, on small files."""
    pytest.importorskip("pronto")

    from spacy_arboel.kb import KnowledgeBase

    commands = _bash_block("### Bring your own KB")
    assert [c.split()[5] for c in commands] == ["--obo", "--jsonl", "--umls"]
    monkeypatch.chdir(tmp_path)
    Path("hp.obo").write_text("format-version: 1.2\n\n[Term]\nid: HP:0012735\nname: Cough\n"
                              'synonym: "Coughing" EXACT []\n')
    Path("umls_kb.jsonl").write_text(json.dumps({
        "concept_id": "C0010200", "canonical_name": "Coughing", "aliases": ["Cough"],
        "types": ["T184"], "definition": None}) + "\n")
    Path("2025AA/META").mkdir(parents=True)
    Path("2025AA/META/MRCONSO.RRF").write_text(
        "C0010200|ENG|P|L0010200|PF|S0028367|Y|A0038417||M0005087|D003371|MSH|MH|D003371|"
        "Cough|0|N|256|\n")
    for command in commands:
        result = cli(*command.split()[3:])
        assert result.exit_code == 0, (command, result.output)
        kb = KnowledgeBase.from_jsonl("kb.jsonl")
        assert kb.ids == (["HP:0012735"] if "--obo" in command else ["C0010200"])


def test_the_own_ontology_recipe_links_variants_coordinations_and_nested_concepts(
        tiny_encoder, tmp_path, monkeypatch, cli):
    """Issue 60: the README's "your ontology, your text" recipe, as written, on a small
    ontology file: an ontology and raw text in, linked concepts out, nested ones too."""
    pytest.importorskip("pronto")

    heading = "### Your ontology, your text"
    command, = _bash_block(heading)
    monkeypatch.chdir(tmp_path)
    terms = [("HP:0000118", "Phenotypic abnormality", None, []),
             ("HP:0001231", "Abnormal fingernail morphology", "HP:0000118", []),
             ("HP:0001798", "Anonychia", "HP:0001231", ["Aplastic nails"]),
             ("HP:0001792", "Small nail", "HP:0001231", ["Hypoplastic nails"]),
             ("HP:0000107", "Renal cyst", "HP:0000118", ["Kidney cyst"]),
             ("HP:0000005", "Mode of inheritance", None, [])]
    Path("hp.obo").write_text("format-version: 1.2\n" + "".join(
        f"\n[Term]\nid: {i}\nname: {n}\n" + (f"is_a: {p}\n" if p else "")
        + "".join(f'synonym: "{a}" EXACT []\n' for a in aliases)
        for i, n, p, aliases in terms))
    result = cli(*command.split()[3:])
    assert result.exit_code == 0, result.output
    code = _python_block(heading)
    given = 'nlp.add_pipe("arbo_linker", config={"kb_path": "hpo.jsonl"})'
    assert given in code.splitlines()
    code = code.replace(given, 'nlp.add_pipe("arbo_linker", config={"kb_path": "hpo.jsonl", '
                        f'"passage_length": 48, "passage_stride": 40, '
                        f'"model": {{"encoder_name": {tiny_encoder!r}}}}})')
    namespace: dict = {}
    printed = _run(code, namespace).splitlines()
    assert printed == [
        "[('Aplastic or hypoplastic nails', 'HP:0001798'), ('renal cysts', 'HP:0000107')]",
        "[('Aplastic or hypoplastic nails', 'HP:0001798'), ('hypoplastic nails', 'HP:0001792'), "
        "('renal cysts', 'HP:0000107')]"]


def test_the_alias_file_recipe_edits_a_kb(tmp_path, monkeypatch, cli):
    """docs/usage.md's "Edit your KB in seconds", run as written (its printf in a shell)."""
    import subprocess

    from spacy_arboel.kb import Entity, KnowledgeBase

    printf, command = _bash_block("### Edit your KB in seconds", USAGE)
    monkeypatch.chdir(tmp_path)
    KnowledgeBase([Entity("HP:0001250", "Seizure"), Entity("HP:0002315", "Headache")]
                  ).to_jsonl("hpo.jsonl")
    subprocess.run(["bash", "-c", printf], check=True, cwd=tmp_path)
    result = cli(*command.split()[3:])
    assert result.exit_code == 0, result.output
    edited = KnowledgeBase.from_jsonl("hpo_edited.jsonl")
    assert edited["HP:0001250"].aliases == ("fits",)
    assert edited["HP:0002315"].aliases == ("sore head",)
