"""Numba kernels of distances to centers: the nearest center in squared l2 (k-means) and in l1
(k-medians), and scoring many center-leaf trees in one sweep.

`nearest_center` assigns rows to the nearest center in squared l2 and `assigned_sq_distances`
gives each row's distance to a given center, bit for bit the same arithmetic.

`nearest_center_l1` assigns rows to the nearest center in l1 (ties: the lowest index, as
numpy's argmin). `trial_costs` routes every row through T trees at once (the trees stacked as
T x m node arrays) and adds each tree's cost of the row: the distance (squared l2 for k-means,
l1 for k-medians) to the center that the row's leaf stands for, with the cost against the
nearest center beside it. `leaf_l1_sums` gives the k-medians cost curve its per-leaf l1 sums
to every center.
"""
from __future__ import annotations

import numba
import numpy as np

from exclust.dataplane._row_distances import distances_to_centers, least_of
from exclust.tree._routing import leaf_of

SQUARED_L2 = 0
L1 = 1


@numba.njit(cache=True, nogil=True, inline="always")
def nearest_center_of(X, i, centers_t, acc):
    """(label, squared distance) of row i to its nearest center (``centers_t``: (d, k); ``acc``: a
    scratch of k); inlined wherever rows meet centers."""
    distances_to_centers(X, i, centers_t, False, acc)
    return least_of(acc)


@numba.njit(cache=True, nogil=True, inline="always")
def transposed(centers):
    """The centers as ``distances_to_centers`` reads them, (d, k) C-ordered, and a scratch of k."""
    return np.ascontiguousarray(centers.T), np.empty(centers.shape[0])


@numba.njit(cache=True, nogil=True, inline="always")
def label_value(v):
    """Label value as int64; -1 for missing (NaN or -1); -2 for a label that is not a valid id."""
    if v != v:
        return -1
    iv = np.int64(v)
    if iv != v or iv < -1:
        return -2
    return iv


@numba.njit(cache=True, nogil=True, inline="always")
def reference_label_of(X, i, ref, ref_mode, centers_t, acc):
    """Reference label of row i: 0 none, 1 from labels, 2 nearest center (``centers_t``, ``acc``:
    ``transposed``'s)."""
    if ref_mode == 1:
        return label_value(ref[i])
    if ref_mode == 2:
        return nearest_center_of(X, i, centers_t, acc)[0]
    return -1


@numba.njit(cache=True, nogil=True)
def nearest_center(X, centers):
    """(label, squared distance) of every row to its nearest center."""
    n = X.shape[0]
    labels = np.empty(n, dtype=np.int64)
    dist = np.empty(n)
    centers_t, acc = transposed(centers)
    for i in range(n):
        labels[i], dist[i] = nearest_center_of(X, i, centers_t, acc)
    return labels, dist


@numba.njit(cache=True, nogil=True)
def assigned_sq_distances(X, labels, centers):
    """Squared distance of every row to its given center: ``nearest_center``'s distances, bit
    for bit, when ``labels`` are its labels (same sums in the same order), for k / d the work."""
    n, d = X.shape
    dist = np.empty(n)
    for i in range(n):
        c = labels[i]
        s = 0.0
        for j in range(d):
            t = X[i, j] - centers[c, j]
            s += t * t
        dist[i] = s
    return dist



@numba.njit(cache=True, nogil=True, inline="always")
def nearest_center_l1_of(X, i, centers_t, acc):
    """(label, l1 distance) of row i to its nearest center in l1 (``centers_t``, ``acc``: ``transposed``'s)."""
    distances_to_centers(X, i, centers_t, True, acc)
    return least_of(acc)


@numba.njit(cache=True, nogil=True)
def nearest_center_l1(X, centers):
    """(label, l1 distance) of every row to its nearest center in l1."""
    n = X.shape[0]
    labels = np.empty(n, dtype=np.int64)
    dist = np.empty(n)
    centers_t, acc = transposed(centers)
    for i in range(n):
        labels[i], dist[i] = nearest_center_l1_of(X, i, centers_t, acc)
    return labels, dist


@numba.njit(cache=True, nogil=True)
def leaf_l1_sums(X, leaves, n_nodes, centers):
    """The k-medians cost curve's sweep: T trees' leaf of every row in, per tree and node
    (count, sum of the l1 distances of its rows to each center) (T, n_nodes, 1 + k), the first
    row that reached the node (-1 where none), and the l1 cost to the nearest center."""
    n = X.shape[0]
    T = leaves.shape[0]
    k = centers.shape[0]
    sums = np.zeros((T, n_nodes, 1 + k))
    first = np.full((T, n_nodes), -1, dtype=np.int64)
    dist = np.empty(k)
    nearest = 0.0
    for i in range(n):
        best = np.inf
        for c in range(k):
            dist[c] = _distance(X, i, centers, c, L1)
            best = min(best, dist[c])
        nearest += best
        for t in range(T):
            node = leaves[t, i]
            if first[t, node] < 0:
                first[t, node] = i
            sums[t, node, 0] += 1.0
            for c in range(k):
                sums[t, node, 1 + c] += dist[c]
    return sums, first, nearest


@numba.njit(cache=True, nogil=True)
def _distance(X, i, centers, c, metric):
    s = 0.0
    for j in range(centers.shape[1]):
        t = X[i, j] - centers[c, j]
        s += t * t if metric == SQUARED_L2 else abs(t)
    return s


@numba.njit(cache=True, nogil=True)
def trial_costs(X, kind, feature, threshold, center, left, right, value, centers, metric):
    """(cost per tree (T), cost to the nearest center) of one chunk; tree arrays are T x m."""
    n = X.shape[0]
    T = kind.shape[0]
    costs = np.zeros(T)
    nearest = 0.0
    centers_t, acc = transposed(centers)
    for i in range(n):
        if metric == SQUARED_L2:
            nearest += nearest_center_of(X, i, centers_t, acc)[1]
        else:
            nearest += nearest_center_l1_of(X, i, centers_t, acc)[1]
        for t in range(T):
            leaf = leaf_of(X, i, kind[t], feature[t], threshold[t], center[t], left[t], right[t])
            costs[t] += _distance(X, i, centers, value[t, leaf], metric)
    return costs, nearest


# --------------------------------------------------------------------------- k-medians reference
@numba.njit(cache=True, nogil=True)
def l1_assignment_counts(X, centers):
    """(rows nearest to each center in l1, total l1 distance to the nearest center) of a chunk."""
    counts = np.zeros(centers.shape[0], dtype=np.int64)
    cost = 0.0
    centers_t, acc = transposed(centers)
    for i in range(X.shape[0]):
        arg, dist = nearest_center_l1_of(X, i, centers_t, acc)
        counts[arg] += 1
        cost += dist
    return counts, cost
