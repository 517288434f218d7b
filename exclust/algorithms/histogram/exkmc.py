"""ExKMC: expanding an explainable k-means tree by surrogate cost (paper 003, Algorithms 1-2).

Starting from IMM's tree with k leaves (``base_tree="imm"``) or from a single leaf
(``base_tree="none"``), ExKMC repeatedly splits the leaf whose best cut lowers the surrogate
cost the most (the cost against the *fixed* reference centers, Definition 1), and labels each
new leaf with its cheapest reference center, until the tree has ``max_leaves`` leaves or no cut
lowers the cost any more (every leaf then holds only points of its own center, Theorem 2).

Per leaf the engine keeps one histogram over (feature, bin) of the count and, per center j,
the sum of ``<x, mu_j>``. With ``S`` the leaf's sum of ``||x||^2``, a side of a cut costs
``S_side - 2 sum<x, mu_j> + n_side ||mu_j||^2`` with its cheapest j; ``S`` is the same for every
cut of the leaf, so gains are computed without it (Section 3.2). A split needs the smaller
child's histogram; the sibling's is the parent's minus it. One pass computes the smaller
sides of every leaf that may still be split (``_smaller_sides``); another is needed only when
the greedy order picks a leaf created since, so the tree is the same as with one pass per
split, in a few passes.

ExKMC is greedy and a split never changes the gain of another leaf, so the tree with L leaves is
a prefix of the tree with more: ``tree_at(L)`` and ``surrogate_costs_`` give every prefix.

``objective="kmedians"``: the surrogate cost of a leaf with center j is the sum of its rows' l1
distances to j. The engine then keeps each row's l1 distance to every center in place of the
dot products, so a side's cost with center j is a prefix sum of that channel directly (exact,
no ``||x||^2`` term); the reference labels, and IMM's base tree, use the nearest center in l1.
"""
from __future__ import annotations

import numpy as np

from exclust.algorithms.histogram.base import (
    CENTER_TREE_CONSTRAINTS,
    CenterTreePredictor,
    dataset_categories,
    prepare_fit,
)
from exclust.algorithms.histogram.criteria import SurrogateCost
from exclust.algorithms.histogram.engine import CodeTree, EncodedData
from exclust.algorithms.histogram.imm import grow_imm
from exclust.errors import ParameterError
from exclust.estimator import Integral, Interval, StrOptions
from exclust.scoring.curves import CurveSeries
from exclust.tree import LEAF, ThresholdTree

BASE_TREES = ("imm", "none")
_GAIN_NOISE = 1e-9
# Histogram bytes a pass computes, and leaf histograms kept between passes, at most (about):
# at many clusters a leaf's histograms are tens of MB, so leaves are taken in several passes.
HISTOGRAM_BYTES = 1 << 29
SURROGATE = SurrogateCost()  # ExKMC's split criterion (stateless)


def expand_by_surrogate(data: EncodedData, tree: CodeTree, max_leaves: int) -> dict:
    """Algorithm 1 on histograms: split leaves of largest surrogate gain until ``max_leaves``.

    Leaves already labelled (IMM's) keep their label; an unlabelled root takes its cheapest
    center. A leaf is a candidate while it holds points of another reference cluster than its
    label (as in the authors' implementation; a leaf without such points cannot gain). Its gain
    is the drop of the tree's surrogate cost, which may be zero: a zero-gain cut can still
    make room for later gains. Returns the split order and the surrogate cost after each split
    (index 0: the base tree).

    Memory at many clusters: a leaf's histograms are d x bins x (2k + 1) numbers (52 MB at
    k = 640, d = 20), so they are computed in passes of at most ``HISTOGRAM_BYTES`` and kept
    only for leaves that can still be split: with r splits left, a leaf ranked r-th or lower
    never is (every leaf above it stays above it, and each split takes the top one). Without
    splits left only the leaves' costs are computed (from one feature's histogram). Of the
    leaves that can be split, those ranked beyond what ``HISTOGRAM_BYTES`` holds drop their
    histograms; when one is split, both its sides are computed (not the smaller one and the
    parent's difference), the only case in which the sums can differ in their last bits.
    """
    center_sq = data.center_sq  # None: the histograms hold distances, summed as they are
    # Mean ||x||^2: the size of the terms that cancel in the dot-product form (none with distances).
    scale = 0.0 if data.holds_distances else data.sum_sq / max(data.n_rows, 1)
    held = max(1, HISTOGRAM_BYTES // SURROGATE.slot_bytes(data))  # leaf histograms held at once
    cost = {}  # current surrogate cost (less ||x||^2) of each leaf with its label
    best = {}  # leaf -> (gain, mistakes, its best cut)
    hists: dict[int, tuple] = {}  # leaf -> (histogram, label counts), for leaves that may be split

    def score(leaf: int, h: np.ndarray, labels: np.ndarray) -> None:
        if tree.value[leaf] < 0:
            tree.value[leaf] = SURROGATE.cheapest_center(h, center_sq)
        label = tree.value[leaf]
        cost[leaf] = SURROGATE.leaf_cost(h, center_sq, label)
        counts = labels[0].sum(axis=0)
        mistakes = int(counts.sum() - counts[label])
        if mistakes == 0:
            return
        # Cancellation leaves noise of a few ulps of the leaf's cost terms: below it, gains tie.
        noise = _GAIN_NOISE * (scale * h[0, :, 0].sum() + abs(cost[leaf]))
        cut = SURROGATE.best_split(h, labels, center_sq, data.mapper, tol=noise)
        if cut is not None:
            gain = cost[leaf] - cut.score
            best[leaf] = (gain if gain > noise else 0.0, mistakes, cut)
            hists[leaf] = (h, labels)

    def ranked() -> list[int]:
        # Largest gain; among equal gains (zero, mostly) the leaf holding most points of other
        # centers, where later cuts can gain; then the lowest node id (the oldest leaf).
        return sorted(best, key=lambda node: (best[node][0], best[node][1], -node), reverse=True)

    def forget(splits_left: int) -> list[int]:
        """Drop the histograms no split will read; returns the leaves that may still be split."""
        rank = ranked()
        may_split = rank[:splits_left]
        for node in set(hists) - set(may_split[:held]):
            del hists[node]
        for node in [node for node in ahead if node not in may_split or len(ahead[node]) == 3 and node not in hists]:
            del ahead[node]
        return may_split

    leaves = tree.leaves()
    n_leaves = len(leaves)
    ahead: dict[int, tuple] = {}  # leaf -> its sides' histograms, computed ahead
    if n_leaves >= max_leaves:  # no split to make: the leaves' costs are all that is needed
        for leaf, h, _ in _leaf_histograms(data, tree, leaves, n_features=1):
            if tree.value[leaf] < 0:
                tree.value[leaf] = SURROGATE.cheapest_center(h, center_sq)
            cost[leaf] = SURROGATE.leaf_cost(h, center_sq, tree.value[leaf])
    else:
        for leaf, h, labels in _leaf_histograms(data, tree, leaves):
            score(leaf, h, labels)
            if len(hists) > held:
                forget(max_leaves - n_leaves)
    order: list[int] = []
    costs = [data.cost_offset + sum(cost.values())]
    while n_leaves < max_leaves and best:
        may_split = forget(max_leaves - n_leaves)
        leaf = may_split[0]
        if leaf not in ahead:
            # One pass computes the smaller side of every leaf that may be split before the
            # budget runs out, so the greedy order below needs a pass only when it picks a
            # leaf made since (a child of a split): same tree, far fewer passes.
            todo = [node for node in may_split if node not in ahead][: max(1, held - len(ahead))]
            ahead.update(_sides(data, tree, hists, best, todo))
        _, _, cut = best.pop(leaf)
        left, right = cut.apply(tree, leaf)
        tree.value[left], tree.value[right] = cut.left_center, cut.right_center
        order.append(leaf)
        sides = ahead.pop(leaf)
        if len(sides) == 3:  # the smaller side; the other is the parent's minus it
            parent, parent_counts = hists.pop(leaf)
            goes_left, h, c = sides
            small, big = (left, right) if goes_left else (right, left)
            side_hists = {small: (h, c), big: (parent - h, parent_counts - c)}
            del parent, parent_counts
        else:
            side_hists = {left: sides[0], right: sides[1]}
            hists.pop(leaf, None)
        del cost[leaf]
        score(left, *side_hists.pop(left))
        score(right, *side_hists.pop(right))
        n_leaves += 1
        costs.append(data.cost_offset + sum(cost.values()))
    return {"order": order, "surrogate_costs": costs}


def _leaf_histograms(data: EncodedData, tree: CodeTree, leaves: list[int], n_features: int | None = None):
    """(leaf, surrogate histogram, label counts) of every one of ``leaves``, from passes of at
    most ``HISTOGRAM_BYTES`` of histograms (at least one leaf a pass)."""
    per_pass = max(1, HISTOGRAM_BYTES // SURROGATE.slot_bytes(data, n_features))
    for start in range(0, len(leaves), per_pass):
        batch = leaves[start:start + per_pass]
        slot = np.full(tree.n_nodes, -1, dtype=np.int64)
        slot[batch] = np.arange(len(batch))
        h, c = data.histograms(SURROGATE, tree, slot, len(batch), n_features)
        for s, leaf in enumerate(batch):
            yield (leaf, *_own(h[s], c[s], len(batch)))
        del h, c


def _own(h: np.ndarray, c: np.ndarray, n_slots: int) -> tuple[np.ndarray, np.ndarray]:
    """One slot's histograms of a pass, copied when the pass has others, so that a leaf kept
    does not keep its whole pass's arrays alive."""
    return (h.copy(), c.copy()) if n_slots > 1 else (h, c)


def _sides(data: EncodedData, tree: CodeTree, hists: dict, best: dict, leaves: list[int]) -> dict:
    """For each of ``leaves`` (each with its best cut in ``best``), in ONE pass: (whether the
    smaller side is the left one, its surrogate histogram, its label counts) when its own
    histograms are in ``hists``; else (the left side's histograms, the right side's), each a
    (histogram, label counts) pair.

    The rows are routed through a copy of the tree in which every one of these leaves is split
    by its cut: the rows a leaf's side receives there are exactly those it will receive when the
    greedy order splits that leaf, whatever is split before it (only other leaves change).
    """
    trial = tree.trial_copy()
    sides: list[tuple[int, bool | None, tuple[int, ...]]] = []
    every_code = np.arange(data.n_bins)
    for leaf in leaves:
        cut = best[leaf][2]
        left, right = cut.apply(trial, leaf)
        if leaf in hists:
            parent = hists[leaf][0][cut.feature]
            goes_left = 2 * float(parent[cut.goes_left(every_code, data.mapper), 0].sum()) <= float(parent[:, 0].sum())
            sides.append((leaf, goes_left, (left if goes_left else right,)))
        else:
            sides.append((leaf, None, (left, right)))
    slot = np.full(trial.n_nodes, -1, dtype=np.int64)
    nodes = [node for _, _, computed in sides for node in computed]
    slot[nodes] = np.arange(len(nodes))
    h, c = data.histograms(SURROGATE, trial, slot, len(nodes))
    at = {node: _own(h[s], c[s], len(nodes)) for s, node in enumerate(nodes)}
    return {leaf: (goes_left, *at[computed[0]]) if goes_left is not None else tuple(at[node] for node in computed)
            for leaf, goes_left, computed in sides}


class ExKMC(CenterTreePredictor):
    """Explainable k-means with up to ``max_leaves`` leaves (paper 003).

    Parameters
    ----------
    n_clusters : int
        Number of reference clusters k, 2 or more.
    max_leaves : int or None, default=None
        Leaves of the final tree (at least ``n_clusters`` when ``base_tree="imm"``); None:
        ``n_clusters``, the IMM tree itself, as the CLI's ``--leaves`` defaults. The tree stops
        short when every leaf holds only points of its own center: it then reproduces the
        reference clustering (Theorem 2) and more leaves cannot lower the cost.
    base_tree : {"imm", "none"}, default="imm"
        ``"imm"``: IMM's k-leaf tree first, as in the paper's main results.
    max_bins : int, default=256
        Bins per feature for the split search (2..65536); features with at most this many
        distinct values are searched exactly (see ``exclust.algorithms.histogram.binning``).
    random_state : None, int or numpy Generator, default=None
        Seeds the reference k-means (when no centers are given) and the binning sample.
    objective : {"kmeans", "kmedians"}, default="kmeans"
        The surrogate cost: squared Euclidean, or l1 (reference centers from
        ``exclust.KMedians`` when none are given).

    Memory: a leaf's histograms hold d x bins x (2k + 1) numbers; they are computed in
    passes of at most ``HISTOGRAM_BYTES`` (512 MB) and kept only for leaves that may still be
    split (``expand_by_surrogate``): a few of those budgets at any k (a pass, the histograms
    kept, the sides computed ahead), beside the rows' per-center values. At ``max_leaves =
    n_clusters`` no leaf is split and only IMM's leaves' costs are computed.

    At ``max_leaves = n_clusters`` the tree is IMM's, whose price collapses at many clusters
    (see ``IMM``'s notes: 6.93 at k = 160 where ExShallow reaches 2.38); leaves beyond k
    recover part of it.

    Fitted attributes: ``tree_``, ``centers_``, ``n_passes_``, ``surrogate_costs_`` (surrogate
    cost of every prefix tree, from the base tree's leaf count up), ``leaf_counts_``; for
    ``tree_at``: ``code_tree_`` (the full tree on bin codes), ``mapper_`` (its bins),
    ``full_tree_`` (the full tree with real thresholds, node ids of ``code_tree_``),
    ``split_order_`` (leaves in the order they were split) and ``feature_names_in_``.
    """

    _parameter_constraints = {
        **CENTER_TREE_CONSTRAINTS,
        "max_leaves": [None, Interval(Integral, 1, None, closed="left")],
        "base_tree": [StrOptions(set(BASE_TREES))],
    }

    def __init__(self, n_clusters: int, max_leaves: int | None = None, base_tree: str = "imm", max_bins: int = 256,
                 random_state=None, objective: str = "kmeans") -> None:
        self.n_clusters = n_clusters
        self.max_leaves = max_leaves
        self.base_tree = base_tree
        self.max_bins = max_bins
        self.random_state = random_state
        self.objective = objective

    def _check_params(self) -> None:
        super()._check_params()
        k, m = self.n_clusters, self._leaf_budget()
        if self.base_tree == "imm" and m < k:
            raise ParameterError(
                f"max_leaves={m} is smaller than n_clusters={k}: the IMM base tree already has "
                f"{k} leaves; pass max_leaves >= {k}"
            )

    def _leaf_budget(self) -> int:
        return int(self.n_clusters if self.max_leaves is None else self.max_leaves)

    def fit(self, X, centers=None, Z=None) -> ExKMC:
        """Build the expanded tree for X against ``centers`` (k-means on X, or on Z, when None).

        ``X``, ``centers`` and ``Z`` as ``IMM.fit``: with Z (the clustering space, complete
        numeric rows aligned with X) the surrogate cost is measured in Z while the cuts are on
        X's features, which may hold NaN and category features.
        """
        self._check_params()
        X = self._fit_input(X)
        ds, centers, data = prepare_fit(
            X, self.n_clusters, centers, self.max_bins, self.random_state, self.objective, Z=Z
        )
        if self.base_tree == "imm":
            tree, _ = grow_imm(data)
        else:
            tree = CodeTree()
        base_leaves = len(tree.leaves())
        history = expand_by_surrogate(data, tree, self._leaf_budget())
        self.centers_ = centers
        self.n_passes_ = data.n_passes
        self.code_tree_ = tree
        self.mapper_ = data.mapper
        self.split_order_ = history["order"]
        self.surrogate_costs_ = history["surrogate_costs"]
        self.leaf_counts_ = list(range(base_leaves, base_leaves + len(self.split_order_) + 1))
        meta = {"algorithm": "exkmc", "base_tree": self.base_tree, "max_bins": self.max_bins,
                "objective": self.objective}
        self.full_tree_ = tree.to_threshold_tree(data.mapper, len(centers), ds.feature_names, meta=meta,
                                                 categories=dataset_categories(ds))
        self.tree_ = self.tree_at(self.leaf_counts_[-1])
        data.release()
        return self

    def tree_at(self, n_leaves: int) -> ThresholdTree:
        """The greedy prefix of the fitted tree with ``n_leaves`` leaves (capped at the final size):
        the base tree's splits and the first ``n_leaves - base leaves`` expansions."""
        self._check_fitted()
        base_leaves = self.leaf_counts_[0]
        n_leaves = max(base_leaves, min(int(n_leaves), self.leaf_counts_[-1]))
        late = set(self.split_order_[n_leaves - base_leaves:])
        internal = np.flatnonzero(self.full_tree_.kind != LEAF)
        return self.full_tree_.prune([node for node in internal if node not in late], self.code_tree_.value)

    @classmethod
    def prefix_trees(cls, data, labels, centers, leaves, *, objective="kmeans", random_state=0, max_bins=256,
                     fitted=None, n_rows=None) -> CurveSeries:
        """The cost curve's ExKMC series: the tree at every leaf count in ``leaves`` (sorted) with
        its surrogate cost, from one fit on ``data`` (a sample of ``n_rows`` rows), or from
        ``fitted``, the run's own ExKMC, when it was grown from these centers for this objective
        to at least ``max(leaves)`` leaves (it then holds every prefix, fitted on all rows)."""
        centers = np.asarray(centers, dtype=np.float64)
        reusable = (
            isinstance(fitted, cls)
            and getattr(fitted, "objective", "kmeans") == objective
            and fitted.max_leaves >= leaves[-1]
            and fitted.centers_.shape == centers.shape
            and np.array_equal(fitted.centers_, centers)
        )
        ex = fitted if reusable else cls(centers.shape[0], leaves[-1], max_bins=max_bins, random_state=random_state,
                                         objective=objective).fit(data, centers)
        surrogate = [ex.surrogate_costs_[min(L, ex.leaf_counts_[-1]) - ex.leaf_counts_[0]] for L in leaves]
        if not reusable and n_rows:  # an ExKMC on the sample: its surrogate costs scale to all rows
            surrogate = [c * n_rows / data.n_rows for c in surrogate]
        return CurveSeries([ex.tree_at(L) for L in leaves], surrogate, fitted_here=not reusable)
