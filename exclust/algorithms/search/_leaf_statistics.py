"""Numba kernels of the search on all rows (``row_statistics.py``): per-leaf moments of several
trees in one sweep, and per-leaf binned moments of one tree.

A row's moments are its count (1), its coordinates moved by ``shift`` (d values) and its
squared norm after the move: enough to price any set of rows at its own mean (the k-means cost
``sum ||x||^2 - ||sum x||^2 / n``) or at any center. The moments are of the clustering space's
rows ``Z`` (X itself when the tree explains its own space); rows are routed on X. Trees are given
as flat arrays (``kind``, ``feature``, ``threshold``, ``left``, ``right``, ``missing``, ``bits``;
``left < 0`` marks a leaf) routed as ``tree._routing.routed_leaf_of`` routes (set cuts, missing
sides), whose leaves carry an index in ``leaf_id``; several trees share the arrays, each
starting at its ``roots`` entry.
"""
from __future__ import annotations

import numba
import numpy as np

from exclust.tree._routing import in_category_set
from exclust.tree.node_kinds import CATEGORY_SET, MISSING_LEFT, UNSEEN_CATEGORY


@numba.njit(cache=True, nogil=True, inline="always")
def _leaf_of(X, i, node, kind, feature, threshold, left, right, missing, bits):
    """The leaf of row i from ``node`` down, as ``routed_leaf_of`` routes but from any root (several
    trees share the arrays) and with a side at every cut (the search learns one everywhere)."""
    while left[node] >= 0:
        v = X[i, feature[node]]
        if v != v or (kind[node] == CATEGORY_SET and v == UNSEEN_CATEGORY):
            go_left = missing[node] == MISSING_LEFT
        elif kind[node] == CATEGORY_SET:
            go_left = in_category_set(bits, node, v)
        else:
            go_left = v <= threshold[node]
        node = left[node] if go_left else right[node]
    return node


@numba.njit(cache=True, nogil=True)
def trees_leaf_moments(X, Z, shift, kind, feature, threshold, left, right, missing, bits, leaf_id, roots,
                       n_leaves_max, centers):
    """Per tree and leaf: (count, summed moved coordinates of Z, summed squared norm), shape
    (trees, n_leaves_max, p + 2); and the same moments of the rows nearest to each of
    ``centers`` (moved by ``shift`` too; ties to the first), shape (centers, p + 2)."""
    n, d = Z.shape
    out = np.zeros((roots.shape[0], n_leaves_max, d + 2))
    nearest = np.zeros((centers.shape[0], d + 2))
    y = np.empty(d)
    for i in range(n):
        sq = 0.0
        for a in range(d):
            y[a] = Z[i, a] - shift[a]
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
            leaf = leaf_id[_leaf_of(X, i, roots[t], kind, feature, threshold, left, right, missing, bits)]
            out[t, leaf, 0] += 1.0
            for a in range(d):
                out[t, leaf, 1 + a] += y[a]
            out[t, leaf, d + 1] += sq
    return out, nearest


@numba.njit(cache=True, nogil=True)
def leaf_binned_moments(X, Z, codes, shift, kind, feature, threshold, left, right, missing, bits, slot, n_slots,
                        n_bins):
    """Per histogrammed leaf (``slot[node]`` >= 0 for the leaves wanted), feature of X and bin of
    that feature (its codes, missing bin included): the moments in Z of the leaf's rows in that
    bin, shape (n_slots, d, n_bins, p + 2)."""
    n, d = X.shape
    p = Z.shape[1]
    out = np.zeros((n_slots, d, n_bins, p + 2))
    y = np.empty(p)
    for i in range(n):
        s = slot[_leaf_of(X, i, 0, kind, feature, threshold, left, right, missing, bits)]
        if s < 0:
            continue
        sq = 0.0
        for a in range(p):
            y[a] = Z[i, a] - shift[a]
            sq += y[a] * y[a]
        for f in range(d):
            cell = out[s, f, codes[i, f]]
            cell[0] += 1.0
            for a in range(p):
                cell[1 + a] += y[a]
            cell[p + 1] += sq
    return out
