"""Synthetic I and II of paper 003, and the cost-ratio curves they are drawn for (Figure 2)."""
from __future__ import annotations

import dask.array as da
import numpy as np
import pytest

from exclust.datasets.synthetic import make_synthetic_i, make_synthetic_ii
from exclust.jobs.explain.cost_curve import cost_ratio_curve


def test_synthetic_i_structure():
    X, y = make_synthetic_i(n=400, d=50, n_flipped=10, random_state=0)
    assert X.shape == (400, 50) and np.bincount(y).tolist() == [199, 199, 2]
    out = X[y == 2]
    assert (out[:, 0] == 1000).all() and sorted(out[:, 1:].sum(1)) == [0, 49]
    assert (X[y != 2, 0] == 0).all()
    assert (X[y == 0, 1:].sum(1) == 49 - 10).all() and (X[y == 1, 1:].sum(1) == 10).all()
    # Every row flips its own features.
    assert len({tuple(np.flatnonzero(r == 0)) for r in X[y == 0]}) > 150
    a, b = make_synthetic_i(n=400, d=50, n_flipped=10, random_state=0)
    assert np.array_equal(a, X) and np.array_equal(b, y)


def test_synthetic_ii_structure():
    X, y = make_synthetic_ii(n=120, d=40, n_clusters=3, random_state=1)
    assert X.shape == (120, 40) and np.bincount(y).tolist() == [40, 40, 40]
    assert set(np.unique(X)) <= {-1.0, 0.0, 1.0}
    assert ((X == 0).sum(1) == 1).all()  # one coordinate zeroed per point
    for c in range(3):
        pts = X[y == c]
        code = np.sign(pts.sum(0))
        assert set(np.abs(pts - code).sum(1)) == {1.0}
        assert sorted(np.flatnonzero(pts == 0) % 40) == list(range(40))  # each coordinate once


def test_bad_parameters():
    with pytest.raises(ValueError, match="n_flipped"):
        make_synthetic_i(n=100, d=10, n_flipped=10)
    with pytest.raises(ValueError):
        make_synthetic_ii(n=2, d=10, n_clusters=3)


def test_synthetic_ii_imm_is_costly_and_exkmc_falls():
    k, d = 10, 200
    X, y = make_synthetic_ii(n=k * d, d=d, n_clusters=k, random_state=0)
    centers = np.array([X[y == c].mean(0) for c in range(k)])
    curve = cost_ratio_curve(X, centers, [k, 2 * k, 3 * k, 4 * k])
    ex = curve["exkmc"]
    assert ex[0] > 1.5  # IMM: Omega(log k) for trees with k leaves
    assert all(b <= a + 1e-9 for a, b in zip(ex, ex[1:], strict=False)) and ex[-1] < 1.05
    assert ex[1] < ex[0]


def test_synthetic_i_cart_is_costly_and_exkmc_is_close_to_one():
    from sklearn.cluster import KMeans

    X, _ = make_synthetic_i(n=1500, d=300, n_flipped=30, random_state=0)
    km = KMeans(3, n_init=5, random_state=0).fit(X)
    curve = cost_ratio_curve(X, km.cluster_centers_, [3, 6, 12], reference_labels=km.labels_)
    assert min(curve["cart"][:2]) > 5
    assert curve["exkmc"][-1] < 1.1
    assert set(curve) >= {"leaves", "exkmc", "cart", "kdtree"} and curve["leaves"] == [3, 6, 12]


def test_curve_on_dask_matches_numpy(dask_client, rng):
    C = rng.uniform(-8, 8, (3, 2))
    X = C[rng.integers(0, 3, 1500)] + rng.normal(size=(1500, 2))
    local = cost_ratio_curve(X, C, [3, 5])
    dist = cost_ratio_curve(da.from_array(X, chunks=(400, 2)), C, [3, 5])
    for key in ("exkmc", "kdtree"):
        np.testing.assert_allclose(dist[key], local[key], rtol=1e-3)
    assert len(dist["cart"]) == 2 and all(r > 0.9 for r in dist["cart"])
    with pytest.raises(ValueError, match="leaves"):
        cost_ratio_curve(X, C, [2])


def test_prefix_trees_of_cart_and_kdtree_equal_separate_fits(rng):
    from exclust.algorithms.cart import CART, cart_prefix_trees
    from exclust.algorithms.histogram.kdtree import KDTree

    C = rng.uniform(-6, 6, (4, 3))
    X = C[rng.integers(0, 4, 1500)] + 2.0 * rng.normal(size=(1500, 3))
    labels = np.argmin(((X[:, None] - C) ** 2).sum(-1), 1)
    prefixes = cart_prefix_trees(X, labels, [4, 6, 9], random_state=0)
    for L, tree in zip([4, 6, 9], prefixes, strict=True):
        alone = CART(max_leaf_nodes=L, random_state=0).fit(X, labels).tree_
        assert tree.n_leaves == L and np.array_equal(tree.predict(X), alone.predict(X))
    big = KDTree(9).fit(X, C)
    for L in (1, 4, 6, 9):
        assert np.array_equal(big.tree_at(L).predict(X), KDTree(L).fit(X, C).predict(X))


def test_curve_reuses_a_fitted_exkmc_only_when_it_covers_the_leaves(rng):
    from exclust.algorithms.histogram.exkmc import ExKMC

    C = rng.uniform(-8, 8, (4, 3))
    X = C[rng.integers(0, 4, 3000)] + 2.5 * rng.normal(size=(3000, 3))
    fresh = cost_ratio_curve(X, C, [4, 6, 8])
    fitted = ExKMC(4, 8).fit(X, C)
    assert cost_ratio_curve(X, C, [4, 6, 8], exkmc=fitted) == fresh
    # Too few leaves, or other centers: the curve fits its own ExKMC and stays right.
    assert cost_ratio_curve(X, C, [4, 6, 8], exkmc=ExKMC(4, 6).fit(X, C)) == fresh
    assert cost_ratio_curve(X, C, [4, 6, 8], exkmc=ExKMC(4, 8).fit(X, C + 0.5)) == fresh
