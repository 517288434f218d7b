"""Kernel MMDT (paper 002, Section 5): kernels, random Fourier features, sampling, interval trees, price."""
from __future__ import annotations

import math

import numpy as np
import pytest

from exclust import KernelMMDT, ThresholdTree
from exclust.algorithms.mmdt.kernel_mmdt import (
    axis_aligned_similarity,
    build_kernel_tree,
    sample_per_cluster,
    theorem12_bound,
)
from exclust.algorithms.mmdt.similarity import (
    RandomFourierFeatures,
    axis_similarity,
    kernel_kmeans_cost,
    kernel_matrix,
    kernel_price,
    profile,
    profile_inverse,
)
from exclust.errors import InputError
from exclust.tree import INTERVAL, LEAF

KERNELS = ["gaussian", "laplace"]


def ari(a, b) -> float:
    from sklearn.metrics import adjusted_rand_score

    return adjusted_rand_score(np.asarray(a), np.asarray(b))


def band_data(rng, n=1500):
    """1-D: cluster 0 uniform on [-1, 1]; cluster 1 on both sides, |x| in [3, 5] (a 1-D ring)."""
    inner = rng.uniform(-1, 1, n)
    outer = rng.uniform(3, 5, n) * rng.choice([-1.0, 1.0], n)
    X = np.r_[inner, outer][:, None]
    y = np.r_[np.zeros(n, int), np.ones(n, int)]
    return X, y


def ring_arcs(rng, n=1500):
    """2-D: a disc of radius 1 and, around it, the left and right arcs (|angle| < 60 deg) of a ring of radius 4-5."""
    r = np.sqrt(rng.uniform(0, 1, n))
    a = rng.uniform(0, 2 * np.pi, n)
    inner = np.c_[r * np.cos(a), r * np.sin(a)]
    r2 = rng.uniform(4, 5, n)
    a2 = rng.uniform(-np.pi / 3, np.pi / 3, n) + np.pi * rng.integers(0, 2, n)
    outer = np.c_[r2 * np.cos(a2), r2 * np.sin(a2)]
    return np.r_[inner, outer], np.r_[np.zeros(n, int), np.ones(n, int)]


# ----------------------------------------------------------------------------- kernels
@pytest.mark.parametrize("kernel", KERNELS)
def test_profile_and_inverse_round_trip(kernel):
    t = np.linspace(0, 4, 41)
    g = profile(kernel, t)
    assert g[0] == 1.0 and (np.diff(g) < 0).all()
    np.testing.assert_allclose(profile_inverse(kernel, g), t, atol=1e-12)
    theta = np.array([1e-6, 0.1, 0.5, 0.99, 1.0])
    np.testing.assert_allclose(profile(kernel, profile_inverse(kernel, theta)), theta, rtol=1e-12)
    with pytest.raises(ValueError):
        profile_inverse(kernel, 0.0)


def test_profiles_are_the_papers():
    assert profile("gaussian", 2.0) == pytest.approx(math.exp(-4.0))
    assert profile("laplace", 2.0) == pytest.approx(math.exp(-2.0))
    # bandwidth rescales the distance
    assert axis_similarity("gaussian", 0.0, 3.0, bandwidth=1.5) == pytest.approx(math.exp(-4.0))


@pytest.mark.parametrize("kernel", KERNELS)
def test_kernel_matrix_is_product_of_axis_terms(kernel, rng):
    X, Y = rng.normal(size=(5, 3)), rng.normal(size=(4, 3))
    h = np.array([0.5, 1.0, 2.0])
    expected = np.ones((5, 4))
    for i in range(3):
        expected *= axis_similarity(kernel, X[:, i][:, None], Y[:, i][None, :], h[i])
    np.testing.assert_allclose(kernel_matrix(kernel, X, Y, h), expected, rtol=1e-12)


@pytest.mark.parametrize("kernel", KERNELS)
def test_random_fourier_features_approximate_the_kernel(kernel, rng):
    X = rng.normal(size=(60, 3))
    exact = kernel_matrix(kernel, X, X, bandwidth=1.3)
    errors = []
    for D in (64, 8192):
        Z = RandomFourierFeatures(kernel, 1.3, D, random_state=1).fit(3).transform(X)
        np.testing.assert_allclose((Z * Z).sum(axis=1), 1.0, rtol=1e-12)  # ||z(x)||^2 = kappa(x, x)
        errors.append(np.abs(Z @ Z.T - exact).max())
    assert errors[1] < 0.06
    assert errors[1] < errors[0] / 3


def test_rff_transform_dask_matches_numpy(rng):
    da = pytest.importorskip("dask.array")
    X = rng.normal(size=(300, 2))
    rff = RandomFourierFeatures("laplace", 0.7, 32, random_state=3).fit(2)
    Zd = rff.transform(da.from_array(X, chunks=(70, 2)))
    assert isinstance(Zd, da.Array)
    np.testing.assert_allclose(Zd.compute(), rff.transform(X), rtol=1e-12)


# ----------------------------------------------------------------------------- sampling
def test_sample_per_cluster_is_chunking_invariant_and_correct(rng, dask_client):
    da = pytest.importorskip("dask.array")
    X = rng.normal(size=(2000, 3))
    y = rng.integers(0, 4, 2000)
    y[y == 3] = 2  # cluster 3 empty, to see its size 0
    y[:5] = 3  # ... then 5 rows
    ref = sample_per_cluster(X, y, 4, 50, seed=7)
    for chunks in (333, 1000):
        got = sample_per_cluster(da.from_array(X, chunks=(chunks, 3)), da.from_array(y, chunks=chunks), 4, 50, seed=7)
        np.testing.assert_array_equal(got[0], ref[0])
        np.testing.assert_array_equal(got[1], ref[1])
        np.testing.assert_array_equal(got[2], ref[2])
    samples, taken, sizes, n_out = ref
    np.testing.assert_array_equal(sizes, np.bincount(y, minlength=4))
    np.testing.assert_array_equal(taken, [50, 50, 50, 5])
    assert n_out == 0
    for k in range(4):
        rows = samples[k, : taken[k]]
        # every sampled row is a distinct row of cluster k
        match = (X[:, None, :] == rows[None, :, :]).all(axis=2)
        hit = match.any(axis=1)
        assert hit.sum() == taken[k] and (y[hit] == k).all()
    assert np.isnan(samples[3, 5:]).all()
    other = sample_per_cluster(X, y, 4, 50, seed=8)
    assert not np.array_equal(other[0][0], samples[0])


# ----------------------------------------------------------------------------- trees on known data
@pytest.mark.parametrize("kernel", KERNELS)
def test_band_surrounded_on_both_sides_gets_one_centred_interval(kernel, rng):
    X, y = band_data(rng)
    m = KernelMMDT(2, kernel=kernel, bandwidth=1.0, samples_per_cluster=200, random_state=0).fit(X, y)
    t = m.tree_
    assert t.kind[0] == INTERVAL and t.feature[0] == 0
    assert abs(t.center[0]) < 0.3  # the prototype sits near the middle of the band
    assert 1.0 <= t.threshold[0] <= 3.0  # the band edge lies in the gap (1, 3)
    assert t.value[t.left[0]] == 0 and t.value[t.right[0]] == 1  # inside the band: cluster 0
    assert (m.predict(X) == y).mean() > 0.99
    d = m.decisions_[0]
    assert d["k"] == 0 and d["near"] == [0] and d["far"] == [1]
    # theta sits halfway across the largest gap of xi(0, k, .), and the half-width is h g^-1(theta)
    assert d["theta"] == pytest.approx(0.5 * (m.xi_[0, 0, 0] + m.xi_[0, 0, 1]))
    assert t.threshold[0] == pytest.approx(profile_inverse(kernel, d["theta"]))


def test_nested_bands_give_nested_intervals(rng):
    # cluster 0: a band around 0; cluster 1: a band on one side; cluster 2: both far sides. An interval
    # is centred on a prototype, so the two-sided cluster must end up outside every interval.
    n = 800
    parts = [rng.uniform(-1, 1, n), rng.uniform(3, 4, n), rng.uniform(7, 8, n) * rng.choice([-1, 1], n)]
    X = np.concatenate(parts)[:, None]
    y = np.repeat([0, 1, 2], n)
    m = KernelMMDT(3, bandwidth=1.0, samples_per_cluster=150, random_state=2).fit(X, y)
    t = m.tree_
    assert t.n_leaves == 3 and (t.kind[t.kind != LEAF] == INTERVAL).all()
    assert (m.predict(X) == y).mean() > 0.99
    assert sorted(t.value[t.leaves].tolist()) == [0, 1, 2]
    outside_leaf = t.leaves[t.value[t.leaves] == 2][0]
    assert all(not went_left for _, went_left in t.leaf_paths()[outside_leaf])


def test_ring_arcs_one_interval_isolates_the_disc(rng):
    X, y = ring_arcs(rng)
    m = KernelMMDT(2, bandwidth=1.0, samples_per_cluster=200, random_state=0).fit(X, y)
    t = m.tree_
    assert t.kind[0] == INTERVAL and t.feature[0] == 0  # only x0 separates; x1 of the arcs spans the disc
    assert (m.predict(X) == y).mean() > 0.99
    assert m.tau_ < m.sigma2_.min()


def test_two_blobs_base_fitted_here(rng):
    X = np.r_[rng.normal(0, 0.3, (300, 2)), rng.normal(0, 0.3, (300, 2)) + [4, 0]]
    y = np.repeat([0, 1], 300)
    m = KernelMMDT(2, kernel="laplace", bandwidth=1.0, n_components=64, random_state=0).fit(X)
    assert ari(m.labels_, y) == 1.0
    assert ari(m.predict(X), y) == 1.0
    assert m.kernel_price_ == pytest.approx(1.0, abs=1e-12)  # the tree reproduces the base exactly
    assert m.n_passes_ >= 4  # validation, k-means, samples, price
    np.testing.assert_array_equal(m.fit_predict(X), m.predict(X))


def test_every_leaf_one_cluster_on_many_blobs(rng):
    centers = rng.uniform(-10, 10, (6, 3))
    X = np.concatenate([rng.normal(c, 0.5, (200, 3)) for c in centers])
    y = np.repeat(np.arange(6), 200)
    m = KernelMMDT(6, bandwidth=2.0, samples_per_cluster=64, random_state=1).fit(X, y)
    assert sorted(m.tree_.value[m.tree_.leaves].tolist()) == list(range(6))
    assert ari(m.predict(X), y) > 0.95
    again = ThresholdTree.from_json(m.tree_.to_json())
    assert again == m.tree_ and again.meta["algorithm"] == "kernel_mmdt"


# ----------------------------------------------------------------------------- price and theory
@pytest.mark.parametrize("kernel", KERNELS)
def test_kernel_cost_matches_exact_kernel_cost(kernel, rng):
    X = rng.normal(size=(300, 2))
    y = (X[:, 0] > 0).astype(int)
    Kx = kernel_matrix(kernel, X, X, 1.0)
    exact = sum((y == c).sum() - Kx[np.ix_(y == c, y == c)].sum() / (y == c).sum() for c in (0, 1))
    approx = kernel_kmeans_cost(X, y, 2, kernel=kernel, bandwidth=1.0, n_components=8192, random_state=0)
    assert approx == pytest.approx(exact, rel=0.03)


def test_kernel_price_is_one_for_the_base_and_above_for_worse(rng):
    X = np.r_[rng.normal(0, 0.3, (200, 2)), rng.normal(0, 0.3, (200, 2)) + 3]
    y = np.repeat([0, 1], 200)
    assert kernel_price(X, y, y, 2, n_components=128) == pytest.approx(1.0, abs=1e-12)
    scrambled = y.copy()
    scrambled[::4] = 1 - scrambled[::4]
    assert kernel_price(X, scrambled, y, 2, n_components=128) > 1.2


def test_theorem12_formula_and_tau():
    b = theorem12_bound(tau=0.1, sigma2=0.5, epsilon2=0.01, alpha=1.0, n_clusters=2)
    err = (4 + 2 * math.pi**2 / 3) * 0.01 * 2 / 0.4
    assert b["error_rate_bound"] == pytest.approx(err)
    assert b["price_bound"] == pytest.approx(1 + 3.0 * max(1, err))  # eq. (32) as printed
    assert b["price_bound_min_form"] == pytest.approx(1 + 3.0 * err)
    assert math.isinf(theorem12_bound(0.6, 0.5, 0.01, 1.0, 2)["error_rate_bound"])
    xi = np.zeros((2, 3, 3))
    xi[0] = [[1, 0.2, 0.5], [0.2, 1, 0.4], [0.5, 0.4, 1]]
    xi[1] = [[1, 0.3, 0.1], [0.3, 1, 0.6], [0.1, 0.6, 1]]
    # min over axes per pair: (0,1) 0.2, (0,2) 0.1, (1,2) 0.4 -> tau 0.4
    assert axis_aligned_similarity(xi) == pytest.approx(0.4)


def test_fitted_theory_attributes(rng):
    X, y = band_data(rng, 600)
    m = KernelMMDT(2, bandwidth=1.0, samples_per_cluster=100, random_state=0).fit(X, y)
    assert m.tau_ == pytest.approx(axis_aligned_similarity(m.xi_))
    assert m.theorem12_["tau"] == m.tau_
    assert m.theorem12_["alpha"] == pytest.approx(1.0)  # two equal clusters
    assert m.theorem12_bound_ == m.theorem12_["price_bound"] and m.theorem12_bound_ >= 1
    doc = ThresholdTree.from_json(m.tree_.to_json()).meta["theorem12"]  # JSON-safe even when the bound is inf
    assert doc["price_bound"] == (m.theorem12_bound_ if math.isfinite(m.theorem12_bound_) else None)
    assert m.xi_.shape == (1, 2, 2) and np.allclose(m.xi_, m.xi_.transpose(0, 2, 1))


def test_random_prototype_is_a_sampled_row(rng):
    X, y = band_data(rng, 500)
    m = KernelMMDT(2, bandwidth=1.0, samples_per_cluster=50, prototype="random", random_state=4).fit(X, y)
    d = m.decisions_[0]
    rows = m.samples_[d["k"], : m.samples_taken_[d["k"]]]
    assert any(np.array_equal(r, d["prototype"]) for r in rows)
    assert m.tree_.center[0] == d["prototype"][0]


# ----------------------------------------------------------------------------- numpy vs dask
def test_numpy_and_dask_give_the_same_tree(rng, dask_client):
    da = pytest.importorskip("dask.array")
    X, y = ring_arcs(rng, 800)
    params = dict(bandwidth=[0.8, 1.1], samples_per_cluster=60, n_components=64, random_state=5)
    a = KernelMMDT(2, **params).fit(X, y)
    b = KernelMMDT(2, **params).fit(da.from_array(X, chunks=(300, 2)), da.from_array(y, chunks=300))
    assert a.tree_ == b.tree_
    np.testing.assert_allclose(b.bandwidth_, a.bandwidth_, rtol=1e-12)
    assert b.kernel_price_ == pytest.approx(a.kernel_price_, rel=1e-9)
    np.testing.assert_array_equal(a.samples_, b.samples_)
    pred = b.predict(da.from_array(X, chunks=(300, 2)))
    assert isinstance(pred, da.Array)
    np.testing.assert_array_equal(pred.compute(), a.predict(X))


def test_dask_base_clustering(rng, dask_client):
    da = pytest.importorskip("dask.array")
    X = np.r_[rng.normal(0, 0.3, (400, 2)), rng.normal(0, 0.3, (400, 2)) + [0, 5]]
    y = np.repeat([0, 1], 400)
    m = KernelMMDT(2, bandwidth=1.0, n_components=32, kmeans_n_init=1, random_state=0)
    m.fit(da.from_array(X, chunks=(250, 2)))
    assert isinstance(m.labels_, da.Array)
    assert ari(m.labels_.compute(), y) == 1.0
    assert (m.predict(X) == m.labels_.compute()).mean() > 0.99  # a tail point may fall outside the interval
    assert m.tree_.feature[0] == 1 and 1.0 <= m.kernel_price_ < 1.02


# ----------------------------------------------------------------------------- bad inputs
@pytest.mark.parametrize("bandwidth", [0, -1.0, float("nan"), [1.0, 1.0, 1.0], "wide"])
def test_bad_bandwidth(bandwidth, rng):
    X, y = band_data(rng, 50)
    with pytest.raises(InputError, match="bandwidth"):
        KernelMMDT(2, bandwidth=bandwidth).fit(X, y)


@pytest.mark.parametrize(
    "params, match",
    [
        (dict(kernel="cosine"), "kernel"),
        (dict(samples_per_cluster=1), "samples_per_cluster"),
        (dict(samples_per_cluster=2.5), "samples_per_cluster"),
        (dict(prototype="medoid"), "prototype"),
        (dict(n_components=7), "n_components"),
    ],
)
def test_bad_parameters(params, match, rng):
    X, y = band_data(rng, 50)
    with pytest.raises(InputError, match=match):
        KernelMMDT(2, **params).fit(X, y)


def test_bad_cluster_counts_and_labels(rng):
    X, y = band_data(rng, 50)
    with pytest.raises(InputError, match="n_clusters"):
        KernelMMDT(1).fit(X, y)
    with pytest.raises(InputError, match="fewer than the 5 clusters"):
        KernelMMDT(5).fit(X[:4])
    lonely = y.copy()
    lonely[:] = 0
    lonely[7] = 1
    with pytest.raises(InputError, match=r"cluster\(s\) \[1\] have fewer than 2 rows"):
        KernelMMDT(2).fit(X, lonely)
    with pytest.raises(InputError, match="outside"):
        KernelMMDT(2).fit(X, y + 1)
    with pytest.raises(InputError, match="one entry per row"):
        KernelMMDT(2).fit(X, y[:-1])


def test_scale_bandwidth_is_sqrt_d_times_std(rng, dask_client):
    da = pytest.importorskip("dask.array")
    X = rng.normal(size=(600, 3)) * [1.0, 5.0, 0.2]
    y = (X[:, 0] > 0).astype(int)
    a = KernelMMDT(2, samples_per_cluster=20, random_state=0).fit(X, y)
    np.testing.assert_allclose(a.bandwidth_, np.sqrt(3) * X.std(axis=0), rtol=1e-12)
    b = KernelMMDT(2, samples_per_cluster=20, random_state=0).fit(da.from_array(X, chunks=(250, 3)), y)
    np.testing.assert_allclose(b.bandwidth_, a.bandwidth_, rtol=1e-9)
    assert b.n_passes_ == 4  # validation, moments for the bandwidth, samples, price
    assert a.tree_.meta["bandwidth"] == pytest.approx(a.bandwidth_.tolist())


def test_scale_bandwidth_rejects_a_constant_feature(rng):
    X = np.c_[rng.normal(size=100), np.ones(100)]
    with pytest.raises(InputError, match="constant"):
        KernelMMDT(2).fit(X, np.repeat([0, 1], 50))


def test_indistinguishable_clusters_are_reported(rng):
    X = np.r_[np.zeros((20, 1)), np.zeros((20, 1))]
    y = np.repeat([0, 1], 20)
    with pytest.raises(InputError, match="cannot be told apart"):
        KernelMMDT(2, bandwidth=1.0).fit(X, y)


def test_predict_before_fit():
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError, match="not fitted"):
        KernelMMDT(2).predict(np.zeros((3, 1)))


def test_build_kernel_tree_directly(rng):
    X, y = band_data(rng, 300)
    samples, taken, sizes, _ = sample_per_cluster(X, y, 2, 40, seed=0)
    tree, decisions = build_kernel_tree(samples, taken, sizes / sizes.sum(), "laplace", 1.0, random_state=0)
    assert tree.n_leaves == 2 and len(decisions) == 1


def test_degenerate_axis_falls_back_to_one_with_a_gap(rng):
    # axis 0: far apart points with a tiny bandwidth, so every similarity on it underflows to 0 (the
    # minimum, shared with the self-similarities); axis 1 separates the two clusters.
    X = np.c_[rng.uniform(0, 1000, 400), np.r_[rng.normal(0, 0.2, 200), rng.normal(3, 0.2, 200)]]
    y = np.repeat([0, 1], 200)
    m = KernelMMDT(2, bandwidth=[1e-3, 1.0], samples_per_cluster=50, random_state=0).fit(X, y)
    assert m.xi_[0].max() == 0.0  # the paper's rule would pick axis 0 and find no gap
    assert m.tree_.feature[0] == 1
    assert (m.predict(X) == y).mean() > 0.99
