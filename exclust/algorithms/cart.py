"""CART baseline (paper 003, Appendix B.1): scikit-learn's decision tree on the reference labels.

Each point is labelled by the reference clustering; a ``DecisionTreeClassifier`` minimizing
Gini impurity is grown best-first to ``max_leaf_nodes`` leaves (default: one per reference
cluster), and converted into a ``ThresholdTree`` whose leaf values are the leaves' majority
reference labels.

Issue 28: missing values (NaN) are scikit-learn's own (since 1.3 its trees learn a side for
them at every cut, the child with more rows where a node saw none), kept as the tree's missing
sides. Category features (a Dataset's ``categories``) are cut by sets: scikit-learn knows no
categories, so each category feature is recoded by the rank of its categories in one Fisher
order over all fitted rows (their rows' shares over the clusters projected on the leading
principal direction, ``cut_search.leading_direction_order``; for two clusters Breiman's order by
the share of one cluster, which makes the best Gini set cut at the root a prefix), and a
threshold on the ranks is the set cut of the categories ranked below it. Categories without
rows in the fitted rows go where missing values go. scikit-learn needs the rows in memory, so data larger than
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
from exclust.sources.dataset import as_tree_input
from exclust.tree import CATEGORY_SET, LEAF, ONE_SIDED, ThresholdTree
from exclust.tree.node_kinds import MISSING_AT_FIT, MISSING_LEFT, MISSING_NONE, MISSING_RIGHT

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
    model, n_features: int, feature_names=None, n_clusters: int | None = None, meta: dict | None = None,
    ranks: dict | None = None, categories: dict | None = None,
) -> ThresholdTree:
    """Convert a fitted ``DecisionTreeClassifier`` into a ``ThresholdTree`` (same routing, missing
    values to the side scikit-learn learned). ``ranks``: per recoded category feature, each code's
    rank (NaN: no rank), so a threshold on the ranks becomes a set cut (``categories``: the
    vocabularies)."""
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
    sides = np.where(is_leaf, MISSING_NONE, np.where(t.missing_go_to_left, MISSING_LEFT, MISSING_RIGHT))
    sets: list[tuple[int, ...]] = [()] * m
    for i in np.flatnonzero(~is_leaf & np.isin(feature, list(ranks or {}))).tolist():
        rank = (ranks or {})[int(feature[i])]
        kind[i] = CATEGORY_SET
        sets[i] = tuple(np.flatnonzero(rank <= float(t.threshold[i])).tolist())  # NaN ranks: never left
        threshold[i] = np.nan
    return ThresholdTree(
        kind, feature, threshold, left, right, value,
        n_features=n_features, feature_names=feature_names, n_clusters=n_clusters, meta=meta,
        missing_side=sides, left_categories=sets, categories=categories,
    )


def rank_categories(X: np.ndarray, labels: np.ndarray, categories: dict) -> tuple[np.ndarray, dict]:
    """X with each category feature's codes replaced by their rank in the Fisher order of the
    categories by their rows' shares over the clusters (codes without rows: NaN, a missing
    value), and per feature each code's rank (NaN where it has none)."""
    from exclust.algorithms.histogram.cut_search import leading_direction_order

    X = np.array(X, dtype=np.float64, copy=True)
    k = int(labels.max()) + 1 if labels.size else 1
    ranks: dict[int, np.ndarray] = {}
    for f, vocabulary in categories.items():
        C = len(vocabulary)
        codes = X[:, f]
        valid = np.isfinite(codes) & (codes >= 0) & (codes < C)
        counts = np.zeros((C, k))
        np.add.at(counts, (codes[valid].astype(np.int64), labels[valid]), 1.0)
        held = np.flatnonzero(counts.sum(axis=1) > 0)
        rank = np.full(C, np.nan)
        if held.size:
            rows = counts[held].sum(axis=1)
            rank[leading_direction_order(counts[held] / rows[:, None], rows, held)] = np.arange(held.size)
        X[:, f] = np.where(valid, rank[np.where(valid, codes, 0).astype(np.int64)], np.nan)
        ranks[int(f)] = rank
    return X, ranks


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
        ds = as_tree_input(self._fit_input(X))
        categories = {int(f): list(v) for f, v in ds.categories.items()}
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
            MISSING_AT_FIT: [ds.feature_names[f] for f in np.flatnonzero(np.isnan(Xs).any(axis=0)).tolist()],
        }
        if leaves == 1 or n_found == 1:
            # scikit-learn refuses max_leaf_nodes=1; one leaf holds the majority label.
            majority = int(np.bincount(ys).argmax())
            self.tree_ = ThresholdTree(
                [LEAF], [-1], [np.nan], [-1], [-1], [majority],
                n_features=ds.n_features, feature_names=ds.feature_names, n_clusters=n_clusters, meta=meta,
                categories=categories,
            )
            self.model_ = None
        else:
            ranked, ranks = rank_categories(Xs, ys, categories) if categories else (Xs, {})
            model = DecisionTreeClassifier(max_leaf_nodes=int(leaves), random_state=self.random_state)
            model.fit(ranked, ys)
            self.model_ = model
            self.tree_ = sklearn_tree_to_threshold_tree(
                model, ds.n_features, ds.feature_names, n_clusters=n_clusters, meta=meta, ranks=ranks,
                categories=categories,
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
