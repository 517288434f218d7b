"""Numba kernels of the certified tree search (``optimal_bnb.py``): a node's per-feature
histograms from its cells, the split of a node's cells by one cut, a node's tight box, and the
exact weighted one-dimensional k-means cost (the per-coordinate lower bound).

A *cell* is one distinct vector of bin codes; its statistics row is (count, summed squared norm,
summed coordinates...), all of rows shifted by one common vector.
"""
from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
def node_histograms(codes, stats, cells, n_bins):
    """Per feature f and bin b, the summed statistics rows of the node's ``cells`` whose code on
    f is b: an array (d, n_bins, width). One sweep over the node's cells."""
    d = codes.shape[1]
    width = stats.shape[1]
    hist = np.zeros((d, n_bins, width))
    for i in range(cells.shape[0]):
        g = cells[i]
        for f in range(d):
            b = codes[g, f]
            for w in range(width):
                hist[f, b, w] += stats[g, w]
    return hist


@numba.njit(cache=True, nogil=True)
def split_cells(codes, cells, feature, split_bin):
    """The node's cells whose code on ``feature`` is <= ``split_bin`` (left) and the others (right),
    each in the node's order."""
    left = np.empty(cells.shape[0], dtype=np.int64)
    right = np.empty(cells.shape[0], dtype=np.int64)
    n_left = 0
    n_right = 0
    for i in range(cells.shape[0]):
        g = cells[i]
        if codes[g, feature] <= split_bin:
            left[n_left] = g
            n_left += 1
        else:
            right[n_right] = g
            n_right += 1
    return left[:n_left], right[:n_right]


@numba.njit(cache=True, nogil=True)
def tight_box(codes, cells):
    """Least and greatest code per feature over the node's cells (d, 2): the same for every box
    that holds exactly these cells, so it names the node's cell set."""
    d = codes.shape[1]
    box = np.empty((d, 2), dtype=np.int64)
    for f in range(d):
        box[f, 0] = 1 << 40
        box[f, 1] = -1
    for i in range(cells.shape[0]):
        g = cells[i]
        for f in range(d):
            c = codes[g, f]
            if c < box[f, 0]:
                box[f, 0] = c
            if c > box[f, 1]:
                box[f, 1] = c
    return box


@numba.njit(cache=True, nogil=True, inline="always")
def _segment_cost(w, wx, wxx, i, j):
    """Weighted squared deviation of sorted points i..j-1 from their weighted mean (prefix sums)."""
    n = w[j] - w[i]
    if n <= 0.0:
        return 0.0
    s = wx[j] - wx[i]
    value = (wxx[j] - wxx[i]) - s * s / n
    return value if value > 0.0 else 0.0


@numba.njit(cache=True, nogil=True)
def _fill_layer(prev, cur, w, wx, wxx, lo, hi, opt_lo, opt_hi):
    """cur[i] = min over s in [opt_lo, min(opt_hi, i - 1)] of prev[s] + cost(s, i) for i in [lo, hi],
    by divide and conquer on the monotone argmin (an explicit stack, no recursion)."""
    stack = np.empty((64 + 2 * int(np.log2(max(hi - lo + 2, 2))) + 8, 4), dtype=np.int64)
    top = 0
    stack[0, 0], stack[0, 1], stack[0, 2], stack[0, 3] = lo, hi, opt_lo, opt_hi
    top = 1
    while top > 0:
        top -= 1
        a, b, oa, ob = stack[top, 0], stack[top, 1], stack[top, 2], stack[top, 3]
        if a > b:
            continue
        mid = (a + b) // 2
        best = np.inf
        arg = oa
        upper = min(ob, mid - 1)
        for s in range(oa, upper + 1):
            value = prev[s] + _segment_cost(w, wx, wxx, s, mid)
            if value < best:
                best = value
                arg = s
        cur[mid] = best
        if top + 2 > stack.shape[0]:
            grown = np.empty((stack.shape[0] * 2, 4), dtype=np.int64)
            grown[:top] = stack[:top]
            stack = grown
        stack[top, 0], stack[top, 1], stack[top, 2], stack[top, 3] = a, mid - 1, oa, arg
        top += 1
        stack[top, 0], stack[top, 1], stack[top, 2], stack[top, 3] = mid + 1, b, arg, ob
        top += 1


@numba.njit(cache=True, nogil=True)
def weighted_kmeans_1d(values, weights, n_parts):
    """Least weighted k-means cost of points ``values`` (any order) with ``weights`` > 0 cut into at
    most ``n_parts`` groups, exactly.

    The optimal groups of points on a line are runs of the sorted points, and the best split point
    of the last run moves right with the run's end (the cost of a run satisfies the quadrangle
    inequality; Wang and Song, "Ckmeans.1d.dp", R Journal 2011; Gronlund et al., "Fast exact
    k-means, k-medians and Bregman divergence clustering in 1D", 2017), so each layer of the
    dynamic programme is filled by divide and conquer: O(n_parts * n log n) after the sort.
    """
    n = values.shape[0]
    if n == 0:
        return 0.0
    order = np.argsort(values)
    w = np.zeros(n + 1)
    wx = np.zeros(n + 1)
    wxx = np.zeros(n + 1)
    for r in range(n):
        i = order[r]
        w[r + 1] = w[r] + weights[i]
        wx[r + 1] = wx[r] + weights[i] * values[i]
        wxx[r + 1] = wxx[r] + weights[i] * values[i] * values[i]
    prev = np.empty(n + 1)
    for i in range(n + 1):
        prev[i] = _segment_cost(w, wx, wxx, 0, i)
    parts = min(n_parts, n)
    cur = np.empty(n + 1)
    for _ in range(1, parts):
        cur[0] = 0.0
        _fill_layer(prev, cur, w, wx, wxx, 1, n, 0, n - 1)
        for i in range(n + 1):
            prev[i] = min(prev[i], cur[i])
    return prev[n]


@numba.njit(cache=True, nogil=True)
def _best_two_of(acc, node, complement, out_arg, seg_of, out_seg):
    """The least cost of at most two leaves over the cells summed in ``acc`` (d, n_bins, width) per
    feature and bin, or with ``complement`` over those of ``node`` less ``acc`` (no copy);
    ``out_arg`` gets (feature, bin) of the cut, (-1, -1) when one leaf is best. ``out_seg`` (d,
    segments; may have no columns) gets per feature g and segment s the least two-leaf cost over
    the cuts after the bins b with ``seg_of[g, b] == s`` (inf where there is none)."""
    d, n_bins, width = acc.shape
    total = np.zeros(width)
    for b in range(n_bins):
        for w in range(width):
            total[w] += node[0, b, w] - acc[0, b, w] if complement else acc[0, b, w]
    count = total[0]
    sumsq = total[1]
    norm = 0.0
    for w in range(2, width):
        norm += total[w] * total[w]
    best = sumsq - norm / count if count > 0 else 0.0
    out_arg[0] = -1
    out_arg[1] = -1
    left = np.zeros(width)
    segmented = out_seg.shape[1] > 0
    if segmented:
        out_seg[:, :] = np.inf
    for g in range(d):
        for w in range(width):
            left[w] = 0.0
        for b in range(n_bins - 1):
            rows = node[g, b, 0] - acc[g, b, 0] if complement else acc[g, b, 0]
            if rows <= 0.0:
                continue
            for w in range(width):
                left[w] += node[g, b, w] - acc[g, b, w] if complement else acc[g, b, w]
            n_left = left[0]
            n_right = count - n_left
            if n_right <= 0.5:
                break
            nl = 0.0
            nr = 0.0
            for w in range(2, width):
                nl += left[w] * left[w]
                r = total[w] - left[w]
                nr += r * r
            value = (left[1] - nl / n_left) + ((sumsq - left[1]) - nr / n_right)
            if segmented and value < out_seg[g, seg_of[g, b]]:
                out_seg[g, seg_of[g, b]] = value
            if value < best:
                best = value
                out_arg[0] = g
                out_arg[1] = b
    return best


@numba.njit(cache=True, nogil=True)
def best_two_by_position(codes, stats, cells, feature, node):
    """``best_two_by_segments`` without the per-segment minima: (left_best, left_arg, right_best,
    right_arg)."""
    seg_of = np.zeros((codes.shape[1], node.shape[1]), dtype=np.int64)
    out = best_two_by_segments(codes, stats, cells, feature, node, seg_of, 0)
    return out[0], out[1], out[2], out[3]


@numba.njit(cache=True, nogil=True)
def best_two_by_segments(codes, stats, cells, feature, node, seg_of, n_segments):
    """For every occupied bin b of ``feature``: the least cost of at most two leaves over the node's
    cells whose code on it is <= b (left) and over those above b (right), with their cuts (feature,
    bin; -1 for one leaf). ``node`` is the node's histograms (``node_histograms`` of the same
    cells), made once per node and shared by every feature's call. The cells are taken in order
    of their code on ``feature``; the left side's per-feature histograms grow by each bin's cells,
    the right side's are the node's less the left's: memory of two histograms (d, n_bins, width),
    O(cells * d * width) to fill them and O(d * n_bins * width) per occupied bin to score.

    With ``n_segments`` > 0 it also returns, per occupied bin b of ``feature`` and per feature g and
    segment s of g's bins (``seg_of``, (d, n_bins), non-decreasing in the bin), the least cost of
    two leaves of the left (right) side cut on g after a bin of segment s: arrays (n_bins, d,
    n_segments), inf where no such cut splits the side (``_first_cut_bound``, Bound 8)."""
    d = codes.shape[1]
    width = stats.shape[1]
    n_bins = node.shape[1]
    order = np.argsort(codes[cells, feature].astype(np.int64), kind="mergesort")
    left_best = np.full(n_bins, np.inf)
    right_best = np.full(n_bins, np.inf)
    left_arg = np.full((n_bins, 2), -1, dtype=np.int64)
    right_arg = np.full((n_bins, 2), -1, dtype=np.int64)
    acc = np.zeros((d, n_bins, width))
    arg = np.empty(2, dtype=np.int64)
    left_seg = np.full((n_bins, d, n_segments), np.inf)
    right_seg = np.full((n_bins, d, n_segments), np.inf)
    i = 0
    n = cells.shape[0]
    while i < n:
        b = codes[cells[order[i]], feature]
        while i < n and codes[cells[order[i]], feature] == b:
            c = cells[order[i]]
            for g in range(d):
                bg = codes[c, g]
                for w in range(width):
                    acc[g, bg, w] += stats[c, w]
            i += 1
        left_best[b] = _best_two_of(acc, node, False, arg, seg_of, left_seg[b])
        left_arg[b, 0], left_arg[b, 1] = arg[0], arg[1]
        if i < n:
            right_best[b] = _best_two_of(acc, node, True, arg, seg_of, right_seg[b])
            right_arg[b, 0], right_arg[b, 1] = arg[0], arg[1]
    return left_best, left_arg, right_best, right_arg, left_seg, right_seg
