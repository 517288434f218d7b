"""IMM on histograms: equal to a brute-force sorting IMM, raw routing equals binned routing, errors."""
from __future__ import annotations

import dask.array as da
import numpy as np
import pytest

from exclust.algorithms.histogram.base import encode_for_trees
from exclust.algorithms.histogram.binning import edges_from_sample
from exclust.algorithms.histogram.imm import IMM, grow_imm
from exclust.errors import InputError


def nearest_centers(X, centers, objective="kmeans"):
    diff = X[:, None, :] - centers[None]
    return np.argmin(np.abs(diff).sum(-1) if objective == "kmedians" else (diff ** 2).sum(-1), axis=1)


def brute_force_imm(X, centers, objective="kmeans"):
    """Textbook IMM: every threshold (midpoints of distinct values, and center coordinates) tried
    directly on the node's alive points; ties to the lowest feature, then the lowest threshold.
    A point's reference cluster is its nearest center (l1 for k-medians)."""
    labels = nearest_centers(X, centers, objective)
    d = X.shape[1]
    cands = []
    for f in range(d):
        v = np.unique(X[:, f])
        cands.append(np.union1d(v[:-1] + (v[1:] - v[:-1]) / 2, centers[:, f]))

    def build(rows, members):
        if members.size == 1:
            return ("leaf", int(members[0]))
        best = None
        for f in range(d):
            cf = centers[members, f]
            for t in cands[f]:
                if not (cf.min() <= t < cf.max()):
                    continue
                point_left = X[rows, f] <= t
                center_left = centers[labels[rows], f] <= t
                mistakes = int((point_left != center_left).sum())
                if best is None or mistakes < best[0]:
                    best = (mistakes, f, t)
        _, f, t = best
        point_left = X[rows, f] <= t
        ok = point_left == (centers[labels[rows], f] <= t)
        go = centers[members, f] <= t
        return ("split", f, t,
                build(rows[point_left & ok], members[go]),
                build(rows[~point_left & ok], members[~go]))

    return build(np.arange(X.shape[0]), np.arange(centers.shape[0]))


def predict_nested(node, x):
    while node[0] == "split":
        node = node[3] if x[node[1]] <= node[2] else node[4]
    return node[1]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_equals_brute_force_on_data_with_few_distinct_values(seed):
    rng = np.random.default_rng(seed)
    k = 5
    true_centers = rng.integers(-20, 20, size=(k, 3))
    X = (true_centers[rng.integers(0, k, 400)] + rng.integers(-6, 7, size=(400, 3))).astype(float)
    centers = true_centers + rng.normal(scale=0.3, size=true_centers.shape)
    model = IMM(k).fit(X, centers)
    nested = brute_force_imm(X, centers)
    expected = np.array([predict_nested(nested, x) for x in X])
    np.testing.assert_array_equal(model.predict(X), expected)
    assert model.tree_.n_leaves == k
    assert sorted(model.tree_.value[model.tree_.leaves].tolist()) == list(range(k))


def test_raw_routing_matches_binned_routing_with_quantile_bins(rng):
    X = rng.normal(size=(5000, 4)) * [1, 10, 0.1, 3]
    centers = X[rng.choice(5000, 6, replace=False)]
    data = encode_for_trees(X, centers, max_bins=16)
    assert not data.mapper.exact.any()
    tree, _ = grow_imm(data)
    raw = tree.to_threshold_tree(data.mapper, 6)
    np.testing.assert_array_equal(raw.apply(X), tree.route(data.mapper.transform(X)))
    assert raw.n_leaves == 6


def test_one_pass_per_level_and_mistakes_counted(rng):
    C = np.array([[0.0, 0.0], [10.0, 0.0], [0.0, 10.0], [10.0, 10.0]])
    X = C[rng.integers(0, 4, 2000)] + rng.normal(size=(2000, 2))
    model = IMM(4).fit(X, C)
    # encode + root level + one level below (both children computed in one pass).
    assert model.n_passes_ == 3
    assert model.n_mistakes_ == 0
    assert (model.predict(X) == np.argmin(((X[:, None] - C) ** 2).sum(-1), 1)).mean() > 0.999


def test_dask_input_gives_the_same_tree(dask_client, rng):
    C = rng.uniform(-10, 10, (5, 3))
    X = C[rng.integers(0, 5, 3000)] + rng.normal(size=(3000, 3))
    local = IMM(5).fit(X, C)
    dist = IMM(5).fit(da.from_array(X, chunks=(700, 3)), C)
    assert dist.tree_ == local.tree_ or (dist.predict(X) == local.predict(X)).all()
    assert dist.n_passes_ == local.n_passes_ + 1  # the binning sample is a pass on Dask


def test_fits_its_own_reference_without_centers(rng):
    C = np.array([[0.0, 0.0], [8.0, 0.0], [0.0, 8.0]])
    X = C[rng.integers(0, 3, 600)] + rng.normal(size=(600, 2))
    model = IMM(3, random_state=0).fit(X)
    assert model.centers_.shape == (3, 2) and model.tree_.n_leaves == 3
    assert np.array_equal(model.fit_predict(X), model.predict(X))


def test_bad_input_is_named():
    X = np.random.default_rng(0).normal(size=(50, 2))
    with pytest.raises(ValueError, match="centers"):
        IMM(3).fit(X, np.zeros((3, 3)))
    with pytest.raises(ValueError, match="centers"):
        IMM(3).fit(X, np.full((3, 2), np.nan))
    with pytest.raises(ValueError, match="max_bins"):
        IMM(3, max_bins=70000).fit(X, np.zeros((3, 2)))
    with pytest.raises(ValueError, match="n_clusters"):
        IMM(0).fit(X, np.zeros((0, 2)))
    bad = X.copy()
    bad[3, 1] = np.nan
    with pytest.raises(InputError):
        IMM(3).fit(bad, np.zeros((3, 2)))
    with pytest.raises(InputError):
        IMM(3).fit(X[:2], np.zeros((3, 2)))


def test_identical_centers_do_not_loop(rng):
    X = rng.normal(size=(100, 2))
    C = np.array([[0.0, 0.0], [0.0, 0.0], [1.0, 1.0]])
    model = IMM(3).fit(X, C)
    assert model.tree_.n_leaves == 2


def test_edges_include_center_coordinates(rng):
    X = rng.integers(0, 5, size=(200, 2)).astype(float)
    C = np.array([[0.3, 1.7], [3.2, 2.5]])
    m = edges_from_sample(X, extra_edges=C)
    assert np.isin(C[:, 0], m.edges[0]).all() and np.isin(C[:, 1], m.edges[1]).all()


@pytest.mark.parametrize("seed", [1, 3])  # seeds where the l1 and the Euclidean IMM trees differ
def test_kmedians_assigns_by_l1_and_equals_brute_force(seed):
    rng = np.random.default_rng(seed)
    k = 5
    C = rng.uniform(-6, 6, size=(k, 3))
    X = C[rng.integers(0, k, 400)] + 2.5 * rng.normal(size=(400, 3))
    # The l1 and the Euclidean reference assignments differ on some rows of this data.
    assert (nearest_centers(X, C, "kmedians") != nearest_centers(X, C)).any()
    model = IMM(k, objective="kmedians", max_bins=1024).fit(X, C)  # exact bins
    nested = brute_force_imm(X, C, "kmedians")
    np.testing.assert_array_equal(model.predict(X), [predict_nested(nested, x) for x in X])
    kmeans_tree = brute_force_imm(X, C)
    kmeans_pred = IMM(k, max_bins=1024).fit(X, C).predict(X)
    assert kmeans_pred.tolist() == [predict_nested(kmeans_tree, x) for x in X]
    assert (kmeans_pred != model.predict(X)).any()
    assert model.tree_.meta["objective"] == "kmedians"


def test_kmedians_on_dask_gives_the_same_tree(dask_client, rng):
    C = rng.uniform(-10, 10, (5, 3))
    X = C[rng.integers(0, 5, 3000)] + 2.0 * rng.normal(size=(3000, 3))
    local = IMM(5, objective="kmedians").fit(X, C)
    dist = IMM(5, objective="kmedians").fit(da.from_array(X, chunks=(700, 3)), C)
    assert dist.tree_ == local.tree_


def test_unknown_objective_is_named():
    X = np.random.default_rng(0).normal(size=(50, 2))
    with pytest.raises(InputError, match="objective"):
        IMM(3, objective="kmedoids").fit(X, np.zeros((3, 2)))
