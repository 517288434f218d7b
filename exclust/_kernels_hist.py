"""Numba kernels of the histogram split engine: bin coding, routing on codes, histograms.

Rows are routed through the tree being grown by their bin codes, never by floats: a node
``(feature f, bin b)`` sends a row left when ``code[f] <= b``, which is the same test as
``x[f] <= edges[f][b]`` on the raw value (see binning.py), so the final ThresholdTree with
real-valued thresholds routes raw data exactly as the engine did.

Histogram kernels split the rows into one block per thread and give each thread its own
histogram, summed at the end: a row is read once, and no two threads write the same cell.
"""
from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, nogil=True, parallel=True)
def encode_rows(X, edges, n_edges, codes):
    """Write into ``codes`` the bin of every value: the number of edges strictly below it."""
    n, d = X.shape
    for i in numba.prange(n):
        for f in range(d):
            v = X[i, f]
            lo = 0
            hi = n_edges[f]
            # Smallest index whose edge is >= v, i.e. the count of edges < v.
            while lo < hi:
                mid = (lo + hi) >> 1
                if edges[f, mid] < v:
                    lo = mid + 1
                else:
                    hi = mid
            codes[i, f] = lo


@numba.njit(cache=True, nogil=True, parallel=True)
def nearest_centers(X, centers, center_sq, labels, dots):
    """Per row: dot products with every center and the index of the nearest center."""
    n, d = X.shape
    k = centers.shape[0]
    for i in numba.prange(n):
        best = np.inf
        arg = 0
        for j in range(k):
            s = 0.0
            for f in range(d):
                s += X[i, f] * centers[j, f]
            dots[i, j] = s
            # ||x - mu||^2 up to the ||x||^2 every center shares.
            c = center_sq[j] - 2.0 * s
            if c < best:
                best = c
                arg = j
        labels[i] = arg


@numba.njit(cache=True, nogil=True)
def route_codes(codes, i, feature, split_bin, left, right):
    """Leaf reached by row ``i`` of ``codes`` (split_bin < 0 marks a leaf)."""
    node = 0
    while split_bin[node] >= 0:
        if codes[i, feature[node]] <= split_bin[node]:
            node = left[node]
        else:
            node = right[node]
    return node


@numba.njit(cache=True, nogil=True)
def route_all_codes(codes, feature, split_bin, left, right):
    """Leaf of every row, routed by codes."""
    n = codes.shape[0]
    out = np.empty(n, dtype=np.int64)
    for i in range(n):
        out[i] = route_codes(codes, i, feature, split_bin, left, right)
    return out


@numba.njit(cache=True, nogil=True, parallel=True)
def mistake_histograms(codes, labels, feature, split_bin, left, right, slot, center_ok, n_slots, n_bins, k, nt):
    """IMM: per (slot, feature, bin, reference cluster) the count of alive rows.

    ``slot[node]`` is the histogram a row reaching leaf ``node`` goes to (-1: none);
    ``center_ok[s, j]`` says whether a row of reference cluster j counts for slot s, which is
    how rows cut off from their center by an earlier split are left out.
    """
    n, d = codes.shape
    parts = np.zeros((nt, n_slots, d, n_bins, k), dtype=np.int64)
    step = (n + nt - 1) // nt
    for t in numba.prange(nt):
        for i in range(t * step, min(n, (t + 1) * step)):
            node = route_codes(codes, i, feature, split_bin, left, right)
            s = slot[node]
            if s < 0:
                continue
            j = labels[i]
            if not center_ok[s, j]:
                continue
            for f in range(d):
                parts[t, s, f, codes[i, f], j] += 1
    out = np.zeros((n_slots, d, n_bins, k), dtype=np.int64)
    for t in range(nt):
        out += parts[t]
    return out


@numba.njit(cache=True, nogil=True, parallel=True)
def surrogate_histograms(codes, dots, labels, feature, split_bin, left, right, slot, n_slots, n_bins, nt):
    """ExKMC: per (slot, feature, bin) the row count, the sums of <x, mu_j>, and label counts.

    Returns ``sums`` (n_slots, d, n_bins, k + 1): channel 0 the count, channel 1 + j the sum of
    dot products with center j; and ``label_counts`` (n_slots, d, n_bins, k): rows per
    reference cluster, which tell which cuts isolate points of other centers than a leaf's.
    ``nt`` blocks of rows, one private histogram each.
    """
    n, d = codes.shape
    k = dots.shape[1]
    parts = np.zeros((nt, n_slots, d, n_bins, k + 1), dtype=np.float64)
    counts = np.zeros((nt, n_slots, d, n_bins, k), dtype=np.int64)
    step = (n + nt - 1) // nt
    for t in numba.prange(nt):
        for i in range(t * step, min(n, (t + 1) * step)):
            node = route_codes(codes, i, feature, split_bin, left, right)
            s = slot[node]
            if s < 0:
                continue
            lab = labels[i]
            for f in range(d):
                b = codes[i, f]
                parts[t, s, f, b, 0] += 1.0
                counts[t, s, f, b, lab] += 1
                for j in range(k):
                    parts[t, s, f, b, 1 + j] += dots[i, j]
    out = np.zeros((n_slots, d, n_bins, k + 1), dtype=np.float64)
    label_counts = np.zeros((n_slots, d, n_bins, k), dtype=np.int64)
    for t in range(nt):
        out += parts[t]
        label_counts += counts[t]
    return out, label_counts


@numba.njit(cache=True, nogil=True)
def leaf_cost_sums(leaves, labels_by_leaf, X, centers, n_nodes):
    """Per leaf: count, sum of x and sum of ||x||^2 (for k-means cost of tree clusters)."""
    n, d = X.shape
    cnt = np.zeros(n_nodes, dtype=np.float64)
    sx = np.zeros((n_nodes, d), dtype=np.float64)
    sq = np.zeros(n_nodes, dtype=np.float64)
    for i in range(n):
        node = leaves[i]
        cnt[node] += 1.0
        for f in range(d):
            v = X[i, f]
            sx[node, f] += v
            sq[node] += v * v
    return cnt, sx, sq
