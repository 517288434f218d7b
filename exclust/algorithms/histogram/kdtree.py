"""KDTree baseline of paper 003 (Appendix B.1): highest-variance feature, cut at the median.

Each split takes the leaf's feature of highest variance and cuts it at the leaf's median, so
the two children hold (about) half the points each; leaves are labelled with the reference
center of lowest surrogate cost, like ExKMC's. The paper obtains at most k' leaves through the
leaf size floor(n / k') of a classic KD-tree (a power of two); here the most populated leaf is
split first until the tree has exactly ``max_leaves`` leaves, which is the same tree when
``max_leaves`` is a power of two and fills a level part way otherwise.

The engine is the histogram one (exclust.algorithms.histogram.binning): one pass per level gathers, per leaf, the
counts per (feature, bin) and the per-feature sums of x and x^2; the median is read off the
cumulative counts (exact when the feature has at most ``max_bins`` distinct values, else to
within one quantile bin), the variance from the sums, and the leaf labels from the sums too
(the surrogate cost of a leaf with center j is ``S - 2 <sum x, mu_j> + n ||mu_j||^2``).
"""
from __future__ import annotations

import numpy as np

from exclust.algorithms.histogram.base import (
    CenterTreePredictor,
    check_centers,
    dataset_categories,
    known_missing,
)
from exclust.algorithms.histogram.binning import DEFAULT_SAMPLE_SIZE, MAX_CODE_BINS, edges_from_sample
from exclust.algorithms.histogram.criteria import MedianCut
from exclust.algorithms.histogram.engine import CodeTree
from exclust.dataplane.parts import map_reduce, uniform_sample
from exclust.errors import InputError
from exclust.estimator import RANDOM_STATE, Integral, Interval
from exclust.scoring.curves import CurveSeries
from exclust.sources.dataset import as_tree_input


class KDTree(CenterTreePredictor):
    """KD-tree with ``max_leaves`` leaves, labelled by surrogate cost against reference centers.

    Parameters
    ----------
    max_leaves : int or None, default=None
        Leaves of the tree; None: one leaf per cluster (``n_clusters``).
    max_bins : int, default=256
        Bins per feature for the median search (2..65536).
    random_state : None, int or numpy Generator, default=None
        Seeds the sample the bin edges come from.
    n_clusters : int or None, default=None
        None: the number of centers given to ``fit``; given, it must be that number.

    Fitted attributes: ``tree_`` (ThresholdTree, leaf value = center index), ``centers_``,
    ``n_passes_`` (passes over the rows), ``split_order_`` (nodes in the order they were split)
    and ``node_value_`` (every node's cheapest center, for the prefix trees of ``tree_at``).
    """

    _parameter_constraints = {
        "max_leaves": [None, Interval(Integral, 1, None, closed="left")],
        "max_bins": [Interval(Integral, 2, MAX_CODE_BINS, closed="both")],
        "random_state": RANDOM_STATE,
        "n_clusters": [None, Interval(Integral, 2, None, closed="left")],
    }

    def __init__(self, max_leaves: int | None = None, max_bins: int = 256, random_state=None, *,
                 n_clusters: int | None = None) -> None:
        self.max_leaves = max_leaves
        self.max_bins = max_bins
        self.random_state = random_state
        self.n_clusters = n_clusters

    def fit(self, X, centers) -> KDTree:
        """Grow the KD-tree on X and label its leaves with the cheapest of ``centers``.

        Missing values (a Dataset loaded with them, ``Dataset.missing``) and category features
        (``Dataset.categories``) are cut as ``MedianCut`` says: the missing rows go to the side
        that halves the node best, a category feature is cut by a set of its categories. The
        leaves are then labelled from the numeric features' observed values: a leaf's cost with
        center j sums, over the numeric features, ``sum (x - mu_j)^2`` over the rows holding a
        value (less the shared sum of x^2); a center's coordinate on a category feature is not
        used."""
        self._check_params()
        max_bins = int(self.max_bins)
        ds = as_tree_input(self._fit_input(X))
        centers = np.asarray(centers, dtype=np.float64)
        if centers.ndim != 2 or centers.shape[0] < 1:
            raise ValueError(
                f"centers must be a 2-D array (n_clusters, n_features), got shape {centers.shape}"
            )
        centers = check_centers(centers, centers.shape[0], ds.n_features)
        if self.n_clusters is not None and centers.shape[0] != self.n_clusters:
            raise InputError(f"{centers.shape[0]} centers given for n_clusters={self.n_clusters}; "
                             "pass one center per cluster")
        m = int(self.max_leaves if self.max_leaves is not None else centers.shape[0])
        (sample,) = uniform_sample(ds.X, size=DEFAULT_SAMPLE_SIZE, random_state=self.random_state)
        passes = int(ds.distributed)  # the sample is a pass on Dask, none in memory
        mapper = edges_from_sample(sample, max_bins=max_bins, categories=dataset_categories(ds),
                                   missing=known_missing(ds))
        del sample
        observed = mapper.is_category.any() or mapper.missing.any()  # label from observed numeric values
        numeric = ~mapper.is_category
        n_bins = mapper.max_n_bins
        center_sq = np.einsum("ij,ij->i", centers, centers)
        criterion = MedianCut()
        tree = CodeTree()
        stats = {}  # leaf -> (counts (d, B), sums (d,), sum of squares (d,))
        node_value = {}  # every node's cheapest center, kept for the prefix trees
        order = []  # nodes in the order they were split
        pending = [0]
        while pending:
            slot = np.full(tree.n_nodes, -1, dtype=np.int64)
            slot[pending] = np.arange(len(pending))
            counts, sums, sq = map_reduce(
                criterion.block, ds.X, args=(mapper, tree.arrays(mapper), slot, len(pending), n_bins)
            )
            passes += 1
            for s, leaf in enumerate(pending):
                stats[leaf] = (counts[s], sums[s], sq[s])
                n_leaf = counts[s][0].sum()
                if observed:
                    n_f = np.array([counts[s][f, : int(nb)].sum() for f, nb in enumerate(mapper.n_bins.tolist())])
                    cost = (n_f * numeric) @ (centers**2).T - 2.0 * (centers * numeric) @ sums[s]
                    node_value[leaf] = int(np.argmin(cost))
                else:
                    node_value[leaf] = int(np.argmin(n_leaf * center_sq - 2.0 * centers @ sums[s]))
            pending = []
            n_leaves = len(tree.leaves())
            # Most populated leaves first (balanced cuts make this level order).
            for leaf in sorted(stats, key=lambda node: (-stats[node][0][0].sum(), node)):
                if n_leaves >= m:
                    break
                cut = criterion.best_split(*stats[leaf], mapper)
                if cut is None:
                    continue
                left, right = cut.apply(tree, leaf)
                order.append(leaf)
                pending += [left, right]
                n_leaves += 1
                del stats[leaf]
        tree.value = [node_value[i] for i in range(tree.n_nodes)]
        self.centers_ = centers
        self.n_passes_ = passes
        self.split_order_ = order
        self.tree_ = tree.to_threshold_tree(
            mapper, centers.shape[0], ds.feature_names, meta={"algorithm": "kdtree", "max_bins": max_bins},
            categories=dataset_categories(ds),
        )
        self.node_value_ = np.asarray(tree.value, dtype=np.int64)
        return self

    def tree_at(self, n_leaves: int):
        """The tree after its first ``n_leaves - 1`` splits (the one ``KDTree(n_leaves)`` grows)."""
        self._check_fitted()
        return self.tree_.prune(self.split_order_[: max(0, int(n_leaves) - 1)], self.node_value_)

    @classmethod
    def prefix_trees(cls, data, labels, centers, leaves, *, objective="kmeans", random_state=0, max_bins=256,
                     fitted=None, n_rows=None) -> CurveSeries:
        """The cost curve's KDTree series: one fit at ``max(leaves)`` on ``data`` holds every smaller tree."""
        kd = cls(leaves[-1], max_bins=max_bins, random_state=random_state).fit(data, centers)
        return CurveSeries([kd.tree_at(L) for L in leaves])

    def fit_predict(self, X, centers):  # centers are required here
        """Fit, then return the cluster of every row of X."""
        return self.fit(X, centers).predict(X)

