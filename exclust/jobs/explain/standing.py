"""Where a run's tree stands (issue 21, item 5): its price beside the trees the other greedy
algorithms build on the same centers, and the exact optimum where the instance is small.

Which algorithms stand beside the run's tree is the registry's (``Algorithm.standing``: IMM,
ExKMC, ExGreedy, ExShallow, KDTree, CART). Each is made and fitted as a run of it would be
(``entry.make`` / ``entry.fit_in_run``: the run's options, the reference's centers, CART the
reference labels), but in memory on the cost curve's uniform sample of the rows (no pass); a
tree the curve fitted already at that leaf count is taken from the curve instead of fitted
again, and the run's own tree is the one it built on all rows. Every tree is then scored on all
rows in scoring's one pass (``scoring.curves.CurvePlan``'s reduction, one tree per series), so
the table costs no pass of its own.

Prices are as the run's headline price: under the k-means objective the k-means cost of a
tree's clusters (each scored by its own mean) divided by the reference clusters' k-means cost
(``kmeans_cost_reference`` of scoring's pass). Under k-medians, the exact k-medians price needs
bisection passes per tree; the table shows the l1 surrogate price the cost curve shows (each
cluster charged to its cheapest center in l1, over the l1 cost to the nearest center), for the
run's tree too, and says so.

The exact optimum (``algorithms.search.optimal_tree``, the best k-leaf tree by k-means cost) is
computed when the run's sample holds every row and the search is known to take a few seconds
(``optimal_tree.small_enough``).

The proven bound (issue 30): under k-means, when the run's sample holds every row,
``OptimalTree`` searches for at most ``BOUND_SECONDS`` (stated in the table's note) and gives a
lower bound on the cost of any k-leaf tree; its own tree joins the table, and every row gets its
proven gap to the bound ("within 3.1% of the best possible k-leaf tree", "optimal" when met).
The bound holds for any tree when every feature was binned at every midpoint of its values
(``OptimalTree.exact_bins_``); otherwise only for trees cutting at the bin edges, and the other
trees get no gap. On a sample of the rows no bound is given (a sample's optimum bounds nothing
about all rows).
"""
from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import numpy as np

from exclust.dataplane.parts import kernel_threading, passes_paused
from exclust.dataplane.row_share import on_row_share
from exclust.errors import InputError
from exclust.jobs import registry
from exclust.jobs.explain.cost_curve import (
    BASELINE_ROWS,
    NOT_IN_SPACE,
    baseline_rows,
    fits_in_space,
    plan_curve,
    sample_dataset,
)
from exclust.jobs.explain.fits_ahead import FittedAhead, curve_leaves, sample_reference_labels
from exclust.scoring.curves import CURVE_COSTS, CurvePlan, CurveSeries, routes_alike
from exclust.sources.dataset import Dataset
from exclust.tree import ThresholdTree
from exclust.tree.style import columns_text

# At more than twice this many rows, under k-means, the table's trees that the scores' pass does not
# route anyway are priced on a uniform sample of about this many rows, beside the run's tree (issue 29
# item 4: routing six more trees through every row was 0.6-0.8 s of a 15 s job at 10M). Their
# prices' error at this size is in bench/README.md ("The standing table on a sample").
PRICED_ROWS = 1_000_000

# What the table says when a run gets none.
NO_CENTERS = ("No standing table: the reference is {what}, with no centers the other algorithms could "
              "build their trees from.")


@dataclass
class StandingPlan:
    """The trees of the standing table (the run's own first) and the reduction that scores them."""

    own: str
    plan: CurvePlan  # one series per algorithm, holding its one tree
    objective: str
    fitted_on: str  # how the others' trees were built
    # The best k-leaf tree on all rows, its k-means cost and its weighted average depth.
    optimum: tuple[ThresholdTree, float, float] | None = None
    optimum_note: str | None = None  # why there is no optimum row
    bound: dict[str, Any] | None = None  # issue 30: the proven lower bound on any k-leaf tree's cost
    bound_note: str | None = None  # why there is no bound, or what it holds for
    # Standing algorithms left out of the table: {"algorithm", "title", "reason"} each.
    left_out: list[dict[str, str]] | None = None
    # Riding on the cost curve's sweep (``ride_on``): where each tree's statistics are in the curve's
    # result, by algorithm (a tree routed as a final tree of the curve's is read there, not routed twice).
    at: dict[str, int] | None = None
    # The share of the rows the trees not in the curve's sweep are priced on (``PRICED_ROWS``), None for all
    # rows; the seed of the rows' draw; and (set by ``reduction``) the trees priced so and their plan, the
    # run's tree first, whose price on all rows scales theirs.
    priced_share: float | None = None
    seed: int = 0
    sampled: list[str] | None = None
    sampled_plan: CurvePlan | None = None

    def ride_on(self, curve: CurvePlan | None) -> list[ThresholdTree] | None:
        """The trees to route in ``curve``'s sweep beside its own (``CurvePlan.reduction(riders=)``),
        none of those that route as one of its final trees (the run's own, CART's, KDTree's at the
        run's leaf count): every row read and routed once for both. None when the table cannot ride
        (no curve, or another objective or centers): it then takes a sweep of its own (``reduction``).
        Per tree the sums are the same to the last bit (``forest_moments`` sums each tree apart)."""
        self.at = None
        if curve is None or curve.objective != self.objective or not np.array_equal(curve.centers, self.plan.centers):
            return None
        finals = [series.trees[-1] for series in curve.series.values()]
        riders: list[ThresholdTree] = []
        self.at = {}
        for name, series in self.plan.series.items():
            alike = [i for i, final in enumerate(finals) if routes_alike(series.trees[0], final)]
            if not alike and self.priced_share is not None:
                continue  # priced on the sample, in the table's own reduction
            self.at[name] = alike[0] if alike else len(finals) + len(riders)
            riders += [] if alike else [series.trees[0]]
        return riders

    def reduction(self, nearest=None, space=None):
        """The table's own reduction in the scores' pass, after ``ride_on``: None when every tree rode on the
        curve's sweep; else over all rows every tree (no curve to ride on), or with ``priced_share`` over that
        share of the rows the trees that did not ride, the run's tree beside them (``finish`` scales their
        costs by its). ``space``: the clustering columns the costs are measured on (CurvePlan.reduction)."""
        if self.priced_share is None:
            if self.at is not None:
                return None
            # Under k-means the table's reference cost is scoring's own (``finish``): the trees only.
            return self.plan.reduction(nearest, reference=self.objective != "kmeans", space=space)
        self.sampled = [name for name in self.plan.series if name not in (self.at or {}) and name != self.own]
        if not self.sampled:
            return None
        self.sampled_plan = self.plan.of_series([self.own, *self.sampled])
        return on_row_share(self.sampled_plan.reduction(nearest, space=space), self.priced_share, self.seed)

    def finish(self, curve_result, own_result, scores: dict[str, Any]) -> dict[str, Any]:
        """metrics.json's ``standing``: one row per tree (price, weighted average depth, leaves;
        the run's own and the best marked; the gap to the optimum where it is known; ``sampled`` where
        it was priced on the sample). ``curve_result``: the curve's sweep, read for the trees that rode
        on it (``ride_on``); ``own_result``: the table's own reduction's (``reduction``), or None."""
        costs: dict[str, list[float]] = {}
        counts: dict[str, np.ndarray] = {}
        nearest_cost = 0.0
        if self.at:  # the curve's sweep: its reference cost is the same (same centers and objective)
            rode = self.plan.of_series(list(self.at))
            result = ([curve_result[0][i] for i in self.at.values()], curve_result[1])
            costs, nearest_cost = rode.tree_costs(result)
            counts = rode.final_leaf_counts(result)
        if own_result is not None and self.sampled_plan is None:
            costs, nearest_cost = self.plan.tree_costs(own_result)
            counts = self.plan.final_leaf_counts(own_result)
        reference = scores.get("kmeans_cost_reference") if self.objective == "kmeans" else nearest_cost
        if self.objective == "kmeans" and scores.get("kmeans_cost_tree") is not None:
            # The run's tree was scored by scoring's own statistics too: its row is the headline price itself.
            costs[self.own] = [scores["kmeans_cost_tree"]]
        sampled = set()
        if own_result is not None and self.sampled_plan is not None:
            on_sample, reference_on_sample = self.sampled_plan.tree_costs(own_result)
            sample_counts = self.sampled_plan.final_leaf_counts(own_result)
            # Priced against the run's tree on the same rows: its cost on all rows over its cost on the sample
            # (the two trees agree on most rows, so most of the sample's error cancels); else the reference's.
            own_cost = costs.get(self.own, [None])[0]
            if own_cost is not None and on_sample[self.own][0] > 0:
                scale = own_cost / on_sample[self.own][0]
            else:
                scale = (reference or 0.0) / reference_on_sample if reference_on_sample > 0 else float("nan")
            for name in [*(self.sampled or ()), *([] if self.own in costs else [self.own])]:
                costs[name] = [on_sample[name][0] * scale]
                counts[name] = sample_counts[name]
                sampled.add(name)
            counts.setdefault(self.own, sample_counts[self.own])
        rows: list[dict[str, Any]] = []
        for name, series in self.plan.series.items():
            tree = series.trees[0]
            reached = counts[name][tree.leaves]
            rows.append({
                "algorithm": name, "title": registry.title(name), "n_leaves": int(tree.n_leaves),
                "cost": float(costs[name][0]), "price": _ratio(costs[name][0], reference),
                "weighted_avg_depth": (float((reached * tree.node_depths()[tree.leaves]).sum() / reached.sum())
                                       if reached.sum() else None),
                "own": name == self.own, "sampled": name in sampled,
            })
        best = min((r["price"] for r in rows if r["price"] is not None), default=None)
        for r in rows:  # ties within rounding (the same tree found twice) are all best
            r["best"] = best is not None and r["price"] is not None and r["price"] <= best * (1 + 1e-9)
        optimum: dict[str, Any] | None = None
        if self.optimum is not None:
            tree, cost, depth = self.optimum
            optimum = {"cost": float(cost), "price": _ratio(cost, reference), "n_leaves": int(tree.n_leaves),
                       "weighted_avg_depth": depth}
            for r in rows:
                ratio = _ratio(r["price"], optimum["price"]) if r["price"] is not None and optimum["price"] else None
                r["gap"] = None if ratio is None else ratio - 1.0
        out = {"cost": CURVE_COSTS[self.objective], "reference_cost": reference, "rows": rows,
               "optimum": optimum, "optimum_note": self.optimum_note, "fitted_on": self.fitted_on,
               "left_out": list(self.left_out or [])}
        out.update(_bound_rows(self.bound, self.bound_note, rows, reference))
        return out


def _ratio(a, b) -> float | None:
    if a is None or b is None:
        return None
    return float(a / b) if b else (1.0 if a == 0 else float("inf"))


def skipped(reason: str) -> dict[str, Any]:
    """metrics.json's ``standing`` of a run that gets no table: the sentence the report shows."""
    return {"note": reason}


def plan_standing(config: Any, own_tree: ThresholdTree, centers: np.ndarray, sample: np.ndarray,
                  sample_labels, n_rows: int, feature_names, curve: CurvePlan | None = None, *,
                  space: np.ndarray | None = None, like: Dataset | None = None,
                  prefitted: dict[str, ThresholdTree] | None = None) -> StandingPlan:
    """Fit the registry's standing algorithms on the run's uniform ``sample`` (its reference
    labels ``sample_labels``) from ``centers``, cut to the curve's ``BASELINE_ROWS`` as the curve
    is; trees the cost curve's ``curve`` holds at the same leaf count are taken from it. No pass.
    ``space``: the sample's clustering columns when the centers live there (``cluster_on``): the
    algorithms that cannot fit with them are left out with the reason (``left_out``), and the
    exact optimum and the proven bound, which search the features' own k-means cost, are not
    computed. ``like``: the run's Dataset (category vocabularies, missing values, column names).
    ``prefitted``: trees ``fit_standing`` made already on the same sample (``fits_ahead``), taken as they are."""
    centers = np.asarray(centers, dtype=np.float64)
    all_rows = sample.shape[0] == n_rows  # before the cut: the optimum needs every row
    if space is None:
        certified, bound, bound_note = _bound(sample if all_rows else None, config, feature_names)
        optimum, note = _optimum(sample if all_rows else None, config, n_rows, list(feature_names), bound)
    else:
        certified, bound, optimum, bound_note = None, None, None, None
        note = (f"No exact optimum or proven bound: they search the k-means cost in the features' own "
                             f"space, and this run's costs are measured on the clustering columns "
                             f"{columns_text(like.cluster_names or ()) if like is not None else ''}.")
    sample, sample_labels, space = baseline_rows(sample, sample_labels, BASELINE_ROWS, config.random_state, space)
    data = sample_dataset(sample, feature_names, space, like)
    others, left_out = fit_standing(config, centers, data, sample_labels, space, curve, prefitted=prefitted)
    trees: dict[str, ThresholdTree] = {config.algorithm: own_tree, **others}
    if certified is not None and "optimal" not in trees:
        trees["optimal"] = certified
    of = f"{data.n_rows:,} rows" + ("" if data.n_rows == n_rows else f" of {n_rows:,}")
    # A proven bound needs every tree's cost on all rows; it is only given where the sample holds every row.
    sampled = config.objective == "kmeans" and n_rows > 2 * PRICED_ROWS and bound is None
    share = PRICED_ROWS / n_rows if sampled else None
    scored = ("every tree scored on all rows" if share is None else
              f"the run's tree and those the cost curve routes scored on all rows, the others (marked ≈) on a uniform "
              f"sample of about {PRICED_ROWS:,} of the {n_rows:,} rows, each priced as the run's tree's price on all "
              "rows times their cost over its cost on those rows")
    fitted_on = (f"the other trees fitted on a uniform sample of {of} from the run's centers (CART on the "
                 f"reference labels), the run's tree on all rows; {scored}"
                 + (f", costs measured on the clustering columns {columns_text(data.cluster_names or ())}"
                    if space is not None else ""))
    plan = CurvePlan([int(own_tree.n_leaves)], {name: CurveSeries([tree]) for name, tree in trees.items()},
                     centers, fitted_on, config.objective)
    return StandingPlan(config.algorithm, plan, config.objective, fitted_on, optimum, note, bound, bound_note,
                        left_out, priced_share=share, seed=int(config.random_state or 0))


def fit_standing(config: Any, centers: np.ndarray, data: Dataset, sample_labels, space: np.ndarray | None,
                 curve: CurvePlan | None, *, prefitted: dict[str, ThresholdTree] | None = None,
                 skip=()) -> tuple[dict[str, ThresholdTree], list[dict[str, str]]]:
    """The standing algorithms' trees but the run's own (by name, in the registry's order) and those
    left out (``left_out``'s rows), fitted on ``data``, the baseline rows (``baseline_rows``) as a
    Dataset, from ``centers`` (CART from ``sample_labels``); a tree the ``curve`` holds at its leaf
    count is taken from it, one in ``prefitted`` as it is; the algorithms in ``skip`` are not fitted."""
    k = int(centers.shape[0])
    reference = SimpleNamespace(centers=centers, labels=sample_labels, summary=None)
    trees: dict[str, ThresholdTree] = {}
    left_out: list[dict[str, str]] = []
    # Fits on the in-memory sample, not passes over the data; their kernels on one thread: on at
    # most 50,000 rows numba's thread pool cost more than it saved (IMM, ExGreedy, ExShallow on
    # 50k x 2, k = 5, load 6 on 2 cores: 0.2-1.3 s each on 2 threads, 0.03-0.06 s on one).
    with passes_paused(), kernel_threading(1):
        for name in registry.standing():
            entry = registry.algorithm(name)
            if name == config.algorithm or (config.objective not in entry.objectives
                                            and entry.needs != registry.LABELS):
                continue
            if entry.needs == registry.LABELS and sample_labels is None:
                continue
            if space is not None and not fits_in_space(name):
                left_out.append({"algorithm": name, "title": registry.title(name),
                                 "reason": NOT_IN_SPACE.format(columns=columns_text(data.cluster_names or ()))})
                continue
            if name in skip:
                continue
            leaves = int(config.leaves or config.k) if entry.leaf_budget else k
            tree = _from_curve(curve, name, leaves) or (prefitted or {}).get(name)
            trees[name] = tree or entry.fit_in_run(entry.make(config, data), data, reference).tree_
    return trees, left_out


def fit_ahead(sample, ref, config: Any, data: Dataset, curve: bool, table: bool) -> FittedAhead:
    """The cost curve's series and the table's trees that need no tree of the run, fitted on the
    run's ``sample`` (``pipeline.RunSample``) as the score step fits them (``plan_curve``,
    ``fit_standing``): run by ``fits_ahead.start`` in a driver thread during the build."""
    labels = sample_reference_labels(sample, ref, config)
    own = registry.algorithm(config.algorithm)
    own_class = own.estimator_class()
    # The series the run's own estimator may hold (``prefix_trees(fitted=...)``) wait for the build.
    waits = {name for name in own.curve if name == config.algorithm
             or issubclass(own_class, registry.algorithm(name).estimator_class())}
    plan = None
    if curve and len(waits) < len(own.curve):
        plan = plan_curve(sample.X, labels, ref.centers, curve_leaves(config),
                          series=[name for name in own.curve if name not in waits], feature_names=data.feature_names,
                          random_state=config.random_state, n_rows=sample.n_rows, objective=config.objective,
                          space=sample.Z, like=data)
    fitted = FittedAhead(curve=dict(plan.series) if plan is not None else {})
    if table:
        rows, rows_labels, space = baseline_rows(sample.X, labels, BASELINE_ROWS, config.random_state, sample.Z)
        fitted.standing, _ = fit_standing(config, np.asarray(ref.centers, dtype=np.float64),
                                          sample_dataset(rows, data.feature_names, space, data), rows_labels,
                                          space, plan if curve else None, skip=waits)
    return fitted


def _from_curve(curve: CurvePlan | None, name: str, leaves: int) -> ThresholdTree | None:
    """The curve's tree of ``name`` at ``leaves`` leaves, when the curve has one."""
    if curve is None or name not in curve.series or leaves not in curve.leaves:
        return None
    return curve.series[name].trees[curve.leaves.index(leaves)]


def _optimum(rows: np.ndarray | None, config: Any, n_rows: int, feature_names, bound: dict[str, Any] | None = None):
    """((the optimal k-leaf tree, its cost, its weighted average depth), None) on a small instance,
    else (None, why not; and, when OptimalTree's branch and bound ran (``bound``), what it gave instead)."""
    from exclust.algorithms.search import optimal_tree as exact

    k, n_features = int(config.k), len(feature_names)
    if config.objective != "kmeans":
        return None, "The exact optimum is searched for the k-means cost only, not for this run's k-medians objective."
    if rows is None or not exact.small_enough(n_rows, n_features, k):
        size = (f"{n_rows:,} rows × {n_features} features, k = {k}: it runs on at most {exact.MAX_ROWS} rows and a "
                "few seconds' work")
        if bound is None:
            return None, f"The instance is too large for the exhaustive search for the exact optimum ({size})."
        # OptimalTree did run (its row is in the table): say what it found, not only what did not run.
        found = ("its tree is proven optimal among k-leaf trees" if bound["proven_optimal"] and bound["any_tree"] else
                 "its tree is proven optimal among trees cutting at its bin edges" if bound["proven_optimal"] else
                 "its tree and proven lower bound are in the table")
        return None, (f"The exhaustive search for the exact optimum did not run: the instance is too large for it "
                      f"({size}). OptimalTree's branch and bound ran on all rows instead: {found}.")
    try:
        tree, cost = exact.optimal_tree(rows, k, feature_names)
    except InputError:  # fewer than k distinct rows: no k-leaf tree exists
        return None, f"No exact optimum: the rows cannot be cut into k = {k} non-empty boxes."
    return (tree, cost, float(tree.node_depths()[np.asarray(tree.apply(rows))].mean())), None


BOUND_SECONDS = 5.0  # the certified search's budget in a run (issue 30), stated in the table's note


def _bound(rows: np.ndarray | None, config: Any, feature_names):
    """(OptimalTree's tree, its bound as metrics.json keeps it, a note) when the run's sample holds
    every row under k-means; else (None, None, why not). The estimator comes from the registry (imported when used)."""
    OptimalTree = registry.algorithm("optimal").estimator_class()  # noqa: N806 (a class)
    if config.objective != "kmeans":
        return None, None, "No proven bound: it is computed for the k-means cost only."
    if rows is None:
        return None, None, ("No proven bound: the run's sample does not hold every row, and a sample's best tree "
                            "bounds nothing about all rows.")
    try:
        with kernel_threading(1):
            model = OptimalTree(int(config.k), max_nodes=OptimalTree.REPORT_MAX_NODES, max_bins=1024).fit(
                Dataset(rows, list(feature_names)))
    except InputError as exc:
        return None, None, f"No proven bound: {exc}"
    bound = {"cost": model.lower_bound_, "proven_optimal": model.proven_optimal_, "any_tree": model.exact_bins_,
             "seconds": model.search_seconds_, "budget_seconds": BOUND_SECONDS, "nodes": model.nodes_searched_}
    scope = ("k-leaf tree" if model.exact_bins_ else
             "k-leaf trees cutting at its bin edges (features with more than 1,024 distinct values are binned)")
    note = (f"Proven bound: no {scope} costs less than {model.lower_bound_:.6g} (OptimalTree, branch and bound "
            f"with a {BOUND_SECONDS:g} s budget, {model.search_seconds_:.1f} s used"
            + ("; its tree is optimal)." if model.proven_optimal_ else ")."))
    return model.tree_, bound, note


def _bound_rows(bound: dict[str, Any] | None, note: str | None, rows: list[dict[str, Any]], reference) -> dict:
    """metrics.json's ``bound`` (its price) and each row's ``proven_gap`` (cost over the bound, less 1;
    only where the bound holds for that tree: any tree, or OptimalTree's own)."""
    if bound is None:
        return {"bound": None, "bound_note": note}
    bound = {**bound, "price": _ratio(bound["cost"], reference)}
    for r in rows:
        if bound["any_tree"] or r["algorithm"] == "optimal":
            r["proven_gap"] = (0.0 if r["cost"] <= bound["cost"] else
                               (_ratio(r["cost"], bound["cost"]) or 0.0) - 1.0)
    return {"bound": bound, "bound_note": note}
