"""RandomCutTree: explanation trees from random threshold cuts, grown from the centers alone.

Both algorithms build a threshold tree with exactly k leaves, one reference center in each, from
the centers only (like MMDT: no pass over the data). A node holding several centers is cut by
one random axis-aligned cut ``x_i <= theta`` drawn from a distribution over the cuts that
separate at least two of its centers; the two children are grown the same way, until every
leaf holds one center. The cost of a tree (the papers' cost(X, T)) assigns every point the
center of its leaf.

k-medians (``objective="kmedians"``): Random Thresholds / RandomCoordinateCut.
  Papers: Gupta, Pittu, Svensson and Yuan, "The Price of Explainability for Clustering" (FOCS
  2023), which prove its expected price is at most 1 + H_{k-1} (H the harmonic number) and that
  this is exact for the algorithm; Makarychev and Shan, "Random Cuts are Optimal for Explainable
  k-Medians" (NeurIPS 2023), 2 ln k + 2. The same algorithm appears in Makarychev and Shan (ICML
  2021) and Esfandiari, Mirrokni and Narayanan (SODA 2022). The papers draw a global sequence of
  cuts, coordinate i uniform in {1..d} and theta uniform on a common interval containing every
  center's coordinates (the same interval on every axis), and apply each cut to every leaf whose
  centers it separates; a cut that separates no pair of a leaf's centers leaves that leaf alone.
  Distribution here, per node: (i, theta) uniform on the union over axes of the intervals
  [min, max] of the node's centers on that axis, i.e. axis i with probability proportional to
  the node's range on i and theta uniform on that range. This is the law of the first global
  cut that separates the node's centers (cuts being i.i.d., the non-separating ones that the
  papers skip are exactly those rejected), so each point's root-to-leaf path, and with it the
  expected cost that the bound is about, has the papers' law. ``bound_ = 1 + H_{k-1}``.
  Note: "uniform axis, then uniform threshold on that axis' range" would be a different
  distribution (pairs would not be separated with probability proportional to their l1
  distance) and carries no such guarantee; the test suite checks the axis frequencies.

k-means (``objective="kmeans"``): cuts with density proportional to the distance to the
  nearest center along the axis (ALL k centers, not only the node's).
  The algorithm: a global sequence of i.i.d. cuts (i, theta) whose density on axis i is
  proportional to min_c |theta - c_i| over all k centers c (on the union of the axes' center
  ranges), each applied to every leaf whose centers it separates. Per node we draw the first
  cut of that sequence that separates the node's centers: the same density, restricted to the
  node's [min, max] range on each axis. Between neighbouring values of all the centers on an
  axis (a *cell* of width g) the mass is g^2 / 4, so the (axis, cell) pair is drawn with
  probability proportional to g^2 among the cells inside the node's ranges, and theta inside
  the cell from the triangular law peaked at its middle. A point at distance t from its center
  along an axis is cut off from it with probability proportional to about t^2 (near its
  center): the k-means analogue of the k-medians rule. Centers already separated from the node
  still shape its density (a gap between two of the node's centers that holds another center
  is two cells, with less mass than one wide gap); the test suite checks this law at a node.
  Source of the distribution: ShallowTree's ``RandomThresholdTree`` (lmurtinho/ShallowTree,
  attributed there to Makarychev's algorithm), which maps every axis by the embedding
  phi(c_(j+1)) - phi(c_j) = (c_(j+1) - c_j)^2 / 2 computed from all k centers and draws cuts
  uniformly in phi on the node's range, i.e. this density. Guarantee: random-cut k-means
  algorithms of this kind have expected price O(k ln k) (Makarychev and Shan, ICML 2021;
  Esfandiari, Mirrokni and Narayanan, SODA 2022; Gamlath, Jia, Polak and Svensson, NeurIPS
  2021, give O(k ln^2 k)). We could read only those papers' abstracts, not their algorithm
  statements or constants, so ``bound_`` is None (no number is claimed) and
  ``bound_expression_`` is "O(k ln k)", with the sources in ``bound_statement_``.
  Not implemented: the O(k ln ln k) algorithm of Gupta, Pittu, Svensson and Yuan (FOCS 2023,
  arXiv 2304.09743), the best known k-means guarantee; only its abstract was available here,
  which does not describe the algorithm, so it cannot be implemented faithfully.

Departures from the papers (all objectives):

- Per-node sampling instead of one global cut sequence shared by all leaves (same law of every
  root-to-leaf path, see above; the trees of one draw are not correlated across branches).
- ShallowTree moves a k-means cut to the midpoint between the nearest data values around it;
  here the cut stays where it was drawn (the papers' trees do not look at the data).
- Cuts are ``x_i <= theta`` (left) / ``x_i > theta`` (right); a theta that floating point puts
  on a center value is replaced by that value (the cut still separates the same centers).
- ``n_trials > 1``: the cheapest of several independent trees on the data is kept. The bound is
  about one tree's expected cost; the cheapest of several costs no more than their mean.
- Centers that coincide on every axis cannot get leaves of their own: InputError.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from exclust.dataplane._center_distances import L1, SQUARED_L2, trial_costs
from exclust.dataplane.parts import map_reduce
from exclust.errors import InputError
from exclust.estimator import RANDOM_STATE, Integral, Interval, StrOptions, TreeExplainer
from exclust.sources.dataset import as_matrix
from exclust.tree import ThresholdTree, TreeBuilder

OBJECTIVES = ("kmeans", "kmedians")
_METRIC = {"kmeans": SQUARED_L2, "kmedians": L1}
_DISTRIBUTION = {
    "kmedians": "(axis, theta) uniform on the union of the node's center ranges per axis "
                "(axis probability proportional to its range)",
    "kmeans": "theta density proportional to the distance to the nearest of all k centers on the axis, "
              "over the union of the node's center ranges",
}


def harmonic_number(n: int) -> float:
    """H_n = 1 + 1/2 + ... + 1/n (H_0 = 0)."""
    return float(sum(1.0 / i for i in range(1, n + 1)))


def random_cut_bound(objective: str, k: int) -> tuple[float | None, str, str]:
    """(guaranteed expected price or None, its expression, the statement with its source) for k
    centers. None where the papers' constant could not be read: no number is invented."""
    if objective == "kmedians":
        value = 1.0 + harmonic_number(k - 1)
        return value, "1 + H_(k-1)", (
            f"E[cost(T)] <= (1 + H_(k-1)) cost(centers) = {value:.6g} cost(centers) for k = {k} "
            "(Gupta, Pittu, Svensson, Yuan, FOCS 2023; also <= 2 ln k + 2 = "
            f"{2 * math.log(k) + 2:.6g}, Makarychev and Shan, NeurIPS 2023)"
        )
    return None, "O(k ln k)", (
        "E[cost(T)] = O(k ln k) cost(centers) for random-cut k-means (Makarychev and Shan, ICML 2021; "
        "Esfandiari, Mirrokni, Narayanan, SODA 2022); constant not stated here, no number claimed. "
        "The best known, O(k ln ln k) (Gupta, Pittu, Svensson, Yuan, FOCS 2023), is another algorithm, "
        "not implemented"
    )


def axis_values(centers: np.ndarray) -> list[np.ndarray]:
    """Per axis, the sorted distinct coordinates of all the centers (the cells' ends)."""
    return [np.unique(centers[:, j]) for j in range(centers.shape[1])]


def _separating_gaps(centers: np.ndarray, comps: np.ndarray, values: Sequence[np.ndarray] | None = None):
    """Per axis, the cells between neighbouring distinct values of ALL the centers that lie
    inside the node's range [min, max] of its centers ``comps`` (every cut there separates them).

    Returns (axis, low end, width) of every cell, all axes together. For k-medians (uniform
    density) the cells of all centers or of the node's alone give the same law; for k-means
    the other centers' values split the node's gaps (module docstring).
    """
    values = axis_values(centers) if values is None else values
    axes, lows, widths = [], [], []
    for j in range(centers.shape[1]):
        own = centers[comps, j]
        lo, hi = own.min(), own.max()
        if lo == hi:
            continue
        v = values[j][np.searchsorted(values[j], lo):np.searchsorted(values[j], hi, side="right")]
        axes.append(np.full(v.size - 1, j))
        lows.append(v[:-1])
        widths.append(np.diff(v))
    if not axes:
        return np.empty(0, np.int64), np.empty(0), np.empty(0)
    return np.concatenate(axes), np.concatenate(lows), np.concatenate(widths)


def draw_cut(centers: np.ndarray, comps: np.ndarray, objective: str, rng: np.random.Generator,
             values: Sequence[np.ndarray] | None = None) -> tuple[int, float]:
    """One random cut (axis, theta) separating the node's centers ``comps`` (module docstring);
    ``values``: ``axis_values(centers)``, computed once per tree."""
    axes, lows, widths = _separating_gaps(centers, comps, values)
    if axes.size == 0:
        raise InputError(
            f"centers {comps.tolist()} coincide on every feature, so no axis-aligned tree can give each "
            "its own leaf; drop the duplicates or refit the reference"
        )
    weights = widths if objective == "kmedians" else widths**2
    total = weights.sum()
    if not np.isfinite(total) or total <= 0:  # gaps so small that their squares underflow
        weights, total = widths / widths.max(), (widths / widths.max()).sum()
    g = int(np.searchsorted(np.cumsum(weights), rng.random() * total, side="right"))
    g = min(g, axes.size - 1)
    lo, width = lows[g], widths[g]
    if objective == "kmedians":
        theta = lo + rng.random() * width
    else:
        theta = rng.triangular(lo, lo + 0.5 * width, lo + width)
    if not lo <= theta < lo + width:  # rounding at the gap's top: x <= lo separates the same centers
        theta = lo
    return int(axes[g]), float(theta)


def grow_random_cut_tree(centers: np.ndarray, objective: str, rng: np.random.Generator,
                         feature_names: Sequence[str] | None = None, meta: dict | None = None) -> ThresholdTree:
    """One random-cut tree: k leaves, leaf value k = center k."""
    K, d = centers.shape
    builder = TreeBuilder(n_features=d)
    values = axis_values(centers)
    stack = [(builder.add_node(), np.arange(K))]
    while stack:
        node, comps = stack.pop()
        if comps.size == 1:
            builder.make_leaf(node, int(comps[0]))
            continue
        j, theta = draw_cut(centers, comps, objective, rng, values)
        goes_left = centers[comps, j] <= theta
        left, right = builder.split(node, j, theta)
        stack.append((right, comps[~goes_left]))
        stack.append((left, comps[goes_left]))
    tree = builder.build(feature_names=feature_names, n_clusters=K, meta=meta)
    if tree.n_leaves != K or not np.array_equal(tree.predict(centers), np.arange(K)):
        raise AssertionError("a random-cut tree's leaves do not hold one center each")
    return tree


def _stack_trees(trees: Sequence[ThresholdTree]) -> tuple[np.ndarray, ...]:
    """Node arrays of trees with the same node count (2k - 1), stacked as T x m."""
    return tuple(
        np.ascontiguousarray(np.stack([getattr(t, name) for t in trees]))
        for name in ("kind", "feature", "threshold", "center", "left", "right", "value")
    )


def _trial_costs_block(X: np.ndarray, stacked: tuple, centers: np.ndarray, metric: int):
    return trial_costs(np.ascontiguousarray(X, dtype=np.float64), *stacked, centers, metric)


def score_trees(X, trees: Sequence[ThresholdTree], centers: np.ndarray, objective: str) -> tuple[np.ndarray, float]:
    """(cost of each tree, cost of the nearest-center assignment) on X, in ONE pass over X.

    A tree's cost gives each point the center of its leaf (leaf value = center index): squared
    l2 for k-means, l1 for k-medians.
    """
    stacked = _stack_trees(trees)
    costs, nearest = map_reduce(_trial_costs_block, X, args=(stacked, centers, _METRIC[objective]))
    return np.asarray(costs, dtype=np.float64), float(nearest)


def _centers_array(centers: Any) -> np.ndarray:
    for attr in ("cluster_centers_", "means_", "means"):
        if not isinstance(centers, np.ndarray) and hasattr(centers, attr):
            centers = getattr(centers, attr)
            break
    c = np.asarray(centers, dtype=np.float64)
    if c.ndim != 2 or c.shape[0] < 1:
        raise InputError(f"centers must be a (n_clusters, n_features) array, got shape {c.shape}")
    if not np.isfinite(c).all():
        raise InputError("centers hold NaN or infinite values; pass finite reference centers")
    return np.ascontiguousarray(c)


class RandomCutTree(TreeExplainer):
    """Random-cut explanation tree grown from reference centers alone (see the module docstring).

    Parameters
    ----------
    n_clusters : int
        Number of centers (= leaves).
    objective : {"kmeans", "kmedians"}, default="kmeans"
        ``"kmedians"`` (Random Thresholds; Gupta et al. FOCS 2023, Makarychev and Shan
        NeurIPS 2023) or ``"kmeans"`` (density proportional to the distance to the nearest of all
        centers; O(k ln k), Makarychev and Shan ICML 2021 / Esfandiari et al. SODA 2022; not the
        O(k ln ln k) algorithm of Gupta et al. FOCS 2023, whose description was not available).
    n_trials : int, default=1
        Number of independent trees; with data, all are scored in one pass and the
        cheapest kept; without data, trial 0 (the tree ``n_trials=1`` gives) is kept.
    random_state : None, int or numpy Generator, default=None
        Trees are drawn one after the other from it.

    Fitted attributes: ``tree_`` (ThresholdTree, k leaves, leaf value = center index),
    ``centers_``, ``bound_`` (guaranteed expected price, a float for k-medians, None for k-means
    where no constant is claimed), ``bound_expression_`` ("1 + H_(k-1)" or "O(k ln k)"),
    ``bound_statement_``, ``trial_costs_`` (cost of every trial
    on the data, or None), ``reference_cost_`` (nearest-center cost on the data, or None),
    ``best_trial_``, ``n_passes_`` (passes over the data: 0 without data; 1 for validation, plus 1 scoring
    pass when several trials are scored).
    """

    _parameter_constraints = {
        "n_clusters": [Interval(Integral, 2, None, closed="left")],  # k >= 2, as the CLI's --k
        "objective": [StrOptions(set(OBJECTIVES))],
        "n_trials": [Interval(Integral, 1, None, closed="left")],
        "random_state": RANDOM_STATE,
    }

    def __init__(self, n_clusters: int, objective: str = "kmeans", n_trials: int = 1, random_state: Any = None) -> None:
        self.n_clusters = n_clusters
        self.objective = objective
        self.n_trials = n_trials
        self.random_state = random_state

    def fit(self, X=None, centers=None, feature_names: Sequence[str] | None = None) -> RandomCutTree:
        """Grow ``n_trials`` trees from ``centers``; with X and several trials keep the cheapest on X."""
        self._check_params()
        k, n_trials = int(self.n_clusters), int(self.n_trials)
        if centers is None:
            raise InputError("RandomCutTree grows its trees from reference centers: pass centers=(k, d) array")
        centers = _centers_array(centers)
        if centers.shape[0] != k:
            raise InputError(f"{centers.shape[0]} centers given for n_clusters={k}; pass one center per cluster")
        data = None
        if X is not None:
            data = as_matrix(self._fit_input(X), n_clusters=k)
            if data.n_features != centers.shape[1]:
                raise InputError(f"centers have {centers.shape[1]} features, the data {data.n_features}")
            feature_names = feature_names or data.feature_names
        rng = np.random.default_rng(self.random_state)
        meta = {
            "algorithm": "random_cut",
            "objective": self.objective,
            "distribution": _DISTRIBUTION[self.objective],
            "random_state": self.random_state if isinstance(self.random_state, (int, type(None))) else "generator",
        }
        trees = [grow_random_cut_tree(centers, self.objective, rng, feature_names, meta) for _ in range(n_trials)]
        self.trial_costs_, self.reference_cost_, self.best_trial_, self.n_passes_ = None, None, 0, 0
        if data is not None and n_trials > 1:
            costs, nearest = score_trees(data.X, trees, centers, self.objective)
            self.trial_costs_, self.reference_cost_ = costs, nearest
            self.best_trial_ = int(np.argmin(costs))
        if data is not None:
            self.n_passes_ = 1 + (n_trials > 1)  # validation (as reference.py counts it) + scoring
        self.bound_, self.bound_expression_, self.bound_statement_ = random_cut_bound(self.objective, k)
        self.tree_ = trees[self.best_trial_]
        self.tree_.meta["trial"] = self.best_trial_
        self.centers_ = centers
        self._record_features(centers.shape[1], feature_names)
        return self

    def fit_predict(self, X, centers=None):
        return self.fit(X, centers).predict(X)
