"""Per-cluster sufficient statistics: one pass, numpy and dask alike, equal to numpy ground truth."""
from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import pytest

from exclust.dataplane.parts import map_reduce
from exclust.dataplane.stats import ClusterStatistics, cluster_statistics
from exclust.errors import InputError


@pytest.fixture
def labelled(rng):
    X = rng.normal(size=(3000, 4)) * [1.0, 5.0, 0.1, 2.0] + [0.0, 100.0, -3.0, 7.0]
    labels = rng.integers(-1, 5, size=3000)  # -1 is noise
    return X, labels


def ground_truth(X, labels, k):
    means = np.array([X[labels == c].mean(axis=0) for c in range(k)])
    variances = np.array([X[labels == c].var(axis=0) for c in range(k)])
    covs = np.array([np.cov(X[labels == c].T, bias=True) for c in range(k)])
    counts = np.array([(labels == c).sum() for c in range(k)])
    pooled = (counts[:, None] * variances).sum(axis=0) / counts.sum()
    sse = np.array([((X[labels == c] - means[c]) ** 2).sum() for c in range(k)])
    return counts, means, variances, covs, pooled, sse


def check_against_truth(s: ClusterStatistics, X, labels, k):
    counts, means, variances, covs, pooled, sse = ground_truth(X, labels, k)
    np.testing.assert_array_equal(s.counts, counts)
    assert s.total == (labels >= 0).sum()
    np.testing.assert_allclose(s.means, means, rtol=1e-12)
    np.testing.assert_allclose(s.variances, variances, rtol=1e-8)
    np.testing.assert_allclose(s.pooled_variance, pooled, rtol=1e-8)
    np.testing.assert_allclose(s.sse, sse, rtol=1e-8)
    np.testing.assert_allclose(s.weights, counts / counts.sum())
    if s.scatter is not None:
        np.testing.assert_allclose(s.covariances, covs, rtol=1e-7, atol=1e-9)


def test_numpy_statistics_equal_ground_truth_with_noise(labelled):
    X, labels = labelled
    check_against_truth(cluster_statistics(X, labels, 5, full_scatter=True), X, labels, 5)
    diag_only = cluster_statistics(X, labels, 5)
    assert diag_only.scatter is None
    with pytest.raises(ValueError, match="full_scatter=True"):
        _ = diag_only.covariances


def test_dask_statistics_equal_numpy(labelled, dask_client):
    X, labels = labelled
    Xd = da.from_array(X, chunks=(700, 4))
    # labels chunked differently from X: they are aligned to X's row chunks
    yd = da.from_array(labels, chunks=500)
    s = cluster_statistics(Xd, yd, 5, full_scatter=True)
    check_against_truth(s, X, labels, 5)
    # numpy labels with dask X, and dask labels with numpy X
    check_against_truth(cluster_statistics(Xd, labels, 5, True), X, labels, 5)
    check_against_truth(cluster_statistics(X, yd, 5, True), X, labels, 5)


def test_lazy_result_can_be_computed_with_other_passes(labelled, dask_client):
    X, labels = labelled
    Xd = da.from_array(X, chunks=(1000, 4))
    yd = da.from_array(labels, chunks=1000)
    lazy = cluster_statistics(Xd, yd, 5, compute=False)
    total = Xd.sum(axis=0)
    s, col_sums = dask.compute(lazy, total)
    check_against_truth(s, X, labels, 5)
    np.testing.assert_allclose(col_sums, X.sum(axis=0))


def test_statistics_merge_by_addition(labelled):
    X, labels = labelled
    whole = cluster_statistics(X, labels, 5, full_scatter=True)
    first = cluster_statistics(X[:1000], labels[:1000], 5, full_scatter=True)
    second = cluster_statistics(X[1000:], labels[1000:], 5, full_scatter=True)
    merged = first + second
    np.testing.assert_array_equal(merged.counts, whole.counts)
    np.testing.assert_allclose(merged.sums, whole.sums)
    np.testing.assert_allclose(merged.scatter, whole.scatter)


def test_number_of_clusters_inferred_in_the_same_pass(labelled, dask_client):
    X, labels = labelled
    labels = labels.copy()
    labels[labels == 4] = 7  # clusters 4, 5, 6 empty; a chunk may hold only low labels
    s = cluster_statistics(da.from_array(X, chunks=(600, 4)), da.from_array(labels, chunks=600), None)
    assert s.n_clusters == 8
    assert s.counts[4:7].tolist() == [0, 0, 0]
    assert s.counts[7] == (labels == 7).sum()
    assert np.isnan(s.means[5]).all()


def test_threaded_numpy_path_equals_single_call(labelled, monkeypatch):
    X, labels = labelled
    single = cluster_statistics(X, labels, 5, True)
    from exclust.dataplane import parts

    monkeypatch.setattr(parts, "THREAD_MIN_ROWS", 10)
    monkeypatch.setattr(parts.os, "cpu_count", lambda: 3)
    assert len(parts.row_offsets(X)) == 4
    threaded = cluster_statistics(X, labels, 5, True)
    np.testing.assert_array_equal(threaded.counts, single.counts)
    np.testing.assert_allclose(threaded.scatter, single.scatter)


def test_float_labels_as_read_from_parquet(labelled):
    X, labels = labelled
    s = cluster_statistics(X, labels.astype(np.float64), 5)
    np.testing.assert_array_equal(s.counts, cluster_statistics(X, labels, 5).counts)


@pytest.mark.parametrize(
    "bad",
    [5, -3, 2.5, np.nan],
)
def test_labels_outside_the_clusters_are_an_error(labelled, bad):
    X, labels = labelled
    labels = labels.astype(np.float64)
    labels[10] = bad
    with pytest.raises(InputError, match="1 label"):
        cluster_statistics(X, labels, 5)


def test_shape_errors(labelled):
    X, labels = labelled
    with pytest.raises(InputError, match="one value per row"):
        cluster_statistics(X, labels[:-1], 5)
    with pytest.raises(InputError, match="at least 1"):
        cluster_statistics(X, labels, 0)
    with pytest.raises(InputError, match="2-D"):
        cluster_statistics(X[:, 0], labels, 5)


def test_map_reduce_tree_over_many_chunks(dask_client):
    x = np.arange(10_000, dtype=np.float64).reshape(-1, 1)
    xd = da.from_array(x, chunks=(100, 1))  # 100 chunks: three levels with split_every=8
    total = map_reduce(lambda b: np.array([b.sum(), b.shape[0]]), xd)
    np.testing.assert_allclose(total, [x.sum(), 10_000])
