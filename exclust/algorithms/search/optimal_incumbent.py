"""The certified search's incumbent trees (``optimal_bnb.py``): a center-guided first tree, and
a tree padded to its leaf count (``pad_leaves``) with each leaf's cells (``tree_cells``).

On many leaves the search's own greedy incumbent (best-first exact two-leaf cuts) is far above the
trees IMM, ExGreedy or TreeSearch build (r15, 15 leaves: 188.6 against 109.4), and the proven gap
is the incumbent's cost over the bound, so a better first tree shrinks it and prunes more.

The center-guided tree is grown top-down over the cells, IMM-style: a node holding several centers is cut at
the bin edge, among those that leave a center on each side, where the node's cells cost least
when each is charged its squared distance to the nearest center on its own side (weighted by its
rows); a node with one center (or whose centers share a bin on every feature) is a leaf, so the tree has
at most one leaf per center. The centers are the
caller's (those the fit was given) and weighted k-means of the cells' means (counts as weights,
fixed seeds: the same cells give the same trees). Its cost is then scored exactly, each leaf at its
own mean, like every tree of the search. Only an upper bound: nothing is claimed of it but its cost.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from exclust.algorithms.search._optimal_bounds import split_cells
from exclust.algorithms.search.optimal_tree import count_leaves, nested_from_cuts

if TYPE_CHECKING:
    from exclust.algorithms.search.optimal_bnb import BranchAndBound

# Restarts of each weighted k-means over the cells' means, and its seeds: one center tree per seed.
# The tree a clustering leads to varies more between k-means' local optima than their costs do
# (d31, 31 leaves: 3,724 / 4,062 / 4,082 for seeds 0-2; aggregation 11,270 / 11,001 / 11,000), so
# the first tree is the cheapest of a few.
KMEANS_RESTARTS = 3
KMEANS_SEEDS = (0, 1, 2)
# Above this many cells the k-means runs on a uniform sample of them (fixed seed), still weighted by
# their counts: the centers only guide the first tree, and on 10^5-10^6 cells a full k-means per
# seed would cost as much as several nodes of the search.
KMEANS_MAX_CELLS = 20_000


def cell_centers(stats: np.ndarray, n_clusters: int) -> list[np.ndarray]:
    """Weighted k-means of the cells' means (rows of ``stats``: count, squared norm, sums), one per
    seed of ``KMEANS_SEEDS``, in the cells' shifted coordinates (on a sample of ``KMEANS_MAX_CELLS``
    cells when there are more); fewer centers when there are fewer cells."""
    from sklearn.cluster import KMeans

    if stats.shape[0] > KMEANS_MAX_CELLS:
        stats = stats[np.sort(np.random.default_rng(0).choice(stats.shape[0], KMEANS_MAX_CELLS, replace=False))]
    count = stats[:, 0]
    means = stats[:, 2:] / count[:, None]
    k = min(int(n_clusters), means.shape[0])
    return [np.asarray(KMeans(k, n_init=KMEANS_RESTARTS, random_state=seed).fit(means, sample_weight=count)
                       .cluster_centers_, dtype=np.float64) for seed in KMEANS_SEEDS]


def center_tree(codes: np.ndarray, stats: np.ndarray, cells: np.ndarray, centers: np.ndarray,
                center_codes: np.ndarray):
    """The nested tree (``optimal_bnb`` form) cutting ``cells`` until each leaf holds one center;
    ``centers`` in the cells' shifted coordinates, ``center_codes`` their bin codes per feature."""
    count = stats[:, 0]
    means = stats[:, 2:] / count[:, None]
    cuts: dict[int, tuple[int, int, int, int]] = {}
    todo = [(0, cells, np.arange(centers.shape[0]))]
    next_id = 1
    while todo:
        node, held, ids = todo.pop()
        if ids.size <= 1:
            continue
        f, b = _best_cut(codes, means, count, held, centers[ids], center_codes[ids])
        if f < 0:  # its centers share one bin on every feature: no edge parts them, a leaf
            continue
        left = codes[held, f] <= b
        on_left = center_codes[ids, f] <= b
        cuts[node] = (f, b, next_id, next_id + 1)
        todo.append((next_id, held[left], ids[on_left]))
        todo.append((next_id + 1, held[~left], ids[~on_left]))
        next_id += 2
    return nested_from_cuts(cuts)


def _best_cut(codes, means, count, held, centers, center_codes) -> tuple[int, int]:
    """(feature, bin) of the least nearest-center cost among cuts leaving a center on each side."""
    gaps = means[held][:, None, :] - centers[None, :, :]
    distance = count[held][:, None] * (gaps * gaps).sum(axis=2)  # (cells, centers), rows-weighted
    best, arg = np.inf, (-1, -1)
    for f in range(codes.shape[1]):
        cell_codes = codes[held, f]
        n_bins = int(max(cell_codes.max(initial=0), center_codes[:, f].max())) + 1
        order = np.argsort(center_codes[:, f], kind="stable")
        for i in range(order.size - 1):
            low, high = int(center_codes[order[i], f]), int(center_codes[order[i + 1], f])
            if low == high:  # no edge between these two centers
                continue
            left = distance[:, order[: i + 1]].min(axis=1)
            right = distance[:, order[i + 1:]].min(axis=1)
            # Cost of the cut after bin b, for b in [low, high - 1]: left cells (code <= b) at
            # their nearest left center, the others at their nearest right center.
            by_bin_left = np.cumsum(np.bincount(cell_codes, weights=left, minlength=n_bins))
            by_bin_right = np.cumsum(np.bincount(cell_codes, weights=right, minlength=n_bins))
            cost = by_bin_left[low:high] + (by_bin_right[-1] - by_bin_right[low:high])
            b = int(np.argmin(cost))
            if cost[b] < best:
                best, arg = float(cost[b]), (f, low + b)
    return arg


# --------------------------------------------------------------------------- the incumbent's leaves
def tree_cells(search: BranchAndBound, tree, cells: np.ndarray) -> list[np.ndarray]:
    """The cells of each leaf of a nested tree, left to right."""
    if tree is None:
        return [cells]
    left, right = split_cells(search.codes, cells, tree[0], tree[1])
    return tree_cells(search, tree[2], left) + tree_cells(search, tree[4], right)


def pad_leaves(search: BranchAndBound, tree, cells: np.ndarray, m: int):
    """The tree grown to ``m`` leaves by best two-leaf cuts of leaves holding several cells (a cut
    never raises the cost), as far as the cells allow."""
    while count_leaves(tree) < m:
        grown = _cut_one_leaf(search, tree, cells)
        if grown is None:
            return tree
        tree = grown
    return tree


def _cut_one_leaf(search: BranchAndBound, tree, cells: np.ndarray):
    if tree is None:
        return None if cells.shape[0] < 2 else search.best_two(search.node(cells), force=True)[1]
    left, right = split_cells(search.codes, cells, tree[0], tree[1])
    grown = _cut_one_leaf(search, tree[2], left)
    if grown is not None:
        return (tree[0], tree[1], grown, count_leaves(grown), tree[4])
    grown = _cut_one_leaf(search, tree[4], right)
    if grown is not None:
        return (tree[0], tree[1], tree[2], tree[3], grown)
    return None
