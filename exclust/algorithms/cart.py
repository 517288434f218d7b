"""CART baseline (paper 003, Appendix B.1): scikit-learn's decision tree on the reference labels.

Each point is labelled by the reference clustering; a ``DecisionTreeClassifier`` minimizing
Gini impurity is grown best-first to ``max_leaf_nodes`` leaves (default: one per reference
cluster), and converted into a ``ThresholdTree`` whose leaf values are the leaves' majority
reference labels. scikit-learn needs the rows in memory, so data larger than
``max_sample_rows`` is fitted on a uniform random sample drawn on the workers (only the sample
travels); the estimator says so in ``sampled_``, ``n_fit_rows_``, ``tree_.meta`` and the log.
"""
from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import numpy as np

from exclust.dataplane.parts import uniform_sample
from exclust.errors import InputError
from exclust.estimator import RANDOM_STATE, Integral, Interval, TreeExplainer
from exclust.scoring.curves import CurveSeries
from exclust.scoring.score_pass import prepare_labels
from exclust.sources.dataset import as_matrix
from exclust.tree import LEAF, ONE_SIDED, ThresholdTree

log = logging.getLogger(__name__)


def sklearn_threshold_as_float64(t: float) -> float:
    """The float64 threshold t' with ``x <= t'`` exactly when ``float32(x) <= t``.

    scikit-learn casts X to float32 before comparing with its (float64) thresholds, so a
    float64 point within float32 rounding of a threshold can go the other way than ``x <= t``
    says. The cut in float64 lies halfway between the largest float32 not above t and the next
    float32, where rounding ties go to the float32 with an even mantissa.
    """
    low = np.float32(t)
    if float(low) > t:
        low = np.nextafter(low, np.float32(-np.inf))
    high = np.nextafter(low, np.float32(np.inf))
    if not np.isfinite(high):
        return float(np.finfo(np.float64).max)
    mid = (float(low) + float(high)) / 2.0  # exact: float32 values have spare float64 bits
    ties_go_low = (int(np.array(low).view(np.int32)) & 1) == 0
    return mid if ties_go_low else float(np.nextafter(mid, -np.inf))


def sklearn_tree_to_threshold_tree(
    model, n_features: int, feature_names=None, n_clusters: int | None = None, meta: dict | None = None
) -> ThresholdTree:
    """Convert a fitted ``DecisionTreeClassifier`` into a ``ThresholdTree`` (same routing)."""
    t = model.tree_
    m = t.node_count
    is_leaf = t.children_left == -1
    kind = np.where(is_leaf, LEAF, ONE_SIDED)
    feature = np.where(is_leaf, -1, t.feature)
    threshold = np.array(
        [np.nan if is_leaf[i] else sklearn_threshold_as_float64(float(t.threshold[i])) for i in range(m)]
    )
    classes = np.asarray(model.classes_)
    majority = classes[np.argmax(t.value[:, 0, :], axis=1)].astype(np.int64)
    value = np.where(is_leaf, majority, -1)
    left = np.where(is_leaf, -1, t.children_left)
    right = np.where(is_leaf, -1, t.children_right)
    return ThresholdTree(
        kind, feature, threshold, left, right, value,
        n_features=n_features, feature_names=feature_names, n_clusters=n_clusters, meta=meta,
    )


def draw_sample(X, labels, max_rows: int, random_state=None) -> tuple[np.ndarray, np.ndarray, bool]:
    """(X_sample, labels_sample, sampled): an exact uniform sample of at most ``max_rows`` rows.

    Rows are chosen by global row id (``exclust.dataplane.parts.uniform_sample``), so the sample does not
    depend on how the data are chunked; one pass on Dask, only the sample travels.
    """
    Xs, ys = uniform_sample(X, labels, size=int(max_rows), random_state=random_state)
    return Xs, ys, int(X.shape[0]) > int(max_rows)


def cluster_ids(ys: np.ndarray) -> np.ndarray:
    """Labels in memory as int64 cluster ids, NaN as -1 (noise); InputError on other values."""
    if np.issubdtype(ys.dtype, np.floating):
        bad = ~np.isnan(ys) & (ys != np.round(ys))
        if bad.any():
            raise InputError("labels must be integer cluster ids (-1 or NaN for noise)")
        ys = np.where(np.isnan(ys), -1, ys)
    ys = ys.astype(np.int64)
    if (ys < -1).any():
        raise InputError("labels must be cluster ids >= 0, or -1 for noise")
    return ys


class CART(TreeExplainer):
    """scikit-learn's CART on the reference labels, as a ThresholdTree (paper 003's baseline).

    ``max_leaf_nodes`` None: one leaf per cluster (``n_clusters``, else the clusters the labels
    hold). ``n_clusters`` None: read from the labels (the largest id + 1); given, the labels
    must name clusters below it.

    Parameters
    ----------
    max_leaf_nodes : int or None, default=None
        Leaves of the tree; None: one per cluster.
    max_sample_rows : int, default=1000000
        scikit-learn fits on an exact uniform sample of at most this many rows (a Dask input is sampled in one pass).
    random_state : None, int or numpy Generator, default=None
        Seeds the sample and scikit-learn's tree.
    n_clusters : int or None, default=None
        Number of clusters; None: read from the labels (the largest id + 1).
    """

    _parameter_constraints = {
        "max_leaf_nodes": [None, Interval(Integral, 1, None, closed="left")],
        "max_sample_rows": [Interval(Integral, 1, None, closed="left")],
        "random_state": RANDOM_STATE,
        "n_clusters": [None, Interval(Integral, 2, None, closed="left")],
    }

    def __init__(self, max_leaf_nodes: int | None = None, max_sample_rows: int = 1_000_000, random_state: Any = None,
                 *, n_clusters: int | None = None):
        self.max_leaf_nodes = max_leaf_nodes
        self.max_sample_rows = max_sample_rows
        self.random_state = random_state
        self.n_clusters = n_clusters

    def fit(self, X, labels) -> CART:
        """Fit on X and the reference labels (ids 0..K-1; -1 marks noise and is left out)."""
        from sklearn.tree import DecisionTreeClassifier

        self._check_params()
        if labels is None:
            raise InputError("CART needs the reference labels: fit(X, labels)")
        ds = as_matrix(self._fit_input(X))
        labels = prepare_labels(labels, ds.X, "labels")
        Xs, ys, sampled = draw_sample(ds.X, labels, int(self.max_sample_rows), self.random_state)
        ys = cluster_ids(np.asarray(ys))
        keep = ys >= 0
        Xs, ys = Xs[keep], ys[keep]
        if ys.size == 0:
            raise InputError("every label is -1 (noise): there is nothing to fit")
        n_clusters = int(ys.max()) + 1
        if self.n_clusters is not None:
            if n_clusters > self.n_clusters:
                raise InputError(f"labels name cluster {n_clusters - 1}, but n_clusters={self.n_clusters}; "
                                 f"labels must be ids 0..{self.n_clusters - 1} (-1 for noise)")
            n_clusters = int(self.n_clusters)
        n_found = int(np.unique(ys).size)
        leaves = self.max_leaf_nodes if self.max_leaf_nodes is not None else (
            n_found if self.n_clusters is None else n_clusters)
        self.sampled_ = bool(sampled)
        self.n_fit_rows_ = int(ys.size)
        self.n_rows_ = int(ds.n_rows)
        if sampled:
            log.info(
                "CART: %d rows exceed max_sample_rows=%d; fitted on a uniform random sample of %d rows",
                self.n_rows_, self.max_sample_rows, self.n_fit_rows_,
            )
        meta = {
            "algorithm": "cart",
            "max_leaf_nodes": int(leaves),
            "sampled": self.sampled_,
            "n_fit_rows": self.n_fit_rows_,
            "n_rows": self.n_rows_,
            "criterion": "gini",
        }
        if leaves == 1 or n_found == 1:
            # scikit-learn refuses max_leaf_nodes=1; one leaf holds the majority label.
            majority = int(np.bincount(ys).argmax())
            self.tree_ = ThresholdTree(
                [LEAF], [-1], [np.nan], [-1], [-1], [majority],
                n_features=ds.n_features, feature_names=ds.feature_names, n_clusters=n_clusters, meta=meta,
            )
            self.model_ = None
        else:
            model = DecisionTreeClassifier(max_leaf_nodes=int(leaves), random_state=self.random_state)
            model.fit(Xs, ys)
            self.model_ = model
            self.tree_ = sklearn_tree_to_threshold_tree(
                model, ds.n_features, ds.feature_names, n_clusters=n_clusters, meta=meta
            )
        self.n_clusters_ = n_clusters
        self.feature_names_ = list(ds.feature_names)
        return self

    def fit_predict(self, X, labels):
        """Fit, then the cluster of every row of X."""
        return self.fit(X, labels).predict(X)

    @classmethod
    def prefix_trees(cls, data, labels, centers, leaves, *, objective="kmeans", random_state=0, max_bins=256,
                     fitted=None, n_rows=None) -> CurveSeries:
        """The cost curve's CART series, learned from the reference ``labels`` of ``data``'s rows."""
        return CurveSeries(cart_prefix_trees(data, labels, leaves, random_state))


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
