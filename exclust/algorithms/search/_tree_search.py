"""Numba kernels of the tree search (``tree_search.py``): the cost of every cut of one node; and
``window_minimum``, which keeps one candidate per valley of those costs."""
from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
def side_cost(count, total, sumsq, centers, center_sq):
    """Cost of a side holding ``count`` rows of summed coordinates ``total`` and summed squared
    norm ``sumsq``: to its own mean when ``centers`` has no rows, else to the best of the
    centers (squared Euclidean either way)."""
    if count == 0:
        return 0.0
    if centers.shape[0] == 0:
        norm = 0.0
        for a in range(total.shape[0]):
            norm += total[a] * total[a]
        return max(sumsq - norm / count, 0.0)
    best = np.inf
    for j in range(centers.shape[0]):
        dot = 0.0
        for a in range(total.shape[0]):
            dot += total[a] * centers[j, a]
        value = sumsq - 2.0 * dot + count * center_sq[j]
        if value < best:
            best = value
    return max(best, 0.0)


@numba.njit(cache=True, nogil=True)
def cut_costs(X, raw, rows_in, order, centers):
    """Per feature f and position p among the node's rows sorted on f: the cost of both sides of
    the cut after that position (inf where the next row has the same value, so no threshold
    parts them), and the cut's threshold (midpoint of the two values); and the node's own cost.

    ``X`` holds the rows of the clustering space moved to their mean (for the sums: the features
    themselves, or other columns Z), ``raw`` the features as given (for the thresholds).
    ``rows_in`` holds the node's rows in ascending order, ``order[f]`` the same rows sorted on
    feature f (``LookaheadSearch.sorted_rows``). Sums are running prefix sums: one sweep over the node's rows per
    feature, O(m * p) each for a node of m rows.
    """
    w = X.shape[1]
    d = raw.shape[1]
    center_sq = np.zeros(centers.shape[0])
    for j in range(centers.shape[0]):
        for a in range(w):
            center_sq[j] += centers[j, a] * centers[j, a]
    total = np.zeros(w)
    total_sq = 0.0
    m = rows_in.shape[0]
    for r in range(m):
        i = rows_in[r]
        for a in range(w):
            total[a] += X[i, a]
            total_sq += X[i, a] * X[i, a]
    costs = np.full((d, max(m - 1, 0)), np.inf)
    thresholds = np.zeros((d, max(m - 1, 0)))
    left = np.empty(w)
    right = np.empty(w)
    for f in range(d):
        rows = order[f]
        left[:] = 0.0
        left_sq = 0.0
        for p in range(m - 1):
            i = rows[p]
            for a in range(w):
                left[a] += X[i, a]
                left_sq += X[i, a] * X[i, a]
            low, high = raw[i, f], raw[rows[p + 1], f]
            if low == high:
                continue
            for a in range(w):
                right[a] = total[a] - left[a]
            costs[f, p] = (side_cost(p + 1, left, left_sq, centers, center_sq)
                           + side_cost(m - p - 1, right, total_sq - left_sq, centers, center_sq))
            thresholds[f, p] = (low + high) / 2.0
    return costs, thresholds, side_cost(m, total, total_sq, centers, center_sq)


@numba.njit(cache=True, nogil=True)
def greedy_cut_costs(X, raw, rows_in, order, centers, members):
    """ExGreedy's score of every cut of one node (Laber and Murtinho 2021): each row pays its
    squared distance to the nearest of the node's centers (``members``) on its own side; cuts
    that leave no member center on a side cost inf. Same layout as ``cut_costs``; the node's own
    cost is the distance to the nearest member center. O(m * k^2) per feature for a node of m rows."""
    n, d = X.shape
    k = members.shape[0]
    m = rows_in.shape[0]
    costs = np.full((d, max(m - 1, 0)), np.inf)
    thresholds = np.zeros((d, max(m - 1, 0)))
    dist = np.empty((n, k))  # rows of the node only are written and read
    own = 0.0
    for r in range(m):
        i = rows_in[r]
        best = np.inf
        for c in range(k):
            v = 0.0
            for a in range(d):
                diff = X[i, a] - centers[members[c], a]
                v += diff * diff
            dist[i, c] = v
            best = min(best, v)
        own += best
    if k < 2:
        return costs, thresholds, own
    coord = np.empty(k)
    for f in range(d):
        for c in range(k):
            coord[c] = centers[members[c], f]
        ranked = np.argsort(coord)
        rows = order[f]
        # Per row, the running nearest distance over the first q ranked centers (left) and over
        # the rest (right), for every split q of the centers along f.
        near_left = np.empty((m, k))
        near_right = np.empty((m, k))
        for p in range(m):
            i = rows[p]
            best = np.inf
            for q in range(k):
                best = min(best, dist[i, ranked[q]])
                near_left[p, q] = best
            best = np.inf
            for q in range(k - 1, -1, -1):
                near_right[p, q] = best
                best = min(best, dist[i, ranked[q]])
        suffix = np.zeros((m + 1, k))
        for p in range(m - 1, -1, -1):
            for q in range(k):
                suffix[p, q] = suffix[p + 1, q] + near_right[p, q]
        prefix = np.zeros(k)
        for p in range(m - 1):
            for q in range(k):
                prefix[q] += near_left[p, q]
            low, high = raw[rows[p], f], raw[rows[p + 1], f]
            if low == high:
                continue
            t = (low + high) / 2.0
            n_left = 0  # member centers at or below the cut
            t_moved = (X[rows[p], f] + X[rows[p + 1], f]) / 2.0
            while n_left < k and coord[ranked[n_left]] <= t_moved:
                n_left += 1
            if n_left == 0 or n_left == k:
                continue
            costs[f, p] = prefix[n_left - 1] + suffix[p + 1, n_left - 1]
            thresholds[f, p] = t
    return costs, thresholds, own


def window_minimum(values: np.ndarray, half: int) -> np.ndarray:
    """Per row, the least of ``values[:, i - half : i + half + 1]`` at every i (edges repeated):
    spans doubled, O(size * log half)."""
    size, n = 2 * half + 1, values.shape[1]
    least = np.pad(values, ((0, 0), (half, half)), mode="edge")  # least[:, i]: min over [i, i + span)
    span = 1
    while 2 * span <= size:
        least[:, :-span] = np.minimum(least[:, :-span], least[:, span:])
        span *= 2
    rest = size - span
    return np.minimum(least[:, :n], least[:, rest:rest + n])
