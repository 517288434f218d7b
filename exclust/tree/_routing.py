"""Numba kernels routing rows through a ThresholdTree (its node arrays), to leaves or to clusters.

Every kernel takes and returns plain numpy arrays (no Python objects), so it runs on Dask
workers with the GIL released; kernels of other ideas live beside the code they serve.

``leaf_of`` follows numeric cuts of finite values only (``dataplane._center_distances.trial_costs``, whose
random-cut trial trees are numeric and whose rows are complete); ``routed_leaf_of``, which the tree's predict
and the scoring kernels use, also follows missing values (NaN to the node's missing
side) and category-set cuts (a code in the node's bitset goes left; NaN or ``UNSEEN_CATEGORY`` to
the missing side), and answers -1 where a missing value meets a node with ``MISSING_NONE``.
"""
from __future__ import annotations

import numba
import numpy as np

# numba reads them as compile-time constants
from exclust.tree.node_kinds import CATEGORY_SET, LEAF, MISSING_LEFT, MISSING_NONE, ONE_SIDED, UNSEEN_CATEGORY


@numba.njit(cache=True, nogil=True, inline="always")
def goes_left(kind, v, threshold, center):
    """Whether a value goes left at a numeric cut (ONE_SIDED or INTERVAL)."""
    if kind == ONE_SIDED:
        return v <= threshold
    return abs(v - center) <= threshold


@numba.njit(cache=True, nogil=True, inline="always")
def leaf_of(X, i, kind, feature, threshold, center, left, right):
    """Leaf node id of row i of X through numeric cuts; inlined into every kernel that routes points."""
    node = 0
    while kind[node] != LEAF:
        go_left = goes_left(kind[node], X[i, feature[node]], threshold[node], center[node])
        node = left[node] if go_left else right[node]
    return node


@numba.njit(cache=True, nogil=True, inline="always")
def in_category_set(bits, node, v):
    """Whether the category code ``v`` (a whole number >= 0) is in the node's set (its row of the bitset)."""
    code = np.int64(v)
    word = code >> 6
    if code != v or word >= bits.shape[1]:
        return False
    return (bits[node, word] >> np.uint64(code & 63)) & np.uint64(1) == np.uint64(1)


@numba.njit(cache=True, nogil=True, inline="always")
def routed_leaf_of(X, i, kind, feature, threshold, center, left, right, missing, bits):
    """Leaf node id of row i of X through every kind of cut, missing values to each node's missing side;
    -1 where a missing value meets a node that learned no side (``MISSING_NONE``)."""
    node = 0
    while kind[node] != LEAF:
        v = X[i, feature[node]]
        k = kind[node]
        if v != v or (k == CATEGORY_SET and v == UNSEEN_CATEGORY):
            if missing[node] == MISSING_NONE:
                return -1
            go_left = missing[node] == MISSING_LEFT
        elif k == CATEGORY_SET:
            go_left = in_category_set(bits, node, v)
        else:
            go_left = goes_left(k, v, threshold[node], center[node])
        node = left[node] if go_left else right[node]
    return node


@numba.njit(cache=True, nogil=True)
def route_to_leaves(X, kind, feature, threshold, center, left, right, missing, bits):
    """Leaf node id of every row of X (-1: not routed, see ``routed_leaf_of``)."""
    n = X.shape[0]
    out = np.empty(n, dtype=np.int64)
    for i in range(n):
        out[i] = routed_leaf_of(X, i, kind, feature, threshold, center, left, right, missing, bits)
    return out


@numba.njit(cache=True, nogil=True)
def route_to_clusters(X, kind, feature, threshold, center, left, right, missing, bits, value):
    """Cluster label (the leaf's value) of every row of X (-1: not routed)."""
    leaves = route_to_leaves(X, kind, feature, threshold, center, left, right, missing, bits)
    out = np.empty(leaves.shape[0], dtype=np.int64)
    for i in range(leaves.shape[0]):
        out[i] = value[leaves[i]] if leaves[i] >= 0 else -1
    return out
