"""KDTree baseline: highest-variance feature, median cut, leaves labelled by surrogate cost."""
from __future__ import annotations

import dask.array as da
import numpy as np
import pytest

from exclust.algorithms.histogram.kdtree import KDTree


def test_root_cuts_the_widest_feature_at_its_median(rng):
    X = np.column_stack([rng.normal(size=1001), 5 * rng.normal(size=1001), rng.normal(size=1001)])
    model = KDTree(2).fit(X, np.zeros((1, 3)))
    t = model.tree_
    assert t.feature[0] == 1
    left = (X[:, 1] <= t.threshold[0]).sum()
    assert abs(left - 500.5) <= 6  # within one quantile bin of the median (1001 points, 256 bins)


def test_exact_median_on_few_distinct_values():
    X = np.repeat(np.arange(8.0), 10).reshape(-1, 1)
    model = KDTree(4).fit(X, np.array([[1.0], [6.0]]))
    t = model.tree_
    assert t.n_leaves == 4
    np.testing.assert_allclose(sorted(t.threshold[t.kind != 0]), [1.5, 3.5, 5.5])


def test_leaves_take_their_cheapest_center(rng):
    C = np.array([[0.0, 0.0], [10.0, 0.0], [0.0, 10.0], [10.0, 10.0]])
    X = C[rng.integers(0, 4, 2000)] + rng.normal(size=(2000, 2))
    model = KDTree(8).fit(X, C)
    t = model.tree_
    leaf = t.apply(X)
    for node in np.unique(leaf):
        pts = X[leaf == node]
        costs = ((pts[:, None] - C) ** 2).sum((0, 2))
        assert t.value[node] == np.argmin(costs)
    assert t.n_leaves == 8


def test_power_of_two_gives_a_balanced_tree_and_any_count_is_reached(rng):
    X = rng.normal(size=(4096, 3))
    C = rng.normal(size=(3, 3))
    full = KDTree(8).fit(X, C)
    assert full.tree_.depth == 3
    sizes = np.bincount(full.tree_.apply(X))
    sizes = sizes[sizes > 0]
    assert sizes.min() >= 0.8 * 512 and sizes.max() <= 1.2 * 512
    assert KDTree(6).fit(X, C).tree_.n_leaves == 6


def test_dask_matches_numpy(dask_client, rng):
    X = rng.normal(size=(3000, 2)) * [1, 3]
    C = rng.normal(size=(3, 2))
    a = KDTree(5).fit(X, C)
    b = KDTree(5).fit(da.from_array(X, chunks=(800, 2)), C)
    assert a.tree_ == b.tree_ or np.array_equal(a.predict(X), b.predict(X))
    assert b.n_passes_ == a.n_passes_ + 1


def test_bad_input():
    X = np.random.default_rng(0).normal(size=(20, 2))
    with pytest.raises(ValueError, match="max_leaves"):
        KDTree(0).fit(X, np.zeros((2, 2)))
    with pytest.raises(ValueError, match="centers"):
        KDTree(3).fit(X, np.zeros((2, 3)))
    with pytest.raises(ValueError, match="centers"):
        KDTree(3).fit(X, np.zeros(2))


def test_constant_data_stays_one_leaf():
    X = np.ones((50, 2))
    assert KDTree(4).fit(X, np.ones((2, 2))).tree_.n_leaves == 1
