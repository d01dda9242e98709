"""An ontology file read safely by pronto (``kb.obo``'s input): nothing it names is
followed (imports off; an XML entity naming a file or an address is E248), and pronto reads
a copy corrected so that a file as published reads whole, with what the correction found
(``Found``): references to terms the file does not declare (with their lines), terms
declared by several stanzas, and their other names. OBO files are checked by a line scanner
(pronto reports no lines), OWL (RDF/XML) by an XML pass with lines, OBO Graphs JSON by its
edges.

No spaCy here.
"""

from __future__ import annotations

import inspect
import io
import json
import lzma
import re
import tempfile
import warnings
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from xml.etree import ElementTree
from xml.parsers import expat

from ..errors import Errors
from ..parsing import input_problem
from .knowledge_base import KnowledgeBaseError

# the tags of a [Term] stanza whose value names a term (``relationship``, and an
# ``intersection_of`` of two words, first a relation)
_TERM_REFERENCES = ("is_a", "relationship", "intersection_of", "union_of", "disjoint_from",
                    "equivalent_to", "replaced_by", "consider")
# the tags a term has once: a term's later stanza does not overwrite what its first one says
_SINGLE_VALUED = ("name", "def", "namespace", "comment", "created_by", "creation_date")
_RDF = "http://www.w3.org/1999/02/22-rdf-syntax-ns#"
_RDFS = "http://www.w3.org/2000/01/rdf-schema#"
_OWL = "http://www.w3.org/2002/07/owl#"
_OBO = "http://purl.obolibrary.org/obo/"
_OBO_IN_OWL = "http://www.geneontology.org/formats/oboInOwl#"


@dataclass
class Found:
    """What reading an ontology found besides its terms."""

    # (line or None where the format keeps none, term, tag, the id it names)
    dangling: list[tuple[int | None, str, str, str]] = field(default_factory=list)
    duplicates: dict[str, list[int]] = field(default_factory=dict)  # id -> its stanzas' lines
    other_names: dict[str, list[str]] = field(default_factory=dict)  # id -> later stanzas' names
    # id -> its replaced_by targets left out as undeclared: it is replaced by no one term
    replaced_outside: dict[str, int] = field(default_factory=dict)
    lines: dict[str, int] = field(default_factory=dict)  # id -> the line of its first stanza


def open_ontology(path: Path) -> tuple[Any, Found]:
    """The ``pronto.Ontology`` at ``path`` (a local file only: pronto would take a missing
    path for a URL), read from a corrected copy, and what the correction found."""
    try:
        import pronto
    except ImportError:
        raise ImportError(Errors.E232) from None
    problem = input_problem(path)
    if problem:  # the check build-kb makes before it reads anything
        raise KnowledgeBaseError(Errors.E230.format(
            path=path, what="file of an OBO or OWL ontology", error=problem, hint=""))
    found = Found()
    # imports off: pronto's default (-1) fetches every import: any address, any local path.
    # One thread: the stanzas of a term then merge in the file's order, and no two threads
    # create one term (pronto's threads share the GIL: they parse no faster)
    options: dict[str, Any] = {"import_depth": 0, "threads": 1}
    if "encoding" in inspect.signature(pronto.Ontology).parameters:  # pronto >= 2.7
        options["encoding"] = "utf-8"  # the copy is UTF-8, whatever chardet would guess
    try:
        with warnings.catch_warnings():
            # pronto warns of OBO constructs it does not model (property values, ...) and
            # of a small file whose encoding it guesses (it reads it as UTF-8)
            warnings.simplefilter("ignore", pronto.warnings.ProntoWarning)
            warnings.simplefilter("ignore", UnicodeWarning)
            data = _corrected(path, _decoded(path), found)
            with tempfile.TemporaryDirectory() as folder:
                copy = Path(folder) / path.name
                copy.write_bytes(data)
                return pronto.Ontology(str(copy), **options), found
    except KnowledgeBaseError:
        raise
    except (SyntaxError, ValueError, KeyError, UnicodeDecodeError, OSError, EOFError,
            expat.ExpatError, lzma.LZMAError, zlib.error) as err:
        raise KnowledgeBaseError(Errors.E231.format(path=path, error=_reason(err))) from None
    except BaseException as err:
        # fastobo (Rust) panics on some malformed files rather than raising
        if type(err).__name__ != "PanicException":
            raise
        raise KnowledgeBaseError(Errors.E231.format(
            path=path, error=f"the OBO parser failed: {err}")) from None


def _reason(err: BaseException) -> str:
    """An error of pronto's or its parsers' as E231 says it: pronto's syntax errors name the
    temporary copy, so their line is given alone."""
    if isinstance(err, SyntaxError) and err.filename and err.lineno:
        return f"{err.msg} (line {err.lineno})"
    if isinstance(err, KeyError):
        return f"it names {err.args[0]!r}, which it does not declare"
    return str(err)


def _decoded(path: Path) -> bytes:
    """The bytes of ``path`` as pronto reads them: decompressed (gzip, bzip2, xz), and
    recoded to UTF-8 from the encoding chardet finds."""
    from pronto.utils.io import decompress

    with path.open("rb", buffering=0) as raw, decompress(raw) as stream:
        return stream.read()


def _corrected(path: Path, data: bytes, found: Found) -> bytes:
    """``data`` as pronto can read it whole (see the module), each format by its own pass
    (a ValueError for a format pronto does not read)."""
    from pronto.parsers import OboJSONParser, OboParser, RdfXMLParser

    head = data[:io.DEFAULT_BUFFER_SIZE]
    if OboParser.can_parse(str(path), head):
        return _corrected_obo(data.decode("utf-8"), found).encode("utf-8")
    if OboJSONParser.can_parse(str(path), head):
        return _corrected_graphs(data, found)
    if RdfXMLParser.can_parse(str(path), head):
        return _corrected_owl(path, data, found)
    start = head[:40].decode("utf-8", "replace").strip()
    raise ValueError(f"it is no OBO, OWL (RDF/XML) or OBO Graphs JSON document: it starts "
                     f"with {start!r}")


# --- OBO: a line scanner --------------------------------------------------------------------


@dataclass
class _Stanza:
    kind: str  # Term, Typedef, Instance
    line: int
    id: str | None = None
    clauses: list[tuple[int, str, str]] = field(default_factory=list)  # line, tag, value


def _corrected_obo(text: str, found: Found) -> str:
    """``text`` with the lines pronto cannot take blanked, so that the lines of its errors
    stay the file's: references to terms or relations the file does not declare, the
    single-valued tags of a term's later stanzas (the first stanza's name and definition
    stay; its other names are kept in ``found.other_names``) and comment-only lines inside a
    stanza (fastobo panics on them)."""
    lines = text.split("\n")
    blank: set[int] = set()  # line numbers
    stanzas: list[_Stanza] = []
    for number, line in enumerate(lines, 1):
        stripped = line.strip()
        if stripped.startswith("["):
            stanzas.append(_Stanza(stripped[1:].partition("]")[0].strip(), number))
        elif stanzas and stripped.startswith("!"):
            blank.add(number)
        elif stanzas and stripped:
            tag, colon, value = stripped.partition(":")
            if colon:
                stanza = stanzas[-1]
                if tag.strip() == "id" and stanza.id is None:
                    stanza.id = next(iter(_ids(value)), None)
                stanza.clauses.append((number, tag.strip(), value))
    term_ids = {s.id for s in stanzas if s.kind == "Term" and s.id}
    relation_ids = {s.id for s in stanzas if s.kind == "Typedef" and s.id} | {"is_a"}
    header = lines[: stanzas[0].line - 1] if stanzas else lines
    synonym_types = {next(iter(_ids(line.partition(":")[2])), None) for line in header
                     if line.strip().startswith("synonymtypedef:")}
    broken: set[tuple[str, str]] = set()  # (term, intersection_of or union_of) with a part out
    for stanza in stanzas:
        for number, tag, value in stanza.clauses if stanza.id else ():
            if tag == "synonym":  # a synonym of a type the header does not declare
                kept = _without_synonym_type(lines[number - 1], synonym_types)
                if kept is not None:
                    lines[number - 1], undeclared = kept
                    found.dangling.append((number, stanza.id, "synonym type", undeclared))
                continue
            reference = _undeclared(stanza.kind, tag, _ids(value), term_ids, relation_ids)
            if reference is not None:
                blank.add(number)
                found.dangling.append((number, stanza.id, tag, reference))
                broken.add((stanza.id, tag))
                if tag == "replaced_by":
                    found.replaced_outside[stanza.id] = found.replaced_outside.get(
                        stanza.id, 0) + 1
    by_id: dict[str, list[_Stanza]] = {}
    for stanza in stanzas:
        if stanza.kind == "Term" and stanza.id:
            by_id.setdefault(stanza.id, []).append(stanza)
    other_names: dict[str, list[str]] = {}  # id -> its later name lines
    for term_id, group in by_id.items():
        seen: set[str] = set()
        for stanza in group:
            for number, tag, _ in stanza.clauses:
                # pronto requires two parts or more: a class expression that lost one goes
                if (term_id, tag) in broken and tag in ("intersection_of", "union_of"):
                    blank.add(number)
                elif len(group) > 1 and tag in _SINGLE_VALUED:
                    if tag in seen:
                        blank.add(number)
                        if tag == "name":
                            other_names.setdefault(term_id, []).append(lines[number - 1])
                    seen.add(tag)
        found.lines[term_id] = group[0].line
        if len(group) > 1:
            found.duplicates[term_id] = [stanza.line for stanza in group]
    found.other_names.update(_names(other_names))
    return "\n".join("\r" if number in blank and line.endswith("\r") else
                     "" if number in blank else line
                     for number, line in enumerate(lines, 1))


_SYNONYM = re.compile(r'^(\s*synonym\s*:\s*"(?:[^"\\]|\\.)*"\s+\S+)(\s+[^\s\[{!]\S*)')


def _without_synonym_type(line: str, declared: set[str | None]) -> tuple[str, str] | None:
    """A ``synonym:`` line without its type, and the type, when the header declares no such
    type (``synonymtypedef``; pronto fails on it when the term's synonyms are read); None
    when it has no type or a declared one. The synonym itself is kept."""
    match = _SYNONYM.match(line)
    if match is None or match.group(2).strip() in declared:
        return None
    return line[: match.end(1)] + line[match.end(2):], match.group(2).strip()


def _ids(value: str) -> list[str]:
    """The words of a clause's value before its trailing qualifiers or comment."""
    words = []
    for word in value.split():
        if word.startswith(("!", "{")):
            break
        words.append(word)
    return words


def _undeclared(kind: str, tag: str, ids: list[str], term_ids: set[str],
                relation_ids: set[str]) -> str | None:
    """The id that a clause names and the file does not declare, if any."""
    if kind == "Typedef":  # pronto resolves a relation's is_a as it reads
        return ids[0] if tag == "is_a" and ids and ids[0] not in relation_ids else None
    if kind != "Term" or tag not in _TERM_REFERENCES or not ids:
        return None
    if tag == "relationship" or (tag == "intersection_of" and len(ids) > 1):
        if ids[0] not in relation_ids:
            return ids[0]
        return ids[1] if len(ids) > 1 and ids[1] not in term_ids else None
    return ids[0] if ids[0] not in term_ids else None


def _names(lines: dict[str, list[str]]) -> dict[str, list[str]]:
    """The names of ``name:`` lines as pronto reads them (escapes, trailing comment)."""
    if not lines:
        return {}
    import fastobo

    names: dict[str, list[str]] = {}
    for term_id, raw in lines.items():
        try:
            document = fastobo.loads("".join(f"[Term]\nid: X:1\n{line.strip()}\n\n"
                                             for line in raw))
            names[term_id] = [clause.name.strip() for frame in document for clause in frame
                              if isinstance(clause, fastobo.term.NameClause)]
        except (SyntaxError, ValueError):  # a line pronto will refuse in the file anyway
            names[term_id] = [line.partition(":")[2].strip() for line in raw]
    return names


# --- OWL (RDF/XML): an XML pass with lines --------------------------------------------------


@dataclass
class _Class:
    line: int
    iri: str
    id: str | None = None  # oboInOwl:id, which pronto takes for the term's id
    parents: list[tuple[int, str]] = field(default_factory=list)  # subClassOf: line, IRI
    labels: list[str] = field(default_factory=list)
    defined: bool = False


def _corrected_owl(path: Path, data: bytes, found: Found) -> bytes:
    """``data`` without the ``rdfs:subClassOf`` of classes it does not declare (pronto
    fails on them as it reads), and with a class declared by several ``owl:Class`` elements
    named and defined by its first one that has a label (a definition): its other labels
    are kept in ``found.other_names``."""
    classes = _owl_classes(path, data)
    declared = {c.iri for c in classes}
    out: dict[int, set[str]] = {}  # class element -> the IRIs of its subClassOf to drop
    for index, owl_class in enumerate(classes):
        for line, iri in owl_class.parents:
            if iri not in declared and iri != f"{_OWL}Thing":
                out.setdefault(index, set()).add(iri)
                found.dangling.append((line, owl_class.id or _compact(owl_class.iri), "is_a",
                                       _compact(iri)))
    by_iri: dict[str, list[int]] = {}
    for index, owl_class in enumerate(classes):
        by_iri.setdefault(owl_class.iri, []).append(index)
    unnamed: set[int] = set()  # later elements of a class whose labels go
    undefined: set[int] = set()  # and whose definitions go
    for group in by_iri.values():
        term_id = next((classes[i].id for i in group if classes[i].id), None)
        term_id = term_id or _compact(classes[group[0]].iri)
        found.lines[term_id] = classes[group[0]].line
        if len(group) == 1:
            continue
        found.duplicates[term_id] = [classes[i].line for i in group]
        for position, index in enumerate(group[1:], 1):
            earlier = [classes[i] for i in group[:position]]
            if classes[index].labels and any(c.labels for c in earlier):
                unnamed.add(index)
                found.other_names.setdefault(term_id, []).extend(classes[index].labels)
            if classes[index].defined and any(c.defined for c in earlier):
                undefined.add(index)
    if not out and not unnamed and not undefined:
        return data
    root = ElementTree.fromstring(data)
    elements = [e for e in root if e.tag == f"{{{_OWL}}}Class" and e.get(f"{{{_RDF}}}about")]
    for index, element in enumerate(elements):
        for child in list(element):
            if (child.tag == f"{{{_RDFS}}}subClassOf"
                    and child.get(f"{{{_RDF}}}resource") in out.get(index, ())
                    or child.tag == f"{{{_RDFS}}}label" and index in unnamed
                    or child.tag == f"{{{_OBO}}}IAO_0000115" and index in undefined):
                element.remove(child)
    return ElementTree.tostring(root, encoding="utf-8", xml_declaration=True)


def _owl_classes(path: Path, data: bytes) -> list[_Class]:
    """The ``owl:Class`` elements at the top of an RDF/XML document (those pronto reads),
    with their lines. An XML entity that names a file or an address is E248: expat opens
    none (nor does ElementTree, which pronto uses), and a file that declares one is
    refused rather than read without it."""
    classes: list[_Class] = []
    depth = 0
    current: _Class | None = None  # the class being read
    text: list[str] | None = None  # the text of its rdfs:label or oboInOwl:id being read
    parser = expat.ParserCreate(namespace_separator="")

    def start(name: str, attributes: dict[str, str]) -> None:
        nonlocal depth, current, text
        depth += 1
        if depth == 2:
            about = attributes.get(f"{_RDF}about")
            current = _Class(parser.CurrentLineNumber, about) if (
                name == f"{_OWL}Class" and about) else None
            if current is not None:
                classes.append(current)
        elif depth == 3 and current is not None:
            if name == f"{_RDFS}subClassOf" and f"{_RDF}resource" in attributes:
                current.parents.append((parser.CurrentLineNumber,
                                        attributes[f"{_RDF}resource"]))
            elif name in (f"{_RDFS}label", f"{_OBO_IN_OWL}id"):
                text = []
            elif name == f"{_OBO}IAO_0000115":
                current.defined = True

    def end(name: str) -> None:
        nonlocal depth, text
        if depth == 3 and text is not None and current is not None:
            if name == f"{_RDFS}label":
                current.labels.append("".join(text))
            else:
                current.id = "".join(text).strip() or None
            text = None
        depth -= 1

    def characters(data: str) -> None:
        if text is not None:
            text.append(data)

    def entity(name, is_parameter, value, base, system_id, public_id, notation) -> None:
        if system_id is not None or public_id is not None:
            raise KnowledgeBaseError(Errors.E248.format(
                path=path, entity=f"{'%' if is_parameter else ''}{name}",
                target=system_id or public_id))

    parser.StartElementHandler = start
    parser.EndElementHandler = end
    parser.CharacterDataHandler = characters
    parser.EntityDeclHandler = entity
    parser.Parse(data, True)
    return classes


def _compact(iri: str) -> str:
    """An OBO PURL as pronto writes its id (``.../obo/HP_0000118`` is ``HP:0000118``)."""
    match = re.match(f"^{re.escape(_OBO)}([^#_]+)_(.*)$", iri)
    return ":".join(match.groups()) if match else iri


# --- OBO Graphs (JSON) ----------------------------------------------------------------------


def _corrected_graphs(data: bytes, found: Found) -> bytes:
    """``data`` without its ``is_a`` edges to nodes it does not declare: pronto would make
    each such node a term without a name (a parent that is not there). Graphs keep no
    lines."""
    document = json.loads(data)
    graphs = document.get("graphs") if isinstance(document, dict) else None
    if not isinstance(graphs, list) or not all(isinstance(g, dict) for g in graphs):
        return data
    declared = {node.get("id") for graph in graphs for node in graph.get("nodes") or ()
                if isinstance(node, dict)}
    changed = False
    for graph in graphs:
        edges = [e for e in graph.get("edges") or () if isinstance(e, dict)]
        out = [e for e in edges if e.get("pred") == "is_a" and e.get("sub") in declared
               and e.get("obj") not in declared]
        if out:
            found.dangling.extend((None, _compact(str(e["sub"])), "is_a",
                                   _compact(str(e.get("obj")))) for e in out)
            graph["edges"] = [e for e in graph["edges"] if not any(e is o for o in out)]
            changed = True
    return json.dumps(document).encode("utf-8") if changed else data


# --- after pronto: references it resolves only when they are read ---------------------------


def find_lazy_references(ontology: Any, terms: list[Any], found: Found) -> None:
    """Add to ``found`` the references to undeclared terms or relations that pronto keeps
    as ids and resolves only when they are read (a KeyError then): replaced_by, consider,
    relationships and class expressions. An OBO file has none left (its scanner took them
    out, with their lines); OWL and OBO Graphs keep no line of them."""
    term_ids = {term.id for term in terms}
    relation_ids = {relation.id for relation in ontology.relationships()} | {"is_a"}
    for term in terms:
        data = term._data()  # the ids as read: the public accessors raise KeyError
        named = [(tag, ref) for tag in ("replaced_by", "consider", "disjoint_from",
                                         "equivalent_to", "union_of")
                 for ref in sorted(getattr(data, tag))]
        for part in sorted(data.intersection_of, key=str):
            relation, target = part if isinstance(part, tuple) else (None, part)
            named.append(("intersection_of", relation if relation is not None
                          and relation not in relation_ids else target))
        for relation, targets in sorted(data.relationships.items()):
            named.extend(("relationship", relation if relation not in relation_ids else t)
                         for t in sorted(targets))
        found.dangling.extend((None, term.id, tag, ref) for tag, ref in named
                              if ref not in term_ids and ref not in relation_ids)
