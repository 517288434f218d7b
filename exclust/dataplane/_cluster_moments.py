"""Numba kernels of per-cluster sufficient statistics: count, sum, sum of squares and scatter per label.

Each reads one chunk of rows and returns small arrays (K, K x d, K x d x d) that ``stats.py`` sums over
chunks. Label-wise scatter matrices are accumulated on the upper triangle only and mirrored by the
caller (``mirror_upper``): half the work per row, same result.
"""
from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
def accumulate_cluster_stats(X, labels, n_clusters, full_scatter):
    """Per-label count, sum, sum of squares (and upper-triangle scatter); label -1 skipped.

    Returns (counts, sums, sums_sq, scatter, n_bad) where n_bad counts labels outside
    [-1, n_clusters): the caller turns a non-zero n_bad into an error.
    """
    n, d = X.shape
    counts = np.zeros(n_clusters, dtype=np.int64)
    sums = np.zeros((n_clusters, d))
    sums_sq = np.zeros((n_clusters, d))
    scatter = np.zeros((n_clusters if full_scatter else 0, d, d))
    n_bad = 0
    for i in range(n):
        k = labels[i]
        if k == -1:
            continue
        if k < -1 or k >= n_clusters:
            n_bad += 1
            continue
        counts[k] += 1
        for a in range(d):
            xa = X[i, a]
            sums[k, a] += xa
            sums_sq[k, a] += xa * xa
            if full_scatter:
                for b in range(a, d):
                    scatter[k, a, b] += xa * X[i, b]
    return counts, sums, sums_sq, scatter, n_bad


@numba.njit(cache=True, nogil=True)
def max_label(labels):
    """Largest label of a chunk (-1 when the chunk holds only noise or no rows)."""
    m = -1
    for i in range(labels.shape[0]):
        if labels[i] > m:
            m = labels[i]
    return m


@numba.njit(cache=True, nogil=True)
def mirror_upper(scatter):
    """Copy the upper triangle of every K x d x d slice onto its lower triangle (in place)."""
    K, d, _ = scatter.shape
    for k in range(K):
        for a in range(d):
            for b in range(a + 1, d):
                scatter[k, b, a] = scatter[k, a, b]
    return scatter
