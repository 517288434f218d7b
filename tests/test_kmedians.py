"""KMedians: brute-force l1 Lloyd, numpy against Dask, and the exact medians it is built on."""
from __future__ import annotations

import numpy as np
import pytest
from sklearn.exceptions import NotFittedError

from exclust import KMedians
from exclust.errors import InputError
from exclust.reference.kmedians import kmedians_parallel_init, weighted_lower_median
from exclust.scoring.kmedians_cost import cluster_medians


def _lower_medians(X):
    return np.sort(X, axis=0)[(X.shape[0] - 1) // 2]


def brute_force_kmedians(X, centers, max_iter=200):
    """Plain numpy l1 Lloyd: nearest center in l1 (lowest index on ties), lower coordinate-wise median."""
    centers = centers.copy()
    for _ in range(max_iter):
        labels = np.abs(X[:, None, :] - centers[None]).sum(axis=2).argmin(axis=1)
        new = centers.copy()
        for c in range(centers.shape[0]):
            if (labels == c).any():
                new[c] = _lower_medians(X[labels == c])
        if np.array_equal(new, centers):
            break
        centers = new
    return centers


def _data_with_outliers(n=2000, k=4, d=3, seed=0):
    rng = np.random.default_rng(seed)
    centers = rng.uniform(-10, 10, (k, d))
    X = centers[rng.integers(0, k, n)] + rng.normal(size=(n, d))
    outliers = rng.choice(n, n // 50, replace=False)
    X[outliers] += rng.choice([-1, 1], (outliers.size, d)) * rng.uniform(60, 200, (outliers.size, d))
    return X


def test_cluster_medians_are_exact(dask_client):
    import dask.array as da

    rng = np.random.default_rng(1)
    X = np.round(rng.standard_cauchy((3000, 3)), 3)  # heavy tails and many ties
    labels = rng.integers(-1, 5, 3000)
    for data, lab in ((X, labels), (da.from_array(X, chunks=(600, 3)), da.from_array(labels, chunks=600))):
        found = cluster_medians(data, lab, 6)
        assert found["exact"]
        for c in range(5):
            members = X[labels == c]
            np.testing.assert_array_equal(found["medians"][c], _lower_medians(members))
            assert found["costs"][c] == pytest.approx(np.abs(members - _lower_medians(members)).sum(), rel=1e-12)
        assert np.isnan(found["medians"][5]).all() and found["counts"][5] == 0


def test_matches_brute_force_from_the_same_start():
    X = _data_with_outliers()
    rng = np.random.default_rng(7)
    start = X[rng.choice(X.shape[0], 4, replace=False)]
    model = KMedians(4, init=start, tol=0.0).fit(X)
    expected = brute_force_kmedians(X, start)
    np.testing.assert_allclose(model.cluster_centers_, expected, rtol=0, atol=1e-9)
    assert model.inertia_ == pytest.approx(np.abs(X[:, None] - expected[None]).sum(axis=2).min(axis=1).sum(), rel=1e-12)


def test_matches_brute_force_from_the_same_seeding():
    X = _data_with_outliers(seed=3)
    seeded, _ = kmedians_parallel_init(X, 4, 0)
    model = KMedians(4, tol=0.0, random_state=0).fit(X)
    np.testing.assert_allclose(model.cluster_centers_, brute_force_kmedians(X, seeded), rtol=0, atol=1e-9)
    np.testing.assert_array_equal(model.labels_,
                                  np.abs(X[:, None] - model.cluster_centers_[None]).sum(axis=2).argmin(axis=1))


def test_numpy_and_dask_reach_the_same_centers(dask_client):
    import dask.array as da

    X = _data_with_outliers(n=3000, seed=5)
    here = KMedians(4, random_state=2).fit(X)
    there = KMedians(4, random_state=2).fit(da.from_array(X, chunks=(500, 3)))
    np.testing.assert_allclose(there.cluster_centers_, here.cluster_centers_, rtol=0, atol=1e-9)
    assert there.inertia_ == pytest.approx(here.inertia_, rel=1e-9)
    assert isinstance(there.labels_, da.Array)
    np.testing.assert_array_equal(there.labels_.compute(), here.labels_)
    assert there.n_iter_ == here.n_iter_ and there.n_passes_ > there.n_iter_


def test_beats_kmeans_centers_on_the_kmedians_cost_with_outliers():
    from sklearn.cluster import KMeans as SKKMeans

    def l1_cost(X, centers):
        return np.abs(X[:, None] - centers[None]).sum(axis=2).min(axis=1).sum()

    for seed in range(3):
        X = _data_with_outliers(seed=seed)
        medians = KMedians(4, random_state=seed).fit(X)
        means = SKKMeans(4, n_init=10, random_state=seed).fit(X)
        assert medians.inertia_ == pytest.approx(l1_cost(X, medians.cluster_centers_), rel=1e-12)
        assert medians.inertia_ <= l1_cost(X, means.cluster_centers_)


def test_weighted_lower_median():
    assert weighted_lower_median(np.array([3.0, 1.0, 2.0]), np.array([1.0, 1.0, 1.0])) == 2.0
    assert weighted_lower_median(np.array([1.0, 2.0]), np.array([1.0, 1.0])) == 1.0
    assert weighted_lower_median(np.array([1.0, 2.0, 9.0]), np.array([1.0, 1.0, 5.0])) == 9.0


def test_inputs_are_checked():
    X = np.arange(10.0).reshape(5, 2)
    with pytest.raises(InputError):
        KMedians(2, init="random").fit(X)
    with pytest.raises(InputError):
        KMedians(2, init=np.zeros((3, 2))).fit(X)
    with pytest.raises(InputError, match="distinct"):
        KMedians(3).fit(np.ones((20, 2)))
    with pytest.raises(NotFittedError, match="not fitted"):
        KMedians(2).predict(X)


def test_kmedians_parallel_init_does_not_depend_on_the_chunking(dask_client):
    """Per-row draws are keyed by the global row id: numpy and 1, 3 or 7 dask chunks seed alike."""
    import dask.array as da

    X = _data_with_outliers(n=2100, seed=6)
    seeds, passes = kmedians_parallel_init(X, 4, 0, rounds=2)
    assert passes == 2 + 2
    for n_chunks in (1, 3, 7):
        got, got_passes = kmedians_parallel_init(da.from_array(X, chunks=(-(-2100 // n_chunks), 3)), 4, 0, rounds=2)
        np.testing.assert_array_equal(got, seeds, err_msg=f"{n_chunks} chunks")
        assert got_passes == passes
