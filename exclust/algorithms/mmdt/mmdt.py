"""MMDT: the Mixture Model Decision Tree, grown from a mixture's means and spreads alone.

Two papers define it (``../shared/papers``):

- Paper 000 (Fleissner, Zarvandi, Ghoshdastidar, "Decision Trees for Interpretable Clusters in
  Mixture Models and Deep Representations"), Algorithm 1: at every node, sort the node's means on
  each axis, take the largest gap between neighbours divided by sigma_j, and cut the best axis
  halfway across that gap (``threshold="midpoint"``). Appendix B (proof of Theorem 2): the
  randomized variant picks the axis of largest normalized range and draws theta uniformly on
  that range (``threshold="random"``).
- Paper 002 ("Explainable Clustering Beyond Worst-Case Guarantees"), Algorithm 1: axis
  i = argmax_j R_j / sigma_j with R_j the range of the node's means on axis j; threshold theta
  in (min, max) of those means minimizing the probability that a point of the node's mixture
  nu(N) = sum_k pbar_k nu_k is cut off from its own mean (eq. 4). With Gaussian components that
  probability is exact (``threshold="exact"``, each component with its own sigma_kj); otherwise
  the paper minimizes the Chebyshev bound sigma^2 / |mu_k - theta|^2 (eq. 5,
  ``threshold="chebyshev"``) or the Gaussian tail bound exp(-(theta - mu_k)^2 / 2 sigma^2)
  (eq. 6, ``threshold="gaussian"``; the variant used in its experiments, Section 6).

Every leaf holds exactly one mean (both papers' problem statement), so the tree has K leaves and
leaf value k stands for component k. Ties are broken at random (both papers: "if multiple
possible thresholds exist, one is chosen randomly") with ``random_state``. Nothing here touches
the data: the work is O(K^2 d) at most, whatever the number of points.
"""
from __future__ import annotations

import math
from numbers import Integral
from typing import Any

import numpy as np

from exclust.algorithms.mmdt._threshold_search import (
    CHEBYSHEV_BOUND,
    EXACT_GAUSSIAN,
    GAUSSIAN_BOUND,
    axis_gaps,
    interval_minima,
    normalized_ranges,
    separation_probability,
    split_orders,
    tied_gaps,
)
from exclust.errors import InputError
from exclust.estimator import RANDOM_STATE, Interval, StrOptions, TreeExplainer
from exclust.reference.summary import MixtureSummary
from exclust.sources.dataset import check_spread
from exclust.tree import TreeBuilder

THRESHOLDS = ("midpoint", "gaussian", "chebyshev", "exact", "random")
_KERNEL_KIND = {"gaussian": GAUSSIAN_BOUND, "chebyshev": CHEBYSHEV_BOUND, "exact": EXACT_GAUSSIAN}
_OBJECTIVE_NAME = {
    "midpoint": "largest normalized gap between neighbouring means (maximized)",
    "gaussian": "sum_k pbar_k exp(-(theta-mu_k)^2 / 2 sigma^2) (paper 002 eq. 6, minimized)",
    "chebyshev": "sum_k pbar_k min(1, sigma^2 / (theta-mu_k)^2) (paper 002 eq. 5, minimized)",
    "exact": "sum_k pbar_k Phi(-|theta-mu_k| / sigma_k) (paper 002 eq. 4, Gaussian components, minimized)",
    "random": "none (theta uniform on the range of the means, paper 000 Appendix B)",
}

# Search settings of the 1-D threshold problem. The margin keeps theta off the means: where the
# objective's infimum lies at a mean (the bounds are loose next to a mean, and very unequal
# weights push the cut toward the light mean) no minimizer exists on the open interval of eq. 4,
# and the cut is placed this fraction of the gap away from the mean instead.
_GRID = 17
_EDGE_MARGIN = 1e-3
_REFINE_WITHIN = 0.05
_REFINE_STEPS = 36
_PROBES = 4
_TIE_RTOL = 1e-9


def _ties(scores: np.ndarray, best: float, larger_is_better: bool) -> np.ndarray:
    """Indices whose score equals the best within a relative tolerance."""
    tol = _TIE_RTOL * abs(best) if np.isfinite(best) else 0.0
    if larger_is_better:
        return np.flatnonzero(scores >= best - tol)
    return np.flatnonzero(scores <= best + tol)


class _Builder:
    """The state of one MMDT fit: the mixture's arrays, the search settings and the random generator.

    ``MMDT.fit`` makes one, calls ``grow`` and keeps only what it returns, so the estimator holds
    its parameters and fitted attributes and nothing of the build.
    """

    def __init__(self, threshold: str, summary: MixtureSummary, random_state: Any) -> None:
        self.threshold = threshold
        self.rng = np.random.default_rng(random_state)
        self.means = summary.means
        self.weights = summary.weights
        self.sigma = summary.sigma
        self.sigma_k = summary.sigma_per_component
        self.names = summary.feature_names
        # Axes where sigma_j = 0 but all means agree are irrelevant: their normalized spread is 0.
        with np.errstate(divide="ignore", invalid="ignore"):
            self.inv_sigma = np.where(self.sigma > 0, 1.0 / self.sigma, 0.0)
        self.means_t: np.ndarray | None = None  # the means axis by axis, for the midpoint rule

    def grow(self) -> tuple[TreeBuilder, list[dict[str, Any]]]:
        """The tree (as a TreeBuilder, leaves holding one component each) and one diagnostics dict per cut."""
        means = self.means
        K, d = means.shape
        builder = TreeBuilder(n_features=d)
        diagnostics: list[dict[str, Any]] = []
        midpoint = self.threshold == "midpoint"
        root_order = None
        if midpoint:
            # Paper 000 sorts the node's means on every axis; sorting once at the root and
            # filtering the sorted lists down the tree gives every node its order in O(K d).
            self.means_t = means_t = np.ascontiguousarray(means.T)
            root_order = np.argsort(means_t, axis=1).astype(np.int64, copy=False)
        goes_left = np.zeros(K, dtype=np.int64)
        stack = [(builder.add_node(), np.arange(K), root_order)]
        while stack:
            node, comps, order = stack.pop()
            if comps.size == 1:
                builder.make_leaf(node, int(comps[0]))
                continue
            diag = self.split(comps, order)
            j, theta = diag["feature"], diag["threshold"]
            left_mask = means[comps, j] <= theta
            left, right = builder.split(node, j, theta)
            diagnostics.append({"node": node, **diag})
            left_order = right_order = None
            if midpoint:
                goes_left[comps] = left_mask
                left_order, right_order = split_orders(order, goes_left, int(left_mask.sum()))
            # Right child first on the stack so the left subtree gets the smaller node ids.
            stack.append((right, comps[~left_mask], right_order))
            stack.append((left, comps[left_mask], left_order))
        return builder, diagnostics

    def split(self, comps: np.ndarray, order: np.ndarray | None) -> dict[str, Any]:
        """Axis, threshold and diagnostics of the cut at a node holding components ``comps``.

        ``order`` (midpoint only): the node's per-axis sorted component lists (d x K_node).
        """
        if order is not None:  # the node's sorted lists give each axis' range in O(d)
            lo_k, hi_k = order[:, 0], order[:, -1]
            cols = np.arange(order.shape[0])
            R = (self.means[hi_k, cols] - self.means[lo_k, cols]) * self.inv_sigma
        else:
            R = normalized_ranges(self.means, comps, self.inv_sigma)
        best = R.max()
        if best <= 0:
            # Axes with sigma 0 vary nowhere (checked in fit), so the node's means coincide.
            raise InputError(
                f"components {comps.tolist()} have identical means on every feature, so no "
                "axis-aligned tree can give each its own leaf; merge them or refit the mixture"
            )
        if self.threshold == "midpoint":
            assert order is not None  # grow gives every node its sorted lists under the midpoint rule
            j, theta, separation, objective = self.midpoint_cut(order)
            at_edge = False
        else:
            j = self.pick(_ties(R, best, True))
            separation = float(best)
        values = self.means[comps, j]
        w = self.weights[comps]
        w = w / w.sum()
        if self.threshold == "random":
            theta = self.random_threshold(values)
            objective, at_edge = math.nan, False
        elif self.threshold != "midpoint":
            theta, objective, at_edge = self.optimal_threshold(comps, j, values, w)
        cut_off = separation_probability(EXACT_GAUSSIAN, float(theta), values, w, self.sigma_k[comps, j])
        return {
            "components": comps.tolist(),
            "feature": int(j),
            "feature_name": self.names[j],
            "threshold": float(theta),
            "normalized_separation": float(separation),
            "cut_off_share": float(cut_off),
            "objective": float(objective),
            "at_edge": bool(at_edge),
        }

    def midpoint_cut(self, order: np.ndarray):
        """Paper 000, Algorithm 1: largest normalized gap between neighbouring means, cut halfway."""
        gaps = axis_gaps(self.means_t, order, self.inv_sigma)
        best, axes, lows, highs = tied_gaps(self.means_t, order, self.inv_sigma, gaps, _TIE_RTOL)
        pick = self.pick(np.arange(axes.size))
        lo, hi = lows[pick], highs[pick]
        theta = 0.5 * (lo + hi)
        if not lo < theta < hi:  # neighbours one float apart: the cut x <= lo still separates them
            theta = lo
        return int(axes[pick]), float(theta), float(best), float(best)

    def random_threshold(self, values: np.ndarray) -> float:
        """Paper 000, Appendix B: theta uniform on [min, max] of the node's means on the axis."""
        lo, hi = values.min(), values.max()
        for _ in range(100):
            theta = self.rng.uniform(lo, hi)
            if lo < theta < hi and not (values == theta).any():
                return float(theta)
        return float(0.5 * (lo + hi)) if not (values == 0.5 * (lo + hi)).any() else float(lo)

    def pick(self, candidates: np.ndarray) -> int:
        """One of the tied candidates, at random (the papers: 'one is chosen randomly')."""
        return int(candidates[0] if candidates.size == 1 else self.rng.choice(candidates))

    def optimal_threshold(self, comps: np.ndarray, j: int, values: np.ndarray, w: np.ndarray):
        """Paper 002, eq. 4-6: minimize the weighted separation probability over (min, max)."""
        if self.threshold == "exact":
            sig = self.sigma_k[comps, j]
        else:
            sig = np.full(comps.size, self.sigma[j])
        cuts = np.unique(values)
        thetas, f, g = interval_minima(
            _KERNEL_KIND[self.threshold], values, w, sig,
            cuts, _GRID, _EDGE_MARGIN, _REFINE_WITHIN, _REFINE_STEPS, _PROBES,
        )
        # f holds log objectives: an absolute tolerance on them is a relative one on the objective.
        tied = np.flatnonzero(f <= f.min() + _TIE_RTOL)
        if tied.size > 1:  # break by the tie-breaker (uncapped Chebyshev), then at random
            tied = tied[_ties(g[tied], g[tied].min(), False)]
        a = self.pick(tied)
        theta = float(thetas[a])
        lo, hi = cuts[a], cuts[a + 1]
        if not lo < theta < hi:
            theta = float(0.5 * (lo + hi)) if lo < 0.5 * (lo + hi) < hi else float(lo)
        gap = hi - lo
        at_edge = min(theta - lo, hi - theta) <= 1.5 * _EDGE_MARGIN * gap
        return theta, float(np.exp(f[a])), bool(at_edge)



class MMDT(TreeExplainer):
    """Mixture Model Decision Tree (paper 000 Alg. 1 and App. B; paper 002 Alg. 1).

    Parameters
    ----------
    threshold : {"exact", "gaussian", "chebyshev", "midpoint", "random"}, default="exact"
        How a node's cut is placed (see the module docstring). ``"exact"`` uses each component's
        own per-axis standard deviation (``summary.sigma_per_component``); the other variants
        use the coordinate-wise sigma_j (``summary.sigma``: the within-component standard
        deviation pooled over components, paper 002's sigma_j). Axis choice always normalizes by
        ``summary.sigma``; paper 000's analysis takes sigma_j as a bound over components (its
        Assumption 1: max_k), which a caller can pass as ``MixtureSummary(sigma=...)``.
    random_state : None, int or numpy Generator, default=None
        Breaks ties and draws the thresholds of ``"random"``; the same seed gives the same tree.
    n_clusters : int or None, default=None
        The number of clusters the tree explains. MMDT reads it from the summary (one leaf per
        component); given, ``fit`` checks that the summary has that many components.

    Attributes
    ----------
    tree_ : ThresholdTree with K leaves, leaf value k = component k.
    node_diagnostics_ : list of dicts, one per internal node (see ``fit``).
    enr_ : explainability-to-noise ratio of the mixture, paper 002 convention (Definition 2);
        paper 000's q (Definition 1) is ``enr_ / 2``.
    summary_ : the MixtureSummary the tree was grown from.
    """

    _parameter_constraints = {"threshold": [StrOptions(set(THRESHOLDS))], "random_state": RANDOM_STATE,
                              "n_clusters": [None, Interval(Integral, 2, None, closed="left")]}

    def __init__(self, threshold: str = "exact", random_state: Any = None, *, n_clusters: int | None = None) -> None:
        self.threshold = threshold
        self.random_state = random_state
        self.n_clusters = n_clusters

    # ------------------------------------------------------------------ fitting
    def fit(self, summary: MixtureSummary, y: Any = None) -> MMDT:
        """Grow the tree from a MixtureSummary (means, sigma, weights); no pass over any data.

        ``node_diagnostics_`` gets one dict per internal node: ``node``, ``components`` at the
        node, ``feature`` (axis index) and ``feature_name``, ``threshold``,
        ``normalized_separation`` (the gap (midpoint) or range (other variants) of the node's
        means on the axis, divided by sigma_j), ``cut_off_share`` (estimated share of the node's
        points cut off from their own mean by this cut, under the Gaussian model with each
        component's own sigma: sum_k pbar_k Phi(-|theta - mu_kj| / sigma_kj)), ``objective``
        (the value of the criterion that chose the cut; NaN for ``"random"``) and
        ``at_edge`` (True when the cut sits at the search margin next to a mean).
        """
        self._check_params()
        if not isinstance(summary, MixtureSummary):
            raise InputError(
                f"MMDT.fit needs a MixtureSummary, got {type(summary).__name__}; build one with "
                "MixtureSummary(means=..., sigma=..., weights=...) or from a fitted mixture"
            )
        means = summary.means
        K, d = means.shape
        if self.n_clusters is not None and K != self.n_clusters:
            raise InputError(f"n_clusters={self.n_clusters}, but the mixture summary has {K} components; MMDT builds "
                             f"one leaf per component: give a summary of that many components or n_clusters={K}")
        self._check_inputs(summary)
        builder, diagnostics = _Builder(self.threshold, summary, self.random_state).grow()

        meta = {
            "algorithm": "mmdt",
            "threshold": self.threshold,
            "objective": _OBJECTIVE_NAME[self.threshold],
            "reference": "paper 000 Alg. 1" if self.threshold == "midpoint"
            else "paper 000 App. B" if self.threshold == "random" else "paper 002 Alg. 1",
            "random_state": self.random_state if isinstance(self.random_state, (int, type(None))) else "generator",
            "weights": summary.weights.tolist(),
        }
        tree = builder.build(feature_names=summary.feature_names, n_clusters=K, meta=meta)
        # The papers' defining constraint: every leaf holds exactly one mean, and it is its own.
        routed = tree.predict(means)
        if tree.n_leaves != K or not np.array_equal(routed, np.arange(K)):
            raise AssertionError(f"MMDT built a tree whose leaves do not hold one mean each: {routed.tolist()}")
        self.tree_ = tree
        self.node_diagnostics_ = diagnostics
        self.n_passes_ = 0  # built from the mixture's summary alone: no pass over the data
        self.summary_ = summary
        self._enr: float | None = None
        self._record_features(d, summary.feature_names)
        return self

    def _check_inputs(self, summary: MixtureSummary) -> None:
        means = summary.means
        spread_matters = np.ptp(means, axis=0) > 0
        if not np.isfinite(summary.sigma).all() or (summary.sigma[spread_matters] <= 0).any():
            cols = np.flatnonzero(spread_matters)
            # check_spread names the features whose sigma is 0 while their means differ.
            check_spread(summary.sigma[cols], [summary.feature_names[j] for j in cols])
        if self.threshold == "exact" and not np.isfinite(summary.sigma_per_component).all():
            raise InputError("sigma_per_component must be finite for threshold='exact'")

    # ------------------------------------------------------------------ using the tree
    @property
    def enr_(self) -> float:
        """Explainability-to-noise ratio of the fitted mixture (paper 002, Definition 2; paper 000's q is half).

        Computed on first use: it costs O(K^2 d), more than growing the tree.
        """
        self._check_fitted()
        if self._enr is None:
            from exclust.algorithms.mmdt.bounds import explainability_to_noise_ratio

            self._enr = float(explainability_to_noise_ratio(self.summary_, convention="paper002"))
        return self._enr
