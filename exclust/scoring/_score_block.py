"""Numba kernels for scoring a ThresholdTree: one chunk in, small per-group statistics out.

`score_block` routes every row through the tree and, in the same sweep, accumulates per leaf and
per reference cluster the count, the sum and the sum of squares (both taken about a per-chunk
shift, so that data far from the origin keep their precision), the contingency tables against
reference and ground-truth labels, and optionally per-group per-feature minimum and maximum.
`forest_moments` gives the cost curve and the standing table the per-node moments of all their
trees in one sweep. The k-medians price's pass is in
``_median_histograms.py``.

Labels may be any numeric dtype; a NaN or -1 label means "no label" and the row is left out of
every table that needs that label. Other negative or non-integral labels are counted as bad and
reported to the caller, which raises.
"""
from __future__ import annotations

import numba
import numpy as np

from exclust.dataplane._center_distances import label_value, reference_label_of, transposed
from exclust.tree._routing import routed_leaf_of


@numba.njit(cache=True, nogil=True)
def label_span(labels):
    """(largest valid label, number of bad labels) of a label chunk; -1 when none is valid."""
    top = -1
    bad = 0
    for i in range(labels.shape[0]):
        v = label_value(labels[i])
        if v == -2:
            bad += 1
        elif v > top:
            top = v
    return top, bad


@numba.njit(cache=True, nogil=True)
def scored_leaf_of(X, i, kind, feature, threshold, center, left, right, missing, bits, nan_unrouted):
    """``routed_leaf_of`` under the tree's labelling policy: with ``nan_unrouted`` (a tree where no cut
    learned a missing side, ``ThresholdTree.routes_missing`` False) a row holding NaN anywhere in X
    reaches no leaf, as ``ThresholdTree.apply`` labels it -1; -1 as well where routing gives none."""
    if nan_unrouted:
        for j in range(X.shape[1]):
            if X[i, j] != X[i, j]:
                return -1
    return routed_leaf_of(X, i, kind, feature, threshold, center, left, right, missing, bits)


@numba.njit(cache=True, nogil=True)
def score_block(X, Z, kind, feature, threshold, center, left, right, missing, bits, nan_unrouted,
                ref, ref_mode, n_ref, truth, has_truth, n_truth, centers, shift, track_range):
    """Per-leaf and per-reference-cluster statistics and contingency tables of one chunk.

    Rows are routed on X (the tree's features); the statistics, ranges and each row's nearest
    center are taken on Z, the space the costs are measured in (the clustering columns; X itself
    when the clustering was fitted on the features: pass X twice).
    Rows whose reference label is missing (noise) are left out of the leaf statistics too, so
    both sides of every price are computed over the same points; ground-truth tables use every
    row with a truth label. Sums and squares are of ``z - shift``. A row the tree does not route (a
    missing value at a cut with no missing side; with ``nan_unrouted``, any NaN in X: see
    ``scored_leaf_of``) is left out.
    """
    n, d = Z.shape
    m = kind.shape[0]
    # Rows are accumulated once per (leaf, reference cluster) cell; leaf and reference
    # statistics are both sums of cells, which halves the per-row work of keeping two sides.
    width = n_ref if ref_mode != 0 else 1
    cells = m * width
    cell_n = np.zeros(cells, np.int64)
    cell_s = np.zeros((cells, d))
    cell_q = np.zeros(cells)
    range_rows = cells if track_range else 0
    cell_lo = np.full((range_rows, d), np.inf)
    cell_hi = np.full((range_rows, d), -np.inf)
    leaf_truth = np.zeros((m, n_truth), np.int64)
    ref_truth = np.zeros((n_ref, n_truth), np.int64)
    centers_t, acc = transposed(centers)
    for i in range(n):
        leaf = scored_leaf_of(X, i, kind, feature, threshold, center, left, right, missing, bits, nan_unrouted)
        if leaf < 0:
            continue
        r = reference_label_of(Z, i, ref, ref_mode, centers_t, acc)
        if has_truth:
            t = label_value(truth[i])
            if t >= 0:
                leaf_truth[leaf, t] += 1
                if r >= 0:
                    ref_truth[r, t] += 1
        if ref_mode != 0 and r < 0:
            continue
        cell = leaf * width + (r if r > 0 else 0)
        sq = 0.0
        for j in range(d):
            v = Z[i, j] - shift[j]
            cell_s[cell, j] += v
            sq += v * v
        cell_n[cell] += 1
        cell_q[cell] += sq
        if track_range:
            for j in range(d):
                v = Z[i, j]
                if v < cell_lo[cell, j]:
                    cell_lo[cell, j] = v
                if v > cell_hi[cell, j]:
                    cell_hi[cell, j] = v
    leaf_n = np.zeros(m, np.int64)
    leaf_s = np.zeros((m, d))
    leaf_q = np.zeros(m)
    ref_n = np.zeros(n_ref, np.int64)
    ref_s = np.zeros((n_ref, d))
    ref_q = np.zeros(n_ref)
    leaf_ref = np.zeros((m, n_ref), np.int64)
    leaf_lo = np.full((m if track_range else 0, d), np.inf)
    leaf_hi = np.full((m if track_range else 0, d), -np.inf)
    ref_lo = np.full((n_ref if track_range else 0, d), np.inf)
    ref_hi = np.full((n_ref if track_range else 0, d), -np.inf)
    for leaf in range(m):
        for r in range(width):
            cell = leaf * width + r
            if cell_n[cell] == 0:
                continue
            leaf_n[leaf] += cell_n[cell]
            leaf_q[leaf] += cell_q[cell]
            for j in range(d):
                leaf_s[leaf, j] += cell_s[cell, j]
            if track_range:
                for j in range(d):
                    leaf_lo[leaf, j] = min(leaf_lo[leaf, j], cell_lo[cell, j])
                    leaf_hi[leaf, j] = max(leaf_hi[leaf, j], cell_hi[cell, j])
            if ref_mode != 0:
                leaf_ref[leaf, r] = cell_n[cell]
                ref_n[r] += cell_n[cell]
                ref_q[r] += cell_q[cell]
                for j in range(d):
                    ref_s[r, j] += cell_s[cell, j]
                if track_range:
                    for j in range(d):
                        ref_lo[r, j] = min(ref_lo[r, j], cell_lo[cell, j])
                        ref_hi[r, j] = max(ref_hi[r, j], cell_hi[cell, j])
    return (leaf_n, leaf_s, leaf_q, ref_n, ref_s, ref_q, leaf_ref, leaf_truth, ref_truth,
            leaf_lo, leaf_hi, ref_lo, ref_hi)


@numba.njit(cache=True, nogil=True)
def forest_moments(X, Z, kind, feature, threshold, center, left, right, missing, bits, nan_unrouted):
    """Per tree and node: (count, sum of z, sum of ||z||^2) of the rows routed to it, shape
    (trees, nodes, d + 2) with d the columns of Z, and the first such row's index (-1 where none),
    shape (trees, nodes). Rows are routed on X (the trees' features), their moments taken on Z
    (the space the costs are measured in; X itself when that is the features: pass X twice).

    Every tree in ONE sweep over the rows (the cost curve's and the standing table's pass): tree
    ``t`` is row ``t`` of the stacked node arrays (``forest_arrays``), so each row is read once
    and routed through every tree while it sits in cache; the pass stays bound by reading the
    rows, not by the number of trees. Per tree and node the sums run over the rows in order, as
    one sweep per tree would add them. A row holding NaN or inf in Z reaches no node (a cost cannot
    take it; with Z = X the tree's ``apply`` leaves such a row unlabelled too), nor, in tree ``t``
    with ``nan_unrouted[t]``, a row holding NaN in X (``scored_leaf_of``).
    """
    n, d = Z.shape
    n_trees, width = kind.shape
    mom = np.zeros((n_trees, width, d + 2))
    first = np.full((n_trees, width), -1, dtype=np.int64)
    for i in range(n):
        s = 0.0
        finite = True
        for f in range(d):
            v = Z[i, f]
            if not np.isfinite(v):
                finite = False
            s += v * v
        if not finite:
            continue
        for t in range(n_trees):
            node = scored_leaf_of(X, i, kind[t], feature[t], threshold[t], center[t], left[t], right[t], missing[t],
                                  bits[t], nan_unrouted[t])
            if node < 0:
                continue
            if first[t, node] < 0:
                first[t, node] = i
            mom[t, node, 0] += 1.0
            for f in range(d):
                mom[t, node, 1 + f] += Z[i, f]
            mom[t, node, d + 1] += s
    return mom, first
