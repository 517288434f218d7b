"""Numba kernel of the k-medians price's pass: per (group, feature) histogram of the points inside
the group's current search interval, as counts and offsets from the bin's lower edge
(``kmedians_cost.py`` bisects the medians on them)."""
from __future__ import annotations

import numba
import numpy as np

from exclust.dataplane._center_distances import reference_label_of, transposed
from exclust.scoring._score_block import scored_leaf_of


@numba.njit(cache=True, nogil=True)
def bin_edge(lo, hi, n_bins, b):
    """Lower edge of bin b of [lo, hi) cut into n_bins equal bins; edge n_bins is hi itself.

    Kernel and driver both call this, so a point's bin and the bin's bounds always agree.
    """
    if b >= n_bins:
        return hi
    return lo + b * ((hi - lo) / n_bins)


@numba.njit(cache=True, nogil=True, inline="always")
def _add_to_hist(hist, edges, scale, g, j, x, n_bins):
    """Count x into its bin of group g, feature j (bins as bin_edge draws them)."""
    b = np.int64((x - edges[g, j, 0]) * scale[g, j])
    if b < 0:
        b = 0
    if b > n_bins - 1:
        b = n_bins - 1
    # The scaled guess can be one off at a bin edge; the edges themselves decide.
    while b > 0 and x < edges[g, j, b]:
        b -= 1
    while b < n_bins - 1 and x >= edges[g, j, b + 1]:
        b += 1
    cell = hist[g, j, b]
    cell[0] += 1.0
    cell[1] += x - edges[g, j, b]
    if x < cell[2]:
        cell[2] = x
    if x > cell[3]:
        cell[3] = x


@numba.njit(cache=True, nogil=True)
def median_hist_block(X, Z, kind, feature, threshold, center, left, right, missing, bits, nan_unrouted, value,
                      ref, ref_mode, centers, n_tree, lo, hi, n_bins):
    """Histogram of the points inside each (group, column) interval [lo, hi): rows routed on X,
    their values (and nearest center) taken from Z (the clustering columns; X itself otherwise).

    Groups are the tree's clusters (0..Kt-1, a leaf's value) followed by the reference clusters
    (Kt..Kt+Kr-1). Returns hist[group, feature, bin, :] = (count, sum of ``x - lower edge``
    (non-negative and small, so no precision is lost when bins are later combined), smallest
    point, largest point): the extremes let ties and gaps be seen exactly. A NaN interval is
    skipped.
    """
    n, d = Z.shape
    groups = lo.shape[0]
    hist = np.zeros((groups, d, n_bins, 4))
    hist[:, :, :, 2] = np.inf
    hist[:, :, :, 3] = -np.inf
    edges = np.empty((groups, d, n_bins + 1))
    scale = np.zeros((groups, d))
    for g in range(groups):
        for j in range(d):
            for b in range(n_bins + 1):
                edges[g, j, b] = bin_edge(lo[g, j], hi[g, j], n_bins, b)
            w = hi[g, j] - lo[g, j]
            if w > 0.0:
                scale[g, j] = n_bins / w
    centers_t, acc = transposed(centers)
    for i in range(n):
        leaf = scored_leaf_of(X, i, kind, feature, threshold, center, left, right, missing, bits, nan_unrouted)
        r = reference_label_of(Z, i, ref, ref_mode, centers_t, acc)
        if leaf < 0 or (ref_mode != 0 and r < 0):
            continue
        c = value[leaf]
        for j in range(d):
            x = Z[i, j]
            if lo[c, j] <= x < hi[c, j]:
                _add_to_hist(hist, edges, scale, c, j, x, n_bins)
        if r >= 0:
            g = n_tree + r
            if g >= groups:
                continue
            for j in range(d):
                x = Z[i, j]
                if lo[g, j] <= x < hi[g, j]:
                    _add_to_hist(hist, edges, scale, g, j, x, n_bins)
    return hist
