"""Reference clusterings: GMM by EM over chunks against scikit-learn, dask against numpy; k-means."""
from __future__ import annotations

import logging

import dask.array as da
import numpy as np
import pytest
from conftest import shared_dataset
from sklearn.cluster import KMeans as SKKMeans
from sklearn.exceptions import NotFittedError
from sklearn.mixture import GaussianMixture as SKGMM

from exclust.datasets.synthetic import make_gmm_dataset
from exclust.errors import InputError
from exclust.reference import GaussianMixture, KMeans, kmeans_parallel_init
from exclust.sources.dataset import load_dataset


def separated_blobs(rng, n=1200, k=4, d=3):
    """Blobs far apart: every k-means start finds the same partition."""
    centers = rng.normal(size=(k, d)) * 30
    y = rng.integers(0, k, size=n)
    scales = rng.uniform(0.5, 2.0, size=(k, d))
    return centers[y] + rng.normal(size=(n, d)) * scales[y], y


def matched(a_means, b_means):
    """Order of b's components that matches a's (nearest means)."""
    dist = ((a_means[:, None, :] - b_means[None, :, :]) ** 2).sum(axis=2)
    order = dist.argmin(axis=1)
    assert len(set(order.tolist())) == len(order)
    return order


@pytest.mark.parametrize("name,k", [("iris", 3), ("wine", 3)])
@pytest.mark.parametrize("covariance_type", ["full", "diag"])
def test_gmm_log_likelihood_matches_sklearn_on_shared_data(name, k, covariance_type):
    X, _ = shared_dataset(name)
    ours = GaussianMixture(k, covariance_type=covariance_type, random_state=0).fit(X)
    ref = SKGMM(k, covariance_type=covariance_type, random_state=0).fit(X)
    assert abs(ours.score(X) - ref.score(X)) <= 1e-3 * abs(ref.score(X))
    assert abs(ours.lower_bound_ - ref.lower_bound_) <= 1e-3 * abs(ref.lower_bound_)
    assert ours.converged_ and ours.n_iter_ == ref.n_iter_


@pytest.mark.parametrize("covariance_type", ["full", "diag"])
def test_gmm_matches_sklearn_with_several_inits(covariance_type):
    X, _, _ = make_gmm_dataset(3000, 4, 3, random_state=2)
    ours = GaussianMixture(4, covariance_type=covariance_type, n_init=3, random_state=5).fit(X)
    ref = SKGMM(4, covariance_type=covariance_type, n_init=3, random_state=5).fit(X)
    assert abs(ours.score(X) - ref.score(X)) <= 1e-3 * abs(ref.score(X))
    order = matched(ref.means_, ours.means_)
    np.testing.assert_allclose(ours.weights_[order], ref.weights_, rtol=1e-6)
    np.testing.assert_allclose(ours.covariances_[order], ref.covariances_, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(ours.precisions_cholesky_[order], ref.precisions_cholesky_, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(ours.precisions_[order], ref.precisions_, rtol=1e-6, atol=1e-9)
    np.testing.assert_array_equal(ours.predict(X), order[ref.predict(X)])


def test_gmm_on_dask_equals_gmm_on_numpy(rng, dask_client):
    X, _ = separated_blobs(rng)
    Xd = da.from_array(X, chunks=(300, 3))
    for covariance_type in ["full", "diag"]:
        local = GaussianMixture(4, covariance_type=covariance_type, random_state=1).fit(X)
        spread = GaussianMixture(4, covariance_type=covariance_type, random_state=1).fit(Xd)
        assert spread.lower_bound_ == pytest.approx(local.lower_bound_, rel=1e-9)
        assert spread.n_iter_ == local.n_iter_
        order = matched(local.means_, spread.means_)
        np.testing.assert_allclose(spread.means_[order], local.means_, rtol=1e-8)
        np.testing.assert_allclose(spread.covariances_[order], local.covariances_, rtol=1e-7, atol=1e-10)
        np.testing.assert_allclose(spread.weights_[order], local.weights_, rtol=1e-8)
        # validation + k-means passes + initial statistics + one per EM iteration
        assert spread.n_passes_ >= spread.n_iter_ + 2


def test_predict_and_proba_numpy_and_dask(rng, dask_client):
    X, y = separated_blobs(rng)
    gmm = GaussianMixture(4, random_state=0).fit(X)
    labels = gmm.predict(X)
    proba = gmm.predict_proba(X)
    assert proba.shape == (len(X), 4)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    np.testing.assert_array_equal(labels, proba.argmax(axis=1))
    # one component per blob
    assert all(len(np.unique(labels[y == c])) == 1 for c in range(4))
    Xd = da.from_array(X, chunks=(250, 3))
    lazy_labels, lazy_proba, lazy_ll = gmm.predict(Xd), gmm.predict_proba(Xd), gmm.score_samples(Xd)
    assert isinstance(lazy_labels, da.Array) and isinstance(lazy_proba, da.Array)
    np.testing.assert_array_equal(lazy_labels.compute(), labels)
    np.testing.assert_allclose(lazy_proba.compute(), proba)
    np.testing.assert_allclose(lazy_ll.compute(), gmm.score_samples(X))
    assert gmm.score(Xd) == pytest.approx(gmm.score(X), rel=1e-12)
    assert gmm.score(X) == pytest.approx(gmm.score_samples(X).mean(), rel=1e-12)
    np.testing.assert_array_equal(GaussianMixture(4, random_state=0).fit_predict(X), labels)


def test_gmm_scores_agree_with_sklearn_formula():
    X, _ = shared_dataset("iris")
    ours = GaussianMixture(3, random_state=0).fit(X)
    ref = SKGMM(3, random_state=0).fit(X)
    order = matched(ref.means_, ours.means_)
    np.testing.assert_allclose(ours.predict_proba(X)[:, order], ref.predict_proba(X), atol=1e-6)
    np.testing.assert_allclose(ours.score_samples(X), ref.score_samples(X), rtol=1e-8)
    assert ours.bic(X) == pytest.approx(ref.bic(X), rel=1e-8)


def test_gmm_progress_is_logged(caplog, capsys):
    X, _ = shared_dataset("iris")
    with caplog.at_level(logging.INFO, logger="exclust"):
        gmm = GaussianMixture(3, random_state=0, verbose=True).fit(X)
    iterations = [r for r in caplog.records if "GMM init 1 iteration" in r.getMessage()]
    assert len(iterations) == gmm.n_iter_
    assert "mean log-likelihood" in capsys.readouterr().out


def test_gmm_warns_when_not_converged():
    from sklearn.exceptions import ConvergenceWarning

    X, _ = shared_dataset("iris")
    with pytest.warns(ConvergenceWarning, match="did not converge"):
        gmm = GaussianMixture(3, max_iter=2, random_state=0).fit(X)
    assert not gmm.converged_ and gmm.n_iter_ == 2


def test_gmm_bad_inputs():
    X, _ = shared_dataset("iris")
    with pytest.raises(InputError, match="fewer than the 5 clusters"):
        GaussianMixture(5).fit(X[:4])
    bad = X.copy()
    bad[3, 1] = np.nan
    with pytest.raises(InputError, match="NaN"):
        GaussianMixture(3).fit(bad)
    with pytest.raises(InputError, match="covariance_type"):
        GaussianMixture(3, covariance_type="spherical-ish").fit(X)
    with pytest.raises(InputError, match="n_components"):
        GaussianMixture(0).fit(X)
    with pytest.raises(InputError, match="tol"):
        GaussianMixture(3, tol=-1).fit(X)
    with pytest.raises(NotFittedError, match="not fitted"):
        GaussianMixture(3).predict(X)
    gmm = GaussianMixture(3, random_state=0).fit(X)
    with pytest.raises(InputError, match="4 features"):
        gmm.predict(X[:, :2])
    # duplicated points and more components than distinct points: a collapsed component (scikit-learn's
    # k-means initialization warns of the 2 distinct points first, as it should)
    from sklearn.exceptions import ConvergenceWarning

    with pytest.warns(ConvergenceWarning, match=r"distinct clusters \(2\) found smaller than n_clusters \(3\)"):
        with pytest.raises(InputError, match="collapsed"):
            GaussianMixture(3, reg_covar=0.0).fit(np.repeat(X[:2], 10, axis=0))


def test_gmm_accepts_a_dataset_with_names():
    X, _ = shared_dataset("iris")
    data = load_dataset(X, features=["sl", "sw", "pl", "pw"])
    gmm = GaussianMixture(3, random_state=0).fit(data)
    assert list(gmm.feature_names_in_) == ["sl", "sw", "pl", "pw"]  # an object array, as scikit-learn keeps it
    # already validated: no validation pass; k-means (seeding + iterations) + initial statistics + EM
    km = SKKMeans(3, n_init=1, random_state=np.random.RandomState(0)).fit(X)
    assert gmm.n_passes_ == (km.n_iter_ + 1) + 1 + gmm.n_iter_


# --------------------------------------------------------------------------- k-means
def test_kmeans_inertia_within_one_percent_of_sklearn(dask_client):
    X, _ = shared_dataset("r15")
    ref = SKKMeans(15, n_init=1, random_state=0).fit(X)
    for backend, data in [("auto", X), ("lloyd", X), ("lloyd", da.from_array(X, chunks=(150, 2)))]:
        km = KMeans(15, n_init=3, random_state=0, backend=backend).fit(data)
        assert km.inertia_ <= 1.01 * ref.inertia_, backend
        assert km.cluster_centers_.shape == (15, 2)
        labels = km.labels_
        if isinstance(data, da.Array):
            assert isinstance(labels, da.Array)
            labels = labels.compute()
        np.testing.assert_array_equal(labels, km.predict(X))
        # inertia_ is the cost of labels_ against cluster_centers_
        assert km.inertia_ == pytest.approx(((X - km.cluster_centers_[labels]) ** 2).sum(), rel=1e-9)
    assert KMeans(15, random_state=0).fit(X).backend_ == "sklearn"


def test_kmeans_dask_counts_passes_and_predicts_lazily(rng, dask_client):
    X, y = separated_blobs(rng)
    Xd = da.from_array(X, chunks=(400, 3))
    km = KMeans(4, random_state=3, init_rounds=3).fit(Xd)
    assert km.backend_ == "lloyd"
    # validation, k-means|| (cost + 3 rounds + weights), one pass per Lloyd iteration: the last
    # one's statistics are the final centers' own (no extra pass to measure them)
    assert km.n_passes_ == 1 + (3 + 2) + km.n_iter_
    Xd_stats = km.statistics_
    nearest = np.argmin(((X[:, None] - km.cluster_centers_) ** 2).sum(-1), 1)
    np.testing.assert_array_equal(Xd_stats.counts, np.bincount(nearest, minlength=4))
    assert km.inertia_ == pytest.approx(((X - km.cluster_centers_[nearest]) ** 2).sum(), rel=1e-9)
    pred = km.predict(Xd)
    assert isinstance(pred, da.Array)
    pred = pred.compute()
    assert all(len(np.unique(pred[y == c])) == 1 for c in range(4))


def test_kmeans_parallel_init_draws_good_seeds(rng, dask_client):
    X, y = separated_blobs(rng, k=6)
    centers, passes = kmeans_parallel_init(da.from_array(X, chunks=(200, 3)), 6, 0, rounds=4)
    assert passes == 4 + 2
    # one seed in each blob
    truth = np.array([X[y == c].mean(axis=0) for c in range(6)])
    nearest = ((centers[:, None, :] - truth[None]) ** 2).sum(axis=2).argmin(axis=1)
    assert sorted(nearest.tolist()) == list(range(6))


@pytest.mark.slow
def test_kmeans_dask_ml_backend(dask_client):
    X, _ = shared_dataset("iris")
    km = KMeans(3, random_state=0, max_iter=3, init_rounds=1, backend="dask-ml").fit(X)
    assert isinstance(km.labels_, np.ndarray)
    np.testing.assert_array_equal(km.labels_, km.predict(X))
    assert km.inertia_ == pytest.approx(((X - km.cluster_centers_[km.labels_]) ** 2).sum(), rel=1e-9)


def test_kmeans_bad_inputs(dask_client):
    X, _ = shared_dataset("iris")
    with pytest.raises(InputError, match="backend"):
        KMeans(3, backend="gpu").fit(X)
    with pytest.raises(InputError, match="needs in-memory data"):
        KMeans(3, backend="sklearn").fit(da.from_array(X, chunks=(50, 4)))
    with pytest.raises(InputError, match="fewer than the 200 clusters"):
        KMeans(200).fit(X)
    with pytest.raises(InputError, match="n_init"):
        KMeans(3, n_init=0).fit(X)
    with pytest.raises(NotFittedError, match="not fitted"):
        KMeans(3).predict(X)
    with pytest.raises(InputError, match="distinct points"):
        KMeans(3, backend="lloyd").fit(da.from_array(np.ones((40, 2)), chunks=(10, 2)))


@pytest.mark.parametrize("chunks", [None, 700, 1999])
def test_lloyd_keeps_its_last_pass_labels_equal_to_predict(rng, dask_client, chunks):
    """Distributed Lloyd's ``labels_`` are its last pass's nearest centers, kept where each part
    was computed: equal to ``predict`` row for row (numpy and Dask, any chunking), and reading
    them reads nothing but the kept parts."""
    from exclust.dataplane.parts import PassCounter, counting_passes, reads_source

    X, *_ = make_gmm_dataset(2100, 4, 3, random_state=1)
    X = X + rng.normal(scale=1e-9, size=X.shape)
    data = X if chunks is None else da.from_array(X, chunks=(chunks, X.shape[1]))
    model = KMeans(4, backend="lloyd", init="sample", max_iter=3, random_state=0).fit(data)
    labels = model.labels_
    assert labels.dtype == np.int64 and labels.shape == (X.shape[0],)
    if chunks is not None:
        assert not reads_source(labels) and labels.chunks[0] == data.chunks[0]
        counter = PassCounter()
        with counting_passes(counter), counter.step("read labels"):
            labels = labels.compute()
        assert counter.passes == {"read labels": 0}  # a column of the kept parts, not a pass
    np.testing.assert_array_equal(labels, KMeans.predict(model, X))
    assert np.bincount(labels, minlength=4).tolist() == model.statistics_.counts.tolist()


def test_nearest_centers_are_the_first_least_distances_each_summed_in_feature_order(rng):
    """The kernels that search the centers (k-means' Lloyd pass, prediction, scoring) sum every
    center's distance over the features in order, all centers at once: the same numbers, to the
    bit, as one center after the other, and ties go to the lowest index (numpy's argmin)."""
    from exclust.dataplane._center_distances import nearest_center, nearest_center_l1
    from exclust.reference._lloyd import lloyd_step

    X = rng.normal(size=(300, 7))
    centers = rng.normal(size=(40, 7))
    centers[17] = centers[5]  # a tie: the lower index wins
    for search, l1 in ((nearest_center, False), (nearest_center_l1, True)):
        labels, dist = search(X, centers)
        for i in range(X.shape[0]):
            sums = []
            for c in centers:
                s = 0.0
                for j in range(X.shape[1]):
                    diff = X[i, j] - c[j]
                    s += abs(diff) if l1 else diff * diff
                sums.append(s)
            assert labels[i] == int(np.argmin(sums)) and dist[i] == min(sums)
        assert 17 not in labels
    labels, dist = nearest_center(X, centers)
    kept = np.empty(X.shape[0], dtype=np.int64)
    counts, sums, _, inertia = lloyd_step(X, centers, kept)
    np.testing.assert_array_equal(kept, labels)
    assert inertia == sum(dist.tolist())
    np.testing.assert_array_equal(counts, np.bincount(labels, minlength=40))
