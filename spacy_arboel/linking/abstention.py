"""The NIL threshold a linker takes from its own KB, with no annotated corpus (issue 61).

A mention whose entity is in the KB but spelt unlike any of its names is what an untrained
linker gets wrong or links with little confidence; the KB itself gives such mentions. An
entity with two names or more lends one of them as a pseudo-mention (``NamePairSampler``),
linked with that name's index rows left out, so that its entity is found by its *other*
names only. The first candidate's score (p(e | m) on the probability scale, the raw score on
the raw scale) is kept for the pseudo-mentions linked right, and the threshold is the score
that keeps a share ``recall`` of them: their (1 - ``recall``) quantile. A real mention scoring
below it is NIL: on BC5CDR's and NCBI's test sets with a fifth of their entities taken out
of MeSH, 0.95 abstains on 50% and 21% of the mentions left out of the KB for 1.9 points of
in-KB R@1 (BENCHMARKS.md, issue 61).

The KB's names are not the corpus's mentions (they are harder: 52-69% of them are linked
right, against 76-81% of gold mentions), so ``recall`` is the share kept *of held-out
names*; a corpus, where there is one, tunes the threshold itself (``tune-nil``).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

import numpy as np

from ..encoders.inputs import MentionSpan
from .name_pairs import NamePairSampler

# how many held-out names set the threshold (seconds to embed on a CPU), and the fewest
# linked right that can (a KB with fewer entities of two names or more sets none)
PSEUDO_MENTIONS = 2000
MIN_RIGHT = 20


def held_out_first_scores(retriever, score_of: Callable[[Sequence[float]], float],
                          k: int, n: int = PSEUDO_MENTIONS, seed: int = 0
                          ) -> tuple[np.ndarray, np.ndarray]:
    """Per held-out name of ``n`` drawn (seeded) from ``retriever``'s current index: the
    first candidate's score (``score_of`` the ranked raw scores of its ``k`` nearest
    entities, the entity's own rows with that name left out) and whether that first
    candidate is the name's entity. A tie goes to the other entity."""
    entities = retriever.entities
    sampler = NamePairSampler(retriever.kb, entities.rows_of, entities.index_row_texts(),
                              rng=random.Random(seed))
    mentions = sampler.sample(n)
    if not mentions:
        return np.zeros(0), np.zeros(0, dtype=bool)
    texts = [m.text for m in mentions]
    vectors = retriever.encode_mentions(
        texts, [MentionSpan(i, 0, len(text)) for i, text in enumerate(texts)])
    scores, positions = entities.search(vectors, k)
    first, right = [], []
    for vector, mention, row_scores, row_positions in zip(vectors, mentions, scores,
                                                          positions, strict=True):
        own = float(np.max(entities.row_vectors(np.asarray(mention.positive_rows)) @ vector))
        ranked = [(int(p), float(s)) for p, s in zip(row_positions, row_scores, strict=True)
                  if p >= 0 and p != mention.entity]
        ranked.append((mention.entity, own))
        ranked = sorted(ranked, key=lambda c: -c[1])[:k]  # stable: a tie keeps the other
        first.append(score_of([s for _, s in ranked]))
        right.append(ranked[0][0] == mention.entity)
    return np.asarray(first, dtype="float64"), np.asarray(right, dtype=bool)


def recall_threshold(first: np.ndarray, right: np.ndarray, recall: float) -> float | None:
    """The highest score that keeps at least ``recall`` of the right first candidates
    (``first[right]``), or None with fewer than ``MIN_RIGHT`` of them."""
    kept = np.sort(first[right])
    if len(kept) < MIN_RIGHT:
        return None
    # the score of the right link that ``recall`` of them are at or above (rounded so that
    # 0.2 x 75 is 15, not 14.999...)
    return float(kept[int(np.floor(round((1.0 - recall) * len(kept), 9)))])
