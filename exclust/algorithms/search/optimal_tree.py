"""The best k-leaf threshold tree by k-means cost, exactly, on small instances (a test oracle).

The k-means cost of a tree is the sum, over its leaves, of the squared distances of the leaf's
rows to the leaf's own mean: the cost behind the price of explainability of Dasgupta et al.
(ICML 2020, Sec. 2), of ExKMC (paper 003) and of ExGreedy/ExShallow (Laber and Murtinho 2021,
Laber, Murtinho and Oliveira 2023), which all divide it by the reference k-means cost.

Search: dynamic programming over the row sets that boxes of candidate cuts can cut out
(Bertsimas and Dunn's optimal trees, "Optimal classification trees", Machine Learning 2017, as
a recursion; here for the k-means cost). A node's candidate cuts are the midpoints between
consecutive distinct values of its rows on every feature, so every partition of the rows that
an axis-aligned cut can make is tried. The best tree of ``m`` leaves over the row set ``S`` is

    best(S, 1) = cost(S),
    best(S, m) = min over cuts (L, R) of S and 1 <= j < m of best(L, j) + best(R, m - j),

memoised by (row set, m); a row set that cannot be cut into ``m`` non-empty boxes (too few
distinct rows) costs infinity. The work grows like (n d)^(k - 1): meant for a few dozen rows, a
few features and k <= 4 or 5. No data are binned and nothing runs on Dask; it is the yardstick
the search (``tree_search.py``) and the greedy rules are measured against.
"""
from __future__ import annotations

import numpy as np

from exclust.errors import InputError
from exclust.tree import LEAF, ONE_SIDED, ThresholdTree

MAX_ROWS = 400  # beyond this the recursion takes hours: refuse instead
# The largest n * d per number of leaves whose exact search took at most about 3 s on this
# project's 2-core machine (gaussian blobs, load 1.5-2.9; commands in bench/README.md): k=2
# 400 x 40 in 2.3 s; k=3 150 x 2 in 1.7 s, 300 x 1 in 3.0 s, 200 x 2 in 4.0 s; k=4 60 x 2 in
# 2.7 s, 120 x 1 in 4.7 s; k=5 40 x 2 in 2.7 s; k=6 30 x 2 in 1.4 s. Memoisation makes the time
# grow more slowly than (n d)^(k-1), but still steeply: beyond k = 6 no instance is called small.
FAST_SIZES = {2: 20_000, 3: 300, 4: 100, 5: 80, 6: 60}


def leaf_cost(X: np.ndarray) -> float:
    """Sum of squared distances of the rows to their mean."""
    if X.shape[0] == 0:
        return 0.0
    return float(((X - X.mean(axis=0)) ** 2).sum())


class _Exact:
    def __init__(self, X: np.ndarray) -> None:
        self.X = X
        self.memo: dict[tuple[bytes, int], tuple[float, tuple | None]] = {}

    def best(self, rows: np.ndarray, m: int) -> tuple[float, tuple | None]:
        """(cost, tree) of the best m-leaf tree over ``rows`` (sorted row ids); tree is None for
        a leaf, else (feature, threshold, left tree, left rows' leaves, right tree)."""
        key = (rows.tobytes(), m)
        hit = self.memo.get(key)
        if hit is not None:
            return hit
        out: tuple[float, tuple | None]
        if m == 1:
            out = (leaf_cost(self.X[rows]), None)
            self.memo[key] = out
            return out
        best_cost, best_tree = np.inf, None
        for f in range(self.X.shape[1]):
            values = np.unique(self.X[rows, f])
            for t in (values[:-1] + values[1:]) / 2.0:
                goes_left = self.X[rows, f] <= t
                left, right = rows[goes_left], rows[~goes_left]
                for j in range(1, m):
                    cost_left, tree_left = self.best(left, j)
                    if cost_left >= best_cost:
                        continue
                    cost_right, tree_right = self.best(right, m - j)
                    if cost_left + cost_right < best_cost:
                        best_cost = cost_left + cost_right
                        best_tree = (f, float(t), tree_left, j, tree_right)
        out = (best_cost, best_tree)
        self.memo[key] = out
        return out


def small_enough(n_rows: int, n_features: int, n_leaves: int) -> bool:
    """Whether the exact search of ``n_leaves`` leaves over n_rows x n_features takes a few
    seconds at most (``FAST_SIZES``; never beyond ``MAX_ROWS`` rows)."""
    largest = FAST_SIZES.get(int(n_leaves), 0 if n_leaves > 1 else MAX_ROWS * max(n_features, 1))
    return 0 < n_rows <= MAX_ROWS and n_rows * n_features <= largest


def optimal_tree(X, n_leaves: int, feature_names=None) -> tuple[ThresholdTree, float]:
    """The k-means-cost-optimal tree of ``n_leaves`` leaves over the rows of X, and its cost.

    Leaves are numbered 0..n_leaves-1 left to right (each leaf its own cluster). InputError when
    X has more than MAX_ROWS rows or fewer than ``n_leaves`` distinct rows.
    """
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2 or X.shape[0] > MAX_ROWS:
        raise InputError(f"optimal_tree takes a 2-d array of at most {MAX_ROWS} rows, got shape {X.shape}")
    if n_leaves < 1:
        raise InputError(f"n_leaves must be at least 1, got {n_leaves}")
    cost, nested = _Exact(X).best(np.arange(X.shape[0]), int(n_leaves))
    if not np.isfinite(cost):
        raise InputError(f"the rows cannot be cut into {n_leaves} non-empty boxes: too few distinct rows")
    return nested_to_tree(nested, X.shape[1], feature_names, n_leaves), cost


def count_leaves(nested) -> int:
    """Leaves of a nested tree ``(feature, threshold, left, left's leaves, right)``; None is a leaf."""
    return 1 if nested is None else count_leaves(nested[2]) + count_leaves(nested[4])


def nested_from_cuts(cuts: dict, root: int = 0):
    """A nested tree from its cuts by node id, ``node -> (feature, threshold, left id, right id)``;
    a node without a cut is a leaf."""
    def build(node):
        if node not in cuts:
            return None
        feature, threshold, low, high = cuts[node]
        left = build(low)
        return (feature, threshold, left, count_leaves(left), build(high))

    return build(root)


def nested_to_tree(nested, n_features: int, feature_names, n_leaves: int, meta=None) -> ThresholdTree:
    """A ThresholdTree from (feature, threshold, left, _, right) tuples (None: a leaf); leaves
    numbered left to right."""
    kind: list[int] = []
    feature, threshold, left, right, value = [], [], [], [], []

    def add(node) -> int:
        i = len(kind)
        kind.append(LEAF)
        feature.append(-1)
        threshold.append(np.nan)
        left.append(-1)
        right.append(-1)
        value.append(-1)
        if node is None:
            value[i] = sum(1 for v, k in zip(value, kind, strict=True) if k == LEAF and v >= 0)
            return i
        f, t, sub_left, _, sub_right = node
        kind[i], feature[i], threshold[i] = ONE_SIDED, f, t
        left[i] = add(sub_left)
        right[i] = add(sub_right)
        return i

    add(nested)
    return ThresholdTree(kind, feature, threshold, left, right, value, n_features=n_features,
                         feature_names=feature_names, n_clusters=n_leaves, meta=meta)
