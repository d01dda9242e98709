"""Clustering and coreference metrics of predicted mention clusters against gold entity ids.

NMI and ARI (the arboEL papers' metrics, from scikit-learn), and the three coreference
metrics whose mean is the CoNLL F1: MUC (Vilain et al., 1995), B³ (Bagga and Baldwin,
1998) and entity-based CEAF (CEAF-e, Luo, 2005). Singletons count (except in MUC, which
ignores them by definition).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Hashable, Sequence

import numpy as np
from scipy.optimize import linear_sum_assignment
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from ..errors import Errors
from .metrics import f1_score


def _prf(precision: float, recall: float) -> dict[str, float]:
    return {"p": precision, "r": recall, "f": f1_score(precision, recall)}


def _codes(labels: Sequence[Hashable]) -> np.ndarray:
    index: dict[Hashable, int] = {}
    return np.array([index.setdefault(label, len(index)) for label in labels], dtype="int64")


def muc(gold: np.ndarray, predicted: np.ndarray) -> dict[str, float]:
    """MUC: links needed to join each cluster, and how many the other partition keeps."""

    def recall(keys: np.ndarray, responses: np.ndarray) -> float:
        numerator = denominator = 0
        for members in _clusters(keys).values():
            numerator += len(members) - len(set(responses[members].tolist()))
            denominator += len(members) - 1
        return numerator / denominator if denominator else 0.0

    return _prf(recall(predicted, gold), recall(gold, predicted))


def b_cubed(gold: np.ndarray, predicted: np.ndarray) -> dict[str, float]:
    """B³: per mention, the overlap of its gold and predicted clusters, averaged."""
    pairs = Counter(zip(gold.tolist(), predicted.tolist(), strict=True))
    gold_sizes, pred_sizes = Counter(gold.tolist()), Counter(predicted.tolist())
    overlap = np.array([pairs[(g, p)] for g, p in zip(gold.tolist(), predicted.tolist(),
                                                        strict=True)], dtype="float64")
    precision = float(np.mean(overlap / np.array([pred_sizes[p] for p in predicted.tolist()])))
    recall = float(np.mean(overlap / np.array([gold_sizes[g] for g in gold.tolist()])))
    return _prf(precision, recall)


def ceaf_e(gold: np.ndarray, predicted: np.ndarray) -> dict[str, float]:
    """CEAF-e: the best one-to-one alignment of gold and predicted clusters under
    φ4(K, R) = 2|K ∩ R| / (|K| + |R|), solved per connected block of overlapping clusters."""
    n_gold, n_pred = int(gold.max()) + 1, int(predicted.max()) + 1
    pairs = Counter(zip(gold.tolist(), predicted.tolist(), strict=True))
    gold_sizes, pred_sizes = np.bincount(gold), np.bincount(predicted)
    rows = np.array([g for g, _ in pairs], dtype="int64")
    cols = np.array([p for _, p in pairs], dtype="int64")
    counts = np.array(list(pairs.values()), dtype="float64")
    phi = 2 * counts / (gold_sizes[rows] + pred_sizes[cols])
    # gold clusters are nodes 0..n_gold-1, predicted ones n_gold..; blocks are independent
    graph = coo_matrix((np.ones(len(rows)), (rows, cols + n_gold)),
                       shape=(n_gold + n_pred, n_gold + n_pred))
    _, block = connected_components(graph, directed=False)
    total = 0.0
    by_block: dict[int, list[int]] = defaultdict(list)
    for edge, row in enumerate(rows.tolist()):
        by_block[int(block[row])].append(edge)
    for edges in by_block.values():
        if len(edges) == 1:
            total += phi[edges[0]]
            continue
        block_rows, block_cols = _codes(rows[edges].tolist()), _codes(cols[edges].tolist())
        matrix = np.zeros((block_rows.max() + 1, block_cols.max() + 1))
        matrix[block_rows, block_cols] = phi[edges]
        chosen_rows, chosen_cols = linear_sum_assignment(matrix, maximize=True)
        total += matrix[chosen_rows, chosen_cols].sum()
    return _prf(total / n_pred, total / n_gold)


def _clusters(labels: np.ndarray) -> dict[int, np.ndarray]:
    order = np.argsort(labels, kind="stable")
    bounds = np.flatnonzero(np.diff(labels[order])) + 1
    return {int(labels[group[0]]): group for group in np.split(order, bounds)}


def coref_metrics(gold: Sequence[Hashable], predicted: Sequence[Hashable]) -> dict[str, object]:
    """All the metrics for one clustering of the same mentions (labels are any hashables)."""
    # imported here: scikit-learn takes ~0.5 s to import, and spacy.load imports this module
    from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score

    if len(gold) != len(predicted):
        raise ValueError(Errors.E064.format(n_gold=len(gold), n_predicted=len(predicted)))
    if not gold:
        return {"n": 0}
    gold_codes, pred_codes = _codes(gold), _codes(predicted)
    scores = {"muc": muc(gold_codes, pred_codes), "b3": b_cubed(gold_codes, pred_codes),
              "ceafe": ceaf_e(gold_codes, pred_codes)}
    return {
        "n": len(gold),
        "gold_clusters": int(gold_codes.max()) + 1,
        "predicted_clusters": int(pred_codes.max()) + 1,
        "nmi": float(normalized_mutual_info_score(gold_codes, pred_codes)),
        "ari": float(adjusted_rand_score(gold_codes, pred_codes)),
        **scores,
        "conll_f1": float(np.mean([scores[m]["f"] for m in ("muc", "b3", "ceafe")])),
    }


def mention_recall(neighbours: np.ndarray, gold: Sequence[Hashable]) -> float | None:
    """arboEL's mention recall@k (§3.5, fig. 3): for each mention with coreferent mentions,
    the share of its k retrieved neighbours (``neighbours``, -1 padded) that are coreferent,
    out of min(k, number of coreferent mentions); averaged over those mentions."""
    codes = _codes(gold)
    sizes = np.bincount(codes)
    k = neighbours.shape[1] if neighbours.ndim == 2 else 0
    values = []
    for mention, row in enumerate(neighbours):
        others = sizes[codes[mention]] - 1
        if others == 0 or k == 0:
            continue
        row = row[row >= 0]
        values.append(float(np.sum(codes[row] == codes[mention])) / min(k, others))
    return float(np.mean(values)) if values else None
