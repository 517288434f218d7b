"""The search family's cuts on category features and missing values (issue 28): TreeSearch, LabelTree.

A nested tree's cut (``(feature, cut, left, ...)``) is either a float, the threshold of a numeric
cut on a feature without missing values (where no row needs a missing side; the final tree gives
such a cut the side of its larger child, as scikit-learn does), or a ``Cut``: a numeric cut with
a learned missing side, or a set cut (the category codes going left, and the side of NaN and of
categories never seen).

Set cuts: a side's cost is a function of its rows' statistics summed (the k-means moments, or
the rows per cluster for mistakes), so a partition of the categories is priced from per-category
sums. Exact over every partition when the node holds at most ``EXACT_CATEGORIES`` categories;
beyond, the categories are ordered Fisher-style (``cut_search.leading_direction_order``: their
rows' means, or their rows' shares over the clusters, projected on the leading principal
direction) and only the prefixes of that order are tried. Every partition is priced with the
missing rows on each side, the cheaper kept (a tie: the side with more rows); categories without
rows at the node go with the larger side.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from exclust.algorithms.histogram.cut_search import leading_direction_order
from exclust.tree.node_kinds import MISSING_LEFT, MISSING_NONE, MISSING_RIGHT, UNSEEN_CATEGORY

EXACT_CATEGORIES = 8  # every partition of at most this many categories (2^7 - 1 = 127 of them)


@dataclass(frozen=True)
class Cut:
    """A cut beyond a plain threshold: ``codes`` (non-empty: a set cut, the codes going left) or
    ``threshold`` (numeric: ``x <= threshold`` goes left), and where missing values go."""

    threshold: float
    codes: tuple[int, ...] = ()
    missing_side: int = MISSING_NONE

    @property
    def is_set(self) -> bool:
        return bool(self.codes)


def cut_order(cut) -> tuple:
    """A sort key over floats and ``Cut``s (candidate lists mix them)."""
    if isinstance(cut, Cut):
        return (1, cut.threshold, cut.codes, cut.missing_side)
    return (0, float(cut), (), 0)


def goes_left(values: np.ndarray, cut) -> np.ndarray:
    """Whether each raw value of the cut's feature goes left (NaN, and at a set cut an unseen
    category, to the missing side; at a float cut NaN goes right)."""
    values = np.asarray(values)
    if not isinstance(cut, Cut):
        return values <= cut
    missing = np.isnan(values)
    if cut.is_set:
        missing |= values == UNSEEN_CATEGORY
        left = np.isin(values, cut.codes)
    else:
        left = values <= cut.threshold
    return np.where(missing, cut.missing_side == MISSING_LEFT, left)


# --------------------------------------------------------------------------- costs of a side
def own_cost(moments: np.ndarray) -> np.ndarray:
    """k-means cost at their own mean of the rows whose moments (..., p + 2) are given:
    count, summed coordinates, summed squared norm."""
    n = moments[..., 0]
    sums = moments[..., 1:-1]
    with np.errstate(invalid="ignore", divide="ignore"):
        cost = moments[..., -1] - np.einsum("...i,...i->...", sums, sums) / n
    return np.where(n > 0, np.maximum(cost, 0.0), 0.0)


def kmeans_side_cost(centers: np.ndarray | None):
    """The cost of a side from its moments: at its own mean (``centers`` None or empty), else at
    the cheapest of ``centers`` (moved as the moments are)."""
    if centers is None or centers.shape[0] == 0:
        return own_cost
    center_sq = (centers ** 2).sum(axis=1)

    def at_centers(moments: np.ndarray) -> np.ndarray:
        dots = moments[..., 1:-1] @ centers.T
        costs = moments[..., -1:] - 2.0 * dots + moments[..., :1] * center_sq
        return np.maximum(costs.min(axis=-1), 0.0)

    return at_centers


def mistakes_side_cost(counts: np.ndarray) -> np.ndarray:
    """Rows of a side not of its majority cluster, from its rows per cluster (..., K)."""
    return counts.sum(axis=-1) - counts.max(axis=-1)


def moments_of(Y: np.ndarray) -> np.ndarray:
    """Each row's moments (count 1, coordinates, squared norm), shape (rows, p + 2)."""
    return np.column_stack([np.ones(Y.shape[0]), Y, np.einsum("ij,ij->i", Y, Y)])


# --------------------------------------------------------------------------- set cuts
def best_set_split(stats: np.ndarray, missing: np.ndarray, side_cost, points: np.ndarray
                   ) -> tuple[float, tuple[int, ...], int] | None:
    """The cheapest set cut of one category feature at one node: (cost, codes going left, missing side).

    ``stats`` (C, q): per category the summed statistics whose first column counts rows (for
    ``side_cost``); ``missing`` (q,): the missing rows'; ``points`` (C, r): what orders the
    categories beyond ``EXACT_CATEGORIES`` (their means, or shares over the clusters). None when
    fewer than two categories hold rows."""
    held = np.flatnonzero(stats[:, 0] > 0.5)
    if held.size < 2:
        return None
    if held.size <= EXACT_CATEGORIES:
        # Every partition once: the first held category stays left (mirrors cost the same).
        parts = np.array([(True, *p) for p in itertools.product((True, False), repeat=held.size - 1) if not all(p)])
    else:
        order = leading_direction_order(points[held], stats[held, 0], held)
        rank = np.empty(held.size, dtype=np.int64)
        rank[np.searchsorted(held, order)] = np.arange(held.size)
        parts = rank[None, :] < np.arange(1, held.size)[:, None]
    left = parts.astype(np.float64) @ stats[held]
    right = stats[held].sum(axis=0) - left
    cost_ml = side_cost(left + missing) + side_cost(right)
    cost_mr = side_cost(left) + side_cost(right + missing)
    send_left = (cost_ml < cost_mr) | ((cost_ml == cost_mr) & (left[:, 0] > right[:, 0]))
    cost = np.where(send_left, cost_ml, cost_mr)
    best = int(np.argmin(cost))
    go_left = np.zeros(stats.shape[0], dtype=bool)
    go_left[held] = parts[best]
    go_left[stats[:, 0] <= 0.5] = left[best, 0] > right[best, 0]  # no rows here: with the larger side
    side = MISSING_LEFT if send_left[best] else MISSING_RIGHT
    return float(cost[best]), tuple(np.flatnonzero(go_left).tolist()), side


def category_stats(codes: np.ndarray, stats: np.ndarray, n_categories: int) -> tuple[np.ndarray, np.ndarray]:
    """Per category code the summed ``stats`` rows (C, q), and the missing rows' (NaN or not a
    code of the vocabulary), from a column of raw category codes."""
    valid = np.isfinite(codes) & (codes >= 0) & (codes < n_categories)
    per = np.zeros((n_categories, stats.shape[1]))
    np.add.at(per, codes[valid].astype(np.int64), stats[valid])
    return per, stats[~valid].sum(axis=0)


def category_points(per: np.ndarray, kmeans: bool) -> np.ndarray:
    """What orders the categories: their rows' mean (k-means moments) or shares over the clusters."""
    rows = np.maximum(per[:, 0] if kmeans else per.sum(axis=1), 1.0)[:, None]
    return (per[:, 1:-1] if kmeans else per) / rows


def numeric_cuts_with_missing(values: np.ndarray, stats: np.ndarray, side_cost, how_many: int
                              ) -> list[tuple[float, Cut]]:
    """The ``how_many`` cheapest threshold cuts of a numeric column holding NaN, each with the
    missing rows on their cheaper side: (cost, Cut), cheapest first; midpoints between the
    distinct values."""
    missing = np.isnan(values)
    distinct, inverse = np.unique(values[~missing], return_inverse=True)
    if distinct.size < 2:
        return []
    per = np.zeros((distinct.size, stats.shape[1]))
    np.add.at(per, inverse, stats[~missing])
    left = np.cumsum(per, axis=0)[:-1]
    right = per.sum(axis=0) - left
    miss = stats[missing].sum(axis=0)
    cost_ml = side_cost(left + miss) + side_cost(right)
    cost_mr = side_cost(left) + side_cost(right + miss)
    send_left = (cost_ml < cost_mr) | ((cost_ml == cost_mr) & (left[:, 0] > right[:, 0]))
    cost = np.where(send_left, cost_ml, cost_mr)
    pick = np.argsort(cost, kind="stable")[:how_many]
    return [(float(cost[i]), Cut(float((distinct[i] + distinct[i + 1]) / 2.0), (),
                                 MISSING_LEFT if send_left[i] else MISSING_RIGHT)) for i in pick]


def special_cuts(values: np.ndarray, stats: np.ndarray, n_categories: int, side_cost, how_many: int,
                 kmeans: bool) -> list[tuple[float, Cut]]:
    """The candidate cuts of one feature that holds categories (``n_categories`` > 0: its best set
    cut) or missing values (its ``how_many`` cheapest thresholds), from the node's raw column and
    per-row statistics."""
    if n_categories:
        per, miss = category_stats(values, stats, n_categories)
        found = best_set_split(per, miss, side_cost, category_points(per, kmeans))
        return [] if found is None else [(found[0], Cut(0.0, found[1], found[2]))]
    return numeric_cuts_with_missing(values, stats, side_cost, how_many)


# --------------------------------------------------------------------------- the final tree
def nested_to_threshold_tree(nested, values, leaf_rows, missing_features, *, n_features: int, feature_names,
                             n_clusters: int, categories: dict, meta: dict):
    """A nested tree ``(feature, cut, left, left's leaves, right)`` as a ThresholdTree, nodes
    numbered in preorder (as ``optimal_tree.nested_to_tree``), leaves left to right naming
    ``values`` and holding ``leaf_rows`` rows. A ``Cut`` keeps its missing side; a float cut
    sends missing values right on a feature of ``missing_features`` (bool per feature: as its
    rows were routed when priced), elsewhere to its child with more rows (a default, not learned:
    ``MISSING_AT_FIT`` lists the features that could hold missing values)."""
    from exclust.tree import CATEGORY_SET, LEAF, ONE_SIDED, ThresholdTree
    from exclust.tree.node_kinds import MISSING_AT_FIT

    kind: list[int] = []
    feature: list[int] = []
    threshold: list[float] = []
    left: list[int] = []
    right: list[int] = []
    value: list[int] = []
    side: list[int] = []
    codes: list[tuple[int, ...]] = []
    next_leaf = [0]

    def add(node) -> tuple[int, float]:
        """(node id, rows reaching it)."""
        i = len(kind)
        kind.append(LEAF)
        threshold.append(np.nan)
        codes.append(())
        for column, empty in ((feature, -1), (left, -1), (right, -1), (value, -1), (side, MISSING_NONE)):
            column.append(empty)
        if node is None:
            value[i] = int(values[next_leaf[0]])
            next_leaf[0] += 1
            return i, float(leaf_rows[next_leaf[0] - 1])
        f, cut, sub_left, _, sub_right = node
        feature[i] = int(f)
        left[i], rows_left = add(sub_left)
        right[i], rows_right = add(sub_right)
        if isinstance(cut, Cut):
            side[i] = cut.missing_side
            if cut.is_set:
                kind[i], codes[i] = CATEGORY_SET, cut.codes
            else:
                kind[i], threshold[i] = ONE_SIDED, cut.threshold
        else:
            kind[i], threshold[i] = ONE_SIDED, float(cut)
            larger = MISSING_LEFT if rows_left > rows_right else MISSING_RIGHT
            side[i] = MISSING_RIGHT if missing_features[int(f)] else larger
        return i, rows_left + rows_right

    add(nested)
    tree = ThresholdTree(kind, feature, threshold, left, right, value, n_features=n_features,
                         feature_names=feature_names, n_clusters=n_clusters, meta=meta, missing_side=side,
                         left_categories=codes, categories=categories)
    tree.meta[MISSING_AT_FIT] = [tree.feature_names[f] for f in np.flatnonzero(missing_features).tolist()]
    return tree
