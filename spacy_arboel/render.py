"""displaCy's entity view of linked docs: each entity's ``kb_id_`` and name link to its KB
page (``kb_url_template``), its top candidates with their scores show in its tooltip, and
where the input has gold ids, wrong and missed links are marked."""

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from html import escape
from typing import Any
from urllib.parse import quote

from spacy import displacy
from spacy.displacy.templates import TPL_ENT
from spacy.tokens import Doc, Span

from .data.ids import gold_ids
from .data.pubtator import NO_ID
from .errors import Errors
from .extensions import CANDIDATES_EXT

MESH_URL_TEMPLATE = "https://meshb.nlm.nih.gov/record/ui?ui={}"
# MeSH descriptors (D) and supplementary concepts (C), 6 to 9 digits
_MESH_PREFIXES = ("D", "C")
COLORS = {"CHEMICAL": "#7aecec", "DISEASE": "#feca74"}
WRONG, MISSED = "✗", "missed"  # the marks of a wrong and of a missed link
WRONG_COLOR, MISSED_COLOR = "#ff8f8f", "#d9d9d9"
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


@dataclass(frozen=True)
class LinkCheck:
    """A link of a rendered doc checked against the input's gold: ``kind`` is ``wrong``
    (the span is gold, its id another), ``missed`` (a gold span the pipeline did not
    link) or ``right``."""

    doc: str
    text: str
    kind: str
    predicted: str
    gold: str


def checkable_gold(doc: Doc, gold: Sequence[tuple[int, int, str]]
                   ) -> list[tuple[int, int, str]]:
    """The gold spans of ``gold`` that can be checked on ``doc``: within its text
    (``0 <= start < end <= len``) and with at least one id (``-1``, PubTator's "no id",
    is none). The readers give only such spans (``data.documents.Document.gold_links``);
    others are left out here too."""
    return [(start, end, ids) for start, end, ids in gold
            if 0 <= start < end <= len(doc.text) and any(i != NO_ID for i in gold_ids(ids))]


def check_links(doc: Doc, gold: Sequence[tuple[int, int, str]], doc_id: str = ""
                ) -> list[LinkCheck]:
    """Each gold span of ``doc`` (``(start_char, end_char, ids)``, ids joined by ``|``;
    those of :func:`checkable_gold`) against the ent the pipeline made there: right when its
    ``kb_id_`` is one of the gold ids, wrong when it is another (NIL included), missed when
    no ent has that span."""
    linked = {(e.start_char, e.end_char): e.kb_id_ for e in doc.ents}
    checks = []
    for start, end, ids in checkable_gold(doc, gold):
        predicted = linked.get((start, end))
        kind = ("missed" if predicted is None else
                "right" if predicted in gold_ids(ids) else "wrong")
        checks.append(LinkCheck(doc_id, doc.text[start:end], kind, predicted or "", ids))
    return checks


def _named(kb_id: str, names: dict[str, str]) -> str:
    return f"{kb_id} {names[kb_id]}" if kb_id in names else kb_id


def doc_data(doc: Doc, url_template: str | None, names: dict[str, str] | None = None,
             n_candidates: int = 3, title: str | None = None,
             gold: Sequence[tuple[int, int, str]] = ()) -> dict[str, Any]:
    """One doc in displaCy's manual format: each ent with its label, ``kb_id_`` and the
    entity's name (linked through ``url_template``, ``{}`` standing for the id; without one
    the id links nowhere) and its candidates' tooltip. With the input's ``gold`` spans, a
    wrong link's label is marked ``✗`` and its tooltip names the gold entity, and a gold
    span the pipeline missed is shown, labelled ``missed``, where it overlaps no ent."""
    names = names or {}
    gold = checkable_gold(doc, gold)
    results = check_links(doc, gold)
    checks = {(start, end): c for (start, end, _), c in zip(gold, results, strict=True)}
    ents = []
    for ent in doc.ents:
        kb_id = ent.kb_id_
        candidates = (ent._.get(CANDIDATES_EXT) if Span.has_extension(CANDIDATES_EXT)
                      else None) or []
        tooltip = candidates_text(candidates, names, n_candidates) or kb_id
        label = ent.label_
        check = checks.get((ent.start_char, ent.end_char))
        if check is not None and check.kind == "wrong":
            label = f"{label} {WRONG}"
            tooltip = f"gold: {_named(check.gold, names)} · {tooltip}"
        span = {"start": ent.start_char, "end": ent.end_char, "label": escape(label),
                "params": {"candidates": escape(tooltip)}}
        if kb_id:
            span["kb_id"] = escape(_named(kb_id, names))
            span["kb_url"] = escape(kb_url(url_template, kb_id)) if url_template else "#"
        ents.append(span)
    taken = [(e.start_char, e.end_char) for e in doc.ents]
    for check, (start, end, ids) in zip(results, gold, strict=True):
        if check.kind == "missed" and not any(s < end and start < e for s, e in taken):
            ents.append({"start": start, "end": end, "label": MISSED,
                         "kb_id": escape(_named(ids, names)),
                         "kb_url": escape(kb_url(url_template, gold_ids(ids)[0]))
                         if url_template else "#",
                         "params": {"candidates": escape(f"gold: {_named(ids, names)}")}})
            taken.append((start, end))
    ents.sort(key=lambda e: e["start"])
    return {"text": doc.text, "ents": ents, "title": escape(title) if title else None}


def render_page(docs: Sequence[Doc], url_template: str | None,
                names: dict[str, str] | None = None, n_candidates: int = 3,
                titles: Sequence[str | None] | None = None,
                golds: Sequence[Sequence[tuple[int, int, str]]] | None = None) -> str:
    """A standalone HTML page of ``docs`` in displaCy's entity view (with the marks of
    :func:`doc_data` where ``golds`` gives each doc's gold spans)."""
    titles = titles or [None] * len(docs)
    golds = golds or [()] * len(docs)
    data = [doc_data(doc, url_template, names, n_candidates, title, gold)
            for doc, title, gold in zip(docs, titles, golds, strict=True)]
    labels = {e["label"] for d in data for e in d["ents"]}
    colors = {**COLORS, **{label.upper(): WRONG_COLOR for label in labels
                           if label.endswith(WRONG)}, MISSED.upper(): MISSED_COLOR}
    return displacy.render(data, style="ent", manual=True, page=True, minify=False,
                           jupyter=False, options={"template": TEMPLATE, "colors": colors})
