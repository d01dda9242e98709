"""Evaluate ``arbo_coref`` on gold mentions, and tune its k and λ on dev."""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np
from spacy.language import Language
from spacy.tokens import Doc
from spacy.training import Example

from ..coref.graph import knn_graph
from ..data.ids import gold_ids
from ..errors import Errors
from ..extensions import VECTOR_EXT
from ..factories import COREF
from ..spacy_data.gold_ids import resolve_examples
from ..spacy_data.readers import with_gold_mentions
from .coref_metrics import coref_metrics, mention_recall
from .coref_scorer import mention_clusters
from .gold import check_gold
from .metrics import linking_metrics, mention_outcomes_from_examples

TUNING_METRICS = ("conll_f1", "nmi", "ari", "accuracy")
MENTION_RECALL_K = 64
# λ candidates: the dissimilarity below which this share of mentions keep their entity edge;
# fine near the top, where a few out-of-KB mentions lose theirs
THRESHOLD_QUANTILES = (0.2, 0.4, 0.6, 0.8, 0.9, 0.95, 0.98, 0.99, 0.995)


def gold_mention_examples(nlp: Language, gold_docs: Iterable[Doc]) -> list[Example]:
    return [Example(with_gold_mentions(nlp.make_doc(g.text), g), g) for g in gold_docs]


def evaluate_coref(
    nlp: Language, examples: list[Example], *, component: str = COREF,
    run: bool = True, with_mention_recall: bool = True, heldout: set[str] | None = None,
) -> dict[str, Any]:
    """Linking accuracy with clustering (arboEL eq. 8) and with independent nearest-entity
    inference, overall and seen/unseen; NMI, ARI, MUC, B³, CEAF-e and CoNLL F1 of the
    clusters against gold ids, over all mentions and over the out-of-KB mentions alone (the
    discovery setting). ``run=False`` scores examples already processed. ``heldout``: the
    ids held out of the KB (``prepare --holdout``), whose mentions are also scored apart.
    Raises a ValueError when no example has a gold mention with a gold id."""
    check_gold(eg.reference for eg in examples)
    coref = nlp.get_pipe(component)
    linker = coref.linker
    examples, resolved = resolve_examples(examples, linker.kb)
    seconds = 0.0
    if run:
        start = time.perf_counter()
        for _ in nlp.pipe([eg.predicted for eg in examples]):
            pass
        seconds = time.perf_counter() - start
    nil_id = linker.linking.nil_id
    outcomes = mention_outcomes_from_examples(
        examples, kb_ids=linker.kb, seen_ids=linker.seen_ids or None, nil_id=nil_id,
    )
    independent = [replace(o, predicted=o.candidates[0] if o.candidates else nil_id)
                   for o in outcomes]
    gold, predicted, _ = mention_clusters(examples)
    in_kb = [any(i in linker.kb for i in gold_ids(g)) if not g.startswith("#") else None
             for g in gold]
    out_of_kb = [i for i, flag in enumerate(in_kb) if flag is False]
    n_mentions = sum(len(eg.predicted.ents) for eg in examples)
    extra: dict[str, Any] = {}
    if heldout:
        held = [i for i, g in enumerate(gold) if set(gold_ids(g)) & heldout]
        extra["coref_heldout"] = coref_metrics([gold[i] for i in held],
                                               [predicted[i] for i in held])
        held_outcomes = [o for o in outcomes if set(o.gold_ids) & heldout]
        extra["heldout_nil_rate"] = (
            sum(o.predicted == nil_id for o in held_outcomes) / len(held_outcomes)
            if held_outcomes else None)
    recall = None
    if with_mention_recall:  # depends on the linker's vectors only, not on the clustering
        gold_labels, vectors = gold_vectors(examples)
        recall = mention_recall(knn_graph(vectors, MENTION_RECALL_K)[0], gold_labels)
    return {
        f"mention_recall@{MENTION_RECALL_K}": recall,
        "clustering": linking_metrics(outcomes, nil_id=nil_id),
        "independent": linking_metrics(independent, nil_id=nil_id),
        "coref": coref_metrics(gold, predicted),
        "coref_out_of_kb": coref_metrics([gold[i] for i in out_of_kb],
                                         [predicted[i] for i in out_of_kb]),
        **extra,
        "gold_ids_resolved": resolved,
        "settings": {key: getattr(coref.settings, key) for key in ("k", "threshold", "directed",
                                                                   "same_doc_only")},
        "timings": {"mentions": n_mentions, "seconds": round(seconds, 3),
                    "mentions_per_s": round(n_mentions / seconds, 1) if seconds else None},
    }


def normalised(text: str) -> str:
    """Lower case, letters and digits only: "Cox-2" and "COX 2" match."""
    return "".join(ch for ch in text.lower() if ch.isalnum())


def string_baseline(examples: list[Example]) -> dict[str, Any]:
    """Clusters of gold mentions with the same normalised text, scored like ``arbo_coref``."""
    gold, predicted = [], []
    for number, eg in enumerate(examples):
        for ent in eg.reference.ents:
            ids = gold_ids(ent.kb_id_)
            gold.append("|".join(ids) if ids else f"#{number}:{ent.start_char}:{ent.end_char}")
            predicted.append(normalised(ent.text))
    return coref_metrics(gold, predicted)


def gold_vectors(examples: list[Example]) -> tuple[list[str], np.ndarray]:
    """The gold id and mention vector of every linked mention that has a gold id."""
    labels, vectors = [], []
    for eg in examples:
        found = {(e.start_char, e.end_char): e for e in eg.predicted.ents}
        for ent in eg.reference.ents:
            pred = found.get((ent.start_char, ent.end_char))
            ids = gold_ids(ent.kb_id_)
            if ids and pred is not None and pred._.get(VECTOR_EXT) is not None:
                labels.append("|".join(ids))
                vectors.append(pred._.get(VECTOR_EXT))
    return labels, np.asarray(vectors, dtype="float32").reshape(len(vectors), -1)


def tuning_value(metrics: dict[str, Any], metric: str) -> float:
    """The number ``tune_coref`` maximises: a coref metric, or linking accuracy over all
    mentions with a gold id where an out-of-KB mention counts as right when put in a
    discovered (NIL) cluster."""
    if metric == "accuracy":
        linking = metrics["clustering"]
        n_all, n_out = linking["all"]["n"], linking["out_of_kb"]["n"]
        right = (linking["all"]["accuracy"] or 0) * n_all
        right += (linking["out_of_kb"]["nil_accuracy"] or 0) * n_out
        return right / n_all if n_all else 0.0
    value = metrics["coref"][metric]
    return float(value)


def edge_weight_quantiles(examples: list[Example], quantiles: Sequence[float]) -> list[float]:
    """Candidate thresholds λ: quantiles of the mention→entity dissimilarities (−score of
    each mention's nearest entity) on the already linked ``examples``."""
    scores = [ent._.kb_candidates[0][1] for eg in examples for ent in eg.predicted.ents
              if ent._.kb_candidates]
    if not scores:
        return []
    return sorted({round(float(q), 4) for q in np.quantile(-np.asarray(scores), quantiles)})


def tune_coref(
    nlp: Language, examples: list[Example], *, component: str = COREF,
    ks: Sequence[int] = (1, 2, 4, 8, 16), thresholds: Sequence[float | None] | None = None,
    directed: Sequence[bool] = (True, False), metric: str = "conll_f1",
    max_accuracy_loss: float | None = 0.02,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Grid search over k, λ and directedness; the linker runs once, the partition per
    setting. Returns the best settings and one row per setting. Raises a ValueError when
    no example has a gold mention with a gold id.

    ``max_accuracy_loss``: a setting whose in-KB linking accuracy is more than this below
    independent linking's is only chosen when no setting is within it (then the one losing
    least is); putting out-of-KB mentions in new clusters cannot make up for it. A cluster
    metric alone can prefer a λ that cuts most entity edges, or mention chains that carry
    one entity to its neighbours' mentions, while the clusters stay pure: good CoNLL F1,
    wrong ``kb_id``s. ``None``: no constraint (arboEL tunes for the clusters alone)."""
    if metric not in TUNING_METRICS:
        raise ValueError(Errors.E007.format(what="tuning metric", value=metric,
                                            options=", ".join(TUNING_METRICS)))
    if max_accuracy_loss is not None and not 0 <= max_accuracy_loss <= 1:
        raise ValueError(Errors.E011.format(name="max_accuracy_loss", condition="in [0, 1]",
                                            value=max_accuracy_loss))
    check_gold(eg.reference for eg in examples)
    coref = nlp.get_pipe(component)
    examples, _ = resolve_examples(examples, coref.linker.kb)
    with nlp.select_pipes(disable=[component]):
        for _ in nlp.pipe([eg.predicted for eg in examples]):
            pass
    if thresholds is None:
        thresholds = [None, *edge_weight_quantiles(examples, THRESHOLD_QUANTILES)]
    original = coref.settings
    rows = []
    try:
        for k, threshold, is_directed in itertools.product(ks, thresholds, directed):
            coref.configure(k=k, threshold=threshold, directed=is_directed, keep_state=False)
            docs = [eg.predicted for eg in examples]
            for start in range(0, len(docs), coref.settings.buffer_size):
                coref.cluster(docs[start : start + coref.settings.buffer_size])
            metrics = evaluate_coref(nlp, examples, component=component, run=False,
                                     with_mention_recall=False)
            in_kb = [metrics[way]["in_kb"]["accuracy"] or 0.0
                     for way in ("independent", "clustering")]
            rows.append({"k": k, "threshold": threshold, "directed": is_directed,
                         "value": tuning_value(metrics, metric),
                         "accuracy": metrics["clustering"]["all"]["accuracy"],
                         "accuracy_loss": in_kb[0] - in_kb[1],
                         "conll_f1": metrics["coref"]["conll_f1"],
                         "nmi": metrics["coref"]["nmi"], "ari": metrics["coref"]["ari"]})
    finally:
        coref.settings = original
    best = best_setting(rows, max_accuracy_loss)
    return {"k": best["k"], "threshold": best["threshold"], "directed": best["directed"],
            "metric": metric, "value": best["value"],
            "max_accuracy_loss": max_accuracy_loss,
            "accuracy_loss": best["accuracy_loss"]}, rows


def best_setting(rows: list[dict[str, Any]], max_accuracy_loss: float | None
                 ) -> dict[str, Any]:
    """The row with the highest value among those losing at most ``max_accuracy_loss``
    linking accuracy; the row losing least when none does (first row on ties)."""
    if max_accuracy_loss is None:
        return max(rows, key=lambda row: row["value"])
    eligible = [row for row in rows if row["accuracy_loss"] <= max_accuracy_loss + 1e-9]
    if not eligible:
        return min(rows, key=lambda row: row["accuracy_loss"])
    return max(eligible, key=lambda row: row["value"])
