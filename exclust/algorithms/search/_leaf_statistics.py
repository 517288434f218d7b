"""Numba kernels of the search on all rows (``row_statistics.py``): per-leaf moments of several
trees in one sweep, and per-leaf binned moments of one tree.

A row's moments are its count (1), its coordinates moved by ``shift`` (d values) and its
squared norm after the move: enough to price any set of rows at its own mean (the k-means cost
``sum ||x||^2 - ||sum x||^2 / n``) or at any center. Trees are given as flat arrays
(``feature``, ``threshold``, ``left``, ``right``; ``left < 0`` marks a leaf) whose leaves carry
an index in ``leaf_id``; several trees share the arrays, each starting at its ``roots`` entry.
"""
from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, nogil=True, inline="always")
def _leaf_of(X, i, node, feature, threshold, left, right):
    while left[node] >= 0:
        if X[i, feature[node]] <= threshold[node]:
            node = left[node]
        else:
            node = right[node]
    return node


@numba.njit(cache=True, nogil=True)
def trees_leaf_moments(X, shift, feature, threshold, left, right, leaf_id, roots, n_leaves_max, centers):
    """Per tree and leaf: (count, summed moved coordinates, summed squared norm), shape
    (trees, n_leaves_max, d + 2); and the same moments of the rows nearest to each of
    ``centers`` (moved by ``shift`` too; ties to the first), shape (centers, d + 2)."""
    n, d = X.shape
    out = np.zeros((roots.shape[0], n_leaves_max, d + 2))
    nearest = np.zeros((centers.shape[0], d + 2))
    y = np.empty(d)
    for i in range(n):
        sq = 0.0
        for a in range(d):
            y[a] = X[i, a] - shift[a]
            sq += y[a] * y[a]
        best = np.inf
        label = -1
        for j in range(centers.shape[0]):
            dist = 0.0
            for a in range(d):
                diff = y[a] - centers[j, a]
                dist += diff * diff
            if dist < best:
                best = dist
                label = j
        if label >= 0:
            nearest[label, 0] += 1.0
            for a in range(d):
                nearest[label, 1 + a] += y[a]
            nearest[label, d + 1] += sq
        for t in range(roots.shape[0]):
            leaf = leaf_id[_leaf_of(X, i, roots[t], feature, threshold, left, right)]
            out[t, leaf, 0] += 1.0
            for a in range(d):
                out[t, leaf, 1 + a] += y[a]
            out[t, leaf, d + 1] += sq
    return out, nearest


@numba.njit(cache=True, nogil=True)
def leaf_binned_moments(X, codes, shift, feature, threshold, left, right, slot, n_slots, n_bins):
    """Per histogrammed leaf (``slot[node]`` >= 0 for the leaves wanted), feature and bin of that
    feature: the moments of the leaf's rows in that bin, shape (n_slots, d, n_bins, d + 2)."""
    n, d = X.shape
    out = np.zeros((n_slots, d, n_bins, d + 2))
    y = np.empty(d)
    for i in range(n):
        s = slot[_leaf_of(X, i, 0, feature, threshold, left, right)]
        if s < 0:
            continue
        sq = 0.0
        for a in range(d):
            y[a] = X[i, a] - shift[a]
            sq += y[a] * y[a]
        for f in range(d):
            cell = out[s, f, codes[i, f]]
            cell[0] += 1.0
            for a in range(d):
                cell[1 + a] += y[a]
            cell[d + 1] += sq
    return out
