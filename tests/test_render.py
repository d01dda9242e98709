"""`render`: displaCy's entity view with KB links and candidate tooltips; the readers of raw
documents it takes; a look at the page in headless Chromium where one is installed."""

import json
import shutil
import subprocess

import pytest
import spacy
from spacy.tokens import DocBin

from spacy_arboel.extensions import CANDIDATES_EXT, register_extensions
from spacy_arboel.render import (
    MESH_URL_TEMPLATE,
    check_links,
    check_url_template,
    default_url_template,
    render_page,
)
from spacy_arboel.spacy_data.readers import read_corpus_documents

PUBTATOR = ("123|t|Famotidine delirium\n123|a|In elderly patients.\n"
            "123\t0\t10\tFamotidine\tChemical\tD015738\n\n"
            "456|t|Cough\n456|a|Aspirin induced cough.\n")


def _read(path):
    """What render reads from ``path``: each document's id, text and gold links."""
    return [(d.id, d.text, d.gold_links) for d in read_corpus_documents(path, strict=False)]


def _doc():
    register_extensions()
    doc = spacy.blank("xx")("Famotidine-associated delirium <b>x</b> in elderly patients.")
    doc.ents = [doc.char_span(0, 10, label="Chemical", kb_id="D015738"),
                doc.char_span(22, 30, label="Disease", kb_id="D003693")]
    doc.ents[0]._.set(CANDIDATES_EXT, [("D015738", 0.93), ("D002927", 0.05), ("D1", 0.01),
                                        ("D2", 0.01)])
    return doc


def test_page_links_each_kb_id_and_shows_the_candidates():
    names = {"D015738": "Famotidine", "D002927": "Cimetidine <H2>"}
    page = render_page([_doc()], MESH_URL_TEMPLATE, names, n_candidates=2,
                       titles=["PMID <1>"])
    assert page.lstrip().startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    assert 'href="https://meshb.nlm.nih.gov/record/ui?ui=D015738"' in page
    assert 'href="https://meshb.nlm.nih.gov/record/ui?ui=D003693"' in page
    assert 'title="D015738 Famotidine 0.93 · D002927 Cimetidine &lt;H2&gt; 0.05"' in page
    assert 'title="D003693"' in page  # no candidates: the id alone
    assert "Chemical" in page and "Disease" in page and "PMID &lt;1&gt;" in page
    assert "&lt;b&gt;x&lt;/b&gt;" in page and "<b>x</b>" not in page  # text is escaped
    assert page.count('<mark class="entity"') == 2
    no_links = render_page([_doc()], None)
    assert "meshb" not in no_links and 'href="#"' in no_links


def test_names_and_the_marks_of_wrong_and_missed_links():
    names = {"D015738": "Famotidine", "D003693": "Delirium", "D003221": "Confusion"}
    doc = _doc()  # Famotidine -> D015738 (right), delirium -> D003693 (gold: D003221)
    gold = [(0, 10, "D015738"), (22, 30, "D003221"), (48, 56, "D009999|D003221")]
    page = render_page([doc], MESH_URL_TEMPLATE, names, titles=["d"], golds=[gold])
    assert ">D015738 Famotidine<" in page and ">D003693 Delirium<" in page  # names shown
    assert "Disease ✗" in page and 'title="gold: D003221 Confusion · D003693"' in page
    assert "missed" in page and "gold: D009999|D003221" in page  # "elderly" was not linked
    assert page.count('<mark class="entity"') == 3
    assert [c.kind for c in check_links(doc, gold)] == ["right", "wrong", "missed"]
    # without gold nothing is marked
    assert "✗" not in render_page([_doc()], None, names)


def test_labels_ids_and_urls_are_escaped_and_encoded():
    register_extensions()
    doc = spacy.blank("xx")("x y z")
    doc.ents = [doc.char_span(0, 1, label="<Chem>", kb_id='a"b&c d')]
    page = render_page([doc], "https://kb.example/e?id={}")
    assert "&lt;Chem&gt;" in page and "<Chem>" not in page
    assert 'href="https://kb.example/e?id=a%22b%26c%20d"' in page
    assert ">a&quot;b&amp;c d</a>" in page


@pytest.mark.parametrize("template", ["javascript:alert(1)//{}", "https://kb.example/",
                                      "https://kb.example/{id}", "{}", "https://x/{}/{}"])
def test_bad_url_templates_are_coded_errors(template):
    with pytest.raises(ValueError, match="E120"):
        check_url_template(template)
    assert check_url_template("http://kb.example/{}") == "http://kb.example/{}"


def test_the_default_link_is_mesh_for_a_mesh_kb_only():
    assert default_url_template(["D015738", "C000601234", "D003693"]) == MESH_URL_TEMPLATE
    assert default_url_template(["D015738", "Q42"]) is None
    assert default_url_template([]) is None


def test_documents_are_read_from_each_format(tmp_path):
    (tmp_path / "a.jsonl").write_text('{"id": "x1", "text": "Aspirin."}\n\n{"text": "Cough."}\n')
    (tmp_path / "b.txt").write_text(PUBTATOR)
    (tmp_path / "c.txt").write_text("Plain text\nof one document.")
    nlp = spacy.blank("xx")
    DocBin(docs=[nlp("Fever.")]).to_disk(tmp_path / "d.spacy")
    (tmp_path / "notes.md").write_text("ignored in a folder")
    assert _read(tmp_path) == [
        ("x1", "Aspirin.", ()), ("a:3", "Cough.", ()),
        ("123", "Famotidine delirium In elderly patients.", ((0, 10, "D015738"),)),
        ("456", "Cough Aspirin induced cough.", ()),
        ("c", "Plain text\nof one document.", ()), ("d:0", "Fever.", ())]


@pytest.mark.parametrize("line,problem", [("not json", "not JSON"), ('{"id": 1}', '"text"'),
                                          ('["a list"]', '"text"')])
def test_bad_jsonl_lines_are_coded_errors(tmp_path, line, problem):
    (tmp_path / "bad.jsonl").write_text('{"text": "fine"}\n' + line + "\n")
    with pytest.raises(ValueError, match=f"E115.*line 2.*{problem}"):
        _read(tmp_path / "bad.jsonl")


def test_unknown_files_are_coded_errors(tmp_path):
    (tmp_path / "x.csv").write_text("a,b")
    with pytest.raises(ValueError, match="E114"):
        _read(tmp_path / "x.csv")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="E114"):
        _read(tmp_path / "empty")


def test_render_command_writes_the_page(linker_pipeline, tmp_path, cli):
    texts = tmp_path / "texts.jsonl"
    texts.write_text("\n".join(json.dumps({"id": f"doc{i}", "text": t}) for i, t in enumerate(
        ["Aspirin induced cough.", "Fever in patients with heart failure.", "Third."])))
    page = tmp_path / "out" / "page.html"
    result = cli("render", linker_pipeline, texts, "--output", page, "--limit", 2)
    assert result.exit_code == 0, result.output
    html = page.read_text()
    assert "doc0" in html and "doc1" in html and "doc2" not in html
    # threshold 0: the random model links every (span, candidate) it proposes
    assert html.count('<mark class="entity"') >= 2
    assert "https://meshb.nlm.nih.gov/record/ui?ui=D" in html  # the toy KB is MeSH
    assert "Rendered 2 docs" in result.output
    custom = cli("render", linker_pipeline, texts, "--output", page,
                 "--kb-url-template", "https://kb.example/{}", "--candidates", 1)
    assert custom.exit_code == 0 and "https://kb.example/D" in page.read_text()
    assert "meshb" not in page.read_text()
    # gold ids in the input: the wrong and missed links are counted and written
    gold = tmp_path / "gold.jsonl"
    gold.write_text(json.dumps({"id": "g", "text": "Aspirin induced cough.", "spans": [
        {"start": 0, "end": 7, "label": "Chemical", "kb_id": "D001241"},
        {"start": 16, "end": 21, "label": "Disease", "kb_id": "D999999"}]}) + "\n")
    checked = cli("render", linker_pipeline, gold, "--output", page,
                  "--errors", tmp_path / "errors.json")
    assert checked.exit_code == 0, checked.output
    errors = json.loads((tmp_path / "errors.json").read_text())
    assert errors["gold_links"] == 2 and "of 2 gold links right" in checked.output
    assert any(e["gold"] == "D999999" and e["kind"] in ("wrong", "missed")
               for e in errors["errors"])


def test_render_command_refuses_bad_input_and_outputs(linker_pipeline, tmp_path, cli):
    texts = tmp_path / "texts.jsonl"
    texts.write_text('{"text": "Aspirin."}\n')
    result = cli("render", linker_pipeline, texts, "--output", texts)
    assert result.exit_code == 1 and "E040" in result.output
    assert texts.read_text() == '{"text": "Aspirin."}\n'  # the input is untouched
    (tmp_path / "bad.jsonl").write_text("oops\n")
    result = cli("render", linker_pipeline, tmp_path / "bad.jsonl", "--output", tmp_path / "p.html")
    assert result.exit_code == 1 and "E115" in result.output
    assert not (tmp_path / "p.html").exists()
    result = cli("render", linker_pipeline, texts, "--output", tmp_path / "p.html",
                 "--kb-url-template", "https://kb.example/{id}")
    assert result.exit_code == 1 and "E120" in result.output


CHROMIUM = next((shutil.which(b) for b in ("chromium-headless-shell", "chromium",
                                            "chromium-browser", "google-chrome")
                 if shutil.which(b)), None)


@pytest.mark.skipif(CHROMIUM is None, reason="no Chromium installed (.ci/run installs it)")
def test_the_page_in_headless_chromium(tmp_path):
    """Chromium loads the page; its screenshot is kept in the test's output folder and the
    DOM it built has the two linked entities with their tooltips."""
    page = tmp_path / "page.html"
    page.write_text(render_page([_doc()], MESH_URL_TEMPLATE, {"D015738": "Famotidine"}))
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             f"--user-data-dir={tmp_path / 'profile'}"]
    shot = tmp_path / "page.png"
    subprocess.run([CHROMIUM, *flags, f"--screenshot={shot}", "--window-size=900,400",
                    page.as_uri()], check=True, capture_output=True, timeout=120)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 5000
    dom = subprocess.run([CHROMIUM, *flags, "--dump-dom", page.as_uri()], check=True,
                         capture_output=True, text=True, timeout=120).stdout
    assert dom.count("<mark") == 2 and 'title="D015738 Famotidine 0.93' in dom
    print(f"screenshot: {shot}")


def test_gold_spans_are_read_as_convert_reads_them_and_bad_ones_skipped_with_W105(tmp_path, cli):
    """One span parser for convert and render: render skips, with W105 naming the file and
    line, what convert refuses (spans outside the text, blank or '|' ids, bools as offsets),
    and -1 (no id) is no gold link."""
    text = "Aspirin induced cough."
    path = tmp_path / "gold.jsonl"
    path.write_text(json.dumps({"id": "g", "text": text, "spans": [
        {"start": 0, "end": 7, "kb_id": "D001241"},
        {"start": 16, "end": 21, "kb_id": "-1"},
        {"start": 8, "end": 15, "kb_id": [" D1 ", "D2"]},
        {"start": 16, "end": 99, "kb_id": "D003371"},
        {"start": 30, "end": 40, "kb_id": "D003371"},
        {"start": True, "end": 7, "kb_id": "D001241"},
        {"start": 0, "end": 7, "kb_id": " "},
        {"start": 0, "end": 7, "kb_id": "|"},
        {"start": 0, "end": 7, "kb_id": ["D1|D2"]}]}) + "\n"
        + json.dumps({"text": text, "spans": {"start": 0}}) + "\n")
    with pytest.warns(UserWarning) as caught:
        first, second = read_corpus_documents(path, strict=False)
    skipped = [str(w.message) for w in caught]
    assert len(skipped) == 7 and all(m.startswith("[W105] ") for m in skipped)
    assert all(f"{path}:1: " in m for m in skipped[:6]) and f"{path}:2: " in skipped[6]
    assert first.gold_links == ((0, 7, "D001241"), (8, 15, "D1|D2"))
    assert second.gold_links == ()
    # the same file is refused by convert
    result = cli("convert", path, tmp_path / "gold.spacy")
    assert result.exit_code == 1 and "[E203]" in result.output


def test_jsonl_ids_that_are_not_ids_are_E115(tmp_path):
    (tmp_path / "a.jsonl").write_text('{"id": null, "text": "Aspirin."}\n')
    with pytest.raises(ValueError, match=r"E115.*line 1.*\"id\" must be"):
        _read(tmp_path / "a.jsonl")
    (tmp_path / "b.jsonl").write_text('{"id": 7, "text": "Aspirin."}\n')
    assert [doc_id for doc_id, _, _ in _read(tmp_path / "b.jsonl")] == ["7"]


def test_gold_outside_the_text_or_without_an_id_is_not_drawn():
    """Gold given to render_page directly: spans outside the text drew the document twice
    or empty misses, "-1" was a missed link, " " and "|" crashed with IndexError."""
    doc = _doc()
    gold = [(0, 10, "D015738"), (50, 90, "D1"), (5, 5, "D2"), (-3, 4, "D3"), (31, 38, "-1"),
            (31, 38, " "), (31, 38, "|"), (48, 56, "D009999")]
    page = render_page([doc], MESH_URL_TEMPLATE, golds=[gold])
    assert page.count("&lt;b&gt;x&lt;/b&gt;") == 1  # the text once
    assert page.count('<mark class="entity"') == 3  # two ents and one missed
    assert [(c.gold, c.kind) for c in check_links(doc, gold)] == [
        ("D015738", "right"), ("D009999", "missed")]


def test_render_command_skips_bad_gold_ids_instead_of_crashing(linker_pipeline, tmp_path, cli):
    gold = tmp_path / "gold.jsonl"
    gold.write_text(json.dumps({"id": "g", "text": "Aspirin induced cough.", "spans": [
        {"start": 0, "end": 7, "kb_id": " "}, {"start": 16, "end": 21, "kb_id": "|"},
        {"start": 8, "end": 15, "kb_id": "-1"}]}) + "\n")
    result = cli("render", linker_pipeline, gold, "--output", tmp_path / "p.html",
                 "--errors", tmp_path / "errors.json")
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "errors.json").read_text()) == {"gold_links": 0,
                                                                   "errors": []}
