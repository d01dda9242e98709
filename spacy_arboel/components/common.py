"""What the component adapters share: gold mentions out of ``Doc`` objects and linked
spans back into them, the KB of a component's config, the shape of ``update``, and saving a
folder."""

from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
from spacy.tokens import Doc, Span
from spacy.training import Example, validate_examples
from spacy.util import to_disk
from thinc.api import Optimizer

from ..artefacts import clear_saved, write_manifest
from ..encoders.inputs import MentionSpan
from ..errors import Errors
from ..extensions import RECORDS_EXT
from ..factories import find_components
from ..kb.knowledge_base import KnowledgeBase
from ..objectives.losses import ranked_candidate_loss
from ..spacy_data.gold_ids import resolved_gold_ids
from ..spacy_data.spans import SpanGetter


def gold_mentions(docs: Iterable[Doc], mentions: Callable[[Doc], Iterable[Span]] = SpanGetter(),
                  kb: KnowledgeBase | None = None
                  ) -> tuple[list[str], list[MentionSpan], list[list[str]]]:
    """The texts of ``docs``, their ``mentions`` (default: ents) as spans and each one's
    gold ids (may be none; alternate ids of ``kb`` resolved to their entity's)."""
    texts: list[str] = []
    spans: list[MentionSpan] = []
    ids: list[list[str]] = []
    for doc in docs:
        for ent in mentions(doc):
            spans.append(MentionSpan(len(texts), ent.start_char, ent.end_char))
            ids.append(resolved_gold_ids(ent.kb_id_, kb))
        texts.append(doc.text)
    return texts, spans, ids


def config_kb(kb_path: str | None, name: str) -> KnowledgeBase:
    """The KB at the component's ``kb_path`` (E008 when it has none, E222 when no such file
    exists)."""
    if not kb_path:
        raise ValueError(Errors.E008.format(name=name))
    if not Path(kb_path).is_file():
        raise ValueError(Errors.E222.format(name=name, path=kb_path))
    return KnowledgeBase.from_jsonl(kb_path)


def saved_component(path: Path, factory: str) -> Any:
    """The first component made by ``factory`` in the pipeline saved at ``path`` (None when
    there is no pipeline there, or none such in it)."""
    import spacy

    pipeline = spacy.load(path) if (path / "config.cfg").exists() else None
    names = find_components(pipeline, factory) if pipeline else []
    return pipeline.get_pipe(names[0]) if names else None


def write_folder(path: Path, writers: dict[str, Callable[[Path], Any]],
                 saved_files: Iterable[str], exclude: Iterable[str]) -> None:
    """Replace a component's saved entries by ``writers`` (minus ``exclude``, as
    ``spacy.util.to_disk`` does) and list what was written in the manifest."""
    clear_saved(path, saved_files)
    to_disk(path, writers, exclude)
    write_manifest(path, writers)


def run_update(pipe: Any, examples: Iterable[Example], step: Callable[[list[Example]], Any],
               sgd: Optimizer | None, losses: dict[str, float] | None) -> dict[str, float]:
    """The body of ``TrainablePipe.update``: validate ``examples``, take one step of the core
    (its loss, or None when the batch has nothing to learn from), apply ``sgd`` when given
    (``nlp.update`` calls ``finish_update`` itself) and add the loss under the pipe's name."""
    losses = {} if losses is None else losses
    losses.setdefault(pipe.name, 0.0)
    examples = list(examples)
    validate_examples(examples, f"{type(pipe).__name__}.update")
    loss = step(examples)
    if loss is not None:
        if sgd is not None:
            pipe.finish_update(sgd)
        losses[pipe.name] += loss
    return losses


def add_linked_ents(doc: Doc, links: Iterable[tuple[int, int, str, str, list]], *,
                    keep: bool) -> None:
    """Write ``(start_char, end_char, label, kb_id, candidates)`` links, best first, as
    ``doc.ents`` with ``span._.candidates`` (``Candidate`` records): the doc's ents are
    replaced, or kept with ``keep`` (then only links that overlap none of them are added); a
    link that overlaps a better one once expanded to token boundaries is dropped."""
    kept = list(doc.ents) if keep else []
    taken = np.zeros(len(doc), dtype=bool)
    for ent in kept:
        taken[ent.start : ent.end] = True
    new = []
    for span, candidates in _token_spans(doc, links):
        if taken[span.start : span.end].any():
            continue
        taken[span.start : span.end] = True
        span._.set(RECORDS_EXT, candidates)
        new.append(span)
    # span extensions are keyed by character offsets, so they carry over to doc.ents
    doc.set_ents(sorted(kept + new, key=lambda s: s.start), default="outside")


def set_linked_group(doc: Doc, key: str, links: Iterable[tuple[int, int, str, str, list]]
                     ) -> None:
    """Write ``(start_char, end_char, label, kb_id, candidates)`` links, overlapping ones
    too, as the span group ``doc.spans[key]`` (sorted by offsets) with
    ``span._.candidates``; a link that is no token span once expanded is left out."""
    spans = []
    for span, candidates in _token_spans(doc, links):
        span._.set(RECORDS_EXT, candidates)
        spans.append(span)
    doc.spans[key] = sorted(spans, key=lambda s: (s.start, s.end))


def _token_spans(doc: Doc, links: Iterable[tuple[int, int, str, str, list]]
                 ) -> Iterator[tuple[Span, list]]:
    """Each link as a labelled, linked token span (its offsets expanded to token
    boundaries) with its candidates; a link that covers no token is left out."""
    for start_char, end_char, label, kb_id, candidates in links:
        span = doc.char_span(start_char, end_char, label=label, kb_id=kb_id,
                             alignment_mode="expand")
        if span is not None and len(span):
            yield span, candidates


def candidate_loss(examples: Iterable[Example], rows: Iterable[Iterable[tuple[Any, list, Any]]],
                   mentions: Callable[[Doc], Iterable[Span]] = SpanGetter(),
                   kb: KnowledgeBase | None = None) -> tuple[float, list]:
    """``get_loss`` of a component that scores candidates: BLINK's softmax loss (eq. 4) of
    each scored mention's gold entity among its candidates, and d loss / d scores. ``rows``:
    per example, ``(span, candidate ids, scores)`` of each span ``predict`` scored; the gold
    ids are those of the reference's ``mentions`` (default: ents) at the same offsets
    (alternate ids of ``kb`` resolved)."""
    scores, gold = [], []
    for eg, doc_rows in zip(examples, rows, strict=True):
        golds = {(e.start_char, e.end_char): resolved_gold_ids(e.kb_id_, kb)
                 for e in mentions(eg.reference)}
        for ent, ids, row in doc_rows:
            wanted = golds.get((ent.start_char, ent.end_char), [])
            scores.append(row)
            gold.append(next((j for j, i in enumerate(ids) if i in wanted), None))
    return ranked_candidate_loss(scores, gold)
