"""The cost curve's per-block work, shipped to the Dask workers (or run on numpy parts): per
final tree of each prefix family, per leaf, the statistics every prefix tree's cost is summed
from, and the reference cost (see exclust.scoring.curves for the curve itself).

Apart from exclust.scoring.curves, which the job's curve planning (exclust.jobs.explain.cost_curve) reaches
with the series' estimators and scikit-learn: a worker imports this module alone (see
exclust.reference.passes).
"""
from __future__ import annotations

import numpy as np

from exclust.dataplane._center_distances import assigned_sq_distances, leaf_l1_sums, nearest_center
from exclust.scoring._score_block import forest_moments
from exclust.tree import ThresholdTree
from exclust.tree.node_kinds import LEAF, MISSING_NONE


def curve_block(X, finals: list[ThresholdTree], centers: np.ndarray, objective: str = "kmeans", nearest=None,
                space=None):
    """One part of the curve's pass.

    Per final tree of a family of prefix trees: per leaf node its statistics (column 0 the
    count; then sum of x and sum of ||x||^2 for k-means, the summed l1 distance to every center
    for k-medians) and one row of the part that reached the leaf (NaN where none did); and the
    part's cost to the nearest reference center (squared l2, or l1). ``nearest``: each row's
    nearest center in squared l2 when already known (k-means only), so the cost needs no search.
    ``space``: the part's clustering columns Z, where the statistics and the reference cost are
    taken (the centers live there); the trees route the rows on X. None: X itself.
    """
    X = np.ascontiguousarray(X, dtype=np.float64)
    Z = X if space is None else np.ascontiguousarray(space, dtype=np.float64)
    n, d = X.shape
    centers = np.ascontiguousarray(centers, dtype=np.float64)
    if objective == "kmedians":
        leaves = [np.asarray(tree.apply(X), dtype=np.int64) for tree in finals]
        width = max([t.node_count for t in finals], default=1)
        stacked = np.stack(leaves) if leaves else np.zeros((0, n), dtype=np.int64)
        sums, firsts, nearest = leaf_l1_sums(Z, stacked, width, centers)
        per_tree = [(sums[i, : t.node_count], firsts[i, : t.node_count]) for i, t in enumerate(finals)]
        ref = float(nearest)
    else:
        per_tree = []
        if finals:  # every tree in one sweep over the part's rows
            # Apart from X, a tree that learned no missing side leaves rows holding NaN unscored (its apply does).
            unrouted = np.array([space is not None and not tree.routes_missing for tree in finals])
            mom, first = forest_moments(X, Z, *forest_arrays(finals), unrouted)
            per_tree = [(mom[t, : tree.node_count], first[t, : tree.node_count]) for t, tree in enumerate(finals)]
        if not (centers.shape[0] and n):
            ref = 0.0
        elif nearest is not None:
            ref = float(assigned_sq_distances(Z, np.asarray(nearest, dtype=np.int64), centers).sum())
        else:
            ref = float(nearest_center(Z, centers)[1].sum())
    out = []
    for stats, first in per_tree:
        reps = np.full((stats.shape[0], d), np.nan)
        seen = first >= 0
        reps[seen] = X[first[seen]]
        out.append((stats, reps))
    return out, np.asarray([ref])


def forest_arrays(trees: list[ThresholdTree]) -> tuple[np.ndarray, ...]:
    """The trees' node arrays stacked, one row per tree (``tree_arrays``' order), padded with leaves:
    what ``forest_moments`` routes every row through."""
    width = max(t.node_count for t in trees)
    kind = np.full((len(trees), width), LEAF, dtype=np.int8)
    feature = np.zeros((len(trees), width), dtype=np.int64)
    threshold = np.zeros((len(trees), width))
    center = np.zeros((len(trees), width))
    left = np.zeros((len(trees), width), dtype=np.int64)
    right = np.zeros((len(trees), width), dtype=np.int64)
    missing = np.full((len(trees), width), MISSING_NONE, dtype=np.int8)
    words = max(t.category_bits.shape[1] for t in trees)
    bits = np.zeros((len(trees), width, words), dtype=np.uint64)
    for t, tree in enumerate(trees):
        m = tree.node_count
        kind[t, :m], feature[t, :m], threshold[t, :m] = tree.kind, tree.feature, tree.threshold
        center[t, :m], left[t, :m], right[t, :m] = tree.center, tree.left, tree.right
        missing[t, :m] = tree.missing_side
        bits[t, :m, : tree.category_bits.shape[1]] = tree.category_bits
    return kind, feature, threshold, center, left, right, missing, bits


def curve_block_of_columns(X, *rest):
    """``curve_block`` with columns of the pass named by ``layout`` (a tuple of "nearest", the
    k-means reference's labels that scoring reads in the same pass, and "space", the clustering
    columns Z; in the order the columns come): rest = (*columns, layout, finals, centers, objective)."""
    *columns, layout, finals, centers, objective = rest
    given = dict(zip(layout, columns, strict=True))
    return curve_block(X, finals, centers, objective, given.get("nearest"), given.get("space"))


def merge_curves(a, b):
    families = []
    for (stats_a, rep_a), (stats_b, rep_b) in zip(a[0], b[0], strict=True):
        families.append((stats_a + stats_b, np.where(np.isnan(rep_a), rep_b, rep_a)))
    return families, a[1] + b[1]
