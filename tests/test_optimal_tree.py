"""The exact k-leaf tree (the oracle): equal to plain enumeration, its cost is its tree's, errors."""
from __future__ import annotations

import numpy as np
import pytest

from exclust.algorithms.search.optimal_tree import leaf_cost, optimal_tree
from exclust.errors import InputError


def enumerate_best(X, rows, m):
    """Every tree of m leaves over ``rows``, no memo and no pruning: the least cost."""
    if m == 1:
        return leaf_cost(X[rows])
    best = np.inf
    for f in range(X.shape[1]):
        values = np.unique(X[rows, f])
        for t in (values[:-1] + values[1:]) / 2:
            left, right = rows[X[rows, f] <= t], rows[X[rows, f] > t]
            for j in range(1, m):
                best = min(best, enumerate_best(X, left, j) + enumerate_best(X, right, m - j))
    return best


def partition_cost(tree, X):
    leaf = tree.apply(X)
    return sum(leaf_cost(X[leaf == v]) for v in np.unique(leaf))


@pytest.mark.parametrize("seed", range(4))
def test_equals_enumeration_on_tiny_instances(seed):
    rng = np.random.default_rng(seed)
    X = np.round(rng.normal(size=(11, 2)), 1)  # rounded: ties between values occur
    for m in (2, 3, 4):
        tree, cost = optimal_tree(X, m)
        assert cost == pytest.approx(enumerate_best(X, np.arange(11), m), rel=1e-12)
        assert tree.n_leaves == m
        assert partition_cost(tree, X) == pytest.approx(cost, rel=1e-12)
        assert sorted(np.unique(tree.predict(X)).tolist()) == list(range(m))


def test_cost_falls_with_leaves_and_beats_any_other_tree():
    rng = np.random.default_rng(7)
    X = rng.normal(size=(25, 3))
    costs = [optimal_tree(X, m)[1] for m in (1, 2, 3, 4)]
    assert costs[0] == pytest.approx(leaf_cost(X))
    assert all(a > b for a, b in zip(costs, costs[1:], strict=False))
    from exclust.algorithms.histogram.exgreedy import ExGreedy

    centers = X[:4] + 0.01
    greedy = ExGreedy(4, max_bins=65536).fit(X, centers)
    assert partition_cost(greedy.tree_, X) >= costs[3] - 1e-9


def test_refuses_what_it_cannot_do():
    with pytest.raises(InputError, match="at most 400 rows"):
        optimal_tree(np.zeros((401, 2)), 2)
    with pytest.raises(InputError, match="too few distinct rows"):
        optimal_tree(np.array([[0.0, 0.0], [0.0, 0.0], [1.0, 1.0]]), 3)
