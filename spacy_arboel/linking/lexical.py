"""BioSyn's lexical (sparse) score: character n-gram TF-IDF similarity of a mention to the KB's
names (Sung et al., ACL 2020, §3.1), and its union with the dense candidates (§3.2).

BioSyn scores a mention against a dictionary name as ``S = S_dense + λ·S_sparse``, where
``S_sparse`` is the inner product of the two names' TF-IDF vectors over character uni- and
bigrams, fitted on the dictionary's names; its candidates are the top dense and the top sparse
names together. Here the dictionary is the KB's rows (an entity's name and aliases, several
rows per entity) and an entity scores as its best row, as the dense index does::

    index = LexicalIndex.from_entities(list(kb))          # or LexicalIndex(names, owners)
    scores, positions = index.search(["Famotidine"], k=8)  # top entities by sparse score
    union = index.combine(texts, dense_scores, dense_positions, dense_score, weight=0.5)
    weight, r1 = best_weight(union.dense, union.sparse, union.positions, gold)  # dev λ

The vectors are l2-normalised (TfidfVectorizer's default), so the inner product is a cosine
in [0, 1]. An entity that shares no n-gram with a mention is no sparse candidate of it.
Nothing is saved but the settings: the index is rebuilt, deterministically, from the KB.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass

import numpy as np
from sklearn.feature_extraction.text import TfidfVectorizer

from ..encoders.inputs import entity_rows
from ..errors import Errors

ANALYZERS = ("char", "char_wb")
WEIGHT_GRID = (0.0, 0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0)
MAX_DOUBLINGS = 6  # past the grid's edge: 3 → 6 → … → 192

# dense_score(query_indices, positions) -> scores of the pairs: see ``LexicalIndex.combine``
DenseScore = Callable[[np.ndarray, np.ndarray], np.ndarray]


@dataclass(frozen=True)
class LexicalSettings:
    """How names become TF-IDF vectors; BioSyn's are the defaults (``analyzer="char"``,
    ``ngram_range=(1, 2)``, lowercased). ``char_wb`` takes n-grams inside words only, padded
    with a space at each end."""

    analyzer: str = "char"
    ngram_range: tuple[int, int] = (1, 2)
    lowercase: bool = True

    def __post_init__(self) -> None:
        low, high = (tuple(self.ngram_range) + (None, None))[:2]
        if (self.analyzer not in ANALYZERS or len(tuple(self.ngram_range)) != 2
                or not all(isinstance(n, int) and not isinstance(n, bool) for n in (low, high))
                or not 1 <= low <= high or not isinstance(self.lowercase, bool)):
            raise ValueError(Errors.E160.format(
                analyzer=self.analyzer, ngram_range=self.ngram_range, lowercase=self.lowercase,
                analyzers=", ".join(ANALYZERS)))
        object.__setattr__(self, "ngram_range", (low, high))

    def to_dict(self) -> dict:
        """JSON-ready settings: all a saved pipeline needs to rebuild the index."""
        settings = asdict(self)
        settings["ngram_range"] = list(self.ngram_range)
        return settings

    @classmethod
    def from_dict(cls, settings: dict) -> LexicalSettings:
        return cls(**{**settings, "ngram_range": tuple(settings.get("ngram_range", (1, 2)))})

    @property
    def fingerprint(self) -> str:
        """A short hash of the settings (the names are the KB's, fingerprinted apart)."""
        text = json.dumps(self.to_dict(), sort_keys=True)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


@dataclass
class Combined:
    """Candidates ranked by ``dense + weight * sparse``, per query: ``positions`` (int64, -1
    padding), their ``scores``, and the two components (float32, -inf padding)."""

    scores: np.ndarray
    positions: np.ndarray
    dense: np.ndarray
    sparse: np.ndarray


def name_rows(entities: Iterable) -> tuple[list[str], np.ndarray]:
    """The rows of a lexical index: each entity's name then its aliases, with the entity
    position that owns each row (``Entity`` objects, e.g. ``list(kb)``); an alias that is
    another entity's preferred name is left to that entity, as in the dense ``names`` rows
    (``encoders.inputs.entity_rows``)."""
    names, _, owners = entity_rows(list(entities), "alias", drop_shadowed=True)
    return names, owners


class LexicalIndex:
    """Character n-gram TF-IDF vectors of the KB's names; searched and scored per entity.

    ``names[i]`` is a name of entity position ``owners[i]``; ``n_entities`` (default: the
    largest owner + 1) bounds the positions. Queries go through in batches of at most
    ``batch_size``, fewer where ``batch_size × rows`` would pass ``block_elements`` scores, so
    that memory stays bounded on a large KB: a batch holds a float32 score per row and per
    query, and a few copies of the per-entity part of it (about 20 bytes × ``block_elements``
    at most, 320 MB by default; 1.5 s and 70 MB to build on 100k MeSH names)."""

    def __init__(self, names: Sequence[str], owners: np.ndarray,
                 settings: LexicalSettings | None = None, *, n_entities: int | None = None,
                 batch_size: int = 256, block_elements: int = 2 ** 24) -> None:
        self.settings = settings or LexicalSettings()
        names = list(names)
        owners = np.asarray(owners)
        if not names:
            raise ValueError(Errors.E161.format(problem="no names were given"))
        if (owners.shape != (len(names),) or not np.issubdtype(owners.dtype, np.integer)
                or owners.min() < 0 or (n_entities is not None and owners.max() >= n_entities)):
            raise ValueError(Errors.E162.format(
                n_names=len(names), shape=owners.shape, dtype=owners.dtype,
                n_entities=n_entities))
        if batch_size < 1 or block_elements < 1:
            raise ValueError(Errors.E164.format(
                problem=f"batch_size {batch_size} and block_elements {block_elements} must "
                        "be positive"))
        self.n_entities = int(owners.max()) + 1 if n_entities is None else int(n_entities)
        self.batch_size = batch_size
        self.block_elements = block_elements
        self.vectorizer = TfidfVectorizer(
            analyzer=self.settings.analyzer, ngram_range=self.settings.ngram_range,
            lowercase=self.settings.lowercase, dtype=np.float32)
        try:
            vectors = self.vectorizer.fit_transform(names)
        except ValueError as error:  # "empty vocabulary": no name has a character
            raise ValueError(Errors.E161.format(problem=f"no name has an n-gram ({error})")
                             ) from None
        self._layout(owners)
        self._rows = vectors[self._row_order].tocsr()  # (rows, n-grams), in layer order

    def _layout(self, owners: np.ndarray) -> None:
        """Lay the rows out in layers so that an entity's best row is a few contiguous maxima.

        Entity slots are ordered by their number of rows (most first, then by position);
        layer ``l`` holds the ``l``-th row of each entity with more than ``l`` rows, in slot
        order, so it scores a prefix of the slots: layer 0 is the first row of every slot,
        and the best row per slot is layer 0 maxed with each further layer's prefix."""
        counts = np.bincount(owners, minlength=self.n_entities)
        present = np.flatnonzero(counts)
        by_count = np.argsort(-counts[present], kind="stable")
        self._entities = present[by_count]  # slot -> entity position
        self._slot_of = np.full(self.n_entities, -1, dtype="int64")
        self._slot_of[self._entities] = np.arange(len(self._entities))
        grouped = np.argsort(owners, kind="stable")
        first = np.searchsorted(owners[grouped], owners[grouped])  # first row of its entity
        layer = np.empty(len(owners), dtype="int64")
        layer[grouped] = np.arange(len(owners)) - first  # the row's rank within its entity
        self._row_order = np.lexsort((self._slot_of[owners], layer))
        sizes = np.bincount(layer)  # rows per layer = slots with more than l rows
        self._layers = [(int(start), int(size)) for start, size
                        in zip(np.cumsum(sizes)[:-1], sizes[1:], strict=True)]

    @classmethod
    def from_entities(cls, entities: Iterable, settings: LexicalSettings | None = None,
                      **options) -> LexicalIndex:
        """The index of the names and aliases of ``entities`` (e.g. ``list(kb)``)."""
        entities = list(entities)
        names, owners = name_rows(entities)
        return cls(names, owners, settings, n_entities=len(entities), **options)

    @property
    def fingerprint(self) -> str:
        """The settings' fingerprint: with the KB's, all that decides the index."""
        return self.settings.fingerprint

    @property
    def n_rows(self) -> int:
        return self._rows.shape[0]

    @property
    def vocabulary_size(self) -> int:
        return self._rows.shape[1]

    # --- scoring -----------------------------------------------------------------------------

    def _query_batch(self) -> int:
        return max(1, min(self.batch_size, self.block_elements // self.n_rows))

    def _entity_scores(self, queries: Sequence[str]
                       ) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """Per batch of distinct query texts (as the vectorizer sees them: repeated mentions
        are scored once): the indices of the queries in the batch, the row of each in
        ``best``, and ``best``, the best-row score of each text per entity slot (texts,
        slots), float32, 0 where nothing is shared."""
        if not len(queries):
            return
        preprocess = self.vectorizer.build_preprocessor()
        keys = [preprocess(q) for q in queries]  # whitespace alone is no query (-> no n-gram)
        texts, inverse = np.unique(np.array([k if k.strip() else "" for k in keys],
                                            dtype=object), return_inverse=True)
        inverse = inverse.reshape(-1)
        by_text = np.argsort(inverse, kind="stable")
        vectors = self.vectorizer.transform(list(texts))
        step = self._query_batch()
        n_slots = len(self._entities)
        for start in range(0, vectors.shape[0], step):
            batch = vectors[start:start + step]
            rows = np.asarray(self._rows @ batch.T.toarray(), dtype="float32")  # (rows, b)
            best = rows[:n_slots]  # layer 0
            for first, size in self._layers:
                np.maximum(best[:size], rows[first:first + size], out=best[:size])
            low, high = np.searchsorted(inverse[by_text], [start, start + batch.shape[0]])
            members = by_text[low:high]
            yield members, inverse[members] - start, np.ascontiguousarray(best.T)

    def _top(self, best: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Top-``k`` entities of each row of ``best`` (b, slots), best first, ties by position;
        entities scoring 0 (nothing shared) are padding."""
        n, slots = best.shape
        scores = np.full((n, k), -np.inf, dtype="float32")
        positions = np.full((n, k), -1, dtype="int64")
        kk = min(k, slots)
        if kk < slots:
            # (on -best: numpy's introselect is slow to select the last k among many ties,
            # here the zeros of entities that share nothing, but not the first k)
            top = np.argpartition(-best, kk - 1, axis=1)[:, :kk]
        else:
            top = np.broadcast_to(np.arange(slots), (n, slots))
        top_scores = np.take_along_axis(best, top, axis=1)
        top_positions = self._entities[top]
        order = np.lexsort((top_positions, -top_scores), axis=1)
        top_positions = np.take_along_axis(top_positions, order, axis=1)
        top_scores = np.take_along_axis(top_scores, order, axis=1)
        found = top_scores > 0
        scores[:, :kk] = np.where(found, top_scores, -np.inf)
        positions[:, :kk] = np.where(found, top_positions, -1)
        return scores, positions

    def _gather(self, best: np.ndarray, rows: np.ndarray, positions: np.ndarray) -> np.ndarray:
        """The scores in ``best[rows]`` of entity ``positions`` (len(rows), k): 0 for an
        entity without names, -inf where the position is -1."""
        slots = self._slot_of[np.maximum(positions, 0)]
        scores = best[rows[:, None], np.maximum(slots, 0)]
        scores = np.where(slots >= 0, scores, np.float32(0))
        return np.where(positions >= 0, scores, -np.inf).astype("float32")

    def _check_positions(self, n: int, positions: np.ndarray, what: str) -> np.ndarray:
        positions = np.asarray(positions)
        if (positions.ndim != 2 or positions.shape[0] != n
                or not np.issubdtype(positions.dtype, np.integer)
                or (positions.size and (positions.min() < -1
                                        or positions.max() >= self.n_entities))):
            raise ValueError(Errors.E163.format(
                what=what, shape=positions.shape, dtype=positions.dtype, n=n,
                n_entities=self.n_entities))
        return positions.astype("int64", copy=False)

    @staticmethod
    def _check_k(k: int) -> None:
        if not isinstance(k, int | np.integer) or k < 1:
            raise ValueError(Errors.E164.format(problem=f"k = {k!r} must be a positive int"))

    def search(self, queries: Sequence[str], k: int) -> tuple[np.ndarray, np.ndarray]:
        """The top-``k`` entities of each query by the sparse score of their best row: (scores
        float32 (n, k), positions int64 (n, k)), best first (ties by position; a tie at the
        k-th place is cut arbitrarily, the same way each time); -inf / -1 where fewer entities
        share an n-gram with the query (all of a query that is empty, only whitespace or has
        no known n-gram)."""
        self._check_k(k)
        scores = np.full((len(queries), k), -np.inf, dtype="float32")
        positions = np.full((len(queries), k), -1, dtype="int64")
        for members, rows, best in self._entity_scores(queries):
            found_scores, found_positions = self._top(best, k)
            scores[members], positions[members] = found_scores[rows], found_positions[rows]
        return scores, positions

    def score(self, queries: Sequence[str], positions: np.ndarray) -> np.ndarray:
        """The sparse score (n, k) of each query against the entities at ``positions`` (n, k),
        e.g. its dense candidates: the cosine of its best row, 0 where nothing is shared (an
        empty query too), -inf where the position is -1."""
        positions = self._check_positions(len(queries), positions, "positions")
        scores = np.full(positions.shape, -np.inf, dtype="float32")
        for members, rows, best in self._entity_scores(queries):
            scores[members] = self._gather(best, rows, positions[members])
        return scores

    def combine(self, queries: Sequence[str], dense_scores: np.ndarray,
                dense_positions: np.ndarray, dense_score: DenseScore, weight: float,
                k: int | None = None, n_sparse: int | None = None) -> Combined:
        """BioSyn's candidates: the union of the dense top-k (``dense_scores``,
        ``dense_positions``, (n, kd), -1 padding) and the sparse top ``n_sparse`` (default
        kd), ranked by ``dense + weight * sparse``; the first ``k`` of them (default: all).

        ``dense_score(query_indices, positions)`` gives the dense score of each pair (1-d int64
        arrays of one length; float array of that length back): it is called once, for the
        sparse candidates that are not among the dense ones. A dense retriever answers it
        from its mention vectors and its index (the entity's best row). Ties keep the dense
        candidates first; one pass over the KB gives both the sparse candidates and the
        sparse scores of the dense ones."""
        dense_positions = self._check_positions(len(queries), dense_positions,
                                                "dense_positions")
        dense_scores = np.asarray(dense_scores, dtype="float32")
        if dense_scores.shape != dense_positions.shape:
            raise ValueError(Errors.E164.format(
                problem=f"dense_scores {dense_scores.shape} and dense_positions "
                        f"{dense_positions.shape} differ in shape"))
        n_sparse = dense_positions.shape[1] if n_sparse is None else n_sparse
        self._check_k(n_sparse)
        n = len(queries)
        sparse_scores = np.full((n, n_sparse), -np.inf, dtype="float32")
        sparse_positions = np.full((n, n_sparse), -1, dtype="int64")
        sparse_of_dense = np.full(dense_positions.shape, -np.inf, dtype="float32")
        for members, rows, best in self._entity_scores(queries):
            found_scores, found_positions = self._top(best, n_sparse)
            sparse_scores[members] = found_scores[rows]
            sparse_positions[members] = found_positions[rows]
            sparse_of_dense[members] = self._gather(best, rows, dense_positions[members])
        positions, (dense, lexical) = union_positions(
            dense_positions, sparse_positions,
            (dense_scores, np.full(sparse_positions.shape, np.nan, dtype="float32")),
            (sparse_of_dense, sparse_scores))
        missing = np.isnan(dense) & (positions >= 0)
        if missing.any():
            rows, columns = np.nonzero(missing)
            found = np.asarray(dense_score(rows.astype("int64"), positions[rows, columns]),
                               dtype="float32")
            if found.shape != rows.shape:
                raise ValueError(Errors.E164.format(
                    problem=f"dense_score returned shape {found.shape} for {rows.size} pairs"))
            dense[rows, columns] = found
        dense[positions < 0] = -np.inf
        ranked = rank_combined(dense, lexical, positions, weight)
        if k is not None:
            self._check_k(k)
            ranked = Combined(*(pad_columns(a, k) for a in (ranked.scores, ranked.positions,
                                                             ranked.dense, ranked.sparse)))
        return ranked


# --- combining ---------------------------------------------------------------------------------


def pad_columns(values: np.ndarray, k: int) -> np.ndarray:
    """The first ``k`` columns of ``values``, padded with -1 (ints) or -inf (floats)."""
    if values.shape[1] >= k:
        return values[:, :k]
    fill = -1 if np.issubdtype(values.dtype, np.integer) else -np.inf
    padding = np.full((values.shape[0], k - values.shape[1]), fill, dtype=values.dtype)
    return np.concatenate([values, padding], axis=1)


def union_positions(first: np.ndarray, second: np.ndarray,
                    *carried: tuple[np.ndarray, np.ndarray]
                    ) -> tuple[np.ndarray, list[np.ndarray]]:
    """Per row, the positions of ``first`` then those of ``second`` not in ``first`` (each
    once, -1 dropped), left-aligned with -1 padding, as wide as the widest row; each pair in
    ``carried`` (arrays shaped like ``first`` and ``second``) follows its position."""
    both = np.concatenate([first, second], axis=1)
    order = np.argsort(both, axis=1, kind="stable")  # equal positions: the first one first
    in_order = np.take_along_axis(both, order, axis=1)
    repeated = np.zeros(both.shape, dtype=bool)
    repeated[:, 1:] = in_order[:, 1:] == in_order[:, :-1]
    keep = np.empty(both.shape, dtype=bool)
    np.put_along_axis(keep, order, ~repeated, axis=1)
    keep &= both >= 0
    width = max(int(keep.sum(axis=1).max(initial=0)), 1)
    moved = np.argsort(~keep, axis=1, kind="stable")[:, :width]  # kept ones, in order
    kept = np.take_along_axis(keep, moved, axis=1)
    positions = np.where(kept, np.take_along_axis(both, moved, axis=1), -1)
    values = []
    for a, b in carried:
        joined = np.take_along_axis(np.concatenate([a, b], axis=1), moved, axis=1)
        values.append(np.where(kept, joined, -np.inf).astype("float32"))
    return positions, values


def rank_combined(dense: np.ndarray, lexical: np.ndarray, positions: np.ndarray,
                  weight: float) -> Combined:
    """Order each row's candidates by ``dense + weight * lexical`` (stable: ties keep their
    order); -1 positions last, scored -inf."""
    with np.errstate(invalid="ignore"):  # 0 * -inf at padding
        total = (dense + np.float32(weight) * lexical).astype("float32")
    total[positions < 0] = -np.inf
    order = np.argsort(-total, axis=1, kind="stable")
    return Combined(*(np.take_along_axis(a, order, axis=1)
                      for a in (total, positions, dense, lexical)))


def best_weight(candidate_dense: np.ndarray, candidate_sparse: np.ndarray,
                candidate_positions: np.ndarray, gold_positions: np.ndarray,
                grid: Sequence[float] = WEIGHT_GRID,
                max_doublings: int = MAX_DOUBLINGS) -> tuple[float, dict[float, float]]:
    """BioSyn's λ for a dev set, chosen rather than learnt: the weight of ``grid`` whose
    ``dense + λ·sparse`` puts a gold entity first for the most mentions (the first such in
    ``grid`` on a tie), and R@1 per weight. While the grid's largest weight is among the best
    (and positive), the search goes on past the edge, doubling it until R@1 falls (at most
    ``max_doublings`` times; a larger weight is chosen only for a higher R@1): a
    corpus-trained linker's dot products are larger than a cosine, so its λ can lie beyond a
    grid made for cosines.

    The candidate arrays are (n, c) per mention (e.g. ``Combined.dense``, ``.sparse``,
    ``.positions``; -1 padding); ``gold_positions`` is (n,) or (n, g) with -1 padding, any
    gold entity counting as correct (composite mentions). R@1 is over all n mentions."""
    dense = np.asarray(candidate_dense, dtype="float32")
    lexical = np.asarray(candidate_sparse, dtype="float32")
    positions = np.asarray(candidate_positions)
    gold = np.asarray(gold_positions)
    gold = gold[:, None] if gold.ndim == 1 else gold
    if (dense.shape != lexical.shape or dense.shape != positions.shape or dense.ndim != 2
            or gold.ndim != 2 or gold.shape[0] != dense.shape[0] or not len(grid)):
        raise ValueError(Errors.E164.format(
            problem=f"candidate arrays {dense.shape}, {lexical.shape}, {positions.shape} and "
                    f"gold {gold.shape} must share their first dimension (and the candidate "
                    f"arrays their shape), with a non-empty grid"))
    n = dense.shape[0]

    def recall_at_1(weight: float) -> float:
        ranked = rank_combined(dense, lexical, positions, weight)
        first = ranked.positions[:, 0] if positions.shape[1] else np.full(n, -1)
        hits = ((first[:, None] == gold) & (first[:, None] >= 0)).any(axis=1)
        return float(hits.mean()) if n else 0.0

    r1 = {float(weight): recall_at_1(weight) for weight in grid}
    best = max(r1.values())
    chosen = next(w for w, value in r1.items() if value == best)
    largest = max(r1)
    for _ in range(max_doublings if r1[largest] == best and largest > 0 else 0):
        largest *= 2
        r1[largest] = recall_at_1(largest)
        if r1[largest] < best:
            break
        if r1[largest] > best:
            best, chosen = r1[largest], largest
    return chosen, r1
