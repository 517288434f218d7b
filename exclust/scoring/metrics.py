"""How good is an explanation tree: prices of explainability, surrogate cost, error rate, ARI.

`evaluate` routes every point through a `ThresholdTree` and compares the tree's clustering with
a reference clustering (labels, or the nearest of fixed centers) and with ground truth; it returns
a typed ``exclust.scoring.scorecard.Score`` (``score`` and ``score_with`` give its dict, as metrics.json
holds it). Everything but the k-medians price comes from ONE pass over the data
(``exclust.scoring.score_pass``: per-leaf and per-reference statistics and contingency tables, merged
exactly); each section of the score below is one function that reads that pass and fills its
own fields. Fields a run cannot compute keep their default (None).

Definitions (n points x_1..x_n; a "cluster" is a set of points; costs are sums, not means):

- k-means cost of a clustering: sum over clusters C of sum_{x in C} ||x - mean(C)||^2.
  ``price_kmeans`` = cost of the tree's clusters / cost of the reference clusters (each cluster
  scored by its own mean; the design's "Metrics", ../shared/DESIGN.md).
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

Clustering columns (``Z``): when the reference clustering was fitted on other columns than the
tree's features (``cluster_on``: an embedding, a PCA), the tree routes every row on its features X
while every cost above is measured on Z, row-aligned with X, in the same one pass: a leaf's
rows' k-means cost is their scatter in Z, the centers live in Z, and the nearest-center reference
searches Z.

Noise: a reference label of -1 (or NaN) marks noise (DBSCAN). Noise points are left out of every
reference-relative number, on BOTH sides: prices, surrogate costs, error rate, ARI vs reference
(so both costs of a price are over the same points). A ground-truth label of -1 (or NaN) leaves
the point out of the truth tables only.

k-medians: medians do not merge across parts; ``exclust.scoring.kmedians_cost`` finds them by bisection
on histograms, 2 or more passes of their own (``kmedians=False`` skips them). The reported cost is
achievable, a certified lower bound comes with it, and ``kmedians_relative_gap`` says how close
the two came.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from exclust.dataplane.parts import run_reductions
from exclust.errors import InputError
from exclust.scoring.kmedians_cost import kmedians_costs
from exclust.scoring.score_pass import (
    group_moments,
    merge_stats,
    prepare_centers,
    prepare_labels,
    prepare_space,
    prepare_X,
    row_reduction,
    scored_tree,
    squared_distances_to_centers,
    stats_chunk,
)
from exclust.scoring.scorecard import Score
from exclust.tree import ThresholdTree


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


# --------------------------------------------------------------------------- the score, section by section
@dataclass
class _Pass:
    """Scoring's merged pass over X (``score_pass.merge_stats``) and the tree it routed rows through."""

    tree: ThresholdTree
    stats: dict
    ref_mode: int  # 0 no reference, 1 reference labels, 2 each row's nearest center
    n_rows: int
    n_features: int

    def __post_init__(self) -> None:
        self.leaves = self.tree.leaves
        self.value = self.tree.value
        self.leaf = self.stats["leaf"]  # per-node moments (leaves filled)
        self.ref = self.stats["ref"]  # per-reference-cluster moments
        self.has_ref = self.ref_mode != 0
        self.n_ref = self.ref["n"].shape[0]
        self.n_scored = int(self.leaf["n"].sum())
        # Leaves merged by the cluster they name: the tree's clustering.
        self.tree_moments = group_moments({k: v[self.leaves] for k, v in self.leaf.items()},
                                          self.value[self.leaves], self.tree.n_clusters)

    def by_cluster(self, table: np.ndarray) -> np.ndarray:
        """A per-leaf contingency table summed by tree cluster."""
        out = np.zeros((self.tree.n_clusters, table.shape[1]), np.int64)
        np.add.at(out, self.value[self.leaves], table[self.leaves])
        return out


def _ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None:
        return None
    if b == 0:
        return 1.0 if a == 0 else float("inf")
    return float(a / b)


def _sizes(p: _Pass) -> dict[str, Any]:
    """Counts, cluster and leaf sizes, depth."""
    tree, leaves = p.tree, p.leaves
    sizes = dict(
        n=p.n_rows, n_features=p.n_features, n_leaves=tree.n_leaves, depth=tree.depth,
        n_clusters_tree=int(tree.n_clusters), n_scored=p.n_scored, cluster_sizes_tree=p.tree_moments["n"].tolist(),
        # Scored rows per leaf (leaf id as a JSON key): drift checks and the weighted average depth.
        leaf_sizes={str(int(i)): int(p.leaf["n"][i]) for i in leaves},
        weighted_avg_depth=(float((p.leaf["n"][leaves] * tree.node_depths()[leaves]).sum() / p.n_scored)
                            if p.n_scored else None),
    )
    if p.has_ref:
        sizes.update(reference={1: "labels", 2: "nearest center"}[p.ref_mode], n_reference_clusters=int(p.n_ref),
                     n_reference_noise=p.n_rows - p.n_scored, cluster_sizes_reference=p.ref["n"].tolist())
    return sizes


def _kmeans_price(p: _Pass) -> dict[str, Any]:
    """k-means cost of the tree's clusters, of the reference clusters, and their ratio."""
    tree_cost = float(p.tree_moments["m2"].sum())
    if not p.has_ref:
        return dict(kmeans_cost_tree=tree_cost)
    ref_cost = float(p.ref["m2"].sum())
    return dict(kmeans_cost_tree=tree_cost, kmeans_cost_reference=ref_cost, price_kmeans=_ratio(tree_cost, ref_cost))


def _surrogate_price(p: _Pass, centers: np.ndarray | None) -> dict[str, Any]:
    """Surrogate cost (paper 003, Definition 1) of the tree's leaves and of the reference, given centers."""
    if centers is None:
        return {}
    per_leaf = squared_distances_to_centers({k: v[p.leaves] for k, v in p.leaf.items()}, centers)
    leaf_values = p.value[p.leaves]
    by_label = (float(per_leaf[np.arange(p.leaves.size), leaf_values].sum())
                if leaf_values.max() < centers.shape[0] else None)
    per_ref = squared_distances_to_centers(p.ref, centers)
    tree_cost = float(per_leaf.min(axis=1).sum())
    ref_cost = float(per_ref[np.arange(p.n_ref), np.arange(p.n_ref)].sum())
    return dict(surrogate_cost_tree=tree_cost, surrogate_cost_tree_by_label=by_label,
                surrogate_cost_reference=ref_cost, surrogate_price=_ratio(tree_cost, ref_cost))


def _agreement(p: _Pass) -> dict[str, Any]:
    """Tree clusters against reference clusters: contingency table, error rate, ARI."""
    if not p.has_ref:
        return {}
    tree_ref = p.by_cluster(p.stats["leaf_ref"])
    k = min(tree_ref.shape)
    agree, total = int(np.trace(tree_ref[:k, :k])), int(tree_ref.sum())
    return dict(error_rate=float(1.0 - agree / total) if total else None,
                ari_reference=adjusted_rand_from_contingency(tree_ref), contingency_tree_reference=tree_ref.tolist())


def _truth(p: _Pass, has_truth: bool) -> dict[str, Any]:
    """Tree clusters (and reference clusters) against the ground truth: ARI."""
    if not has_truth:
        return {}
    tree_truth = p.by_cluster(p.stats["leaf_truth"])
    return dict(n_truth_labelled=int(tree_truth.sum()), ari_truth=adjusted_rand_from_contingency(tree_truth),
                ari_reference_truth=adjusted_rand_from_contingency(p.stats["ref_truth"]) if p.has_ref else None)


def _kmedians_price(p: _Pass, X, ref, centers: np.ndarray, *, tol: float, max_passes: int,
                    n_bins: int | None, space=None) -> dict[str, Any]:
    """k-medians costs and price (paper 002, Definition 1): passes of their own (``exclust.scoring.kmedians_cost``)."""
    km = kmedians_costs(X, ref, p.tree, p.ref_mode, centers, p.stats, p.tree_moments, tol=tol, max_passes=max_passes,
                        n_bins=n_bins, space=space)
    ref_cost = km["reference_upper"] if p.has_ref else None
    return dict(kmedians_cost_tree=km["tree_upper"], kmedians_cost_tree_lower=km["tree_lower"],
                kmedians_cost_reference=ref_cost,
                kmedians_cost_reference_lower=km["reference_lower"] if p.has_ref else None,
                price_kmedians=_ratio(km["tree_upper"], ref_cost),
                kmedians_relative_gap=max(km["tree_gap"], km["reference_gap"] if p.has_ref else 0.0),
                kmedians_passes=km["passes"])


# --------------------------------------------------------------------------- entry points
def score(
    tree: ThresholdTree,
    X,
    reference_labels=None,
    centers=None,
    y_true=None,
    *,
    Z=None,
    kmedians: bool = True,
    feature_names: Sequence[str] | None = None,
    kmedians_tol: float = 1e-6,
    max_kmedians_passes: int = 4,
    kmedians_bins: int | None = None,
) -> dict[str, Any]:
    """Score a tree's clustering of X against reference labels / centers and ground truth, as a
    dict (``evaluate`` without other reductions; see there)."""
    return evaluate(
        tree, X, reference_labels, centers, y_true, Z=Z, kmedians=kmedians, feature_names=feature_names,
        kmedians_tol=kmedians_tol, max_kmedians_passes=max_kmedians_passes, kmedians_bins=kmedians_bins,
    )[0].as_dict()


def score_with(tree: ThresholdTree, X, reference_labels=None, centers=None, y_true=None, *,
               also: Sequence[Any] = (), **options) -> tuple[dict[str, Any], list]:
    """``evaluate`` with the score as a dict (metrics.json's keys) and the results of ``also``."""
    scores, fused = evaluate(tree, X, reference_labels, centers, y_true, also=also, **options)
    return scores.as_dict(), fused


def evaluate(
    tree: ThresholdTree,
    X,
    reference_labels=None,
    centers=None,
    y_true=None,
    *,
    Z=None,
    also: Sequence[Any] = (),
    kmedians: bool = True,
    feature_names: Sequence[str] | None = None,
    kmedians_tol: float = 1e-6,
    max_kmedians_passes: int = 4,
    kmedians_bins: int | None = None,
) -> tuple[Score, list]:
    """Score a tree's clustering of X against reference labels / centers and ground truth.

    X: numpy array, pandas DataFrame, dask array (row chunks, one column chunk) or Dataset.
    reference_labels, y_true: cluster ids 0..K-1 per row; -1 or NaN marks noise / unlabelled
    rows, which are left out of the tables that need that label (reference noise: out of every
    reference-relative number, on both sides). numpy, pandas or dask; numpy labels with dask X
    are chunked like X. centers: (K, d) fixed
    centers (or a MixtureSummary); without reference_labels the reference becomes each point's
    nearest center. Z: the clustering columns (n x d_Z; numpy, pandas or dask, row-aligned with X)
    when the reference was fitted on other columns than the tree's features: the tree routes rows
    on X, every cost is measured on Z (centers then (K, d_Z)), in the same one pass; default
    None: the costs are measured on X. See the module docstring for every definition; numbers that need a missing
    input keep their default, None. ``passes`` counts passes over the data (1, plus the
    k-medians passes; ``kmedians=False`` makes none and leaves the k-medians fields None).

    ``also``: other ``exclust.dataplane.parts.Reduction``s over the same X, run in scoring's first pass
    (the cost curve's); returns (the Score, their results).
    """
    if not isinstance(tree, ThresholdTree):
        raise InputError(f"tree must be a ThresholdTree, got {type(tree).__name__}")
    X = prepare_X(tree, X, feature_names)
    n, d = X.shape
    space = prepare_space(Z, X)
    d_cost = d if space is None else int(space.shape[1])  # the columns costs are measured on
    centers = prepare_centers(centers, d_cost)
    ref = prepare_labels(reference_labels, X, "reference_labels")
    truth = prepare_labels(y_true, X, "y_true")
    ref_mode = 1 if ref is not None else (2 if centers is not None else 0)
    centers_arg = centers if centers is not None else np.zeros((0, d_cost))

    stats, *fused = run_reductions(X, [row_reduction(
        stats_chunk, merge_stats, ref, truth, space,
        nodes=scored_tree(tree, space), ref_mode=ref_mode, centers=centers_arg, track_range=bool(kmedians),
    ), *also])
    leaf = stats["leaf"]
    # Without reference labels every row is scored, so a row the tree did not route (a NaN at a
    # cut that learned no missing side) is a missing value the cost cannot take either.
    unrouted = ref_mode == 0 and int(leaf["n"].sum()) < n
    if unrouted or not (np.isfinite(leaf["m2"]).all() and np.isfinite(leaf["mean"]).all()):
        where = "X" if space is None else "Z (the clustering columns)"
        raise InputError(f"{where} holds NaN or infinite values; clean them or load with {{fix}}",
                         option="nan_policy", value="drop")
    p = _Pass(tree, stats, ref_mode, int(n), int(d))
    if ref_mode == 1 and centers is not None and p.n_ref > centers.shape[0]:
        raise InputError(
            f"reference_labels go up to {p.n_ref - 1} but only {centers.shape[0]} centers were given; "
            "label i must name centers[i]"
        )
    if p.has_ref and p.n_scored == 0:
        raise InputError("every reference label is -1 (noise): there is no reference clustering to compare with")
    kmedians_fields = (_kmedians_price(p, X, ref, centers_arg, tol=kmedians_tol, max_passes=max_kmedians_passes,
                                       n_bins=kmedians_bins, space=space) if kmedians else {})
    # Each section fills its own fields (a field named twice is a TypeError here).
    result = Score(**_sizes(p), **_kmeans_price(p), **_surrogate_price(p, centers), **_agreement(p),
                   **_truth(p, truth is not None), **kmedians_fields)
    return dataclasses.replace(result, passes=1 + result.kmedians_passes), fused
