"""Scoring's one pass over the data: inputs checked and lined up, per-part statistics, merged exactly.

``exclust.scoring.metrics`` scores a tree from what this pass returns; ``exclust.scoring.kmedians_cost`` starts
its median search from it. Per part, a numba kernel (``_score_block.score_block``) routes
every row through the tree and accumulates per-leaf and per-reference-cluster count / mean /
scatter (shifted sums, so far-from-origin data keep their precision), the contingency tables
(leaf x reference, leaf x truth, reference x truth) and, on request, per-group ranges. The small
per-part results are merged in a tree reduction with Chan et al.'s pairwise update: exact and
independent of the order and grouping of the parts. Nothing row-sized reaches the driver.
"""
from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

import numpy as np

from exclust.dataplane import arrays
from exclust.dataplane.parts import Reduction, align, run_reductions
from exclust.errors import InputError
from exclust.scoring._score_block import label_span, score_block
from exclust.sources.dataset import Dataset
from exclust.tree import ThresholdTree

# Label ids become array indices; a larger id is almost always an un-encoded category.
MAX_LABEL = 1_000_000

# --------------------------------------------------------------------------- moments
def moments(n: np.ndarray, sums: np.ndarray, squares: np.ndarray, shift: np.ndarray) -> dict:
    """Count, mean and scatter (sum of squared distances to the mean) from shifted sums."""
    safe = np.maximum(n, 1)[:, None]
    centred = sums / safe
    scatter = squares - (sums * centred).sum(axis=1)
    return {"n": n, "mean": shift[None, :] + centred * (n[:, None] > 0), "m2": np.maximum(scatter, 0.0)}


def pad_rows(a: np.ndarray, rows: int, fill=0) -> np.ndarray:
    if a.shape[0] == rows:
        return a
    out = np.full((rows,) + a.shape[1:], fill, dtype=a.dtype)
    out[: a.shape[0]] = a
    return out


def merge_moments(a: dict, b: dict) -> dict:
    """Chan et al.'s pairwise update: exact, and stable where sum(x^2) - n mean^2 is not."""
    rows = max(a["n"].shape[0], b["n"].shape[0])
    na, nb = pad_rows(a["n"], rows), pad_rows(b["n"], rows)
    ma, mb = pad_rows(a["mean"], rows), pad_rows(b["mean"], rows)
    n = na + nb
    safe = np.maximum(n, 1)
    delta = mb - ma
    mean = ma + delta * (nb / safe)[:, None]
    m2 = pad_rows(a["m2"], rows) + pad_rows(b["m2"], rows) + (delta**2).sum(axis=1) * (na * nb / safe)
    return {"n": n, "mean": mean, "m2": m2}


def group_moments(mom: dict, group: np.ndarray, n_groups: int) -> dict:
    """Merge rows of ``mom`` that share a group id (leaves of one tree cluster)."""
    d = mom["mean"].shape[1]
    out = {"n": np.zeros(n_groups, np.int64), "mean": np.zeros((n_groups, d)), "m2": np.zeros(n_groups)}
    for row, g in enumerate(group):
        one = {"n": mom["n"][row : row + 1], "mean": mom["mean"][row : row + 1], "m2": mom["m2"][row : row + 1]}
        cur = {"n": out["n"][g : g + 1], "mean": out["mean"][g : g + 1], "m2": out["m2"][g : g + 1]}
        merged = merge_moments(cur, one)
        out["n"][g], out["mean"][g], out["m2"][g] = merged["n"][0], merged["mean"][0], merged["m2"][0]
    return out


def squared_distances_to_centers(mom: dict, centers: np.ndarray) -> np.ndarray:
    """groups x centers: sum over a group's points of ||x - mu||^2 = scatter + n ||mean - mu||^2."""
    diff = mom["mean"][:, None, :] - centers[None, :, :]
    return mom["m2"][:, None] + mom["n"][:, None] * (diff**2).sum(axis=2)



# --------------------------------------------------------------------------- chunk functions
def tree_arrays(tree: ThresholdTree) -> tuple[np.ndarray, ...]:
    """The node arrays the numba kernels route rows with (``exclust.tree._routing.routed_leaf_of``'s)."""
    return (tree.kind, tree.feature, tree.threshold, tree.center, tree.left, tree.right, tree.missing_side,
            tree.category_bits)


def scored_tree(tree: ThresholdTree, space=None) -> tuple:
    """What scoring's kernels route rows with: the node arrays (``tree_arrays``) and ``nan_unrouted``
    (``_score_block.scored_leaf_of``): when the costs are measured on other columns than the routed
    ones (``space``), a tree that learned no missing side leaves rows holding NaN unscored, as its
    ``apply`` labels them -1 (on X itself such a row's cost is NaN, and scoring refuses it)."""
    return (*tree_arrays(tree), space is not None and not tree.routes_missing)


_NO_LABELS = np.empty(0, dtype=np.float64)


def label_chunk(labels) -> np.ndarray:
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


def stats_chunk(X, ref, truth, space=None, *, nodes, ref_mode, centers, track_range) -> dict:
    """Pass 1 on one chunk: per-leaf / per-reference statistics and contingency tables. Rows are
    routed on X; the statistics are of ``space`` (the clustering columns Z, row-aligned with X),
    or of X itself when None."""
    X = np.asarray(X, dtype=np.float64)
    Z = X if space is None else np.asarray(space, dtype=np.float64)
    ref = label_chunk(ref)
    truth = label_chunk(truth)
    n_ref = _label_count(ref, "reference labels") if ref_mode == 1 else (centers.shape[0] if ref_mode == 2 else 0)
    n_truth = _label_count(truth, "ground-truth labels") if truth.shape[0] else 0
    shift = Z[0].copy() if Z.shape[0] else np.zeros(Z.shape[1])
    (leaf_n, leaf_s, leaf_q, ref_n, ref_s, ref_q, leaf_ref, leaf_truth, ref_truth,
     leaf_lo, leaf_hi, ref_lo, ref_hi) = score_block(
        X, Z, *nodes, ref, ref_mode, n_ref, truth, truth.shape[0] > 0, n_truth, centers, shift, track_range
    )
    return {
        "rows": X.shape[0],
        "leaf": moments(leaf_n, leaf_s, leaf_q, shift),
        "ref": moments(ref_n, ref_s, ref_q, shift),
        "leaf_ref": leaf_ref,
        "leaf_truth": leaf_truth,
        "ref_truth": ref_truth,
        "leaf_lo": leaf_lo,
        "leaf_hi": leaf_hi,
        "ref_lo": ref_lo,
        "ref_hi": ref_hi,
    }


def pad2(a: np.ndarray, shape: tuple[int, int], fill=0) -> np.ndarray:
    if a.shape == shape:
        return a
    out = np.full(shape, fill, dtype=a.dtype)
    out[: a.shape[0], : a.shape[1]] = a
    return out


def merge_stats(parts: list[dict]) -> dict:
    """Merge pass-1 results of several chunks (any order, any grouping)."""
    out = parts[0]
    for p in parts[1:]:
        tables = {}
        for key in ("leaf_ref", "leaf_truth", "ref_truth"):
            shape = tuple(max(s, t) for s, t in zip(out[key].shape, p[key].shape, strict=True))
            tables[key] = pad2(out[key], shape) + pad2(p[key], shape)
        ranges = {}
        for key, fill, op in (("leaf_lo", np.inf, np.minimum), ("leaf_hi", -np.inf, np.maximum),
                              ("ref_lo", np.inf, np.minimum), ("ref_hi", -np.inf, np.maximum)):
            shape = tuple(max(s, t) for s, t in zip(out[key].shape, p[key].shape, strict=True))
            ranges[key] = op(pad2(out[key], shape, fill), pad2(p[key], shape, fill))
        out = {
            "rows": out["rows"] + p["rows"],
            "leaf": merge_moments(out["leaf"], p["leaf"]),
            "ref": merge_moments(out["ref"], p["ref"]),
            **tables,
            **ranges,
        }
    return out


def _call_with_optional_labels(block, *rest):
    *columns, present, func, params = rest
    given = iter(columns)
    ref, truth, space = (next(given) if has else None for has in present)
    return func(block, ref, truth, space, **params)


def _merge_pair(merge: Callable, a, b):
    return merge([a, b])


def row_reduction(func: Callable, merge: Callable, ref, truth, space=None, **params):
    """``func(X_part, ref_part, truth_part, space_part, **params)`` as one reduction of a pass
    (``exclust.dataplane.parts``): parts merged with ``merge([a, b])``; absent labels come as None.
    ``space``: the clustering columns Z (row-aligned with X), read in the same pass as X's rows;
    None when the costs are measured on X itself."""
    present = (ref is not None, truth is not None, space is not None)
    columns = [c for c in (ref, truth, space) if c is not None]
    return Reduction(_call_with_optional_labels, columns, (present, func, params),
                     functools.partial(_merge_pair, merge))


def row_map_reduce(func: Callable, merge: Callable, X, ref, truth, space=None, **params):
    """``func(X_part, ref_part, truth_part, space_part, **params)`` on every row part, merged up a tree: one pass."""
    return run_reductions(X, [row_reduction(func, merge, ref, truth, space, **params)])[0]


# --------------------------------------------------------------------------- input
def prepare_X(tree: ThresholdTree, X, feature_names: Sequence[str] | None):
    import pandas as pd

    if isinstance(X, Dataset):
        if feature_names is None:
            feature_names = X.feature_names
        X = X.X
    if isinstance(X, pd.DataFrame):
        wanted = list(feature_names) if feature_names is not None else list(tree.feature_names)
        missing = [c for c in wanted if c not in X.columns]
        if missing:
            raise InputError(f"columns {missing} of the tree are missing from the DataFrame; columns are "
                             f"{list(X.columns)}")
        X = X[wanted].to_numpy(dtype=np.float64)
        feature_names = wanted
    if feature_names is not None and list(feature_names) != list(tree.feature_names):
        raise InputError(
            f"the data's features {list(feature_names)} differ from the tree's {list(tree.feature_names)}; "
            "pass the columns the tree was built on, in the same order"
        )
    X, distributed = arrays.entering(X, measure_chunks=True)
    if not distributed:
        X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2 or X.shape[1] != tree.n_features:
        raise InputError(
            f"the tree was built on {tree.n_features} features ({', '.join(tree.feature_names[:6])}); "
            f"got data of shape {X.shape}"
        )
    if X.shape[0] == 0:
        raise InputError("no rows to score")
    return X


def prepare_space(Z, X):
    """The clustering columns Z (None stays None) as X's kind, row-aligned with X's parts: the
    space the costs are measured in while the tree routes rows on X. Refused when its rows
    differ from X's or hold NaN or inf (a cost needs every value; checked in the pass)."""
    if Z is None:
        return None
    import pandas as pd

    if isinstance(Z, Dataset):
        Z = Z.X
    if isinstance(Z, pd.DataFrame):
        Z = Z.to_numpy(dtype=np.float64)
    Z, distributed = arrays.entering(Z, measure_chunks=True)
    if not distributed:
        Z = np.asarray(Z, dtype=np.float64)
    if Z.ndim != 2 or Z.shape[1] == 0:
        raise InputError(f"Z (the clustering columns) must be a 2-D array with one row per row of X, got shape "
                         f"{Z.shape}")
    return align(Z, X, "Z (the clustering columns)")


def prepare_labels(labels, X, what: str):
    """Labels as a 1-D array of X's kind, row-aligned with X's chunks (None stays None)."""
    if labels is None:
        return None
    import pandas as pd

    if isinstance(labels, (pd.Series, pd.Index)):
        labels = labels.to_numpy()
    labels, distributed = arrays.entering_array(labels)
    if labels.ndim == 2 and labels.shape[1] == 1:
        labels = labels[:, 0]
    if labels.ndim != 1:
        raise InputError(f"{what} must be one-dimensional, got shape {labels.shape}")
    if not distributed:
        if not np.issubdtype(labels.dtype, np.number) and labels.dtype != bool:
            raise InputError(f"{what} must be numeric ids 0..K-1 (-1 for noise), got dtype {labels.dtype}")
    return align(labels, X, what)


def prepare_centers(centers, d: int) -> np.ndarray | None:
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
