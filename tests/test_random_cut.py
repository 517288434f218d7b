"""RandomCutTree: k leaves with one center each, the intended cut distributions, trials scored in one pass."""
from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from exclust import RandomCutTree
from exclust.algorithms.random_cut import harmonic_number
from exclust.errors import InputError

OBJECTIVES = ("kmeans", "kmedians")


def _tree_cost(tree, X, centers, objective):
    """Brute force: each row pays its distance to the center its leaf stands for."""
    diff = X - centers[tree.predict(X)]
    return float((diff**2).sum()) if objective == "kmeans" else float(np.abs(diff).sum())


@pytest.mark.parametrize("objective", OBJECTIVES)
def test_every_tree_has_k_leaves_with_one_center_each(objective):
    rng = np.random.default_rng(0)
    for seed in range(60):
        k = int(rng.integers(2, 25))
        d = int(rng.integers(1, 5))
        # Coarse grid values: many centers share a coordinate on some axis (ties the cuts must respect).
        centers = rng.integers(0, 6, size=(k, d)).astype(float)
        centers = np.unique(centers, axis=0)
        k = centers.shape[0]
        if k < 2:
            continue
        model = RandomCutTree(k, objective=objective, random_state=seed).fit(centers=centers)
        tree = model.tree_
        assert tree.n_leaves == k
        leaf_values = np.sort(tree.value[tree.leaves])
        assert np.array_equal(leaf_values, np.arange(k))
        assert np.array_equal(tree.predict(centers), np.arange(k))
        assert tree.node_count == 2 * k - 1


def test_coinciding_centers_are_refused():
    centers = np.array([[0.0, 1.0], [2.0, 3.0], [0.0, 1.0]])
    with pytest.raises(InputError, match="coincide"):
        RandomCutTree(3, objective="kmedians", random_state=0).fit(centers=centers)


def test_inputs_are_checked():
    centers = np.array([[0.0], [1.0]])
    with pytest.raises(InputError, match="centers"):
        RandomCutTree(2).fit()
    with pytest.raises(InputError, match="objective"):
        RandomCutTree(2, objective="kcenter").fit(centers=centers)
    with pytest.raises(InputError, match="n_trials"):
        RandomCutTree(2, n_trials=0).fit(centers=centers)
    with pytest.raises(InputError, match="one center per cluster"):
        RandomCutTree(3).fit(centers=centers)


def test_bounds():
    for k in (2, 7, 31):  # k >= 2, as --k (issue 19)
        model = RandomCutTree(k, objective="kmedians", random_state=0).fit(centers=np.arange(k, dtype=float)[:, None])
        assert model.bound_ == pytest.approx(1.0 + sum(1.0 / i for i in range(1, k)))
        assert model.bound_ <= 2 * math.log(k) + 2
        assert "Gupta" in model.bound_statement_
    assert harmonic_number(3) == pytest.approx(11 / 6)
    assert model.bound_expression_ == "1 + H_(k-1)"
    model = RandomCutTree(3, objective="kmeans", random_state=0).fit(centers=np.arange(3, dtype=float)[:, None])
    # No constant could be read from the k-means papers: no number is claimed, the order is stated.
    assert model.bound_ is None and model.bound_expression_ == "O(k ln k)"
    assert "O(k ln k)" in model.bound_statement_ and "not implemented" in model.bound_statement_


# --------------------------------------------------------------------------- the sampling distributions
# Centers chosen so that the candidate distributions differ clearly: axis ranges 1, 2, 6; on axis 2
# the gaps are 1 and 5.
DIST_CENTERS = np.array([
    [0.0, 0.0, 0.0],
    [1.0, 2.0, 1.0],
    [0.5, 1.0, 6.0],
])
N_DRAWS = 4000


def _first_cuts(objective):
    axes = np.empty(N_DRAWS, np.int64)
    thetas = np.empty(N_DRAWS)
    for seed in range(N_DRAWS):
        tree = RandomCutTree(3, objective=objective, random_state=seed).fit(centers=DIST_CENTERS).tree_
        axes[seed], thetas[seed] = tree.feature[0], tree.threshold[0]
    return axes, thetas


def _gap_cells(centers):
    """(axis, low, width) of every gap between neighbouring distinct center values."""
    cells = []
    for j in range(centers.shape[1]):
        v = np.unique(centers[:, j])
        cells += [(j, lo, hi - lo) for lo, hi in zip(v[:-1], v[1:], strict=True)]
    return cells


def test_kmedians_first_cut_axis_and_threshold_follow_the_range_weighted_uniform_law():
    axes, thetas = _first_cuts("kmedians")
    ranges = np.ptp(DIST_CENTERS, axis=0)
    observed = np.bincount(axes, minlength=3)
    expected = N_DRAWS * ranges / ranges.sum()
    assert stats.chisquare(observed, expected).pvalue > 1e-3
    # Power: a uniform choice of axis (a plausible misreading) is rejected by the same data.
    assert stats.chisquare(observed, np.full(3, N_DRAWS / 3)).pvalue < 1e-9
    # Given its axis, theta is uniform on the axis' range: 10 equal bins.
    for j in range(3):
        u = (thetas[axes == j] - DIST_CENTERS[:, j].min()) / ranges[j]
        assert ((u >= 0) & (u < 1)).all()
        counts = np.histogram(u, bins=10, range=(0, 1))[0]
        assert stats.chisquare(counts).pvalue > 1e-3


def _triangular_bin_probabilities(bins=10):
    edges = np.linspace(0, 1, bins + 1)
    cdf = np.where(edges < 0.5, 2 * edges**2, 1 - 2 * (1 - edges) ** 2)
    return np.diff(cdf)


def test_kmeans_first_cut_follows_the_distance_to_nearest_center_density():
    axes, thetas = _first_cuts("kmeans")
    cells = _gap_cells(DIST_CENTERS)
    cell_of = np.full(N_DRAWS, -1)
    for c, (j, lo, w) in enumerate(cells):
        cell_of[(axes == j) & (thetas >= lo) & (thetas < lo + w)] = c
    assert (cell_of >= 0).all()
    observed = np.bincount(cell_of, minlength=len(cells))
    widths = np.array([w for _, _, w in cells])
    # Density proportional to the distance to the nearest center: a gap of width g has mass g^2 / 4.
    expected = N_DRAWS * widths**2 / (widths**2).sum()
    assert stats.chisquare(observed, expected).pvalue > 1e-3
    # Power: the k-medians law (mass proportional to g) is rejected by the same data.
    assert stats.chisquare(observed, N_DRAWS * widths / widths.sum()).pvalue < 1e-9
    # Inside its gap theta follows the triangular law peaked at the middle, not the uniform one.
    u = np.array([(thetas[i] - cells[cell_of[i]][1]) / cells[cell_of[i]][2] for i in range(N_DRAWS)])
    counts = np.histogram(u, bins=10, range=(0, 1))[0]
    assert stats.chisquare(counts, N_DRAWS * _triangular_bin_probabilities()).pvalue > 1e-3
    assert stats.chisquare(counts).pvalue < 1e-9


# At a node below the root, the k-means density is the distance to the nearest of ALL centers
# (the law of the first cut of the papers' global i.i.d. sequence that separates the node), not
# to the nearest of the node's own centers: center 2 (not at the node) splits the node's axis-0
# gap [0, 4] into the cells [0, 2] and [2, 4]; on axis 1 it lies outside the node's range.
NODE_CENTERS = np.array([
    [0.0, 0.0],
    [4.0, 3.0],
    [2.0, 10.0],
])


def test_kmeans_cut_at_a_node_uses_the_distance_to_all_centers():
    from exclust.algorithms.random_cut import axis_values, draw_cut

    rng = np.random.default_rng(7)
    values = axis_values(NODE_CENTERS)
    comps = np.array([0, 1])
    cuts = [draw_cut(NODE_CENTERS, comps, "kmeans", rng, values) for _ in range(N_DRAWS)]
    axes = np.array([c[0] for c in cuts])
    thetas = np.array([c[1] for c in cuts])
    # Cells (axis 0: [0, 2], [2, 4]; axis 1: [0, 3]) have masses g^2 / 4: 1, 1, 9 / 4.
    cell = np.where(axes == 1, 2, np.where(thetas < 2.0, 0, 1))
    observed = np.bincount(cell, minlength=3)
    mass = np.array([1.0, 1.0, 2.25])
    assert stats.chisquare(observed, N_DRAWS * mass / mass.sum()).pvalue > 1e-3
    # Power: the node-only law (axis 0 one gap of width 4, mass 4, triangular peaked at 2) is rejected.
    node_only = np.array([2.0, 2.0, 2.25])
    assert stats.chisquare(observed, N_DRAWS * node_only / node_only.sum()).pvalue < 1e-9
    # Inside each axis-0 cell theta is triangular around the cell's middle (1 and 3), so few draws
    # land near 2, where the node-only law would put its peak.
    u = (thetas[axes == 0] % 2.0) / 2.0
    counts = np.histogram(u, bins=10, range=(0, 1))[0]
    assert stats.chisquare(counts, counts.sum() * _triangular_bin_probabilities()).pvalue > 1e-3
    # Every cut separates the node's centers.
    for j, theta in cuts:
        assert (NODE_CENTERS[comps, j] <= theta).sum() == 1


# --------------------------------------------------------------------------- trials
def _blobs(n=3000, k=6, d=3, seed=0):
    rng = np.random.default_rng(seed)
    centers = rng.uniform(-10, 10, (k, d))
    X = centers[rng.integers(0, k, n)] + rng.normal(size=(n, d))
    return X, centers


@pytest.mark.parametrize("objective", OBJECTIVES)
def test_trials_are_scored_against_brute_force_and_the_cheapest_is_kept(objective):
    X, centers = _blobs()
    model = RandomCutTree(6, objective=objective, n_trials=12, random_state=3).fit(X, centers=centers)
    assert model.trial_costs_.shape == (12,)
    # Re-grow the same trials from the same generator and score each by brute force.
    rng = np.random.default_rng(3)
    from exclust.algorithms.random_cut import grow_random_cut_tree

    brute = [_tree_cost(grow_random_cut_tree(centers, objective, rng), X, centers, objective) for _ in range(12)]
    np.testing.assert_allclose(model.trial_costs_, brute, rtol=1e-9)
    assert model.best_trial_ == int(np.argmin(brute))
    assert _tree_cost(model.tree_, X, centers, objective) == pytest.approx(min(brute), rel=1e-9)
    diff = X[:, None, :] - centers[None]
    per_center = (diff**2).sum(axis=2) if objective == "kmeans" else np.abs(diff).sum(axis=2)
    nearest = per_center.min(axis=1).sum()
    assert model.reference_cost_ == pytest.approx(nearest, rel=1e-9)
    assert model.n_passes_ == 2
    assert len(set(np.round(brute, 6))) > 1  # the trials really differ, so the choice means something


def test_without_data_trial_zero_is_kept():
    _, centers = _blobs()
    one = RandomCutTree(6, objective="kmedians", random_state=11).fit(centers=centers)
    many = RandomCutTree(6, objective="kmedians", n_trials=20, random_state=11).fit(centers=centers)
    assert many.best_trial_ == 0 and many.trial_costs_ is None and many.n_passes_ == 0
    assert many.tree_.to_dict()["nodes"] == one.tree_.to_dict()["nodes"]


def test_trials_on_dask_match_numpy(dask_client):
    import dask.array as da

    X, centers = _blobs(n=4000)
    Xd = da.from_array(X, chunks=(700, 3))
    for objective in OBJECTIVES:
        here = RandomCutTree(6, objective=objective, n_trials=8, random_state=5).fit(X, centers=centers)
        there = RandomCutTree(6, objective=objective, n_trials=8, random_state=5).fit(Xd, centers=centers)
        np.testing.assert_allclose(there.trial_costs_, here.trial_costs_, rtol=1e-9)
        assert there.best_trial_ == here.best_trial_
        labels = there.predict(Xd)
        assert isinstance(labels, da.Array)
        np.testing.assert_array_equal(labels.compute(), here.predict(X))


def test_kmedians_mean_cost_stays_within_the_guarantee():
    """Over many trees the average price must respect E[price] <= 1 + H_(k-1) (with room for noise)."""
    X, centers = _blobs(n=2000, k=8, d=4, seed=2)
    model = RandomCutTree(8, objective="kmedians", n_trials=200, random_state=0).fit(X, centers=centers)
    prices = model.trial_costs_ / model.reference_cost_
    assert prices.min() >= 1.0 - 1e-12
    assert prices.mean() <= model.bound_
