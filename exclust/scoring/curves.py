"""Cost ratio against the number of leaves: ExKMC, CART and KDTree side by side (paper 003, Figure 2).

For each leaf count L the cost of a tree's clusters is divided by the reference cost. Under the
k-means objective a cluster costs its k-means cost, scored by its own mean, and the reference
every point's squared distance to its nearest reference center. Under k-medians (``cost`` in the
result says which) the curve shows the l1 surrogate cost: each cluster is charged to the
reference center of least summed l1 distance for its rows (ExKMC's surrogate cost with l1
distances, paper 003 Definition 1), and the reference every point's l1 distance to its nearest
center. Exact per-cluster medians would take several bisection passes; the surrogate takes
none of its own.

All three algorithms grow greedily and a split never changes the choice at another leaf, so one
fit at ``max(leaves)`` holds every smaller tree as a prefix (``ExKMC.tree_at``,
``KDTree.tree_at``, ``cart_prefix_trees``: ``ThresholdTree.prune``). CART and KDTree (and ExKMC
when the run did not fit one) are built on an exact uniform sample of the rows, in memory; then
every tree and the reference cost are scored in ONE pass (``CurvePlan.reduction``), which the
pipeline fuses into scoring's pass: the curve costs at most 2 passes (the sample, and the
scoring pass), none of its own when the sample and the scoring pass are shared. A prefix tree's
clusters are unions of its final tree's leaves, so per final leaf the pass keeps (count, sum of
x, sum of ||x||^2) under k-means, (count, summed l1 distance to each center) under k-medians.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from exclust.dataplane._center_distances import nearest_center_l1
from exclust.dataplane._center_distances import nearest_center
from exclust.algorithms.cart import CART
from exclust.algorithms.histogram.exkmc import ExKMC
from exclust.algorithms.histogram.kdtree import KDTree
from exclust.scoring.curve_pass import curve_block, curve_block_given_nearest, merge_curves
from exclust.sources.dataset import as_matrix
from exclust.dataplane.parts import PASSES, Reduction, map_reduce, run_reductions, sample_ids, uniform_sample
from exclust.tree import ThresholdTree


def cart_prefix_trees(X, labels, leaves: Sequence[int], random_state=0) -> list[ThresholdTree]:
    """CART trees for every leaf count from one best-first fit at the largest count.

    scikit-learn grows a tree with ``max_leaf_nodes`` best first and numbers the two children
    of a node when it expands it, so sorting the internal nodes by their left child's id gives
    the expansion order, and the tree with L leaves is the first L - 1 expansions.
    """
    cart = CART(max_leaf_nodes=max(leaves), random_state=random_state).fit(X, labels)
    model = getattr(cart, "model_", None)
    if model is None:
        return [cart.tree_ for _ in leaves]
    t = model.tree_
    internal = np.flatnonzero(t.children_left >= 0)
    order = internal[np.argsort(t.children_left[internal])]
    values = np.asarray(model.classes_)[np.argmax(t.value[:, 0, :], axis=1)]
    return [cart.tree_.prune(order[: L - 1], values) for L in leaves]


# What the curve's "cost" field says it shows, per objective.
CURVE_COSTS = {"kmeans": "kmeans", "kmedians": "kmedians-surrogate"}
# The baselines' trees are fitted on at most this many of the sample's rows: a 20-leaf CART or
# KDTree is as good from 50k uniform rows as from 200k, and scikit-learn's CART on 200k x 20
# took 4x as long (it sorts every feature at every node).
BASELINE_ROWS = 50_000


def _prefix_stats(final_stats: np.ndarray, reps: np.ndarray, tree: ThresholdTree, k: int) -> np.ndarray:
    """Per cluster of a prefix tree, the sum of its final tree's leaf statistics: each reached
    leaf goes to the prefix cluster of a row that reached it."""
    reached = np.flatnonzero(final_stats[:, 0] > 0)
    out = np.zeros((k, final_stats.shape[1]))
    if reached.size:
        clusters = np.asarray(tree.predict(reps[reached]), dtype=np.int64)
        np.add.at(out, clusters, final_stats[reached])
    return out


def _cost_of(stats: np.ndarray, objective: str = "kmeans") -> float:
    """The cost of a tree's clusters from their statistics: k-means cost, each cluster scored
    by its own mean; or, for k-medians, each cluster charged to its cheapest center in l1."""
    if objective == "kmedians":
        return float(stats[:, 1:].min(axis=1).sum()) if stats.shape[1] > 1 else 0.0
    return float(_costs_from_moments(stats[None])[0])


def _costs_from_moments(mom: np.ndarray) -> np.ndarray:
    n, sums, sq = mom[..., 0], mom[..., 1:-1], mom[..., -1]
    with np.errstate(invalid="ignore", divide="ignore"):
        between = np.where(n > 0, np.einsum("tkd,tkd->tk", sums, sums) / np.maximum(n, 1), 0.0)
    return (sq - between).sum(axis=1)


def kmeans_costs(X, trees: Sequence[ThresholdTree], n_clusters: int) -> np.ndarray:
    """k-means cost of each tree's clusters (each scored by its own mean), all in one pass."""
    trees = list(trees)
    families, _ = map_reduce(curve_block, X, args=(trees, np.zeros((0, X.shape[1]))), combine=merge_curves)
    k = max(int(n_clusters), max(t.n_clusters for t in trees))
    return np.asarray([_cost_of(_prefix_stats(mom, reps, t, k)) for t, (mom, reps) in zip(trees, families)])


def reference_cost(X, centers: np.ndarray) -> float:
    """Sum of squared distances of every point to its nearest reference center (one pass)."""
    _, cost = map_reduce(curve_block, X, args=([], np.asarray(centers, dtype=np.float64)), combine=merge_curves)
    return float(cost[0])


@dataclass
class CurvePlan:
    """The trees of a cost curve, built without a pass over the data, and the one pass that scores them."""

    leaves: list[int]
    families: list[list[ThresholdTree]]  # ExKMC, CART, KDTree: one tree per leaf count, the last the largest
    centers: np.ndarray
    surrogate: list[float]  # ExKMC's surrogate cost of each prefix (divided by the reference cost later)
    baselines: str  # how CART and KDTree (and an ExKMC not fitted by the run) were built
    objective: str = "kmeans"  # the cost the curve shows: k-means cost, or the k-medians l1 surrogate

    @property
    def n_clusters(self) -> int:
        return max(self.centers.shape[0], max(t.n_clusters for f in self.families for t in f))

    def reduction(self, nearest=None) -> Reduction:
        """The pass that scores every tree and the reference, to fuse into another pass.
        ``nearest``: every row's nearest center in squared l2 (numpy or dask, aligned with the
        rows), when known; the reference cost then reads it instead of searching the centers."""
        finals = [f[-1] for f in self.families]
        if nearest is not None and self.objective == "kmeans":
            return Reduction(curve_block_given_nearest, (nearest,), (finals, self.centers, self.objective),
                             merge_curves)
        return Reduction(curve_block, (), (finals, self.centers, self.objective), merge_curves)

    def finish(self, result) -> dict:
        families, ref = result
        ref = float(ref[0])
        k = self.n_clusters
        ratios = [
            [_cost_of(_prefix_stats(stats, reps, tree, k), self.objective) / ref for tree in family]
            for family, (stats, reps) in zip(self.families, families)
        ]
        return {
            "leaves": self.leaves,
            "cost": CURVE_COSTS[self.objective],
            "exkmc": ratios[0],
            "cart": ratios[1],
            "kdtree": ratios[2],
            "exkmc_surrogate": [c / ref for c in self.surrogate],
            "reference_cost": ref,
            "baselines": self.baselines,
        }


def plan_curve(sample: np.ndarray, sample_labels, centers, leaves: Sequence[int], *, feature_names=None,
               max_bins: int = 256, random_state=0, exkmc=None, n_rows: int | None = None,
               objective: str = "kmeans", max_rows: int = BASELINE_ROWS) -> CurvePlan:
    """Build the curve's trees on an in-memory uniform ``sample`` of the rows (with their reference
    labels), cut to a uniform ``max_rows`` of them: CART, KDTree, and ExKMC for ``objective``
    unless ``exkmc`` (fitted on all the data from these centers for that objective to at least
    ``max(leaves)`` leaves) gives its prefix trees. No pass over the data."""
    from exclust.sources.dataset import Dataset

    if objective not in CURVE_COSTS:
        raise ValueError(f"objective must be one of {', '.join(CURVE_COSTS)}, not {objective!r}")
    centers = np.asarray(centers, dtype=np.float64)
    k = int(centers.shape[0])
    leaves = sorted({int(L) for L in leaves})
    if not leaves or leaves[0] < k:
        raise ValueError(f"leaves must be leaf counts >= n_clusters={k}, got {leaves}")
    if sample.shape[0] > max_rows:  # a uniform subsample of a uniform sample is uniform
        keep = sample_ids(sample.shape[0], max_rows, random_state)
        sample = sample[keep]
        sample_labels = None if sample_labels is None else np.asarray(sample_labels)[keep]
    sample = np.ascontiguousarray(sample, dtype=np.float64)
    names = list(feature_names) if feature_names is not None else [f"x{j}" for j in range(sample.shape[1])]
    ds = Dataset(sample, names)
    if sample_labels is None:
        sample_labels = (nearest_center_l1(sample, centers) if objective == "kmedians"
                         else nearest_center(sample, centers))[0]
    reusable = (
        exkmc is not None
        and getattr(exkmc, "objective", "kmeans") == objective
        and exkmc.max_leaves >= leaves[-1]
        and exkmc.centers_.shape == centers.shape
        and np.array_equal(exkmc.centers_, centers)
    )
    with PASSES.paused():  # passes over the in-memory sample, not over the data
        ex = exkmc if reusable else ExKMC(k, leaves[-1], max_bins=max_bins, random_state=random_state,
                                          objective=objective).fit(ds, centers)
        families = [[ex.tree_at(L) for L in leaves], cart_prefix_trees(ds, sample_labels, leaves, random_state)]
        kd = KDTree(leaves[-1], max_bins=max_bins, random_state=random_state).fit(ds, centers)
        families.append([kd.tree_at(L) for L in leaves])
    surrogate = [ex.surrogate_costs_[min(L, ex.leaf_counts_[-1]) - ex.leaf_counts_[0]] for L in leaves]
    if not reusable and n_rows:  # an ExKMC on the sample: its surrogate costs scale to all rows
        surrogate = [c * n_rows / sample.shape[0] for c in surrogate]
    of = f"{sample.shape[0]} rows" + (f" of {n_rows}" if n_rows else "")
    # Where the run fitted no ExKMC, the curve's ExKMC is fitted on the sample too (fits on the
    # sample and on all rows agree when the sample is all rows).
    baselines = f"CART and KDTree fitted on a uniform sample of {of}, every tree scored on all rows"
    return CurvePlan(leaves, families, centers, surrogate, baselines, objective)


def cost_ratio_curve(
    X, centers, leaves: Sequence[int], reference_labels=None, max_bins: int = 256, random_state=0, exkmc=None,
    sample_rows: int = BASELINE_ROWS, objective: str = "kmeans",
) -> dict:
    """Cost ratio (tree cost / reference cost) of ExKMC, CART and KDTree at each leaf count.

    ``centers`` are the reference centers; ``reference_labels`` (default: nearest center) are
    what CART learns. ``objective``: "kmeans" (k-means cost) or "kmedians" (the l1 surrogate:
    each cluster charged to its cheapest center in l1, over the l1 reference cost; ExKMC then
    grows by the l1 surrogate too). The baselines are built on an exact uniform sample of
    ``sample_rows`` rows (one pass), then every tree and the reference are scored in one more
    pass. Returns ``{"leaves", "exkmc", "cart", "kdtree"}`` with one ratio per leaf count, plus
    ``"cost"`` (which cost: "kmeans" or "kmedians-surrogate"), ``"exkmc_surrogate"`` (ExKMC's
    surrogate cost ratio), ``"reference_cost"`` and ``"baselines"`` (how they were built).
    ``exkmc``: an ExKMC already fitted on all of X from these centers, for this objective, to at
    least ``max(leaves)`` leaves; its prefix trees are used instead of fitting one on the sample.
    """
    ds = as_matrix(X)
    columns = () if reference_labels is None else (reference_labels,)
    sample, *labels = uniform_sample(ds.X, *columns, size=int(sample_rows), random_state=random_state)
    plan = plan_curve(sample, labels[0] if labels else None, centers, leaves, feature_names=ds.feature_names,
                      max_bins=max_bins, random_state=random_state, exkmc=exkmc, n_rows=ds.n_rows,
                      objective=objective, max_rows=int(sample_rows))
    (result,) = run_reductions(ds.X, [plan.reduction()])
    return plan.finish(result)
