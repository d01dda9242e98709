"""``build-kb --obo`` over an ontology as it is published (issue 59): its imports are not
followed, its references to undeclared terms are left out, and the command says both."""

from __future__ import annotations

import http.server
import threading

import pytest
from typer.testing import CliRunner

from spacy_arboel.cli import app
from spacy_arboel.kb import KnowledgeBase

pytest.importorskip("pronto")


@pytest.fixture
def server(monkeypatch):
    """A local HTTP server's address, and the paths requested from it."""
    for name in ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    seen: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server's name)
            seen.append(self.path)
            body = b"format-version: 1.2\n\n[Term]\nid: NET:0000001\nname: Fetched\n"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", seen
    httpd.shutdown()
    httpd.server_close()


def test_build_kb_follows_no_import_and_reads_past_a_dangling_reference(tmp_path, server):
    url, requests = server
    ontology = tmp_path / "mondo.obo"
    ontology.write_text(
        f"format-version: 1.2\nimport: {url}/bfo.obo\n\n"
        "[Term]\nid: MONDO:0000001\nname: disease\nis_a: BFO:0000016\n\n"
        "[Term]\nid: MONDO:0000002\nname: cancer\nis_a: MONDO:0000001\n", encoding="utf8")
    output = tmp_path / "kb.jsonl"
    with pytest.warns(UserWarning) as caught:  # what a terminal shows on stderr
        result = CliRunner().invoke(app, ["build-kb", str(output), "--obo", str(ontology)])
    assert result.exit_code == 0, result.output
    assert requests == []
    text = " ".join(str(warning.message) for warning in caught)
    assert "[W107]" in text and f"{url}/bfo.obo" in text
    assert "[W108]" in text and "line 7: MONDO:0000001 is_a BFO:0000016" in text
    assert KnowledgeBase.from_jsonl(output).ids == ["MONDO:0000001", "MONDO:0000002"]
