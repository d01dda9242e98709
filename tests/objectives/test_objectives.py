"""Objectives: the arborescence, candidate plans and losses (arboEL §2.3, BLINK eq. 4)."""

import itertools
import random

import numpy as np
import pytest
import torch

from spacy_arboel.ml.objectives import FUNCTIONS, objective_block
from spacy_arboel.objectives import (
    FGSM,
    Arborescence,
    Distillation,
    InBatch,
    KnnNegatives,
    MentionStore,
    PlanContext,
    Proxy,
    arborescence_parents,
    distillation_loss,
    edge_loss,
    proxy_loss,
    softmax_loss,
)
from spacy_arboel.objectives.losses import candidate_scores


def _brute_force_parents(entity_aff, mention_aff):
    """Minimum-weight arborescence rooted at the entity by enumerating parent choices."""
    n = len(entity_aff)
    best, best_parents = None, None
    for parents in itertools.product(range(-1, n), repeat=n):
        if any(p == i for i, p in enumerate(parents)):
            continue
        ok = True
        for i in range(n):  # every node must reach the root without a cycle
            seen, node = set(), i
            while node != -1:
                if node in seen:
                    ok = False
                    break
                seen.add(node)
                node = parents[node]
            if not ok:
                break
        if not ok:
            continue
        weight = sum(-(entity_aff[i] if p == -1 else mention_aff[p, i])
                     for i, p in enumerate(parents))
        if best is None or weight < best - 1e-9:
            best, best_parents = weight, parents
    return np.array(best_parents)


@pytest.mark.parametrize("seed", range(8))
def test_arborescence_matches_brute_force(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 5))
    vectors = rng.normal(size=(n, 4))
    entity = rng.normal(size=4)
    entity_aff, mention_aff = vectors @ entity, vectors @ vectors.T
    assert (arborescence_parents(entity_aff, mention_aff)
            == _brute_force_parents(entity_aff, mention_aff)).all()


def test_arborescence_chains_through_a_close_mention():
    # m0 is close to the entity; m1 is far from the entity but close to m0.
    entity_aff = np.array([0.9, 0.1])
    mention_aff = np.array([[1.0, 0.8], [0.8, 1.0]])
    assert arborescence_parents(entity_aff, mention_aff).tolist() == [-1, 0]
    # if m1 is closer to the entity than to m0, the entity is its parent
    mention_aff = np.array([[1.0, 0.05], [0.05, 1.0]])
    assert arborescence_parents(entity_aff, mention_aff).tolist() == [-1, -1]


def _context(queries, golds, store=None, positions=None):
    rows = np.eye(6, 4, dtype="float32") * 2
    rows[5] = [1, 1, 0, 0]
    owners = np.arange(6)

    def search(q, k):
        return np.argsort(-(q @ rows.T), axis=1)[:, :k]

    return PlanContext(
        gold_rows=[[g] for g in golds], gold_entities=list(golds),
        store_positions=positions or [-1] * len(golds), queries=np.asarray(queries, "float32"),
        row_vectors=rows, row_owners=owners, search_rows=search, store=store,
        rng=random.Random(0),
    )


def test_in_batch_plan_uses_other_gold_entities_once():
    ctx = _context(np.ones((3, 4)), [0, 1, 0])
    plan = InBatch().plan(ctx)
    assert sorted(plan.entity_rows) == [0, 1]
    row = lambda i: [plan.entity_rows[c] for c in plan.candidates[i] if c >= 0]  # noqa: E731
    assert row(0) == [0, 1] and row(1) == [1, 0] and row(2) == [0, 1]


def test_knn_plan_excludes_the_gold_entity():
    ctx = _context([[1, 0.5, 0, 0]], [0])
    plan = KnnNegatives(n_negatives=2).plan(ctx)
    rows = [plan.entity_rows[c] for c in plan.candidates[0]]
    assert rows[0] == 0 and 0 not in rows[1:] and rows[1:] == [5, 1]


def _store():
    store = MentionStore()
    for i, gold in enumerate([0, 0, 0, 1]):
        store.add(("doc", i, i + 1), [1, 2, 3], gold)
    vectors = np.array([[2, 0.2, 0, 0], [1.9, 0.4, 0, 0], [0, 0, 0, 3], [0, 2, 0, 0]], "float32")
    store.set_embeddings(vectors)
    return store


@pytest.mark.parametrize("variant", ["full", "1nn", "1rand"])
def test_arborescence_plan_positive_and_negatives(variant):
    store = _store()
    # mention 1 is closer to mention 0 (3.88) than to its entity's row (3.8): with the
    # cluster in the graph, its incoming arborescence edge comes from mention 0.
    ctx = _context(store.embeddings[[1]], [0], store=store, positions=[1])
    plan = Arborescence(variant, n_negatives=2).plan(ctx)
    n_rows = len(plan.entity_rows)
    positive = plan.candidates[0, 0]
    if variant in ("full", "1nn"):
        assert positive >= n_rows + 1 and plan.extra_mentions[positive - n_rows - 1] == 0
    negatives = plan.candidates[0, 1:]
    neg_rows = [plan.entity_rows[c] for c in negatives if 0 <= c < n_rows]
    neg_mentions = [plan.extra_mentions[c - n_rows - 1] for c in negatives if c >= n_rows + 1]
    assert 0 not in neg_rows and len(neg_rows) == 1
    assert neg_mentions == [3]  # the only mention of another cluster


def test_singleton_cluster_falls_back_to_the_entity():
    store = _store()
    ctx = _context(store.embeddings[[3]], [1], store=store, positions=[3])
    plan = Arborescence("full", n_negatives=0).plan(ctx)
    assert plan.entity_rows[plan.candidates[0, 0]] == 1


def test_losses_match_their_formulas():
    queries = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    nodes = torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.5, 0.5]])
    candidates = torch.tensor([[0, 1, 2], [1, 0, -1]])
    scores, valid = candidate_scores(queries, nodes, candidates)
    assert scores[1, 2] == float("-inf")
    p0 = torch.softmax(torch.tensor([1.0, 0.0, 0.5]), 0)
    p1 = torch.softmax(torch.tensor([1.0, 0.0]), 0)
    expected_ce = -(p0[0].log() + p1[0].log()) / 2
    assert softmax_loss(scores, valid).item() == pytest.approx(expected_ce.item(), rel=1e-5)
    expected_edge = -((p0[0].log() + (1 - p0[1]).log() + (1 - p0[2]).log())
                      + (p1[0].log() + (1 - p1[1]).log())) / 2
    assert edge_loss(scores, valid).item() == pytest.approx(expected_edge.item(), rel=1e-5)


def test_knn_negatives_take_one_row_per_entity():
    ctx = _context([[1, 0.5, 0, 0]], [0])
    ctx.row_owners = np.array([0, 1, 1, 2, 3, 1])  # entity 1 owns rows 1, 2 and 5
    plan = KnnNegatives(n_negatives=2).plan(ctx)
    rows = [plan.entity_rows[c] for c in plan.candidates[0]]
    owners = [int(ctx.row_owners[r]) for r in rows[1:]]
    assert rows[0] == 0 and 0 not in owners and len(set(owners)) == len(owners) == 2


def test_proxy_loss_matches_pel_eq_3():
    scores = torch.tensor([[0.8, 0.1, -0.2], [0.3, 0.5, 0.0]])
    valid = torch.tensor([[True, True, True], [True, True, False]])
    alpha, delta = 4.0, 0.1

    def term(s, negatives):
        pos = np.log1p(np.exp(-alpha * (s - delta)))
        neg = np.log1p(sum(np.exp(alpha * (n + delta)) for n in negatives))
        return pos + neg

    expected = (term(0.8, [0.1, -0.2]) + term(0.3, [0.5])) / 2
    assert proxy_loss(scores, valid, alpha, delta).item() == pytest.approx(expected, rel=1e-5)


def test_proxy_loss_is_decoupled_from_the_positive():
    """PEL eq. 4: the gradient on a negative does not depend on the positive's score (unlike
    cross-entropy's)."""
    grads = []
    for positive in (0.9, -0.5):
        scores = torch.tensor([[positive, 0.2, 0.1]], requires_grad=True)
        proxy_loss(scores, torch.ones(1, 3, dtype=torch.bool), 8.0, 0.0).backward()
        grads.append(scores.grad[0, 1:].clone())
    assert torch.allclose(grads[0], grads[1])


def test_cosine_scores_ignore_the_vector_length():
    queries = torch.tensor([[3.0, 0.0]])
    nodes = torch.tensor([[10.0, 0.0], [0.0, 0.1], [1.0, 1.0]])
    scores, _ = candidate_scores(queries, nodes, torch.tensor([[0, 1, 2]]), "cosine")
    assert scores[0].tolist() == pytest.approx([1.0, 0.0, 2 ** -0.5], abs=1e-6)


def _entity_context(n_entities=40):
    ctx = _context([[1, 0.5, 0, 0]], [0])
    ctx.row_owners = np.arange(6)
    ctx.rows_of = [[r] for r in range(6)] + [[] for _ in range(n_entities - 6)]
    return ctx


@pytest.mark.parametrize("negatives,n_hard", [("random", 0), ("mixed", 2), ("hard", 4)])
def test_negative_sampling_random_mixed_and_hard(negatives, n_hard):
    ctx = _entity_context()
    plan = Proxy(n_negatives=4, negatives=negatives, hard_fraction=0.5).plan(ctx)
    rows = [plan.entity_rows[c] for c in plan.candidates[0] if c >= 0]
    assert rows[0] == 0 and 0 not in rows[1:] and len(set(rows)) == len(rows)
    nearest = [5, 1, 2, 3]  # the k-NN order of the other rows for this query
    assert rows[1 : 1 + n_hard] == nearest[:n_hard]
    assert len(rows) == 5  # entities without rows are never drawn, and there are enough


def test_random_negatives_are_uniform_over_entities():
    ctx = _context([[1, 0.5, 0, 0]], [0])
    ctx.row_owners = np.array([0, 1, 1, 1, 1, 2])  # entity 1 has four rows, entity 2 one
    ctx.rows_of = [[0], [1, 2, 3, 4], [5]]
    counts = {1: 0, 2: 0}
    objective = KnnNegatives(n_negatives=1, negatives="random")
    for seed in range(400):
        ctx.rng = random.Random(seed)
        row = objective.sampled_entity_negatives(ctx, 1, "random", 0)[0][0]
        counts[int(ctx.row_owners[row])] += 1
    assert abs(counts[1] - counts[2]) < 80, counts
    assert not objective.needs_entity_index


def test_objective_blocks_select_the_versioned_functions():
    from spacy.util import registry

    assert objective_block("in_batch", {"n_negatives": 4}) == {"@misc": FUNCTIONS["in_batch"]}
    assert objective_block("arborescence", {"n_negatives": 4, "negatives": "hard"}) == {
        "@misc": "spacy_arboel.ArborescenceObjective.v1", "n_negatives": 4}
    distill = objective_block("distill", {"n_negatives": 3, "teacher_path": "x", "alpha": 0.2})
    assert distill == {"@misc": "spacy_arboel.DistillationObjective.v1", "teacher_path": "x",
                       "alpha": 0.2, "objective": {
                           "@misc": "spacy_arboel.KnnNegativesObjective.v1", "n_negatives": 3}}
    built = registry.resolve({"o": objective_block("proxy", {"n_negatives": 2})})["o"]
    assert isinstance(built, Proxy) and built.n_negatives == 2 and built.negatives == "mixed"
    with pytest.raises(ValueError, match=r"E007.*softmax.*knn_negatives"):
        objective_block("softmax")


def test_the_versioned_functions_build_their_objectives():
    from spacy.util import registry

    def build(block: dict):
        return registry.resolve({"o": block})["o"]

    assert build({"@misc": FUNCTIONS["proxy"]}).negatives == "mixed"
    assert build({"@misc": FUNCTIONS["knn_negatives"]}).negatives == "hard"
    wrapped = build({"@misc": "spacy_arboel.FGSMObjective.v1", "epsilon": 0.01,
                     "objective": {"@misc": FUNCTIONS["in_batch"]}})
    arbo = build({"@misc": FUNCTIONS["arborescence"], "variant": "1nn", "n_negatives": 3})
    assert isinstance(wrapped, FGSM) and wrapped.epsilon == 0.01
    assert isinstance(wrapped.objective, InBatch) and wrapped.captures_entity_embeddings
    assert isinstance(arbo, Arborescence) and (arbo.variant, arbo.n_negatives) == ("1nn", 3)
    with pytest.raises(ValueError, match="fgsm epsilon"):
        build({"@misc": "spacy_arboel.FGSMObjective.v1", "epsilon": -1.0,
               "objective": {"@misc": FUNCTIONS["proxy"]}})
    with pytest.raises(ValueError, match="E007.*some"):
        build({"@misc": FUNCTIONS["proxy"], "negatives": "some"})


def test_distillation_loss_matches_blink_eq_8_to_10():
    scores = torch.tensor([[2.0, 1.0, 0.0], [0.5, 1.5, float("-inf")]])
    valid = torch.tensor([[True, True, True], [True, True, False]])
    teacher = torch.tensor([[1.0, 3.0, 0.0], [2.0, 0.0, 7.0]])  # the padded 7.0 is ignored
    T, alpha = 2.0, 0.3
    expected = 0.0
    for s, t in ((np.array([2.0, 1.0, 0.0]), np.array([1.0, 3.0, 0.0])),
                 (np.array([0.5, 1.5]), np.array([2.0, 0.0]))):
        student = -(s[0] - np.log(np.exp(s).sum()))
        p = np.exp(t / T) / np.exp(t / T).sum()
        log_q = s / T - np.log(np.exp(s / T).sum())
        expected += alpha * student + (1 - alpha) * -(p * log_q).sum()
    got = distillation_loss(scores, valid, teacher, T, alpha).item()
    assert got == pytest.approx(expected / 2, rel=1e-5)
    # alpha = 1 is the plain softmax loss
    assert distillation_loss(scores, valid, teacher, T, 1.0).item() == pytest.approx(
        softmax_loss(scores, valid).item(), rel=1e-6)


def test_distill_needs_a_teacher():
    from spacy.util import registry

    with pytest.raises(ValueError, match="teacher_path"):
        registry.resolve({"o": objective_block("distill")})
    distill = registry.resolve({"o": objective_block("distill", {"teacher_path": "x",
                                                                 "n_negatives": 3})})["o"]
    assert isinstance(distill, Distillation) and distill.objective.negatives == "hard"
    assert distill.teacher is None  # loaded on the first training step


def test_ranked_candidate_loss_is_softmax_cross_entropy_with_its_gradient():
    from spacy_arboel.objectives.losses import ranked_candidate_loss

    rows = [np.array([2.0, 1.0, -np.inf]), np.array([0.5, 0.5]), np.array([1.0, 3.0])]
    loss, grads = ranked_candidate_loss(rows, [1, None, 0])
    first = -np.log(np.exp(1.0) / (np.exp(2.0) + np.exp(1.0)))
    third = -np.log(np.exp(1.0) / (np.exp(1.0) + np.exp(3.0)))
    assert loss == pytest.approx((first + third) / 2)
    assert not grads[1].any() and grads[0][2] == 0.0  # no gold: no gradient; padding: none
    p = np.exp([2.0, 1.0]) / np.exp([2.0, 1.0]).sum()
    np.testing.assert_allclose(grads[0][:2], (p - [0, 1]) / 2, rtol=1e-5)
