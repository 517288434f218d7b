"""The report's cost curve for a run: the series its registry entry names, fitted on the run's sample.

Which algorithms a curve compares is the registry's (``Algorithm.curve``: ExKMC, CART and KDTree
for the data-driven trees, as paper 003's Figure 2); each series' trees come from its estimator's
``prefix_trees`` (one fit at the largest leaf count holds every smaller tree). The trees are fitted
in memory on an exact uniform sample of the rows (no pass), then ``exclust.scoring.curves`` scores
every tree and the reference cost in one pass, fused by the pipeline into scoring's pass.
"""
from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

import numpy as np

from exclust.dataplane._center_distances import nearest_center, nearest_center_l1
from exclust.dataplane.parts import passes_paused, run_reductions, sample_ids, uniform_sample
from exclust.jobs import registry
from exclust.scoring.curves import CURVE_COSTS, CurvePlan
from exclust.sources.dataset import Dataset, as_matrix
from exclust.tree.style import columns_text

# The series' trees are fitted on at most this many of the sample's rows: a 20-leaf CART or
# KDTree is as good from 50k uniform rows as from 200k, and scikit-learn's CART on 200k x 20
# took 4x as long (it sorts every feature at every node).
BASELINE_ROWS = 50_000


def baseline_rows(sample: np.ndarray, sample_labels, max_rows: int, random_state,
                  space: np.ndarray | None = None) -> tuple[np.ndarray, Any, np.ndarray | None]:
    """The rows baseline trees are fitted on: the run's uniform ``sample`` (its labels, or None;
    its clustering columns ``space``, or None) cut to a uniform ``max_rows`` of them, as contiguous float64."""
    if sample.shape[0] > max_rows:  # a uniform subsample of a uniform sample is uniform
        keep = sample_ids(sample.shape[0], max_rows, random_state)
        sample = sample[keep]
        sample_labels = None if sample_labels is None else np.asarray(sample_labels)[keep]
        space = None if space is None else space[keep]
    space = None if space is None else np.ascontiguousarray(space, dtype=np.float64)
    return np.ascontiguousarray(sample, dtype=np.float64), sample_labels, space


def sample_dataset(sample: np.ndarray, feature_names, space: np.ndarray | None = None,
                   like: Dataset | None = None) -> Dataset:
    """The baseline trees' input: the sampled rows as a Dataset with the run's category vocabularies
    and missing-value counts (``like``, the run's Dataset), and its clustering columns ``space``
    (``cluster_X``: IMM and ExKMC then price their cuts there, where the centers live)."""
    names = list(feature_names) if feature_names is not None else [f"x{j}" for j in range(sample.shape[1])]
    cluster_names = None
    if space is not None:
        cluster_names = (list(like.cluster_names) if like is not None and like.cluster_names else
                         [f"z{j}" for j in range(space.shape[1])])
    return Dataset(sample, names, categories=dict(like.categories) if like is not None else {},
                   missing=dict(like.missing) if like is not None else {}, cluster_X=space,
                   cluster_names=cluster_names)


def fits_in_space(name: str) -> bool:
    """Whether the registered algorithm ``name`` can fit when the centers live in other columns than
    the features: it reads labels (CART), or its ``fit`` takes the clustering columns (``Z=``)."""
    entry = registry.algorithm(name)
    if entry.needs == registry.LABELS:
        return True
    return entry.needs == registry.CENTERS and "Z" in inspect.signature(entry.estimator_class().fit).parameters


# Why a builder is left out of the curve and the standing table of a run clustered on other columns.
NOT_IN_SPACE = ("it prices its cuts with centers in the features' own space; this run's centers live in the "
                "clustering columns {columns}, which its fit does not read (no Z=...)")


def plan_curve(sample: np.ndarray, sample_labels, centers, leaves: Sequence[int], *,
               series: Sequence[str] = registry.PAPER_003_CURVE, fitted: Any = None, feature_names=None,
               max_bins: int = 256, random_state=0, n_rows: int | None = None, objective: str = "kmeans",
               max_rows: int = BASELINE_ROWS, space: np.ndarray | None = None,
               like: Dataset | None = None, prefitted: dict | None = None) -> CurvePlan | None:
    """Fit the curve's ``series`` (registered algorithm names) on an in-memory uniform ``sample`` of
    the rows (with their reference labels), cut to a uniform ``max_rows`` of them. ``fitted``: the
    run's own estimator, which a series of its kind reuses when it holds the prefixes the curve
    needs (ExKMC grown to at least ``max(leaves)`` leaves from these centers). ``space``: the
    sample's clustering columns when the centers live there (``cluster_on``); the series that cannot
    fit with them are left out, and the curve's ``baselines`` say so (None when none is left).
    ``like``: the run's Dataset, whose category vocabularies and missing-value counts (and
    clustering columns' names) the sample keeps. ``prefitted``: series this function fitted already
    on the same sample (``fits_ahead``: ``CurveSeries`` by name), taken as they are. No pass over the data."""
    if objective not in CURVE_COSTS:
        raise ValueError(f"objective must be one of {', '.join(CURVE_COSTS)}, not {objective!r}")
    centers = np.asarray(centers, dtype=np.float64)
    k = int(centers.shape[0])
    leaves = sorted({int(L) for L in leaves})
    if not leaves or leaves[0] < k:
        raise ValueError(f"leaves must be leaf counts >= n_clusters={k}, got {leaves}")
    sample, sample_labels, space = baseline_rows(sample, sample_labels, max_rows, random_state, space)
    ds = sample_dataset(sample, feature_names, space, like)
    left_out = [name for name in series if space is not None and not fits_in_space(name)]
    series = [name for name in series if name not in left_out]
    if not series:  # none can fit in the clustering columns: no curve
        return None
    if sample_labels is None:
        rows = sample if space is None else space  # the centers' space
        sample_labels = (nearest_center_l1(rows, centers) if objective == "kmedians"
                         else nearest_center(rows, centers))[0]
    fitted_series = {}
    with passes_paused():  # passes over the in-memory sample, not over the data
        for name in series:
            if prefitted and name in prefitted:
                fitted_series[name] = prefitted[name]
                continue
            estimator = registry.algorithm(name).estimator_class()
            fitted_series[name] = estimator.prefix_trees(
                ds, sample_labels, centers, leaves, objective=objective, random_state=random_state,
                max_bins=max_bins, fitted=fitted, n_rows=n_rows)
    of = f"{sample.shape[0]} rows" + (f" of {n_rows}" if n_rows else "")
    # The same words whether or not a series was read from the run's own tree: fits on the sample
    # and on all rows agree when the sample is all rows.
    baselines = (f"{_and([registry.title(name) for name in series])} fitted on a uniform sample of {of} "
                 "(or read from the run's own tree), every tree scored on all rows")
    if space is not None:
        baselines += f", costs measured on the clustering columns {columns_text(ds.cluster_names or ())}"
    if left_out:
        baselines += (f"; {_and([registry.title(name) for name in left_out])} left out: "
                      + NOT_IN_SPACE.format(columns=columns_text(ds.cluster_names or ())))
    return CurvePlan(leaves, fitted_series, centers, baselines, objective)


def _and(words: list[str]) -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def cost_ratio_curve(
    X, centers, leaves: Sequence[int], reference_labels=None, max_bins: int = 256, random_state=0, exkmc=None,
    sample_rows: int = BASELINE_ROWS, objective: str = "kmeans", series: Sequence[str] = registry.PAPER_003_CURVE,
) -> dict:
    """Cost ratio (tree cost / reference cost) of ExKMC, CART and KDTree (``series``) at each leaf count.

    ``centers`` are the reference centers; ``reference_labels`` (default: nearest center) are
    what CART learns. ``objective``: "kmeans" (k-means cost) or "kmedians" (the l1 surrogate:
    each cluster charged to its cheapest center in l1, over the l1 reference cost; ExKMC then
    grows by the l1 surrogate too). The series are built on an exact uniform sample of
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
    plan = plan_curve(sample, labels[0] if labels else None, centers, leaves, series=series, fitted=exkmc,
                      feature_names=ds.feature_names, max_bins=max_bins, random_state=random_state,
                      n_rows=ds.n_rows, objective=objective, max_rows=int(sample_rows))
    assert plan is not None  # every series fits when the centers live in the features
    (result,) = run_reductions(ds.X, [plan.reduction()])
    return plan.finish(result)
