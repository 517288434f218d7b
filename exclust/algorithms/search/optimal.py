"""OptimalTree: the k-leaf tree of least k-means cost among trees cutting at bin edges, with a
proven lower bound when the search's budget runs out.

What is exact. Every feature is binned (``binning.edges_from_sample`` on an exact uniform
sample of at most 100,000 rows); a feature with at most ``max_bins`` distinct values in that
sample gets an edge between every two consecutive ones, so on data of few distinct values (or
no more rows than the sample) the search ranges over every axis-aligned cut and its optimum is
the true optimum; otherwise it ranges over the cuts at the ``max_bins - 1`` edges. Rows are then
grouped by their vector of codes (cells, ``optimal_cells.py``: one pass, numpy or Dask), and
``optimal_bnb.BranchAndBound`` searches the trees over the cells, from the best-first greedy tree
as its incumbent. The costs are exact: every row counts, nothing is sampled but the bin edges.

``lower_bound_`` is the larger of the search's own bound (exact when it finished) and the
per-coordinate one-dimensional bound (``optimal_bnb``, Bound 3); no tree of ``n_clusters``
leaves cutting at these edges costs less. ``proven_optimal_`` is True exactly when it equals
``cost_``. When the budget runs out the best tree found is returned with the bound proved so far,
never above the optimum.

The budget is counted in nodes of the branch and bound (searches of a box with a number of
leaves), not in seconds, so that the same data and budget give the same tree and bound on any
machine at any load (the standing table of a report must not change with the machine's load).
``max_seconds`` is an optional cap on top, for a user who wants a time limit: with it the result
depends on the machine's speed.

Scale. The work is sweeps over the cells of searched boxes: k = 2 is one sweep, k = 3 one sweep
per feature (every cut position's best two-leaf sides at once), larger k one such node search per
probe of the interval bisection, as many as the bounds fail to prune; sides of three or more
leaves are bounded from their scatter matrix (``_scatter_bounds.py``) and, at every cut position,
over their own first cut (``_first_cut_bound.py``), carried along a feature's positions with the
slabs of cells in between (``_slab_bound.py``), and skipped when that suffices
(bench/bench_optimal.py, bench/README.md: k <= 3 proven at 10^6 x 10 in one node of 17 sweeps,
k = 4 at 10^4, 10^5 and 10^6 x 10 in 11, 11 and 12 nodes). The cells are
held in memory on the driver: at most one per row, (2 d + 2) floats each.
"""
from __future__ import annotations

import time

import numpy as np

from exclust.algorithms.histogram.base import (
    CENTER_TREE_CONSTRAINTS,
    CenterTreePredictor,
    check_centers,
    dataset_categories,
    known_missing,
)
from exclust.algorithms.histogram.binning import DEFAULT_SAMPLE_SIZE, edges_from_sample
from exclust.algorithms.search.optimal_bnb import (
    PROBE_MAX_LEAVES,
    PROBE_MIN_LEAVES,
    PROBE_NODES,
    BranchAndBound,
)
from exclust.algorithms.search.optimal_cells import block_cells, merge_cells
from exclust.algorithms.search.optimal_incumbent import cell_centers, center_tree, pad_leaves, tree_cells
from exclust.algorithms.search.optimal_node import leaf_costs
from exclust.algorithms.search.optimal_tree import count_leaves, nested_to_tree
from exclust.dataplane.parts import map_reduce, uniform_sample
from exclust.errors import ParameterError
from exclust.estimator import Integral, Interval, Real
from exclust.sources.dataset import as_matrix

# Nodes a fit searches at most by default: 6-100 CPU seconds on the shared sets of bench/README.md
# (a few milliseconds a node on 2 features and 800 rows, about 0.1 s on digits' 64 features).
DEFAULT_MAX_NODES = 1_000


def thresholds_of(nested, mapper):
    """A nested tree on bin codes with real thresholds (the bins' upper edges)."""
    if nested is None:
        return None
    f, b, left, j, right = nested
    return (f, mapper.threshold(f, b), thresholds_of(left, mapper), j, thresholds_of(right, mapper))


def match_leaves(leaf_stats: np.ndarray, centers: np.ndarray, shift: np.ndarray) -> np.ndarray:
    """The center each leaf names: one-to-one by least summed squared distance (Hungarian
    matching) when there are as many leaves as centers, else each leaf's nearest in cost."""
    from scipy.optimize import linear_sum_assignment

    moved = centers - shift
    count, sums = leaf_stats[:, 0], leaf_stats[:, 2:]
    cost = leaf_stats[:, 1:2] - 2.0 * sums @ moved.T + count[:, None] * (moved * moved).sum(axis=1)[None, :]
    if cost.shape[0] == cost.shape[1]:
        rows, cols = linear_sum_assignment(cost)
        chosen = np.empty(cost.shape[0], dtype=np.int64)
        chosen[rows] = cols
        return chosen
    return cost.argmin(axis=1)


def _refuse_categories_and_missing(feature_names, categories, missing) -> None:
    """ParameterError naming the first feature that is a category (its index in ``categories``) or
    holds missing values (``missing``, bool per feature): the cells and bounds know numeric
    thresholds on complete rows only (issue 28)."""
    for f, name in enumerate(feature_names):
        kind = "is a category column" if f in categories else "holds missing values" if missing[f] else ""
        if kind:
            raise ParameterError(f"OptimalTree cuts numeric features without missing values only: column {name!r} "
                                 f"{kind}; use TreeSearch, IMM or ExKMC, which cut sets of categories and learn "
                                 "where missing values go")


class OptimalTree(CenterTreePredictor):
    """The certified k-leaf tree: least k-means cost at the bin edges, or a proven gap (see the module).

    Parameters
    ----------
    n_clusters : int
        Leaves of the tree (one cluster each).
    max_nodes : int, default DEFAULT_MAX_NODES
        Budget of the search, in branch-and-bound nodes (searches of a box with a number of
        leaves); when it runs out the best tree found is kept and ``lower_bound_`` is the bound
        proved so far. The result depends on the data and the budget only; the time a node takes
        grows with the cells and features (bench/README.md).
    max_seconds : float or None, default None
        An optional time cap on the search (the statistics' pass not included), stopping it like
        ``max_nodes``. With it the tree and bound depend on the machine's speed and load: two fits
        of the same data may differ.
    max_bins : int, default 256
        Bins per feature (2..65536); a feature with at most this many distinct values is searched
        at every midpoint between them.
    random_state : int, RandomState or None, default None
        Seed of the binning sample (used only when there are more rows than the sample).
    use_first_cut : bool, default True
        Bound the sides of three or more leaves over their own first cut too (Bound 8 of
        ``_first_cut_bound``). Off only to compare: the same optimum, usually in more nodes.
    probe_nodes : int or None, default optimal_bnb.PROBE_NODES (4)
        Iterative deepening of the probes (``optimal_bnb``, "A probe's own budget"): a probe of the
        root's cut positions (of the first ``probe_depth`` levels) with a side of at least
        ``probe_min_leaves`` leaves stops after this many nodes, and its position goes back on the
        heap with the bound reached, to be probed again with twice the nodes. None: every probe runs
        until its sides reach their cutoffs. Any value gives valid bounds, and the same optimum when
        the search finishes.
    probe_depth : int, default 1
        How many levels of the search give their probes their own budget (1: the root's alone).
    probe_min_leaves, probe_max_leaves : int, default optimal_bnb.PROBE_MIN_LEAVES (5) and PROBE_MAX_LEAVES (6)
        The probes budgeted: those with a side of at least ``probe_min_leaves`` leaves in a search of
        at most ``probe_max_leaves`` (by default k = 6's probes with a five-leaf side; below and above
        six leaves every probe runs to its cutoff, where budgets were measured not to help).
    use_slabs : bool, default True
        Carry a side's bound to the larger sides of the same feature with the slabs of cells in
        between added (Bound 9 of ``_slab_bound``), not unchanged (Bound 1). The same optimum; the
        bounds on the way at least as high (gmm 10^5 x 10, k = 5: proven in 617 nodes instead of
        753; bench/README.md, session bound30g). Off only to compare.

    Fitted attributes: ``tree_`` (leaves left to right, or naming the given centers one-to-one),
    ``cost_`` (its k-means cost on every row, each leaf at its own mean), ``lower_bound_``,
    ``proven_optimal_``, ``gap_`` (``cost_ / lower_bound_ - 1``), ``bounds_`` (each bound's value:
    ``greedy`` tree's cost, ``incumbent`` the search's first tree's (the cheapest of the greedy
    tree and the center-guided trees of ``optimal_incumbent``), ``coordinate`` 1-D bound, ``scatter``
    the root's Bound 5 of ``_scatter_bounds`` (0 below three leaves), ``neighbour`` the root's
    Bound 7 of ``_neighbour_bound`` (0 below three leaves or above ``optimal_bnb.NEIGHBOUR_MAX_CELLS``
    cells), ``branch_and_bound``, which includes both), ``search_seconds_``,
    ``nodes_searched_``, ``sweeps_``, ``n_cells_``, ``timed_out_``, ``n_passes_``, ``exact_bins_``
    (every feature binned at every midpoint of all its values: the bound then holds for any tree),
    ``root_probes_`` (one dict per probe of the root's cut positions, in order: feature, left
    leaves, position, the interval's and the position's bound before, each side's (lb, ub) after,
    the nodes spent inside) and ``root_shares_`` (one dict per feature and left share of the root:
    its positions' bounds before any probe); diagnostics, ``bench_optimal.py --trace-root``.
    """

    # The budget the explain job's standing table passes: about 1-15 CPU seconds on the shared sets.
    REPORT_MAX_NODES = 100

    _parameter_constraints = {
        **{k: v for k, v in CENTER_TREE_CONSTRAINTS.items() if k != "objective"},
        "max_nodes": [Interval(Integral, 0, None, closed="left")],
        "max_seconds": [None, Interval(Real, 0, None, closed="left")],
        "use_first_cut": ["boolean"],
        "probe_nodes": [None, Interval(Integral, 1, None, closed="left")],
        "probe_depth": [Interval(Integral, 1, None, closed="left")],
        "probe_min_leaves": [Interval(Integral, 3, None, closed="left")],
        "probe_max_leaves": [Interval(Integral, 4, None, closed="left")],
        "use_slabs": ["boolean"],
    }

    def __init__(self, n_clusters: int, max_nodes: int = DEFAULT_MAX_NODES, max_seconds: float | None = None,
                 max_bins: int = 256, random_state=None, use_first_cut: bool = True,
                 probe_nodes: int | None = PROBE_NODES, probe_depth: int = 1,
                 probe_min_leaves: int = PROBE_MIN_LEAVES, probe_max_leaves: int = PROBE_MAX_LEAVES,
                 use_slabs: bool = True) -> None:
        self.n_clusters = n_clusters
        self.max_nodes = max_nodes
        self.max_seconds = max_seconds
        self.max_bins = max_bins
        self.random_state = random_state
        self.use_first_cut = use_first_cut
        self.probe_nodes = probe_nodes
        self.probe_depth = probe_depth
        self.probe_min_leaves = probe_min_leaves
        self.probe_max_leaves = probe_max_leaves
        self.use_slabs = use_slabs

    def fit(self, X, centers=None) -> OptimalTree:
        """Search the tree for X; ``centers`` (optional) only name the leaves' clusters."""
        self._check_params()
        k = int(self.n_clusters)
        ds = as_matrix(self._fit_input(X), n_clusters=k)
        # Its bounds and cells know numeric thresholds on complete rows only (issue 28): refused in one line.
        _refuse_categories_and_missing(ds.feature_names, dataset_categories(ds).keys(), known_missing(ds))
        lazy = ds.distributed
        (sample,) = uniform_sample(ds.X, size=DEFAULT_SAMPLE_SIZE, random_state=self.random_state)
        sample = np.asarray(sample, dtype=np.float64)
        _refuse_categories_and_missing(ds.feature_names, (), np.isnan(sample).any(axis=0))
        mapper = edges_from_sample(sample, int(self.max_bins))
        shift = sample.mean(axis=0)
        cells = map_reduce(block_cells, ds.X, args=(mapper, shift), combine=merge_cells) if lazy \
            else block_cells(ds.X, mapper, shift)
        started = time.monotonic()
        deadline = np.inf if self.max_seconds is None else started + float(self.max_seconds)
        search = BranchAndBound(cells.codes, cells.stats, mapper.max_n_bins, deadline=deadline,
                                max_nodes=int(self.max_nodes), use_first_cut=bool(self.use_first_cut),
                                probe_nodes=None if self.probe_nodes is None else int(self.probe_nodes),
                                probe_depth=int(self.probe_depth), probe_min_leaves=int(self.probe_min_leaves),
                                probe_max_leaves=int(self.probe_max_leaves), use_slabs=bool(self.use_slabs))
        everything = np.arange(cells.n_cells, dtype=np.int64)
        greedy = search.greedy(everything, k)
        if centers is not None:
            centers = check_centers(centers, k, ds.n_features)
        incumbent = _first_tree(search, everything, greedy, k, mapper, shift, centers)
        coordinate = search.coordinate_bound(cells.squares, k)
        scatter = search.scatter_bound(everything, k) if k >= 3 else 0.0
        neighbour = search.neighbour_bound(everything, k) if k >= 3 else 0.0
        lower, cost, nested = search.solve(everything, k, incumbent=incumbent)
        self.search_seconds_ = time.monotonic() - started
        lower = max(float(lower), 0.0)  # a sum of bounds may round below zero
        if max(lower, coordinate, neighbour) >= cost:
            lower = cost
        self.bounds_ = {"greedy": float(greedy[0]), "incumbent": float(incumbent[0]), "coordinate": float(coordinate),
                        "scatter": float(scatter), "neighbour": float(neighbour), "branch_and_bound": float(lower)}
        nested = pad_leaves(search, nested, everything, k)
        leaf_stats = np.stack([search.stats[c].sum(axis=0) for c in tree_cells(search, nested, everything)])
        tree = nested_to_tree(thresholds_of(nested, mapper), ds.n_features, ds.feature_names, count_leaves(nested),
                              meta={"algorithm": "optimal", "max_bins": int(self.max_bins)})
        if centers is not None:
            tree = _renamed(tree, match_leaves(leaf_stats, centers, shift), k)
            self.centers_ = centers
        self.tree_ = tree
        self.cost_ = float(cost)
        self.lower_bound_ = float(max(lower, min(coordinate, cost), min(neighbour, cost)))
        self.proven_optimal_ = bool(self.lower_bound_ == self.cost_)
        self.gap_ = 0.0 if self.proven_optimal_ else (
            np.inf if self.lower_bound_ <= 0 else self.cost_ / self.lower_bound_ - 1.0)
        self.timed_out_ = bool(search.timed_out)
        self.nodes_searched_ = int(search.nodes)
        self.sweeps_ = int(search.sweeps)
        self.root_probes_ = list(search.root_probes)
        self.root_shares_ = list(search.root_shares)
        self.n_cells_ = cells.n_cells
        self.exact_bins_ = bool(np.all(mapper.exact)) and ds.n_rows <= DEFAULT_SAMPLE_SIZE
        self.n_passes_ = 2 * int(lazy)  # the binning sample, then the cells
        return self


def _first_tree(search: BranchAndBound, everything: np.ndarray, greedy: tuple, k: int, mapper, shift: np.ndarray,
                centers: np.ndarray | None) -> tuple:
    """The search's incumbent: the cheapest of the greedy tree and the center-guided trees
    (``optimal_incumbent``) for a weighted k-means of the cells and for the given centers."""
    best = greedy
    choices = cell_centers(search.stats, k) + ([] if centers is None else [np.asarray(centers) - shift])
    for chosen in choices:
        if chosen.shape[0] < 2:
            continue
        nested = center_tree(search.codes, search.stats, everything, chosen, mapper.transform(chosen + shift))
        cost = float(sum(leaf_costs(search.stats[c].sum(axis=0)) for c in tree_cells(search, nested, everything)))
        if cost < best[0]:
            best = (cost, nested)
    return best


def _renamed(tree, chosen: np.ndarray, n_clusters: int):
    """The tree with leaf i (left to right) naming cluster ``chosen[i]``."""
    from exclust.tree import LEAF, ThresholdTree

    value = np.asarray(tree.value).copy()
    leaves = np.flatnonzero(tree.kind == LEAF)
    value[leaves] = chosen[value[leaves]]
    return ThresholdTree(tree.kind, tree.feature, tree.threshold, tree.left, tree.right, value.tolist(),
                         n_features=tree.n_features, feature_names=tree.feature_names, n_clusters=n_clusters,
                         meta=tree.meta)
