"""Local search on all rows: a k-leaf tree improved by moves priced exactly on every row.

Each sweep is one pass (or, when the histograms of all leaves exceed
``row_statistics.HISTOGRAM_BYTES``, a few) that sums the binned moments of every leaf of the
current tree (``RowStatistics.binned_batches``). Prefix sums over the bins then price, exactly
on all rows (a cut falls on a bin edge, so the rows on each side are the bins' rows):

- every leaf's best cut (what splitting it saves),
- every "cherry" (a cut whose two children are leaves): what merging its leaves costs, and the
  best cut of their union (the cherry's cut re-chosen on all rows).

Moves, each keeping the number of leaves: re-cut a cherry; merge a cherry and split another
leaf (the leaf budget moves to where it saves most). Moves touching disjoint leaves change
disjoint terms of the cost (a sum over leaves), so every improving move of a sweep whose leaves
no better move took is applied at once: the cost falls by exactly their summed gains. The
search stops when no move improves, or when its budget (passes, seconds) is spent.

Effort per sweep: O(rows * d^2) per pass plus O(leaves * d * bins * d) on the driver; the
number of passes per sweep grows linearly with the leaves.
"""
from __future__ import annotations

import logging
import time

import numpy as np

from exclust.algorithms.search.category_cuts import Cut, best_set_split, category_points, own_cost
from exclust.algorithms.search.optimal_tree import count_leaves
from exclust.algorithms.search.row_statistics import FlatTree, RowStatistics
from exclust.tree.node_kinds import MISSING_LEFT, MISSING_RIGHT

logger = logging.getLogger("exclust")

# A move must save at least this share of the tree's cost (float sums of many rows).
MIN_GAIN = 1e-9


def best_cuts(binned: np.ndarray, mapper) -> tuple[np.ndarray, np.ndarray, list]:
    """Per leaf of ``binned`` (leaves, d, codes, p + 2): the least cost of two sides at their own
    means, its feature, and the cut (inf, -1, None where no cut leaves rows on both sides).

    A cut is a float threshold (a bin edge) on a feature without a missing bin; on a feature with
    one, a ``Cut`` whose missing side is the cheaper (``category_cuts``); on a category feature,
    its best set cut (``category_cuts.best_set_split``). Of several edges giving the same
    partition (empty bins) only the last counts."""
    m, d, bins, _ = binned.shape
    n_bins, missing_bin = mapper.n_bins, mapper.missing_bin
    values = binned.copy()
    miss = np.zeros((m, d, 1, binned.shape[-1]))
    for f in np.flatnonzero(missing_bin >= 0).tolist():
        miss[:, f, 0] = binned[:, f, missing_bin[f]]
        values[:, f, missing_bin[f]] = 0.0
    prefix = np.cumsum(values, axis=2)
    total = prefix[:, :, -1:, :]
    left_rows = prefix[..., 0]
    right_rows = total[..., 0] - left_rows
    if (missing_bin >= 0).any():
        cost_ml = own_cost(prefix + miss) + own_cost(total - prefix)
        cost_mr = own_cost(prefix) + own_cost(total - prefix + miss)
        miss_left = (cost_ml < cost_mr) | ((cost_ml == cost_mr) & (left_rows > right_rows))
        cost = np.where(miss_left, cost_ml, cost_mr)
    else:  # no missing side to choose: half the work (the driver's share of a sweep at many leaves)
        cost = own_cost(prefix) + own_cost(total - prefix)
        miss_left = left_rows > right_rows
    next_rows = np.concatenate([values[:, :, 1:, 0], np.zeros((m, d, 1))], axis=2)
    edge = np.arange(bins)[None, None, :] < (n_bins[None, :, None] - 1)
    valid = (left_rows > 0.5) & (right_rows > 0.5) & edge & (next_rows > 0.5) & ~mapper.is_category[None, :, None]
    cost = np.where(valid, cost, np.inf)
    sets: dict[tuple[int, int], Cut] = {}
    for f in np.flatnonzero(mapper.is_category).tolist():
        C = int(n_bins[f])
        for leaf in range(m):
            per = values[leaf, f, :C]
            found = best_set_split(per, miss[leaf, f, 0], own_cost, category_points(per, kmeans=True))
            if found is not None:
                cost[leaf, f, 0] = found[0]
                sets[(leaf, f)] = Cut(0.0, found[1], found[2])
    cost = cost.reshape(m, d * bins)
    flat = cost.argmin(axis=1)
    least = cost[np.arange(m), flat]
    feature, bin_ = np.divmod(flat, bins)
    found_any = np.isfinite(least)
    cuts: list = []
    for leaf in range(m):
        f, b = int(feature[leaf]), int(bin_[leaf])
        if not found_any[leaf]:
            cuts.append(None)
        elif mapper.is_category[f]:
            cuts.append(sets[(leaf, f)])
        elif missing_bin[f] >= 0:
            side = MISSING_LEFT if miss_left[leaf, f, b] else MISSING_RIGHT
            cuts.append(Cut(mapper.threshold(f, b), (), side))
        else:
            cuts.append(mapper.threshold(f, b))
    return least, np.where(found_any, feature, -1), cuts


def cherries(flat: FlatTree) -> np.ndarray:
    """Nodes whose two children are leaves."""
    cuts = np.flatnonzero(flat.left >= 0)
    both = (flat.left[flat.left[cuts]] < 0) & (flat.left[flat.right[cuts]] < 0)
    return cuts[both]


def sweep(stats: RowStatistics, nested) -> tuple[float, list, FlatTree]:
    """One sweep: the tree's cost on all rows, the improving moves (best first) as (gain, leaves
    used, merged cut or -1, (node cut, feature, bin), whether it re-cuts a cherry), and the
    flat tree they refer to."""
    flat = FlatTree.of(nested)
    twins = cherries(flat)
    # Cherries' two leaves side by side, so that they share a batch (their union's histogram).
    in_pairs = np.stack([flat.leaf_id[flat.left[twins]], flat.leaf_id[flat.right[twins]]], axis=1).ravel()
    order = np.concatenate([in_pairs, np.setdiff1d(np.arange(flat.n_leaves), in_pairs)]).astype(np.int64)
    mapper = stats.mapper
    leaf_total = np.zeros((flat.n_leaves, stats.p + 2))
    split_cost = np.full(flat.n_leaves, np.inf)
    split_feature = np.full(flat.n_leaves, -1, dtype=np.int64)
    split_cut: list = [None] * flat.n_leaves
    recut = {}
    for chosen, binned in stats.binned_batches(flat, order):
        leaf_total[chosen] = binned[:, 0].sum(axis=1)
        cost, f, cut = best_cuts(binned, mapper)
        split_cost[chosen], split_feature[chosen] = cost, f
        for leaf, one in zip(chosen.tolist(), cut, strict=True):
            split_cut[leaf] = one
        position = {int(leaf): i for i, leaf in enumerate(chosen)}
        for c in twins:
            a, z = int(flat.leaf_id[flat.left[c]]), int(flat.leaf_id[flat.right[c]])
            if a in position and z in position:
                union = binned[position[a]] + binned[position[z]]
                least, feature, union_cut = best_cuts(union[None], mapper)
                recut[int(c)] = (float(least[0]), int(feature[0]), union_cut[0])
    leaf_cost = own_cost(leaf_total)
    total = float(leaf_cost.sum())
    tol = MIN_GAIN * max(total, 1e-300)
    moves: list[tuple] = []
    split_gain = np.where(split_feature >= 0, leaf_cost - split_cost, -np.inf)
    for c in twins:
        a, z = int(flat.leaf_id[flat.left[c]]), int(flat.leaf_id[flat.right[c]])
        pair = leaf_cost[a] + leaf_cost[z]
        cost_u, f_u, cut_u = recut[int(c)]
        if f_u >= 0 and pair - cost_u > tol:
            moves.append((pair - cost_u, (a, z), -1, (int(c), f_u, cut_u), True))
        merge = float(own_cost(leaf_total[a] + leaf_total[z])) - pair
        gains = split_gain - merge
        gains[[a, z]] = -np.inf
        for leaf in np.flatnonzero(gains > tol):
            moves.append((float(gains[leaf]), (a, z, int(leaf)), int(c),
                          (int(flat.leaf_node[leaf]), int(split_feature[leaf]), split_cut[leaf]), False))
    moves.sort(key=lambda m: (-m[0], m[1]))
    return total, moves, flat


def apply_moves(flat: FlatTree, moves: list) -> tuple[object, float, int]:
    """The tree after every move whose leaves no better move took: (nested tree, summed gain,
    moves applied)."""
    used: set = set()
    merged: set = set()
    split: dict = {}
    gained, applied = 0.0, 0
    for gain, leaves, merge, (node, f, t), is_recut in moves:
        if used.intersection(leaves):
            continue
        used.update(leaves)
        if is_recut:  # the cherry's cut re-chosen: merge it, then cut the merged leaf
            merged.add(node)
            split[("recut", node)] = (f, t)
        else:
            merged.add(merge)
            split[node] = (f, t)
        gained += gain
        applied += 1
    nested = _rebuild_with_recuts(flat, merged, split)
    return nested, gained, applied


def _rebuild_with_recuts(flat: FlatTree, merged: set, split: dict, node: int = 0):
    if node in merged:
        recut = split.get(("recut", node))
        return None if recut is None else (int(recut[0]), recut[1], None, 1, None)
    if flat.left[node] < 0:
        if node in split:
            f, t = split[node]
            return (int(f), t, None, 1, None)
        return None
    lo = _rebuild_with_recuts(flat, merged, split, int(flat.left[node]))
    return (int(flat.feature[node]), flat.cuts[node], lo, count_leaves(lo),
            _rebuild_with_recuts(flat, merged, split, int(flat.right[node])))


def improve(stats: RowStatistics, nested, max_passes: int | None, max_seconds: float | None,
            label: str = "TreeSearch", min_share: float = 0.0) -> tuple[object, list[float]]:
    """Sweeps while a move improves and the budget lasts; returns (tree, the cost before each
    sweep). A sweep is started only when its passes fit in ``max_passes`` and the time spent is
    below ``max_seconds``, and the previous sweep's moves saved at least ``min_share`` of the
    cost; the tree returned costs at most the tree given."""
    start = time.perf_counter()
    spent = 0
    history: list[float] = []
    while True:
        need = stats.passes_per_sweep(count_leaves(nested))
        if max_passes is not None and spent + need > max_passes:
            break
        if max_seconds is not None and time.perf_counter() - start >= max_seconds:
            break
        total, moves, flat = sweep(stats, nested)
        spent += need
        history.append(total)
        if not moves:
            break
        nested, gained, applied = apply_moves(flat, moves)
        logger.info("%s on all rows: sweep %d (%d passes, %.1f s): cost %.6g, %d moves save %.3g%%", label,
                    len(history), spent, time.perf_counter() - start, total, applied, 100 * gained / max(total, 1e-300))
        if gained < min_share * total:  # what is left to gain is small: the passes go unspent
            break
    return nested, history
