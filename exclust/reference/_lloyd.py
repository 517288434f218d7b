"""Numba kernel of one Lloyd step of k-means over a chunk: nearest centers, per-center sums, inertia."""
from __future__ import annotations

import numba
import numpy as np

from exclust.dataplane._center_distances import nearest_center_of, transposed


@numba.njit(cache=True, nogil=True)
def lloyd_step(X, centers, labels):
    """One Lloyd pass over a chunk: per-center counts, sums, sums of squares, and the inertia;
    each row's nearest center is written into ``labels`` unless it is empty (length 0)."""
    n, d = X.shape
    K = centers.shape[0]
    counts = np.zeros(K, dtype=np.int64)
    sums = np.zeros((K, d))
    sums_sq = np.zeros((K, d))
    inertia = 0.0
    record = labels.shape[0] > 0
    centers_t, acc = transposed(centers)
    for i in range(n):
        arg, best = nearest_center_of(X, i, centers_t, acc)
        if record:
            labels[i] = arg
        inertia += best
        counts[arg] += 1
        for j in range(d):
            x = X[i, j]
            sums[arg, j] += x
            sums_sq[arg, j] += x * x
    return counts, sums, sums_sq, inertia
