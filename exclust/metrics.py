"""How good is an explanation tree: prices of explainability, surrogate cost, error rate, ARI.

`score` routes every point through a `ThresholdTree` and compares the tree's clustering with a
reference clustering (labels, or the nearest of fixed centers) and with ground truth. Everything
but the k-medians price comes from ONE pass over the data: a numba kernel per chunk accumulates
per-leaf and per-reference-cluster count / mean / scatter and the contingency tables; the small
per-chunk results are merged in a tree reduction (exact, order-independent formulas for means and
scatter). Nothing row-sized reaches the driver.

Definitions (n points x_1..x_n; a "cluster" is a set of points; costs are sums, not means):

- k-means cost of a clustering: sum over clusters C of sum_{x in C} ||x - mean(C)||^2.
  ``price_kmeans`` = cost of the tree's clusters / cost of the reference clusters (each cluster
  scored by its own mean; DESIGN.md "Metrics").
- Surrogate cost (paper 003, Definition 1), given fixed centers mu_1..mu_k: sum over the tree's
  LEAVES L of min_i sum_{x in L} ||x - mu_i||^2 (each leaf takes its best center, as ExKMC
  labels leaves). ``surrogate_cost_tree_by_label`` instead scores each leaf against the center
  its value names. Reference surrogate cost: sum_x ||x - mu_{r(x)}||^2 with r(x) the reference
  label (or the nearest center when no labels are given; then it is the k-means cost of the
  centers, the value ExKMC converges to). ``surrogate_price`` = tree / reference.
- k-medians price (paper 002, Definition 1, on the sample): l1 cost of the tree's clusters to
  their own coordinate-wise medians / the same for the reference clusters.
- ``error_rate``: share of points whose tree cluster (leaf value) differs from their reference
  label (paper 002, Section 2.3); leaf values are reference cluster ids.
- ARI as in scikit-learn's ``adjusted_rand_score``, from contingency tables.

Noise: a reference label of -1 (or NaN) marks noise (DBSCAN). Noise points are left out of every
reference-relative number, on BOTH sides: prices, surrogate costs, error rate, ARI vs reference
(so both costs of a price are over the same points). A ground-truth label of -1 (or NaN) leaves
the point out of the truth tables only.

k-medians: medians do not merge across chunks, so they are found by bisection on histograms:
pass 2 bins each (cluster, feature) between its min and max (taken in pass 1), each later pass
re-bins only the bin holding the median. The reported cost is the exact l1 cost to a point of
the final median bin (an achievable cost, so never below the true one), and a certified lower
bound comes with it; passes stop when both sides are within ``kmedians_tol`` (relative) or
after ``max_kmedians_passes``. ``kmedians_relative_gap`` says how close they came (typically
below 1e-9 after 2 histogram passes).
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from exclust._kernels_score import label_span, median_hist_block, score_block
from exclust.data import Dataset, InputError
from exclust.parts import align, is_lazy
from exclust.tree import ThresholdTree

# Label ids become array indices; a larger id is almost always an un-encoded category.
MAX_LABEL = 1_000_000


# --------------------------------------------------------------------------- ARI
def pair_confusion_from_contingency(table: np.ndarray) -> tuple[int, int, int, int]:
    """(tn, fp, fn, tp) pair counts of a contingency table, as exact Python integers."""
    table = np.asarray(table, dtype=np.int64)
    n = int(table.sum())
    rows = table.sum(axis=1)
    cols = table.sum(axis=0)
    sum_squares = int((table.astype(object) ** 2).sum()) if table.size else 0
    tp = sum_squares - n
    fp = int((table.astype(object) @ cols.astype(object)).sum()) - sum_squares if table.size else 0
    fn = int((table.T.astype(object) @ rows.astype(object)).sum()) - sum_squares if table.size else 0
    tn = n * n - fp - fn - sum_squares
    return tn, fp, fn, tp


def adjusted_rand_from_contingency(table: np.ndarray) -> float:
    """Adjusted Rand index of the two labellings behind a contingency table (as scikit-learn)."""
    tn, fp, fn, tp = pair_confusion_from_contingency(table)
    if fn == 0 and fp == 0:  # full agreement, or no pairs at all
        return 1.0
    return 2.0 * (tp * tn - fn * fp) / ((tp + fn) * (fn + tn) + (tp + fp) * (fp + tn))


# --------------------------------------------------------------------------- moments
def _moments(n: np.ndarray, sums: np.ndarray, squares: np.ndarray, shift: np.ndarray) -> dict:
    """Count, mean and scatter (sum of squared distances to the mean) from shifted sums."""
    safe = np.maximum(n, 1)[:, None]
    centred = sums / safe
    scatter = squares - (sums * centred).sum(axis=1)
    return {"n": n, "mean": shift[None, :] + centred * (n[:, None] > 0), "m2": np.maximum(scatter, 0.0)}


def _pad_rows(a: np.ndarray, rows: int, fill=0) -> np.ndarray:
    if a.shape[0] == rows:
        return a
    out = np.full((rows,) + a.shape[1:], fill, dtype=a.dtype)
    out[: a.shape[0]] = a
    return out


def _merge_moments(a: dict, b: dict) -> dict:
    """Chan et al.'s pairwise update: exact, and stable where sum(x^2) - n mean^2 is not."""
    rows = max(a["n"].shape[0], b["n"].shape[0])
    na, nb = _pad_rows(a["n"], rows), _pad_rows(b["n"], rows)
    ma, mb = _pad_rows(a["mean"], rows), _pad_rows(b["mean"], rows)
    n = na + nb
    safe = np.maximum(n, 1)
    delta = mb - ma
    mean = ma + delta * (nb / safe)[:, None]
    m2 = _pad_rows(a["m2"], rows) + _pad_rows(b["m2"], rows) + (delta**2).sum(axis=1) * (na * nb / safe)
    return {"n": n, "mean": mean, "m2": m2}


def _group_moments(mom: dict, group: np.ndarray, n_groups: int) -> dict:
    """Merge rows of ``mom`` that share a group id (leaves of one tree cluster)."""
    d = mom["mean"].shape[1]
    out = {"n": np.zeros(n_groups, np.int64), "mean": np.zeros((n_groups, d)), "m2": np.zeros(n_groups)}
    for row, g in enumerate(group):
        one = {"n": mom["n"][row : row + 1], "mean": mom["mean"][row : row + 1], "m2": mom["m2"][row : row + 1]}
        cur = {"n": out["n"][g : g + 1], "mean": out["mean"][g : g + 1], "m2": out["m2"][g : g + 1]}
        merged = _merge_moments(cur, one)
        out["n"][g], out["mean"][g], out["m2"][g] = merged["n"][0], merged["mean"][0], merged["m2"][0]
    return out


def _squared_distances_to_centers(mom: dict, centers: np.ndarray) -> np.ndarray:
    """groups x centers: sum over a group's points of ||x - mu||^2 = scatter + n ||mean - mu||^2."""
    diff = mom["mean"][:, None, :] - centers[None, :, :]
    return mom["m2"][:, None] + mom["n"][:, None] * (diff**2).sum(axis=2)


# --------------------------------------------------------------------------- chunk functions
_NO_LABELS = np.empty(0, dtype=np.float64)


def _label_chunk(labels) -> np.ndarray:
    if labels is None:
        return _NO_LABELS
    return np.asarray(labels).reshape(-1)


def _label_count(labels: np.ndarray, what: str) -> int:
    top, bad = label_span(labels)
    if bad:
        raise InputError(
            f"{bad} {what} value(s) are neither integers >= 0 nor -1/NaN (noise); "
            "encode labels as 0..K-1 (for example with numpy.unique(..., return_inverse=True))"
        )
    if top >= MAX_LABEL:
        raise InputError(f"{what} go up to {top}; encode them as 0..K-1 before scoring")
    return int(top) + 1


def _stats_chunk(X, ref, truth, *, tree_arrays, ref_mode, centers, track_range) -> dict:
    """Pass 1 on one chunk: per-leaf / per-reference statistics and contingency tables."""
    X = np.asarray(X, dtype=np.float64)
    ref = _label_chunk(ref)
    truth = _label_chunk(truth)
    n_ref = _label_count(ref, "reference labels") if ref_mode == 1 else (centers.shape[0] if ref_mode == 2 else 0)
    n_truth = _label_count(truth, "ground-truth labels") if truth.shape[0] else 0
    shift = X[0].copy() if X.shape[0] else np.zeros(X.shape[1])
    (leaf_n, leaf_s, leaf_q, ref_n, ref_s, ref_q, leaf_ref, leaf_truth, ref_truth,
     leaf_lo, leaf_hi, ref_lo, ref_hi) = score_block(
        X, *tree_arrays, ref, ref_mode, n_ref, truth, truth.shape[0] > 0, n_truth, centers, shift, track_range
    )
    return {
        "rows": X.shape[0],
        "leaf": _moments(leaf_n, leaf_s, leaf_q, shift),
        "ref": _moments(ref_n, ref_s, ref_q, shift),
        "leaf_ref": leaf_ref,
        "leaf_truth": leaf_truth,
        "ref_truth": ref_truth,
        "leaf_lo": leaf_lo,
        "leaf_hi": leaf_hi,
        "ref_lo": ref_lo,
        "ref_hi": ref_hi,
    }


def _pad2(a: np.ndarray, shape: tuple[int, int], fill=0) -> np.ndarray:
    if a.shape == shape:
        return a
    out = np.full(shape, fill, dtype=a.dtype)
    out[: a.shape[0], : a.shape[1]] = a
    return out


def _merge_stats(parts: list[dict]) -> dict:
    """Merge pass-1 results of several chunks (any order, any grouping)."""
    out = parts[0]
    for p in parts[1:]:
        tables = {}
        for key in ("leaf_ref", "leaf_truth", "ref_truth"):
            shape = tuple(max(s, t) for s, t in zip(out[key].shape, p[key].shape))
            tables[key] = _pad2(out[key], shape) + _pad2(p[key], shape)
        ranges = {}
        for key, fill, op in (("leaf_lo", np.inf, np.minimum), ("leaf_hi", -np.inf, np.maximum),
                              ("ref_lo", np.inf, np.minimum), ("ref_hi", -np.inf, np.maximum)):
            shape = tuple(max(s, t) for s, t in zip(out[key].shape, p[key].shape))
            ranges[key] = op(_pad2(out[key], shape, fill), _pad2(p[key], shape, fill))
        out = {
            "rows": out["rows"] + p["rows"],
            "leaf": _merge_moments(out["leaf"], p["leaf"]),
            "ref": _merge_moments(out["ref"], p["ref"]),
            **tables,
            **ranges,
        }
    return out


def _hist_chunk(X, ref, truth, *, tree_arrays, value, ref_mode, centers, n_tree, lo, hi, n_bins):
    """One k-medians pass on one chunk: per (group, feature) histogram inside [lo, hi).

    Returns hist[group, feature, bin, (count, offset sum, smallest point, largest point)].
    """
    X = np.asarray(X, dtype=np.float64)
    return median_hist_block(X, *tree_arrays, value, _label_chunk(ref), ref_mode, centers, n_tree, lo, hi, n_bins)


def _merge_hist(parts: list) -> np.ndarray:
    out = parts[0].copy()
    for h in parts[1:]:
        out[..., :2] += h[..., :2]
        np.minimum(out[..., 2], h[..., 2], out=out[..., 2])
        np.maximum(out[..., 3], h[..., 3], out=out[..., 3])
    return out


def _call_with_optional_labels(block, *rest):
    *columns, present, func, params = rest
    given = iter(columns)
    ref, truth = (next(given) if has else None for has in present)
    return func(block, ref, truth, **params)


def _merge_pair(merge: Callable, a, b):
    return merge([a, b])


def row_reduction(func: Callable, merge: Callable, ref, truth, **params):
    """``func(X_part, ref_part, truth_part, **params)`` as one reduction of a pass
    (``exclust.parts``): parts merged with ``merge([a, b])``; absent labels come as None."""
    import functools

    from exclust.parts import Reduction

    present = (ref is not None, truth is not None)
    columns = [c for c in (ref, truth) if c is not None]
    return Reduction(_call_with_optional_labels, columns, (present, func, params), functools.partial(_merge_pair, merge))


def row_map_reduce(func: Callable, merge: Callable, X, ref, truth, **params):
    """``func(X_part, ref_part, truth_part, **params)`` on every row part, merged up a tree: one pass."""
    from exclust.parts import run_reductions

    return run_reductions(X, [row_reduction(func, merge, ref, truth, **params)])[0]


# --------------------------------------------------------------------------- input
def _prepare_X(tree: ThresholdTree, X, feature_names: Sequence[str] | None):
    import pandas as pd

    if isinstance(X, Dataset):
        if feature_names is None:
            feature_names = X.feature_names
        X = X.X
    if isinstance(X, pd.DataFrame):
        wanted = list(feature_names) if feature_names is not None else list(tree.feature_names)
        missing = [c for c in wanted if c not in X.columns]
        if missing:
            raise InputError(f"columns {missing} of the tree are missing from the DataFrame; columns are {list(X.columns)}")
        X = X[wanted].to_numpy(dtype=np.float64)
        feature_names = wanted
    if feature_names is not None and list(feature_names) != list(tree.feature_names):
        raise InputError(
            f"the data's features {list(feature_names)} differ from the tree's {list(tree.feature_names)}; "
            "pass the columns the tree was built on, in the same order"
        )
    if is_lazy(X):
        if X.dtype != np.float64:
            X = X.astype(np.float64)
        if X.ndim == 2 and X.numblocks[1] != 1:
            X = X.rechunk({1: -1})
        if X.ndim == 2 and any(np.isnan(c) for c in X.chunks[0]):
            X = X.compute_chunk_sizes()
    else:
        X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2 or X.shape[1] != tree.n_features:
        raise InputError(
            f"the tree was built on {tree.n_features} features ({', '.join(tree.feature_names[:6])}); "
            f"got data of shape {X.shape}"
        )
    if X.shape[0] == 0:
        raise InputError("no rows to score")
    return X


def _prepare_labels(labels, X, what: str):
    """Labels as a 1-D array of X's kind, row-aligned with X's chunks (None stays None)."""
    if labels is None:
        return None
    import pandas as pd

    if isinstance(labels, (pd.Series, pd.Index)):
        labels = labels.to_numpy()
    if not is_lazy(labels):
        labels = np.asarray(labels)
    if labels.ndim == 2 and labels.shape[1] == 1:
        labels = labels[:, 0]
    if labels.ndim != 1:
        raise InputError(f"{what} must be one-dimensional, got shape {labels.shape}")
    if not is_lazy(labels):
        labels = np.asarray(labels)
        if not np.issubdtype(labels.dtype, np.number) and labels.dtype != bool:
            raise InputError(f"{what} must be numeric ids 0..K-1 (-1 for noise), got dtype {labels.dtype}")
    return align(labels, X, what)


def _prepare_centers(centers, d: int) -> np.ndarray | None:
    if centers is None:
        return None
    for attr in ("means", "cluster_centers_", "means_"):
        if hasattr(centers, attr) and not isinstance(centers, np.ndarray):
            centers = getattr(centers, attr)
            break
    centers = np.asarray(centers, dtype=np.float64)
    if centers.ndim != 2 or centers.shape[1] != d or centers.shape[0] == 0:
        raise InputError(f"centers must be a (K, {d}) array, got shape {centers.shape}")
    if not np.isfinite(centers).all():
        raise InputError("centers hold NaN or infinite values")
    return centers


# --------------------------------------------------------------------------- k-medians
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
    in_offset = np.where(top == new_lo, 0.0, np.maximum(o[rows, star] - c[rows, star] * (new_lo - edges[rows, star]), 0.0))
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


def _kmedians(X, ref, tree_arrays, value, ref_mode, centers, groups: dict, n_tree: int, tol: float,
              max_passes: int, n_bins: int | None) -> dict:
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
            _hist_chunk, _merge_hist, X, ref, None, tree_arrays=tree_arrays, value=value, ref_mode=ref_mode,
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
    from exclust._kernels import LEAF

    X = X.X if isinstance(X, Dataset) else X
    d = X.shape[1]
    one_leaf = ThresholdTree([LEAF], [0], [0.0], [0], [0], [0], n_features=d, n_clusters=1)
    X = _prepare_X(one_leaf, X, None)
    ref = _prepare_labels(labels, X, "labels")
    tree_arrays = (one_leaf.kind, one_leaf.feature, one_leaf.threshold, one_leaf.center, one_leaf.left, one_leaf.right)
    no_centers = np.zeros((0, d))
    stats = row_map_reduce(_stats_chunk, _merge_stats, X, ref, None, tree_arrays=tree_arrays, ref_mode=1,
                           centers=no_centers, track_range=True)
    K = int(n_clusters)
    if stats["ref"]["n"].shape[0] > K:
        raise InputError(f"labels go up to {stats['ref']['n'].shape[0] - 1}, beyond n_clusters={K}")
    mom = {key: _pad_rows(v, K) for key, v in stats["ref"].items()}
    # The one-leaf tree is group 0, kept empty (n = 0) so that the bisection skips it.
    groups = {
        "n": np.concatenate([[0], mom["n"]]),
        "mean": np.concatenate([np.zeros((1, d)), mom["mean"]]),
        "lo": np.concatenate([np.full((1, d), np.inf), _pad2(stats["ref_lo"], (K, d), np.inf)]),
        "hi": np.concatenate([np.full((1, d), -np.inf), _pad2(stats["ref_hi"], (K, d), -np.inf)]),
    }
    km = _kmedians(X, ref, tree_arrays, one_leaf.value, 1, no_centers, groups, 1, 0.0, max_passes, n_bins)
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


# --------------------------------------------------------------------------- score
def _ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None:
        return None
    if b == 0:
        return 1.0 if a == 0 else float("inf")
    return float(a / b)


def score(
    tree: ThresholdTree,
    X,
    reference_labels=None,
    centers=None,
    y_true=None,
    *,
    kmedians: bool = True,
    feature_names: Sequence[str] | None = None,
    kmedians_tol: float = 1e-6,
    max_kmedians_passes: int = 4,
    kmedians_bins: int | None = None,
) -> dict[str, Any]:
    """Score a tree's clustering of X against reference labels / centers and ground truth
    (``score_with`` without other reductions; see there)."""
    return score_with(
        tree, X, reference_labels, centers, y_true, kmedians=kmedians, feature_names=feature_names,
        kmedians_tol=kmedians_tol, max_kmedians_passes=max_kmedians_passes, kmedians_bins=kmedians_bins,
    )[0]


def score_with(
    tree: ThresholdTree,
    X,
    reference_labels=None,
    centers=None,
    y_true=None,
    *,
    also: Sequence[Any] = (),
    kmedians: bool = True,
    feature_names: Sequence[str] | None = None,
    kmedians_tol: float = 1e-6,
    max_kmedians_passes: int = 4,
    kmedians_bins: int | None = None,
) -> tuple[dict[str, Any], list]:
    """Score a tree's clustering of X against reference labels / centers and ground truth.

    X: numpy array, pandas DataFrame, dask array (row chunks, one column chunk) or Dataset.
    reference_labels, y_true: cluster ids 0..K-1 per row; -1 or NaN marks noise / unlabelled
    rows, which are left out of the tables that need that label (reference noise: out of every
    reference-relative number, on both sides). numpy, pandas or dask; numpy labels with dask X
    are chunked like X. centers: (K, d) fixed
    centers (or a MixtureSummary); without reference_labels the reference becomes each point's
    nearest center. See the module docstring for every definition; numbers that need a missing
    input are None. ``passes`` counts passes over the data (1, plus the k-medians passes).

    ``also``: other ``exclust.parts.Reduction``s over the same X, run in scoring's first pass
    (the cost curve's); returns (scores, their results).
    """
    if not isinstance(tree, ThresholdTree):
        raise InputError(f"tree must be a ThresholdTree, got {type(tree).__name__}")
    X = _prepare_X(tree, X, feature_names)
    n, d = X.shape
    centers = _prepare_centers(centers, d)
    ref = _prepare_labels(reference_labels, X, "reference_labels")
    truth = _prepare_labels(y_true, X, "y_true")
    ref_mode = 1 if ref is not None else (2 if centers is not None else 0)
    centers_arg = centers if centers is not None else np.zeros((0, d))
    tree_arrays = (tree.kind, tree.feature, tree.threshold, tree.center, tree.left, tree.right)

    from exclust.parts import run_reductions

    stats, *fused = run_reductions(X, [row_reduction(
        _stats_chunk, _merge_stats, ref, truth,
        tree_arrays=tree_arrays, ref_mode=ref_mode, centers=centers_arg, track_range=bool(kmedians),
    ), *also])
    passes = 1
    leaf = stats["leaf"]
    if not (np.isfinite(leaf["m2"]).all() and np.isfinite(leaf["mean"]).all()):
        raise InputError("X holds NaN or infinite values; clean them or load with {fix}", option="nan_policy", value="drop")

    n_tree = tree.n_clusters
    value = tree.value
    leaves = tree.leaves
    tree_mom = _group_moments(
        {k: v[leaves] for k, v in leaf.items()}, value[leaves], n_tree
    )
    has_ref = ref_mode != 0
    ref_mom = stats["ref"]
    n_ref = ref_mom["n"].shape[0]
    if ref_mode == 1 and centers is not None and n_ref > centers.shape[0]:
        raise InputError(
            f"reference_labels go up to {n_ref - 1} but only {centers.shape[0]} centers were given; "
            "label i must name centers[i]"
        )
    n_scored = int(leaf["n"].sum())
    if has_ref and n_scored == 0:
        raise InputError("every reference label is -1 (noise): there is no reference clustering to compare with")
    result: dict[str, Any] = {
        "n": int(n),
        "n_features": int(d),
        "n_leaves": tree.n_leaves,
        "depth": tree.depth,
        "n_clusters_tree": int(n_tree),
        "reference": {1: "labels", 2: "nearest center", 0: None}[ref_mode],
        "n_reference_clusters": int(n_ref) if has_ref else None,
        "n_scored": n_scored,
        "n_reference_noise": int(n - n_scored) if has_ref else 0,
        "cluster_sizes_tree": tree_mom["n"].tolist(),
        "cluster_sizes_reference": ref_mom["n"].tolist() if has_ref else None,
        # Scored rows per leaf (leaf id as a JSON key): drift checks and the weighted average depth.
        "leaf_sizes": {str(int(i)): int(leaf["n"][i]) for i in leaves},
        "weighted_avg_depth": (float((leaf["n"][leaves] * tree.node_depths()[leaves]).sum() / n_scored)
                               if n_scored else None),
        "kmeans_cost_tree": float(tree_mom["m2"].sum()),
        "kmeans_cost_reference": float(ref_mom["m2"].sum()) if has_ref else None,
    }
    result["price_kmeans"] = _ratio(result["kmeans_cost_tree"], result["kmeans_cost_reference"])

    # Surrogate cost (paper 003, Definition 1).
    if centers is not None:
        per_leaf = _squared_distances_to_centers({k: v[leaves] for k, v in leaf.items()}, centers)
        result["surrogate_cost_tree"] = float(per_leaf.min(axis=1).sum())
        leaf_values = value[leaves]
        if leaf_values.max() < centers.shape[0]:
            result["surrogate_cost_tree_by_label"] = float(per_leaf[np.arange(leaves.size), leaf_values].sum())
        else:
            result["surrogate_cost_tree_by_label"] = None
        per_ref = _squared_distances_to_centers(ref_mom, centers)
        result["surrogate_cost_reference"] = float(per_ref[np.arange(n_ref), np.arange(n_ref)].sum())
        result["surrogate_price"] = _ratio(result["surrogate_cost_tree"], result["surrogate_cost_reference"])
    else:
        for key in ("surrogate_cost_tree", "surrogate_cost_tree_by_label", "surrogate_cost_reference", "surrogate_price"):
            result[key] = None

    # Contingency tables, by tree cluster (leaves merged by value).
    def by_cluster(table: np.ndarray) -> np.ndarray:
        out = np.zeros((n_tree, table.shape[1]), np.int64)
        np.add.at(out, value[leaves], table[leaves])
        return out

    if has_ref:
        tree_ref = by_cluster(stats["leaf_ref"])
        k = min(tree_ref.shape)
        agree = int(np.trace(tree_ref[:k, :k]))
        total = int(tree_ref.sum())
        result["error_rate"] = float(1.0 - agree / total) if total else None
        result["ari_reference"] = adjusted_rand_from_contingency(tree_ref)
        result["contingency_tree_reference"] = tree_ref.tolist()
    else:
        result["error_rate"] = result["ari_reference"] = result["contingency_tree_reference"] = None
    if truth is not None:
        tree_truth = by_cluster(stats["leaf_truth"])
        result["n_truth_labelled"] = int(tree_truth.sum())
        result["ari_truth"] = adjusted_rand_from_contingency(tree_truth)
        result["ari_reference_truth"] = adjusted_rand_from_contingency(stats["ref_truth"]) if has_ref else None
    else:
        result["n_truth_labelled"] = 0
        result["ari_truth"] = result["ari_reference_truth"] = None

    # k-medians (paper 002, Definition 1): extra passes.
    if kmedians:
        lo_t = np.full((n_tree, d), np.inf)
        hi_t = np.full((n_tree, d), -np.inf)
        for leaf_id in leaves:
            c = value[leaf_id]
            lo_t[c] = np.minimum(lo_t[c], stats["leaf_lo"][leaf_id])
            hi_t[c] = np.maximum(hi_t[c], stats["leaf_hi"][leaf_id])
        ref_lo = _pad2(stats["ref_lo"], (n_ref, d), np.inf) if has_ref else np.zeros((0, d))
        ref_hi = _pad2(stats["ref_hi"], (n_ref, d), -np.inf) if has_ref else np.zeros((0, d))
        groups = {
            "n": np.concatenate([tree_mom["n"], ref_mom["n"] if has_ref else np.zeros(0, np.int64)]),
            "mean": np.concatenate([tree_mom["mean"], ref_mom["mean"] if has_ref else np.zeros((0, d))]),
            "lo": np.concatenate([lo_t, ref_lo]),
            "hi": np.concatenate([hi_t, ref_hi]),
        }
        km = _kmedians(X, ref, tree_arrays, value, ref_mode, centers_arg, groups, n_tree, kmedians_tol,
                       max_kmedians_passes, kmedians_bins)
        passes += km["passes"]
        result["kmedians_cost_tree"] = km["tree_upper"]
        result["kmedians_cost_tree_lower"] = km["tree_lower"]
        result["kmedians_cost_reference"] = km["reference_upper"] if has_ref else None
        result["kmedians_cost_reference_lower"] = km["reference_lower"] if has_ref else None
        result["price_kmedians"] = _ratio(result["kmedians_cost_tree"], result["kmedians_cost_reference"])
        result["kmedians_relative_gap"] = max(km["tree_gap"], km["reference_gap"] if has_ref else 0.0)
        result["kmedians_passes"] = km["passes"]
    else:
        for key in ("kmedians_cost_tree", "kmedians_cost_tree_lower", "kmedians_cost_reference",
                    "kmedians_cost_reference_lower", "price_kmedians", "kmedians_relative_gap"):
            result[key] = None
        result["kmedians_passes"] = 0
    result["passes"] = passes
    return result, fused
