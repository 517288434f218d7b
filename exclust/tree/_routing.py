"""Numba kernels routing rows through a ThresholdTree (its node arrays), to leaves or to clusters.

Every kernel takes and returns plain numpy arrays (no Python objects), so it runs on Dask
workers with the GIL released; kernels of other ideas live beside the code they serve.
"""
from __future__ import annotations

import numba
import numpy as np

from exclust.tree.node_kinds import LEAF, ONE_SIDED  # numba reads them as compile-time constants


@numba.njit(cache=True, nogil=True, inline="always")
def leaf_of(X, i, kind, feature, threshold, center, left, right):
    """Leaf node id of row i of X; inlined into every kernel that routes points."""
    node = 0
    while kind[node] != LEAF:
        v = X[i, feature[node]]
        if kind[node] == ONE_SIDED:
            go_left = v <= threshold[node]
        else:
            go_left = abs(v - center[node]) <= threshold[node]
        node = left[node] if go_left else right[node]
    return node


@numba.njit(cache=True, nogil=True)
def route_to_leaves(X, kind, feature, threshold, center, left, right):
    """Leaf node id of every row of X."""
    n = X.shape[0]
    out = np.empty(n, dtype=np.int64)
    for i in range(n):
        out[i] = leaf_of(X, i, kind, feature, threshold, center, left, right)
    return out


@numba.njit(cache=True, nogil=True)
def route_to_clusters(X, kind, feature, threshold, center, left, right, value):
    """Cluster label (the leaf's value) of every row of X."""
    leaves = route_to_leaves(X, kind, feature, threshold, center, left, right)
    out = np.empty(leaves.shape[0], dtype=np.int64)
    for i in range(leaves.shape[0]):
        out[i] = value[leaves[i]]
    return out
