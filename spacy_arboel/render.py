"""displaCy's entity view of linked docs: each entity's ``kb_id_`` links to its KB page
(``kb_url_template``) and its top candidates with their scores show in its tooltip."""

from collections.abc import Iterable, Sequence
from html import escape
from typing import Any
from urllib.parse import quote

from spacy import displacy
from spacy.displacy.templates import TPL_ENT
from spacy.tokens import Doc, Span

from .errors import Errors
from .extensions import CANDIDATES_EXT

MESH_URL_TEMPLATE = "https://meshb.nlm.nih.gov/record/ui?ui={}"
# MeSH descriptors (D) and supplementary concepts (C), 6 to 9 digits
_MESH_PREFIXES = ("D", "C")
COLORS = {"CHEMICAL": "#7aecec", "DISEASE": "#feca74"}
# TPL_ENT with the candidates as the mark's tooltip
TEMPLATE = TPL_ENT.replace('<mark class="entity"', '<mark class="entity" title="{candidates}"', 1)


def check_url_template(template: str) -> str:
    """``template`` if it is an http(s) URL with one ``{}`` for the id, else a ValueError
    (E120)."""
    rest = template.replace("{}", "", 1)
    if not template.startswith(("https://", "http://")) or "{}" not in template \
            or "{" in rest or "}" in rest:
        raise ValueError(Errors.E120.format(template=template))
    return template


def kb_url(template: str, kb_id: str) -> str:
    """The KB page of ``kb_id`` (percent-encoded into the template)."""
    return template.replace("{}", quote(kb_id, safe=""))


def is_mesh_id(kb_id: str) -> bool:
    """Whether ``kb_id`` has the form of a MeSH descriptor or supplementary concept id."""
    return (kb_id[:1] in _MESH_PREFIXES and kb_id[1:].isdigit()
            and 6 <= len(kb_id) - 1 <= 9)


def default_url_template(kb_ids: Iterable[str]) -> str | None:
    """MeSH's record page when every id of the KB is a MeSH id, else None (no link)."""
    ids = list(kb_ids)
    return MESH_URL_TEMPLATE if ids and all(is_mesh_id(i) for i in ids) else None


def candidates_text(candidates: Sequence[tuple[str, float]], names: dict[str, str],
                    n: int) -> str:
    """``D015738 Famotidine 0.99 · D002927 Cimetidine 0.01``: the ``n`` best candidates."""
    return " · ".join(f"{kb_id} {names.get(kb_id, '')} {score:.2f}".replace("  ", " ")
                      for kb_id, score in list(candidates)[:n])


def doc_data(doc: Doc, url_template: str | None, names: dict[str, str] | None = None,
             n_candidates: int = 3, title: str | None = None) -> dict[str, Any]:
    """One doc in displaCy's manual format: each ent with its label, ``kb_id_`` (linked
    through ``url_template``, ``{}`` standing for the id; without one the id links nowhere)
    and its candidates' tooltip."""
    names = names or {}
    ents = []
    for ent in doc.ents:
        kb_id = ent.kb_id_
        candidates = (ent._.get(CANDIDATES_EXT) if Span.has_extension(CANDIDATES_EXT)
                      else None) or []
        span = {"start": ent.start_char, "end": ent.end_char, "label": escape(ent.label_),
                "params": {"candidates": escape(candidates_text(candidates, names,
                                                                n_candidates) or kb_id)}}
        if kb_id:
            span["kb_id"] = escape(kb_id)
            span["kb_url"] = escape(kb_url(url_template, kb_id)) if url_template else "#"
        ents.append(span)
    return {"text": doc.text, "ents": ents, "title": escape(title) if title else None}


def render_page(docs: Sequence[Doc], url_template: str | None,
                names: dict[str, str] | None = None, n_candidates: int = 3,
                titles: Sequence[str | None] | None = None) -> str:
    """A standalone HTML page of ``docs`` in displaCy's entity view."""
    titles = titles or [None] * len(docs)
    data = [doc_data(doc, url_template, names, n_candidates, title)
            for doc, title in zip(docs, titles, strict=True)]
    return displacy.render(data, style="ent", manual=True, page=True, minify=False,
                           jupyter=False, options={"template": TEMPLATE, "colors": COLORS})
