"""Sufficient statistics that merge across partitions: per-cluster count, sum, sum of squares, scatter.

One pass over the data: a numba kernel reads each row chunk and returns small arrays, and the
chunk results are added pairwise up a tree (``parts.map_reduce``). Nothing row-sized reaches the
driver. Statistics of disjoint pieces of data merge with ``+``, so a caller can also combine
passes it made itself.

Variances here are maximum-likelihood (divide by the count, as a Gaussian mixture's M-step does);
they are computed from raw (uncentered) sums, which is exact enough in float64 unless a feature's
mean is many orders of magnitude larger than its spread.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from exclust.dataplane import _cluster_moments as K
from exclust.dataplane.parts import is_lazy, map_reduce
from exclust.errors import InputError


# --------------------------------------------------------------------------- cluster statistics
@dataclass
class ClusterStatistics:
    """Per-cluster count (K), sum (K x d), sum of squares (K x d), optional scatter sum x x^T (K x d x d)."""

    counts: np.ndarray
    sums: np.ndarray
    sums_sq: np.ndarray
    scatter: np.ndarray | None = None

    def __post_init__(self) -> None:
        self.counts = np.asarray(self.counts)
        self.sums = np.asarray(self.sums, dtype=np.float64)
        self.sums_sq = np.asarray(self.sums_sq, dtype=np.float64)
        if self.scatter is not None:
            self.scatter = np.asarray(self.scatter, dtype=np.float64)

    @property
    def n_clusters(self) -> int:
        return int(self.counts.shape[0])

    @property
    def n_features(self) -> int:
        return int(self.sums.shape[1])

    @property
    def total(self) -> int:
        """Points counted (noise, label -1, left out)."""
        return int(self.counts.sum())

    def padded(self, n_clusters: int) -> ClusterStatistics:
        """The same statistics with empty clusters appended up to ``n_clusters``."""
        extra = n_clusters - self.n_clusters
        if extra <= 0:
            return self
        def pad(a):
            return np.concatenate([a, np.zeros((extra,) + a.shape[1:], dtype=a.dtype)])

        return ClusterStatistics(
            pad(self.counts), pad(self.sums), pad(self.sums_sq), None if self.scatter is None else pad(self.scatter)
        )

    def __add__(self, other: ClusterStatistics) -> ClusterStatistics:
        if not isinstance(other, ClusterStatistics):
            return NotImplemented
        if other.n_features != self.n_features:
            raise ValueError(f"cannot merge statistics of {self.n_features} and {other.n_features} features")
        k = max(self.n_clusters, other.n_clusters)
        a, b = self.padded(k), other.padded(k)
        scatter = None if a.scatter is None or b.scatter is None else a.scatter + b.scatter
        return ClusterStatistics(a.counts + b.counts, a.sums + b.sums, a.sums_sq + b.sums_sq, scatter)

    def subset(self, clusters: Sequence[int]) -> ClusterStatistics:
        """The statistics of some clusters, in the order given."""
        idx = np.asarray(clusters, dtype=np.int64)
        return ClusterStatistics(
            self.counts[idx], self.sums[idx], self.sums_sq[idx], None if self.scatter is None else self.scatter[idx]
        )

    @property
    def weights(self) -> np.ndarray:
        """Share of the counted points in each cluster."""
        return self.counts / max(self.total, 1)

    @property
    def means(self) -> np.ndarray:
        """Per-cluster mean (K x d); NaN for an empty cluster."""
        with np.errstate(invalid="ignore", divide="ignore"):
            return self.sums / self.counts[:, None]

    @property
    def variances(self) -> np.ndarray:
        """Per-cluster, per-axis variance (K x d, divided by the count); NaN for an empty cluster."""
        with np.errstate(invalid="ignore", divide="ignore"):
            n = self.counts[:, None].astype(np.float64)
            return np.maximum(self.sums_sq / n - (self.sums / n) ** 2, 0.0)

    @property
    def pooled_variance(self) -> np.ndarray:
        """Per-axis within-cluster variance pooled over clusters: sum_k w_k var_kj (d)."""
        n = self.counts.astype(np.float64)
        keep = n > 0
        within = self.sums_sq[keep].sum(axis=0) - ((self.sums[keep] ** 2) / n[keep, None]).sum(axis=0)
        return np.maximum(within, 0.0) / max(n.sum(), 1.0)

    @property
    def covariances(self) -> np.ndarray:
        """Per-cluster covariance (K x d x d, divided by the count); needs ``full_scatter=True``."""
        if self.scatter is None:
            raise ValueError("full covariances need the scatter: compute the statistics with full_scatter=True")
        with np.errstate(invalid="ignore", divide="ignore"):
            n = self.counts[:, None, None].astype(np.float64)
            mu = self.sums / self.counts[:, None]
            return self.scatter / n - mu[:, :, None] * mu[:, None, :]

    @property
    def sse(self) -> np.ndarray:
        """Per-cluster sum of squared distances to the cluster mean (the k-means cost of each cluster)."""
        with np.errstate(invalid="ignore", divide="ignore"):
            cost = self.sums_sq.sum(axis=1) - np.where(
                self.counts > 0, (self.sums**2).sum(axis=1) / np.maximum(self.counts, 1), 0.0
            )
        return np.maximum(cost, 0.0)


def _as_int_labels(labels: np.ndarray) -> np.ndarray:
    """int64 labels; a non-integral or non-finite value becomes -2, which the kernel reports as bad."""
    labels = np.asarray(labels).reshape(-1)
    if labels.dtype.kind in "iub":
        return labels.astype(np.int64, copy=False)
    if labels.dtype.kind != "f":
        raise InputError(f"labels must be integers, got dtype {labels.dtype}")
    with np.errstate(invalid="ignore"):
        ok = np.isfinite(labels) & (labels == np.round(labels))
    out = np.where(ok, labels, -2).astype(np.int64)
    return out


def _stats_block(X: np.ndarray, labels: np.ndarray, n_clusters: int | None, full_scatter: bool):
    """Kernel call for one chunk; returns (ClusterStatistics, bad label count)."""
    X = np.ascontiguousarray(X, dtype=np.float64)
    labels = _as_int_labels(labels)
    if labels.shape[0] != X.shape[0]:
        raise InputError(f"{labels.shape[0]} labels for {X.shape[0]} rows")
    k = n_clusters if n_clusters is not None else int(K.max_label(labels)) + 1
    counts, sums, sums_sq, scatter, n_bad = K.accumulate_cluster_stats(X, labels, k, full_scatter)
    if full_scatter:
        K.mirror_upper(scatter)
    return ClusterStatistics(counts, sums, sums_sq, scatter if full_scatter else None), int(n_bad)


def _finish(result, n_clusters):
    stats, n_bad = result
    if n_bad:
        allowed = f"0..{n_clusters - 1}" if n_clusters is not None else "non-negative integers"
        raise InputError(
            f"{n_bad} label(s) are not cluster numbers: labels must be {allowed}, or -1 for noise; "
            "relabel them (e.g. with numpy.unique(labels, return_inverse=True))"
        )
    return stats.padded(n_clusters) if n_clusters is not None else stats


def cluster_statistics(X, labels, n_clusters: int | None, full_scatter: bool = False, *, compute: bool = True):
    """Per-cluster count, sum, sum of squares (and full scatter) of X under labels, in one pass.

    ``X`` is numpy or dask (n x d); ``labels`` (n) numpy or dask, cluster numbers in
    ``[0, n_clusters)``, -1 for noise (left out). With ``n_clusters=None`` the number of clusters
    is the largest label + 1, found in the same pass. Returns a ``ClusterStatistics``, or with
    ``compute=False`` and dask input a ``Delayed`` of it (to compute together with other passes).
    """
    if n_clusters is not None:
        n_clusters = int(n_clusters)
        if n_clusters < 1:
            raise InputError(f"n_clusters must be at least 1, got {n_clusters}")
    if X.ndim != 2:
        raise InputError(f"X must be a 2-D matrix, got shape {X.shape}")
    if labels.ndim != 1 or labels.shape[0] != X.shape[0]:
        raise InputError(f"labels must be one value per row of X ({X.shape[0]}), got shape {labels.shape}")
    result = map_reduce(_stats_block, X, labels, args=(n_clusters, bool(full_scatter)), compute=compute)
    if not compute and is_lazy(X):
        import dask

        return dask.delayed(_finish, pure=True)(result, n_clusters)
    return _finish(result, n_clusters)
