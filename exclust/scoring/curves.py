"""Cost ratio against the number of leaves, for trees the caller fitted (paper 003, Figure 2).

For each leaf count L the cost of a tree's clusters is divided by the reference cost. Under the
k-means objective a cluster costs its k-means cost, scored by its own mean, and the reference
every point's squared distance to its nearest reference center. Under k-medians (``cost`` in the
result says which) the curve shows the l1 surrogate cost: each cluster is charged to the
reference center of least summed l1 distance for its rows (ExKMC's surrogate cost with l1
distances, paper 003 Definition 1), and the reference every point's l1 distance to its nearest
center. Exact per-cluster medians would take several bisection passes; the surrogate takes
none of its own.

The curve's series are families of prefix trees, one per leaf count: a greedy algorithm whose
split never changes the choice at another leaf holds every smaller tree as a prefix of one fit
at ``max(leaves)`` (each estimator's ``prefix_trees``, a ``CurveSeries``; which algorithms a
curve shows is the registry's business, ``exclust.jobs.explain.cost_curve``). Every tree and the
reference cost are scored in ONE pass (``CurvePlan.reduction``), which the pipeline fuses into
scoring's pass: the curve costs at most 2 passes (the sample its trees are fitted on, and the
scoring pass), none of its own when the sample and the scoring pass are shared. A prefix tree's
clusters are unions of its final tree's leaves, so per final leaf the pass keeps (count, sum of
x, sum of ||x||^2) under k-means, (count, summed l1 distance to each center) under k-medians.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from exclust.dataplane.parts import Reduction, map_reduce
from exclust.scoring.curve_pass import curve_block, curve_block_of_columns, merge_curves
from exclust.tree import ThresholdTree

# What the curve's "cost" field says it shows, per objective.
CURVE_COSTS = {"kmeans": "kmeans", "kmedians": "kmedians-surrogate"}


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
    return np.asarray([_cost_of(_prefix_stats(mom, reps, t, k))
                       for t, (mom, reps) in zip(trees, families, strict=True)])


def reference_cost(X, centers: np.ndarray) -> float:
    """Sum of squared distances of every point to its nearest reference center (one pass)."""
    _, cost = map_reduce(curve_block, X, args=([], np.asarray(centers, dtype=np.float64)), combine=merge_curves)
    return float(cost[0])


def routes_alike(a: ThresholdTree, b: ThresholdTree) -> bool:
    """Whether two trees send every row to the same node (their routing arrays are equal): a pass
    then gives both the same statistics, to the last bit (``forest_moments`` sums each tree apart)."""
    if a is b:
        return True
    if a.node_count != b.node_count or a.routes_missing != b.routes_missing:
        return False
    return (all(np.array_equal(getattr(a, name), getattr(b, name), equal_nan=True) for name in ("threshold", "center"))
            and all(np.array_equal(getattr(a, name), getattr(b, name))
                    for name in ("kind", "feature", "left", "right", "missing_side", "category_bits")))


@dataclass
class CurveSeries:
    """One series of a cost curve: an algorithm's tree at every leaf count, and where the algorithm
    grows by a surrogate cost (ExKMC), that cost of each tree (divided by the reference cost later)."""

    trees: list[ThresholdTree]
    surrogate: list[float] | None = None
    fitted_here: bool = True  # fitted on the curve's sample (False: the run's own estimator, fitted on all rows)


@dataclass
class CurvePlan:
    """The trees of a cost curve, built without a pass over the data, and the one pass that scores them."""

    leaves: list[int]
    series: dict[str, CurveSeries]  # name -> one tree per leaf count, the last the largest
    centers: np.ndarray
    baselines: str  # how the series' trees were built
    objective: str = "kmeans"  # the cost the curve shows: k-means cost, or the k-medians l1 surrogate

    @property
    def n_clusters(self) -> int:
        return max(self.centers.shape[0], max(t.n_clusters for s in self.series.values() for t in s.trees))

    def of_series(self, names: Sequence[str]) -> CurvePlan:
        """The same plan with only the series ``names``, in that order (one pass can score a subset)."""
        return CurvePlan(self.leaves, {name: self.series[name] for name in names}, self.centers, self.baselines,
                         self.objective)

    def reduction(self, nearest=None, reference: bool = True, space=None, riders: Sequence[ThresholdTree] = ()
                  ) -> Reduction:
        """The pass that scores every tree and the reference, to fuse into another pass.
        ``nearest``: every row's nearest center in squared l2 (numpy or dask, aligned with the
        rows), when known; the reference cost then reads it instead of searching the centers.
        ``reference=False``: the trees only, the reference cost left at 0 (a caller that has it
        from scoring's own statistics: one sweep over the rows less). ``space``: the clustering
        columns Z (row-aligned with the rows, read in the same pass) when the centers live there
        rather than in the trees' features: the costs are measured on Z, the rows routed on X.
        ``riders``: more trees routed in the same sweep (the standing table's), their statistics
        after the series' in the result's list (``tree_costs`` reads the series' own)."""
        finals = [s.trees[-1] for s in self.series.values()] + list(riders)
        centers = self.centers if reference else self.centers[:0]
        given = {"nearest": nearest if reference and self.objective == "kmeans" else None, "space": space}
        layout = tuple(name for name, column in given.items() if column is not None)
        if not layout:
            return Reduction(curve_block, (), (finals, centers, self.objective), merge_curves)
        return Reduction(curve_block_of_columns, tuple(given[name] for name in layout),
                         (layout, finals, centers, self.objective), merge_curves)

    def tree_costs(self, result) -> tuple[dict[str, list[float]], float]:
        """From the pass's ``result``: every series' cost per tree (the objective's cost, see the
        module's docstring) and the reference cost to the nearest center."""
        families, ref = result
        families = families[: len(self.series)]  # riders' statistics follow
        k = self.n_clusters
        costs = {name: [_cost_of(_prefix_stats(stats, reps, tree, k), self.objective) for tree in series.trees]
                 for (name, series), (stats, reps) in zip(self.series.items(), families, strict=True)}
        return costs, float(ref[0])

    def final_leaf_counts(self, result) -> dict[str, np.ndarray]:
        """From the pass's ``result``: the rows that reached each node of every series' final tree."""
        return {name: stats[:, 0] for name, (stats, _) in zip(self.series, result[0][: len(self.series)], strict=True)}

    def finish(self, result) -> dict:
        """``{"leaves", "cost", <one ratio list per series>, <"NAME_surrogate" per surrogate series>,
        "reference_cost", "baselines"}``."""
        costs, ref = self.tree_costs(result)
        out: dict = {"leaves": self.leaves, "cost": CURVE_COSTS[self.objective]}
        for name, series_costs in costs.items():
            out[name] = [c / ref for c in series_costs]
        for name, series in self.series.items():
            if series.surrogate is not None:
                out[f"{name}_surrogate"] = [c / ref for c in series.surrogate]
        out.update(reference_cost=ref, baselines=self.baselines)
        return out
