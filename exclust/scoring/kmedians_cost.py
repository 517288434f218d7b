"""k-medians costs without moving rows: per-cluster medians by bisection on histograms.

Medians do not merge across parts, so they are found by bisection: scoring's pass
(``exclust.scoring.score_pass``) gives each (group, feature) its count, mean and range; each further pass
bins every still-open (group, feature) interval (``_median_histograms.median_hist_block``) and keeps
only the bin holding the median, narrowed to the span of the points in it. The reported cost is
the exact l1 cost to a point of the final median bin (an achievable cost, so never below the
true one), with a certified lower bound; passes stop when both sides agree within the tolerance
(relative) or after the pass budget (typically below 1e-9 after 2 histogram passes).

``kmedians_costs`` prices a tree's clusters and the reference clusters (paper 002, Definition 1);
``cluster_medians`` runs the same search to the exact medians (the k-medians reference).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from exclust.errors import InputError
from exclust.scoring._median_histograms import median_hist_block
from exclust.scoring.score_pass import (
    label_chunk,
    merge_stats,
    pad2,
    pad_rows,
    prepare_labels,
    prepare_X,
    row_map_reduce,
    scored_tree,
    stats_chunk,
)
from exclust.sources.dataset import Dataset
from exclust.tree import ThresholdTree


def _hist_chunk(X, ref, truth, space, *, nodes, value, ref_mode, centers, n_tree, lo, hi, n_bins):
    """One k-medians pass on one chunk: per (group, column) histogram inside [lo, hi), rows routed
    on X, values from ``space`` (the clustering columns Z; X itself when None).

    Returns hist[group, feature, bin, (count, offset sum, smallest point, largest point)].
    """
    X = np.asarray(X, dtype=np.float64)
    Z = X if space is None else np.asarray(space, dtype=np.float64)
    return median_hist_block(X, Z, *nodes, value, label_chunk(ref), ref_mode, centers, n_tree, lo, hi, n_bins)


def _merge_hist(parts: list) -> np.ndarray:
    out = parts[0].copy()
    for h in parts[1:]:
        out[..., :2] += h[..., :2]
        np.minimum(out[..., 2], h[..., 2], out=out[..., 2])
        np.maximum(out[..., 3], h[..., 3], out=out[..., 3])
    return out


def _kmedians_bounds(state: dict) -> tuple[np.ndarray, np.ndarray]:
    """(upper, lower) l1 cost per (group, feature) from the current median bins."""
    w = state["hi"] - state["lo"]
    outside = state["below_cost"] + state["above_cost"]
    at_lo = outside + state["n_above"] * w + state["in_offset"]
    at_hi = outside + state["n_below"] * w + state["n_in"] * w - state["in_offset"]
    upper = np.minimum(at_lo, at_hi)
    lower = outside + np.minimum(state["n_above"], state["n_below"]) * w
    # When the median bin holds one point, or all its points sit on its lower edge, f is linear
    # between lo, that point and hi, so its minimum is one of the three: the cost is exact.
    single = (state["n_in"] == 1) | ((state["in_offset"] == 0) & (state["n_in"] > 0))
    x = state["lo"] + np.where(single, state["in_offset"] / np.maximum(state["n_in"], 1), 0.0)
    at_x = (state["below_cost"] + state["n_below"] * (x - state["lo"])
            + state["above_cost"] + state["n_above"] * (state["hi"] - x)
            + np.where(state["n_in"] == 1, 0.0, state["in_offset"]))
    upper = np.where(single, np.minimum(upper, at_x), upper)
    lower = np.where(single, upper, lower)
    empty = state["n"] == 0
    upper[empty] = 0.0
    lower[empty] = 0.0
    return upper, np.minimum(lower, upper)


def _refine(state: dict, active: np.ndarray, hist: np.ndarray, n_bins: int) -> None:
    """Narrow each active (group, feature) interval to the points of the bin holding its median."""
    counts, offsets, low, high = hist[..., 0], hist[..., 1], hist[..., 2], hist[..., 3]
    gi, fj = np.nonzero(active)
    c = counts[gi, fj].astype(np.float64)
    o = offsets[gi, fj]
    lo, hi = state["lo"][gi, fj], state["hi"][gi, fj]
    n_in = state["n_in"][gi, fj]
    if not np.array_equal(c.sum(axis=1), n_in):
        raise RuntimeError("the data changed between two passes of the k-medians search; score a stable input")
    b = np.arange(n_bins)
    width = (hi - lo) / n_bins
    edges = lo[:, None] + b[None, :] * width[:, None]  # bin_edge, vectorized with the same arithmetic
    edges = np.concatenate([edges, hi[:, None]], axis=1)
    n_below = state["n_below"][gi, fj]
    n_total = state["n"][gi, fj]
    cum = n_below[:, None] + np.cumsum(c, axis=1)
    star = np.argmax(cum >= n_total[:, None] / 2.0, axis=1)
    rows = np.arange(star.shape[0])
    # The next interval is the span of the points actually in the median bin: ties collapse it
    # to one value at once (exact), and gaps in the data are skipped.
    new_lo = low[gi, fj, star]
    top = high[gi, fj, star]
    new_hi = np.nextafter(top, np.inf)
    in_offset = np.where(top == new_lo, 0.0,
                         np.maximum(o[rows, star] - c[rows, star] * (new_lo - edges[rows, star]), 0.0))
    below = b[None, :] < star[:, None]
    above = b[None, :] > star[:, None]
    below_cost = state["below_cost"][gi, fj] + n_below * (new_lo - lo) + (
        (c * (new_lo[:, None] - edges[:, :-1]) - o) * below
    ).sum(axis=1)
    above_cost = state["above_cost"][gi, fj] + state["n_above"][gi, fj] * (hi - new_hi) + (
        (c * (edges[:, :-1] - new_hi[:, None]) + o) * above
    ).sum(axis=1)
    state["below_cost"][gi, fj] = below_cost
    state["above_cost"][gi, fj] = above_cost
    state["n_below"][gi, fj] = n_below + (c * below).sum(axis=1)
    state["n_above"][gi, fj] = state["n_above"][gi, fj] + (c * above).sum(axis=1)
    state["n_in"][gi, fj] = c[rows, star]
    state["in_offset"][gi, fj] = in_offset
    state["lo"][gi, fj] = new_lo
    state["hi"][gi, fj] = new_hi


def _bisect_medians(X, ref, nodes, value, ref_mode, centers, groups: dict, n_tree: int, tol: float,
                    max_passes: int, n_bins: int | None, space=None) -> dict:
    """l1 cost to per-cluster medians for the tree's clusters and the reference clusters."""
    n = groups["n"].astype(np.float64)
    G, d = groups["lo"].shape
    if n_bins is None:
        # Keep one chunk's histograms (4 arrays of 8 bytes) near 32 MB whatever K and d are.
        n_bins = int(np.clip(2**20 // max(G * d, 1), 16, 1024))
    lo = np.where(np.isfinite(groups["lo"]), groups["lo"], 0.0)
    top = np.where(np.isfinite(groups["hi"]), groups["hi"], 0.0)
    state = {
        "n": np.repeat(n[:, None], d, axis=1),
        "lo": lo,
        "hi": np.nextafter(top, np.inf),  # half-open bins: the maximum must fall inside
        "n_in": np.repeat(n[:, None], d, axis=1),
        "in_offset": np.where(lo == top, 0.0, np.maximum(n[:, None] * (groups["mean"] - lo), 0.0)),
        "n_below": np.zeros((G, d)),
        "n_above": np.zeros((G, d)),
        "below_cost": np.zeros((G, d)),
        "above_cost": np.zeros((G, d)),
    }
    sides = {"tree": slice(0, n_tree), "reference": slice(n_tree, G)}
    passes = 0
    while True:
        upper, lower = _kmedians_bounds(state)
        gaps = {}
        for name, sl in sides.items():
            u, lw = upper[sl].sum(), lower[sl].sum()
            gaps[name] = 0.0 if u - lw <= 0 else (np.inf if lw <= 0 else (u - lw) / lw)
        active = (upper - lower > 0) & (state["n_in"] > 1) & (state["n"] > 0)
        if max(gaps.values(), default=0.0) <= tol or passes >= max_passes or not active.any():
            break
        lo_arg = np.where(active, state["lo"], np.nan)
        hi_arg = np.where(active, state["hi"], np.nan)
        hist = row_map_reduce(
            _hist_chunk, _merge_hist, X, ref, None, space, nodes=nodes, value=value, ref_mode=ref_mode,
            centers=centers, n_tree=n_tree, lo=lo_arg, hi=hi_arg, n_bins=n_bins,
        )
        passes += 1
        _refine(state, active, hist, n_bins)
    out = {"passes": passes, "n_bins": n_bins, "state": state, "upper": upper}
    for name, sl in sides.items():
        out[f"{name}_upper"] = float(upper[sl].sum())
        out[f"{name}_lower"] = float(lower[sl].sum())
        out[f"{name}_gap"] = gaps[name]
    return out


def kmedians_costs(X, ref, tree: ThresholdTree, ref_mode: int, centers: np.ndarray, stats: dict, tree_moments: dict,
                   *, tol: float, max_passes: int, n_bins: int | None, space=None) -> dict[str, Any]:
    """l1 cost of the tree's clusters and of the reference clusters to their own medians, in
    ``space`` (the clustering columns Z, row-aligned with X, prepared by ``score_pass.prepare_space``;
    None: X itself); rows routed on X.

    ``stats``: scoring's merged pass (taken with ranges); ``tree_moments``: its leaves merged by
    tree cluster. Returns ``tree_upper`` / ``tree_lower`` and ``reference_upper`` /
    ``reference_lower`` (achievable cost and certified lower bound), ``tree_gap`` /
    ``reference_gap`` (relative) and ``passes`` (the histogram passes made).
    """
    d = (X if space is None else space).shape[1]
    value, leaves, n_tree = tree.value, tree.leaves, tree.n_clusters
    has_ref = ref_mode != 0
    ref_mom = stats["ref"]
    n_ref = ref_mom["n"].shape[0]
    lo_t = np.full((n_tree, d), np.inf)
    hi_t = np.full((n_tree, d), -np.inf)
    for leaf_id in leaves:
        c = value[leaf_id]
        lo_t[c] = np.minimum(lo_t[c], stats["leaf_lo"][leaf_id])
        hi_t[c] = np.maximum(hi_t[c], stats["leaf_hi"][leaf_id])
    ref_lo = pad2(stats["ref_lo"], (n_ref, d), np.inf) if has_ref else np.zeros((0, d))
    ref_hi = pad2(stats["ref_hi"], (n_ref, d), -np.inf) if has_ref else np.zeros((0, d))
    groups = {
        "n": np.concatenate([tree_moments["n"], ref_mom["n"] if has_ref else np.zeros(0, np.int64)]),
        "mean": np.concatenate([tree_moments["mean"], ref_mom["mean"] if has_ref else np.zeros((0, d))]),
        "lo": np.concatenate([lo_t, ref_lo]),
        "hi": np.concatenate([hi_t, ref_hi]),
    }
    return _bisect_medians(X, ref, scored_tree(tree, space), value, ref_mode, centers, groups, n_tree, tol,
                           max_passes, n_bins, space)


def cluster_medians(X, labels, n_clusters: int, *, max_passes: int = 64, n_bins: int | None = None) -> dict[str, Any]:
    """Per-cluster, per-feature medians of X under ``labels``, by the k-medians histogram bisection.

    The bisection of ``score``'s k-medians price, run until every median bin holds one distinct
    value (tolerance 0): the median of a cluster with n points on a feature is then its point of
    rank ceil(n/2) (the lower median; every value between the two middle points of an even
    count minimizes the l1 cost alike). ``labels``: cluster ids 0..n_clusters-1 per row, -1 left
    out; numpy, or dask (lazy labels are recomputed with each pass). Returns ``medians`` (K x d,
    NaN for an empty cluster), ``costs`` (l1 cost of each cluster to its medians), ``counts``,
    ``passes`` (1 for ranges and counts + the histogram passes) and ``exact`` (False only when
    ``max_passes`` ran out first; the medians are then points of the final median bins).
    """
    from exclust.tree.node_kinds import LEAF

    X = X.X if isinstance(X, Dataset) else X
    d = X.shape[1]
    one_leaf = ThresholdTree([LEAF], [0], [0.0], [0], [0], [0], n_features=d, n_clusters=1)
    X = prepare_X(one_leaf, X, None)
    ref = prepare_labels(labels, X, "labels")
    arrays = scored_tree(one_leaf)
    no_centers = np.zeros((0, d))
    stats = row_map_reduce(stats_chunk, merge_stats, X, ref, None, nodes=arrays, ref_mode=1,
                           centers=no_centers, track_range=True)
    K = int(n_clusters)
    if stats["ref"]["n"].shape[0] > K:
        raise InputError(f"labels go up to {stats['ref']['n'].shape[0] - 1}, beyond n_clusters={K}")
    mom = {key: pad_rows(v, K) for key, v in stats["ref"].items()}
    # The one-leaf tree is group 0, kept empty (n = 0) so that the bisection skips it.
    groups = {
        "n": np.concatenate([[0], mom["n"]]),
        "mean": np.concatenate([np.zeros((1, d)), mom["mean"]]),
        "lo": np.concatenate([np.full((1, d), np.inf), pad2(stats["ref_lo"], (K, d), np.inf)]),
        "hi": np.concatenate([np.full((1, d), -np.inf), pad2(stats["ref_hi"], (K, d), -np.inf)]),
    }
    km = _bisect_medians(X, ref, arrays, one_leaf.value, 1, no_centers, groups, 1, 0.0, max_passes, n_bins)
    state = km["state"]
    n_in, offset = state["n_in"][1:], state["in_offset"][1:]
    filled = mom["n"] > 0
    medians = np.where(filled[:, None], state["lo"][1:], np.nan)
    single = (n_in <= 1) | (offset == 0)
    return {
        "medians": medians,
        "costs": km["upper"][1:].sum(axis=1),
        "counts": mom["n"],
        "passes": 1 + km["passes"],
        "exact": bool(single[filled].all()),
    }
