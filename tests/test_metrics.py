"""exclust.score against brute-force numpy on small random data, numpy vs dask, noise handling."""
from __future__ import annotations

import math

import numpy as np
import pytest
from sklearn.metrics import adjusted_rand_score

from exclust.errors import InputError
from exclust.scoring.metrics import adjusted_rand_from_contingency, score
from exclust.tree import TreeBuilder


def _blobs(rng, n_per=300, k=4, d=3, spread=1.5):
    means = rng.uniform(-10, 10, size=(k, d))
    X = np.concatenate([m + spread * rng.standard_normal((n_per, d)) for m in means])
    y = np.repeat(np.arange(k), n_per)
    return X, y, means


def _tree_with_interval(d=3):
    """Five leaves over four clusters (cluster 0 twice), one interval cut: exercises every path."""
    b = TreeBuilder(n_features=d)
    root = b.add_node()
    left, right = b.split(root, feature=0, threshold=0.3)
    ll, lr = b.split_interval(left, feature=1, center=-1.0, half_width=4.0)
    b.make_leaf(ll, 0)
    b.make_leaf(lr, 1)
    rl, rr = b.split(right, feature=2, threshold=0.0)
    b.make_leaf(rl, 2)
    rrl, rrr = b.split(rr, feature=1, threshold=2.0)
    b.make_leaf(rrl, 3)
    b.make_leaf(rrr, 0)
    return b.build()


def _kmeans_cost(X, labels):
    return sum(((X[labels == c] - X[labels == c].mean(axis=0)) ** 2).sum() for c in np.unique(labels))


def _kmedians_cost(X, labels):
    return sum(np.abs(X[labels == c] - np.median(X[labels == c], axis=0)).sum() for c in np.unique(labels))


def _surrogate_cost(X, leaves, centers):
    """Paper 003, Definition 1: every leaf takes its best center."""
    total = 0.0
    for leaf in np.unique(leaves):
        pts = X[leaves == leaf]
        total += min(((pts - mu) ** 2).sum() for mu in centers)
    return total


def _assert_dicts_match(a: dict, b: dict, rtol=1e-10):
    assert a.keys() == b.keys()
    for key in a:
        va, vb = a[key], b[key]
        if isinstance(va, float) and isinstance(vb, float):
            assert math.isclose(va, vb, rel_tol=rtol, abs_tol=1e-9), (key, va, vb)
        else:
            assert va == vb, (key, va, vb)


def test_every_metric_matches_brute_force(rng):
    X, y, means = _blobs(rng)
    tree = _tree_with_interval()
    ref = y.copy()
    truth = (y + (rng.uniform(size=y.size) < 0.1)) % 4  # a noisy ground truth
    centers = means + 0.3 * rng.standard_normal(means.shape)
    s = score(tree, X, ref, centers, truth)

    pred = tree.predict(X)
    leaves = tree.apply(X)
    assert s["n"] == X.shape[0] and s["n_leaves"] == 5 and s["n_clusters_tree"] == 4
    assert math.isclose(s["kmeans_cost_tree"], _kmeans_cost(X, pred), rel_tol=1e-10)
    assert math.isclose(s["kmeans_cost_reference"], _kmeans_cost(X, ref), rel_tol=1e-10)
    assert math.isclose(s["price_kmeans"], _kmeans_cost(X, pred) / _kmeans_cost(X, ref), rel_tol=1e-10)
    assert math.isclose(s["surrogate_cost_tree"], _surrogate_cost(X, leaves, centers), rel_tol=1e-10)
    by_label = sum(((X[leaves == leaf] - centers[tree.value[leaf]]) ** 2).sum() for leaf in np.unique(leaves))
    assert math.isclose(s["surrogate_cost_tree_by_label"], by_label, rel_tol=1e-10)
    ref_surrogate = ((X - centers[ref]) ** 2).sum()
    assert math.isclose(s["surrogate_cost_reference"], ref_surrogate, rel_tol=1e-10)
    assert math.isclose(s["surrogate_price"], _surrogate_cost(X, leaves, centers) / ref_surrogate, rel_tol=1e-10)
    # Exact medians on small data: the bisection ends on an exact cost here.
    assert math.isclose(s["kmedians_cost_tree"], _kmedians_cost(X, pred), rel_tol=1e-9)
    assert math.isclose(s["kmedians_cost_reference"], _kmedians_cost(X, ref), rel_tol=1e-9)
    assert s["kmedians_cost_tree_lower"] <= s["kmedians_cost_tree"]
    assert s["kmedians_relative_gap"] <= 1e-6
    assert math.isclose(s["price_kmedians"], _kmedians_cost(X, pred) / _kmedians_cost(X, ref), rel_tol=1e-9)
    assert math.isclose(s["error_rate"], float((pred != ref).mean()), abs_tol=1e-12)
    assert s["ari_reference"] == pytest.approx(adjusted_rand_score(ref, pred), abs=1e-12)
    assert s["ari_truth"] == pytest.approx(adjusted_rand_score(truth, pred), abs=1e-12)
    assert s["ari_reference_truth"] == pytest.approx(adjusted_rand_score(truth, ref), abs=1e-12)
    assert s["cluster_sizes_tree"] == np.bincount(pred, minlength=4).tolist()
    assert s["passes"] == 1 + s["kmedians_passes"] and s["kmedians_passes"] >= 1


def test_kmedians_bounds_hold_when_stopped_early(rng):
    X, y, _ = _blobs(rng, n_per=2000)
    tree = _tree_with_interval()
    s = score(tree, X, y, max_kmedians_passes=1, kmedians_bins=16)
    exact_tree, exact_ref = _kmedians_cost(X, tree.predict(X)), _kmedians_cost(X, y)
    assert s["kmedians_passes"] == 1 and s["passes"] == 2
    assert s["kmedians_cost_tree_lower"] - 1e-9 <= exact_tree <= s["kmedians_cost_tree"] + 1e-9
    assert s["kmedians_cost_reference_lower"] - 1e-9 <= exact_ref <= s["kmedians_cost_reference"] + 1e-9
    gap = (s["kmedians_cost_tree"] - s["kmedians_cost_tree_lower"]) / s["kmedians_cost_tree_lower"]
    assert 0 < gap <= s["kmedians_relative_gap"] + 1e-15


def test_kmedians_with_ties_and_far_from_origin(rng):
    X = np.round(rng.standard_normal((900, 2)) * 2) + 1e6  # many ties, large offset
    y = (X[:, 0] > 1e6).astype(int)
    b = TreeBuilder(n_features=2)
    left, right = b.split(b.add_node(), feature=1, threshold=1e6 + 0.5)
    b.make_leaf(left, 0)
    b.make_leaf(right, 1)
    tree = b.build()
    s = score(tree, X, y)
    assert math.isclose(s["kmedians_cost_tree"], _kmedians_cost(X, tree.predict(X)), rel_tol=1e-9)
    assert math.isclose(s["kmedians_cost_reference"], _kmedians_cost(X, y), rel_tol=1e-9)
    assert math.isclose(s["kmeans_cost_tree"], _kmeans_cost(X, tree.predict(X)), rel_tol=1e-8)


def test_noise_labels_are_left_out(rng):
    X, y, means = _blobs(rng)
    tree = _tree_with_interval()
    ref = y.copy()
    ref[rng.uniform(size=y.size) < 0.2] = -1
    truth = y.copy()
    truth[::5] = -1
    s = score(tree, X, ref, means, truth)
    keep = ref >= 0
    pred = tree.predict(X)
    assert s["n_reference_noise"] == int((~keep).sum()) and s["n_scored"] == int(keep.sum())
    assert math.isclose(s["kmeans_cost_tree"], _kmeans_cost(X[keep], pred[keep]), rel_tol=1e-10)
    assert math.isclose(s["kmeans_cost_reference"], _kmeans_cost(X[keep], ref[keep]), rel_tol=1e-10)
    assert math.isclose(s["kmedians_cost_tree"], _kmedians_cost(X[keep], pred[keep]), rel_tol=1e-9)
    assert s["error_rate"] == pytest.approx(float((pred[keep] != ref[keep]).mean()))
    assert s["ari_reference"] == pytest.approx(adjusted_rand_score(ref[keep], pred[keep]), abs=1e-12)
    t = truth >= 0
    assert s["ari_truth"] == pytest.approx(adjusted_rand_score(truth[t], pred[t]), abs=1e-12)
    both = t & keep
    assert s["ari_reference_truth"] == pytest.approx(adjusted_rand_score(truth[both], ref[both]), abs=1e-12)
    # NaN labels mean the same as -1.
    s_nan = score(tree, X, np.where(ref < 0, np.nan, ref), means, np.where(truth < 0, np.nan, truth))
    _assert_dicts_match(s, s_nan, rtol=0)


def test_perfect_tree_scores_one(rng):
    X, _, _ = _blobs(rng, d=3)
    tree = _tree_with_interval()
    labels = tree.predict(X)
    centers = np.array([X[labels == c].mean(axis=0) for c in range(4)])
    s = score(tree, X, labels, centers, labels)
    assert s["price_kmeans"] == pytest.approx(1.0, abs=1e-12)
    assert s["price_kmedians"] == pytest.approx(1.0, abs=1e-12)
    assert s["error_rate"] == 0.0
    assert s["ari_reference"] == 1.0 and s["ari_truth"] == 1.0
    # Leaf 0 and leaf 4 share cluster 0 but its center is the mean of both: the surrogate
    # cost (each leaf to its best center) can only be lower than the reference.
    assert s["surrogate_price"] <= 1.0 + 1e-12


def test_nearest_center_reference(rng):
    X, _, means = _blobs(rng)
    tree = _tree_with_interval()
    s = score(tree, X, centers=means)
    nearest = ((X[:, None, :] - means[None]) ** 2).sum(axis=2).argmin(axis=1)
    assert s["reference"] == "nearest center"
    assert math.isclose(s["kmeans_cost_reference"], _kmeans_cost(X, nearest), rel_tol=1e-10)
    assert math.isclose(s["surrogate_cost_reference"], ((X - means[nearest]) ** 2).sum(), rel_tol=1e-10)
    assert s["error_rate"] == pytest.approx(float((tree.predict(X) != nearest).mean()))


def test_tree_only_numbers_without_reference(rng):
    X, y, _ = _blobs(rng)
    tree = _tree_with_interval()
    s = score(tree, X, y_true=y, kmedians=False)
    assert s["price_kmeans"] is None and s["error_rate"] is None and s["ari_reference"] is None
    assert s["ari_truth"] == pytest.approx(adjusted_rand_score(y, tree.predict(X)), abs=1e-12)
    assert s["passes"] == 1 and s["kmedians_cost_tree"] is None


def test_ari_from_contingency_matches_sklearn(rng):
    for _ in range(20):
        a = rng.integers(0, rng.integers(1, 6), size=int(rng.integers(1, 60)))
        b = rng.integers(0, rng.integers(1, 6), size=a.size)
        table = np.zeros((a.max() + 1, b.max() + 1), np.int64)
        np.add.at(table, (a, b), 1)
        assert adjusted_rand_from_contingency(table) == pytest.approx(adjusted_rand_score(a, b), abs=1e-12)


def test_bad_inputs_are_named(rng):
    X, y, means = _blobs(rng)
    tree = _tree_with_interval()
    with pytest.raises(InputError, match="reference_labels has"):
        score(tree, X, y[:-1])
    with pytest.raises(InputError, match="neither integers"):
        score(tree, X, y + 0.5)
    with pytest.raises(InputError, match="features"):
        score(tree, X[:, :2])
    with pytest.raises(InputError, match="centers"):
        score(tree, X, y, centers=means[:2])  # labels name 4 clusters, 2 centers given
    with pytest.raises(InputError, match="every reference label is -1"):
        score(tree, X, np.full(X.shape[0], -1))
    with pytest.raises(InputError, match="NaN"):
        bad = X.copy()
        bad[3, 1] = np.nan
        score(tree, bad, y)


def test_numpy_and_dask_agree(rng, dask_client):
    import dask.array as da

    X, y, means = _blobs(rng)
    tree = _tree_with_interval()
    ref = y.copy()
    ref[::13] = -1
    truth = y.copy()
    truth[::7] = -1
    expected = score(tree, X, ref, means, truth)
    Xd = da.from_array(X, chunks=(170, 3))
    # Labels as dask with other chunks, and as numpy: both are aligned to X's chunks.
    got = score(tree, Xd, da.from_array(ref, chunks=250), means, truth)
    _assert_dicts_match(expected, got)
    assert score(tree, Xd, centers=means, kmedians=False)["reference"] == "nearest center"
    _assert_dicts_match(score(tree, X, centers=means, kmedians=False), score(tree, Xd, centers=means, kmedians=False))


def test_deep_chain_trees_route_like_predict(rng):
    """Unbalanced trees (a chain of cuts, as IMM can build) score the clusters predict() gives."""
    X = rng.uniform(0, 1, size=(3000, 2))
    for depth in (3, 11):
        b = TreeBuilder(n_features=2)
        node = b.add_node()
        for level in range(depth):  # a chain: each cut peels off one slice of x0
            left, node = b.split(node, feature=level % 2, threshold=(level + 1) / (depth + 1))
            b.make_leaf(left, level % 3)
        b.make_leaf(node, 3)
        tree = b.build()
        assert tree.depth == depth
        s = score(tree, X, y_true=np.arange(X.shape[0]) % 4, kmedians=False)
        pred = tree.predict(X)
        assert s["cluster_sizes_tree"] == np.bincount(pred, minlength=4).tolist()
        assert math.isclose(s["kmeans_cost_tree"], _kmeans_cost(X, pred), rel_tol=1e-10)
