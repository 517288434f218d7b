"""MixtureSummary builders: from labels, from k-means, from a fitted Gaussian mixture."""
from __future__ import annotations

import dask.array as da
import numpy as np
import pandas as pd
import pytest
from conftest import shared_dataset
from sklearn.cluster import KMeans as SKKMeans
from sklearn.mixture import GaussianMixture as SKGMM

from exclust.errors import InputError
from exclust.reference import GaussianMixture, KMeans
from exclust.reference.summary import MixtureSummary
from exclust.sources.dataset import load_dataset


def hand_summary(X, labels, values):
    """Means, per-axis variances (divided by n), counts and pooled variance, computed directly."""
    means = np.array([X[labels == v].mean(axis=0) for v in values])
    var = np.array([((X[labels == v] - X[labels == v].mean(axis=0)) ** 2).mean(axis=0) for v in values])
    counts = np.array([(labels == v).sum() for v in values])
    pooled = (counts[:, None] * var).sum(axis=0) / counts.sum()
    return means, var, counts, pooled


@pytest.fixture
def noisy_labels(rng):
    X = rng.normal(size=(900, 3)) + [10.0, 0.0, -5.0]
    labels = rng.choice([-1, 2, 5, 9], size=900)  # non-contiguous cluster labels and noise
    return X, labels


def test_from_labels_equals_hand_computed(noisy_labels):
    X, labels = noisy_labels
    s = MixtureSummary.from_labels(X, labels)
    means, var, counts, pooled = hand_summary(X, labels, [2, 5, 9])
    assert s.meta["labels"] == [2, 5, 9]
    np.testing.assert_allclose(s.means, means, rtol=1e-12)
    np.testing.assert_allclose(s.sigma_per_component, np.sqrt(var), rtol=1e-9)
    np.testing.assert_allclose(s.sigma, np.sqrt(pooled), rtol=1e-9)
    np.testing.assert_array_equal(s.counts, counts)
    np.testing.assert_allclose(s.weights, counts / counts.sum())
    for k, v in enumerate([2, 5, 9]):
        np.testing.assert_allclose(s.covariances[k], np.cov(X[labels == v].T, bias=True), rtol=1e-8, atol=1e-12)
    assert MixtureSummary.from_labels(X, labels, full_covariance=False).covariances is None


def test_from_labels_dask_equals_numpy(noisy_labels, dask_client):
    X, labels = noisy_labels
    local = MixtureSummary.from_labels(X, labels)
    spread = MixtureSummary.from_labels(da.from_array(X, chunks=(200, 3)), da.from_array(labels, chunks=200))
    # dask labels keep their numbers; empty ones (0, 1, 3, 4, 6, 7, 8) are skipped
    assert spread.meta["labels"] == [2, 5, 9]
    np.testing.assert_allclose(spread.means, local.means, rtol=1e-12)
    np.testing.assert_allclose(spread.sigma, local.sigma, rtol=1e-9)
    np.testing.assert_allclose(spread.covariances, local.covariances, rtol=1e-9)


def test_from_labels_uses_dataset_names_and_extra_columns(noisy_labels):
    X, labels = noisy_labels
    frame = pd.DataFrame(X, columns=["height", "weight", "age"]).assign(group=labels)
    data = load_dataset(frame, extra_columns=["group"])
    s = MixtureSummary.from_labels(data, "group")
    assert s.feature_names == ["height", "weight", "age"]
    np.testing.assert_allclose(s.means, MixtureSummary.from_labels(X, labels).means)
    named = MixtureSummary.from_labels(frame[["height", "weight", "age"]], labels)
    assert named.feature_names == ["height", "weight", "age"]
    assert MixtureSummary.from_labels(X, labels, feature_names=["a", "b", "c"]).feature_names == ["a", "b", "c"]


def test_string_labels_in_memory(noisy_labels):
    X, labels = noisy_labels
    names = np.array(["noise?", "b", "c", "a"])[np.searchsorted([-1, 2, 5, 9], labels)]
    s = MixtureSummary.from_labels(X, names)
    assert s.meta["labels"] == ["a", "b", "c", "noise?"]
    np.testing.assert_allclose(s.means[0], X[labels == 9].mean(axis=0))


def test_from_labels_errors(noisy_labels, dask_client):
    X, labels = noisy_labels
    with pytest.raises(InputError, match="no labelled points"):
        MixtureSummary.from_labels(X, np.full(len(X), -1))
    single = labels.copy()
    single[0] = 7
    with pytest.raises(InputError, match=r"\[7\] hold fewer than 2 points"):
        MixtureSummary.from_labels(X, single)
    with pytest.raises(InputError, match="one value per row"):
        MixtureSummary.from_labels(X, labels[:-3])
    bad = X.copy()
    bad[5, 1] = np.nan
    labels = labels.copy()
    labels[5] = 2  # a NaN in a noise row is left out with the row
    with pytest.raises(InputError, match="NaN"):
        MixtureSummary.from_labels(bad, labels)
    with pytest.raises(InputError, match="NaN"):
        MixtureSummary.from_labels(da.from_array(bad, chunks=(300, 3)), da.from_array(labels, chunks=300))
    with pytest.raises(InputError, match="name no extra column"):
        MixtureSummary.from_labels(X, "truth")


def test_from_kmeans_exclust_sklearn_and_dask(dask_client):
    X, _ = shared_dataset("r15")
    km = KMeans(15, random_state=0).fit(X)
    s = MixtureSummary.from_kmeans(km, X)
    means, var, counts, pooled = hand_summary(X, km.labels_, range(15))
    np.testing.assert_allclose(s.means, means, rtol=1e-12)
    np.testing.assert_allclose(s.sigma, np.sqrt(pooled), rtol=1e-9)
    np.testing.assert_array_equal(s.counts, counts)
    # converged k-means: the cluster means are the centers
    np.testing.assert_allclose(s.means, km.cluster_centers_, atol=1e-6)
    sk = SKKMeans(15, n_init=1, random_state=0).fit(X)
    np.testing.assert_allclose(MixtureSummary.from_kmeans(sk, X).sigma, s.sigma, rtol=1e-9)
    spread = MixtureSummary.from_kmeans(km, da.from_array(X, chunks=(150, 2)))
    np.testing.assert_allclose(spread.means, s.means, rtol=1e-12)
    np.testing.assert_allclose(spread.sigma_per_component, s.sigma_per_component, rtol=1e-9)


def test_from_kmeans_errors():
    X, _ = shared_dataset("iris")
    with pytest.raises(InputError, match="not fitted"):
        MixtureSummary.from_kmeans(KMeans(3), X)
    km = KMeans(3, random_state=0).fit(X)
    with pytest.raises(InputError, match="4 features"):
        MixtureSummary.from_kmeans(km, X[:, :2])
    far = km.cluster_centers_.copy()
    km.cluster_centers_ = np.vstack([far, far[:1] + 1e6])  # a center no point is near
    with pytest.raises(InputError, match=r"\[3\] hold no points"):
        MixtureSummary.from_kmeans(km, X)


@pytest.mark.parametrize("covariance_type", ["full", "diag", "tied", "spherical"])
def test_from_gmm_sklearn_all_covariance_types(covariance_type):
    X, _ = shared_dataset("iris")
    gmm = SKGMM(3, covariance_type=covariance_type, random_state=0).fit(X)
    s = MixtureSummary.from_gmm(gmm, feature_names=["sl", "sw", "pl", "pw"])
    full = {
        "full": lambda c: c,
        "diag": lambda c: np.array([np.diag(v) for v in c]),
        "tied": lambda c: np.array([c] * 3),
        "spherical": lambda c: np.array([np.eye(4) * v for v in c]),
    }[covariance_type](gmm.covariances_)
    var = np.array([np.diag(c) for c in full])
    np.testing.assert_allclose(s.sigma_per_component, np.sqrt(var))
    np.testing.assert_allclose(s.sigma, np.sqrt((gmm.weights_[:, None] * var).sum(axis=0)))
    np.testing.assert_allclose(s.means, gmm.means_)
    np.testing.assert_allclose(s.weights, gmm.weights_)
    assert s.feature_names == ["sl", "sw", "pl", "pw"]
    assert (s.covariances is not None) == (covariance_type in ("full", "tied"))
    if s.covariances is not None:
        np.testing.assert_allclose(s.covariances, full)


def test_from_gmm_exclust_keeps_names():
    X, _ = shared_dataset("iris")
    data = load_dataset(X, features=["sl", "sw", "pl", "pw"])
    gmm = GaussianMixture(3, covariance_type="diag", random_state=0).fit(data)
    s = MixtureSummary.from_gmm(gmm)
    assert s.feature_names == ["sl", "sw", "pl", "pw"]
    np.testing.assert_allclose(s.sigma_per_component, np.sqrt(gmm.covariances_))
    assert s.covariances is None and s.meta["covariance_type"] == "diag"
    with pytest.raises(InputError, match="not fitted"):
        MixtureSummary.from_gmm(GaussianMixture(3))
