"""NIL detection by a score threshold (PEL §5.3): tuning, metrics and PR curves.

A mention is predicted NIL when the score of its best candidate is below the threshold; the
threshold is the one that maximises NIL F1 on dev. NIL mentions are those whose gold ids are
all absent from the KB (or equal the NIL id); mentions without a gold id are left out.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from spacy.language import Language
from spacy.tokens import Doc
from spacy.training import Example

from ..atomic import atomic_file
from ..data.ids import gold_ids
from ..errors import Errors
from ..factories import ENTITY_LINKER
from ..spacy_data.gold_ids import resolve_gold_docs
from ..spacy_data.readers import with_gold_mentions
from .gold import check_gold
from .metrics import f1_score, prf

NO_CANDIDATE = -1e9  # the score of a mention without candidates (finite, for sklearn)


@dataclass(frozen=True)
class NilThreshold:
    """The tuned threshold and NIL precision, recall and F1 on the data it was tuned on."""

    threshold: float
    precision: float
    recall: float
    f1: float


def _check(scores: Sequence[float], is_nil: Sequence[bool]) -> tuple[np.ndarray, np.ndarray]:
    s = np.asarray(scores, dtype=np.float64)
    nil = np.asarray(is_nil, dtype=bool)
    if s.shape != nil.shape or s.ndim != 1:
        raise ValueError(Errors.E110.format(scores=s.shape, is_nil=nil.shape))
    if not nil.any() or nil.all():
        raise ValueError(Errors.E024.format(n_nil=int(nil.sum()), n_linked=int((~nil).sum())))
    return s, nil


def tune_nil_threshold(scores: Sequence[float], is_nil: Sequence[bool]) -> NilThreshold:
    """The threshold t maximising NIL F1 when every mention scoring below t is NIL.

    The NIL precision and recall of every cut come from scikit-learn's
    ``precision_recall_curve`` (the NIL score being the negated best-candidate score);
    thresholds lie midway between consecutive distinct scores (and below the lowest or above
    the highest); of equally good ones the lowest is returned. ``scores``: each mention's
    best candidate score; ``is_nil``: whether its gold entity is absent from the KB."""
    from sklearn.metrics import precision_recall_curve

    s, nil = _check(scores, is_nil)
    precision, recall, negated = precision_recall_curve(nil, -s)
    # point i: NIL when s <= -negated[i]; the last point (nothing NIL) has no threshold
    distinct = np.unique(s)
    upper = np.append(distinct[1:], distinct[-1] + 2.0)  # the next distinct score up
    cut_of = dict(zip(distinct.tolist(), ((distinct + upper) / 2).tolist(), strict=True))
    cuts = np.array([distinct[0] - 1.0] + [cut_of[-t] for t in negated])
    precision = np.concatenate([[0.0], precision[:-1]])  # nothing NIL: precision 0
    recall = np.concatenate([[0.0], recall[:-1]])
    f1 = f1_score(precision, recall)
    order = np.argsort(cuts, kind="stable")
    best = order[int(np.argmax(f1[order]))]
    return NilThreshold(float(cuts[best]), float(precision[best]), float(recall[best]),
                        float(f1[best]))


def nil_metrics(scores: Sequence[float], is_nil: Sequence[bool],
                threshold: float) -> dict[str, Any]:
    """NIL precision, recall and F1 at ``threshold``, and the area under the NIL PR curve
    (average precision, the NIL score being the negated best-candidate score)."""
    from sklearn.metrics import average_precision_score

    s, nil = _check(scores, is_nil)
    predicted = s < threshold
    tp = float((predicted & nil).sum())
    precision, recall, f1 = prf(tp, float(predicted.sum()), int(nil.sum()))
    return {"threshold": threshold, "precision": precision, "recall": recall, "f1": f1,
            "au_pr": float(average_precision_score(nil, -s)), "n": int(len(s)),
            "n_nil": int(nil.sum())}


def plot_nil_pr_curves(curves: dict[str, tuple[Sequence[float], Sequence[bool]]],
                       path: str | Path) -> None:
    """One NIL precision-recall curve per named (scores, is_nil) pair, saved as an image
    (atomically)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from sklearn.metrics import precision_recall_curve

    fig, ax = plt.subplots(figsize=(5, 4))
    for name, (scores, is_nil) in curves.items():
        s, nil = _check(scores, is_nil)
        precision, recall, _ = precision_recall_curve(nil, -s)
        ax.plot(recall, precision, label=name)
    ax.set_xlabel("NIL recall")
    ax.set_ylabel("NIL precision")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1.02)
    ax.legend(loc="lower left")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    try:
        with atomic_file(path) as temp:
            fig.savefig(temp, dpi=120)
    finally:
        plt.close(fig)


@dataclass
class NilScores:
    """Per gold mention: its best candidate's score, whether it is NIL, and whether the best
    candidate is a gold id."""

    scores: list[float]
    is_nil: list[bool]
    top1_correct: list[bool]

    def accuracy(self, threshold: float | None) -> float:
        """Accuracy over all mentions, NIL included: a NIL mention is right when it scores
        below ``threshold``, an in-KB one when its best candidate is gold and scores at or
        above it (PEL Table 4's "all classes incl. NIL" recall@1)."""
        t = float("-inf") if threshold is None else threshold
        right = [(s < t) if nil else (ok and s >= t) for s, nil, ok
                 in zip(self.scores, self.is_nil, self.top1_correct, strict=True)]
        return sum(right) / len(right) if right else 0.0

    def in_kb_accuracy(self) -> float:
        """Accuracy of the best candidate over the in-KB mentions, with no threshold."""
        linked = [ok for ok, nil in zip(self.top1_correct, self.is_nil, strict=True) if not nil]
        return sum(linked) / len(linked) if linked else 0.0


def nil_scores(nlp: Language, gold_docs: Iterable[Doc], *, component: str = ENTITY_LINKER,
               batch_size: int = 256) -> NilScores:
    """Link the gold mentions of ``gold_docs``: each mention's best candidate score and
    whether it is NIL (no gold id in the KB, or the NIL id). Mentions without a gold id are
    skipped; a ValueError is raised when none has one."""
    gold_docs = list(gold_docs)
    check_gold(gold_docs)
    linker = nlp.get_pipe(component)
    linker.ensure_ready()
    gold_docs, _ = resolve_gold_docs(gold_docs, linker.kb)
    nil_id = linker.linking.nil_id
    examples = [Example(with_gold_mentions(nlp.make_doc(g.text), g), g) for g in gold_docs]
    docs = nlp.pipe([eg.predicted for eg in examples], batch_size=batch_size)
    out = NilScores([], [], [])
    for doc, eg in zip(docs, examples, strict=True):
        predicted = {(e.start_char, e.end_char): e for e in doc.ents}
        for gold in eg.reference.ents:
            ent = predicted.get((gold.start_char, gold.end_char))
            all_ids = gold_ids(gold.kb_id_)
            if ent is None or not all_ids:
                continue
            candidates = ent._.kb_candidates or []
            out.scores.append(float(candidates[0][1]) if candidates else NO_CANDIDATE)
            ids = [i for i in all_ids if i != nil_id]
            out.is_nil.append(not any(i in linker.kb for i in ids))
            out.top1_correct.append(bool(candidates) and candidates[0][0] in ids)
    return out

