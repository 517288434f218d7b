"""MixtureSummary: the only input MMDT needs (weights, means, variances, feature names).

Built directly (``MixtureSummary(means=..., sigma=..., weights=...)``), from a fitted Gaussian
mixture, from k-means, or from any labels in one statistics pass (see the ``from_*`` methods).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from exclust.dataplane import arrays
from exclust.errors import InputError
from exclust.sources.dataset import Dataset


@dataclass(init=False)
class MixtureSummary:
    """Weights p_k, means mu_k, per-axis sigma_j (pooled within components) and per-component sigma_kj.

    ``sigma`` is the coordinate-wise standard deviation of paper 002 (one value per axis,
    the square root of the weight-averaged within-component variance). ``sigma_per_component``
    holds each component's own standard deviations (used by the ``exact`` threshold); when not
    given it is ``sigma`` for every component. ``covariances`` (K x d x d) is kept when known.
    """

    # The attributes as validated (the constructor takes sigma, weights, ... as optional).
    means: np.ndarray
    sigma: np.ndarray
    weights: np.ndarray
    sigma_per_component: np.ndarray
    covariances: np.ndarray | None
    feature_names: list[str]
    counts: np.ndarray | None  # points per component when built from data
    meta: dict[str, Any]

    def __init__(self, means: ArrayLike, sigma: ArrayLike | None = None, weights: ArrayLike | None = None,
                 sigma_per_component: ArrayLike | None = None, covariances: ArrayLike | None = None,
                 feature_names: Sequence[str] | None = None, counts: np.ndarray | None = None,
                 meta: dict[str, Any] | None = None) -> None:
        self.means = np.atleast_2d(np.asarray(means, dtype=np.float64))
        K, d = self.means.shape
        if K < 1 or d < 1:
            raise InputError("a mixture needs at least one component and one feature, got means of shape "
                             f"{self.means.shape}")
        if not np.isfinite(self.means).all():
            raise InputError("mixture means must be finite")
        w = np.asarray(np.full(K, 1.0 / K) if weights is None else weights, dtype=np.float64).reshape(-1)
        if w.shape != (K,) or (w < 0).any() or not np.isfinite(w).all():
            raise InputError(f"weights must be {K} non-negative numbers, got {w!r}")
        total = w.sum()
        if total <= 0:
            raise InputError("mixture weights sum to zero")
        self.weights = w / total
        per_component = None
        if sigma_per_component is not None:
            per_component = np.asarray(sigma_per_component, dtype=np.float64).reshape(K, d)
            if (per_component < 0).any() or not np.isfinite(per_component).all():
                raise InputError("per-component standard deviations must be finite and >= 0")
        if sigma is None:
            if per_component is None:
                raise InputError("give sigma (one standard deviation per axis) or sigma_per_component")
            sigma = np.sqrt(self.weights @ per_component**2)
        self.sigma = np.asarray(sigma, dtype=np.float64)
        if self.sigma.ndim == 0:
            self.sigma = np.full(d, float(self.sigma))
        if self.sigma.shape != (d,):
            raise InputError(f"sigma must hold one value per feature ({d}), got shape {self.sigma.shape}")
        if (self.sigma < 0).any() or not np.isfinite(self.sigma).all():
            raise InputError("sigma must be finite and >= 0")
        self.sigma_per_component = np.tile(self.sigma, (K, 1)) if per_component is None else per_component
        self.covariances = (None if covariances is None
                            else np.asarray(covariances, dtype=np.float64).reshape(K, d, d))
        self.feature_names = [str(s) for s in ([f"x{j}" for j in range(d)] if feature_names is None
                                               else feature_names)]
        if len(self.feature_names) != d:
            raise InputError(f"{len(self.feature_names)} feature names for {d} features")
        self.counts = counts
        self.meta = {} if meta is None else meta

    @property
    def n_components(self) -> int:
        return int(self.means.shape[0])

    @property
    def n_features(self) -> int:
        return int(self.means.shape[1])

    def to_dict(self) -> dict[str, Any]:
        """Plain lists, for metrics.json and reports."""
        out = {
            "weights": self.weights.tolist(),
            "means": self.means.tolist(),
            "sigma": self.sigma.tolist(),
            "sigma_per_component": self.sigma_per_component.tolist(),
            "feature_names": list(self.feature_names),
        }
        if self.counts is not None:
            out["counts"] = np.asarray(self.counts).tolist()
        return out

    def subset(self, components: Sequence[int]) -> MixtureSummary:
        """The summary of some components, weights renormalized (p-bar of paper 002)."""
        idx = np.asarray(components, dtype=np.int64)
        return MixtureSummary(
            means=self.means[idx],
            sigma=self.sigma,
            weights=self.weights[idx],
            sigma_per_component=self.sigma_per_component[idx],
            covariances=None if self.covariances is None else self.covariances[idx],
            feature_names=self.feature_names,
        )

    # ------------------------------------------------------------------ builders
    @classmethod
    def from_gmm(cls, gmm: Any, feature_names: Sequence[str] | None = None) -> MixtureSummary:
        """Summary of a fitted Gaussian mixture (exclust's or scikit-learn's, any covariance type).

        Per-component sigma is the square root of the diagonal of each covariance; the per-axis
        sigma pools them, sqrt(sum_k w_k var_kj); full covariances are kept for ``"full"`` and
        ``"tied"`` mixtures.
        """
        if not hasattr(gmm, "means_"):
            raise InputError("the Gaussian mixture is not fitted: call fit(X) before MixtureSummary.from_gmm")
        means = np.asarray(gmm.means_, dtype=np.float64)
        k, d = means.shape
        kind = getattr(gmm, "covariance_type", "full")
        cov = np.asarray(gmm.covariances_, dtype=np.float64)
        full = None
        if kind == "full":
            full = cov.reshape(k, d, d)
            var = np.diagonal(full, axis1=1, axis2=2).copy()
        elif kind == "tied":
            full = np.broadcast_to(cov.reshape(d, d), (k, d, d)).copy()
            var = np.tile(np.diag(cov.reshape(d, d)), (k, 1))
        elif kind == "diag":
            var = cov.reshape(k, d)
        elif kind == "spherical":
            var = np.repeat(cov.reshape(k, 1), d, axis=1)
        else:
            raise InputError(f"unknown covariance_type {kind!r} on the mixture; expected full, tied, diag or spherical")
        weights = np.asarray(gmm.weights_, dtype=np.float64)
        names = feature_names if feature_names is not None else getattr(gmm, "feature_names_in_", None)
        return cls(
            means=means,
            sigma=np.sqrt(weights @ var),
            weights=weights,
            sigma_per_component=np.sqrt(var),
            covariances=full,
            feature_names=None if names is None else [str(n) for n in names],
            meta={"source": "gmm", "covariance_type": kind},
        )

    @classmethod
    def from_kmeans(
        cls, kmeans: Any, X: Any, feature_names: Sequence[str] | None = None, *, full_covariance: bool = True
    ) -> MixtureSummary:
        """Summary of a fitted k-means (exclust's, scikit-learn's or dask-ml's) on X, in one statistics pass.

        Every row of X goes to its nearest center (computed on the workers, fused with the
        statistics pass); means, variances and weights are those of the points of each cluster.
        Without ``full_covariance``, the statistics an exclust ``KMeans`` kept from its last pass
        (``statistics_``) are used: no pass.
        """
        if not hasattr(kmeans, "cluster_centers_"):
            raise InputError("the k-means is not fitted: call fit(X) before MixtureSummary.from_kmeans")
        from exclust.reference import KMeans

        centers = np.ascontiguousarray(kmeans.cluster_centers_, dtype=np.float64)
        X, names = _summary_input(X, feature_names)
        if X.shape[1] != centers.shape[1]:
            raise InputError(f"the k-means has {centers.shape[1]} features but X has {X.shape[1]} columns")
        known = getattr(kmeans, "statistics_", None)
        if not full_covariance and known is not None and X.shape[0] == known.total:
            # exclust's KMeans kept the statistics of its last pass (nearest center of every row).
            return cls._from_cluster_statistics(known, names, False, "k-means")
        nearest = KMeans(centers.shape[0])
        nearest.cluster_centers_, nearest.n_features_in_ = centers, centers.shape[1]
        labels = nearest.predict(X)
        summary = cls._from_statistics(X, labels, centers.shape[0], names, full_covariance, "k-means")
        return summary

    @classmethod
    def from_labels(
        cls, X: Any, labels: Any, feature_names: Sequence[str] | None = None, *, full_covariance: bool = True
    ) -> MixtureSummary:
        """Summary of any labelling of X (DBSCAN, spectral, ground truth), in one statistics pass.

        Label -1 marks noise and is left out. In-memory labels may be any values (components
        follow their sorted order); dask labels must be small non-negative integers, and labels
        with no points are skipped. ``meta["labels"]`` holds the label of each component. A
        cluster with fewer than 2 points has no spread to summarize and is an error: relabel it
        -1 (noise) or merge it. ``labels`` may name an extra column of an ``exclust.sources.dataset.Dataset``.
        """
        if isinstance(labels, str):
            if not isinstance(X, Dataset) or labels not in X.extra:
                raise InputError(f"labels {labels!r} name no extra column of the data; pass the labels themselves")
            labels = X.extra[labels]
        X, names = _summary_input(X, feature_names)
        labels, distributed_labels = arrays.entering_array(labels)
        if distributed_labels:
            if labels.ndim != 1 or labels.shape[0] != X.shape[0]:
                raise InputError(f"labels must be one value per row of X ({X.shape[0]}), got shape {labels.shape}")
            return cls._from_statistics(X, labels, None, names, full_covariance, "labels")
        labels = labels.reshape(-1) if labels.ndim else labels
        if labels.ndim != 1 or labels.shape[0] != X.shape[0]:
            raise InputError(f"labels must be one value per row of X ({X.shape[0]}), got shape {labels.shape}")
        noise = labels == -1 if labels.dtype.kind in "iuf" else np.zeros(labels.shape, dtype=bool)
        if labels.dtype.kind == "f" and np.isnan(labels).any():
            raise InputError("labels hold NaN: give every row a label, -1 for noise")
        values, codes = np.unique(labels[~noise], return_inverse=True)
        if len(values) == 0:
            raise InputError("no labelled points: every label is -1 (noise); give at least one cluster")
        coded = np.full(labels.shape[0], -1, dtype=np.int64)
        coded[~noise] = codes
        return cls._from_statistics(X, coded, len(values), names, full_covariance, "labels", values.tolist())

    @classmethod
    def _from_statistics(
        cls, X, labels, n_clusters, names, full_covariance: bool, source: str, label_values: list | None = None
    ) -> MixtureSummary:
        from exclust.dataplane.stats import cluster_statistics

        stats = cluster_statistics(X, labels, n_clusters, full_scatter=full_covariance)
        return cls._from_cluster_statistics(stats, names, full_covariance, source, label_values)

    @classmethod
    def _from_cluster_statistics(
        cls, stats, names, full_covariance: bool, source: str, label_values: list | None = None
    ) -> MixtureSummary:
        if stats.total == 0:
            raise InputError("no labelled points: every label is -1 (noise) or there are no rows")
        if not (np.isfinite(stats.sums).all() and np.isfinite(stats.sums_sq).all()):
            raise InputError("X holds NaN or infinite values: clean them (or load with {fix})", option="nan_policy",
                             value="drop")
        present = np.flatnonzero(stats.counts > 0)
        values = present.tolist() if label_values is None else [label_values[i] for i in present]
        if source == "k-means" and len(present) < stats.n_clusters:
            empty = np.flatnonzero(stats.counts == 0).tolist()
            raise InputError(f"k-means cluster(s) {empty} hold no points of X: refit with fewer clusters")
        stats = stats.subset(present)
        small = [v for v, c in zip(values, stats.counts, strict=True) if c < 2]
        if small:
            raise InputError(
                f"cluster(s) {small} hold fewer than 2 points, so they have no spread: "
                "relabel them -1 (noise) or merge them into another cluster"
            )
        return cls(
            means=stats.means,
            sigma=np.sqrt(stats.pooled_variance),
            weights=stats.weights,
            sigma_per_component=np.sqrt(stats.variances),
            covariances=stats.covariances if full_covariance else None,
            feature_names=names,
            counts=stats.counts,
            meta={"source": source, "labels": values},
        )


def _summary_input(X: Any, feature_names: Sequence[str] | None):
    """(matrix, feature names): a Dataset's own names, else the given ones (or None).

    Dask input is not validated here (that would be a second pass): NaN shows up in the
    statistics and is reported then (a NaN in a row labelled -1 is left out with the row).
    """
    if isinstance(X, Dataset):
        return X.X, list(feature_names) if feature_names is not None else list(X.feature_names)
    X, distributed = arrays.entering(X)
    if not distributed:
        from exclust.sources.dataset import as_matrix

        data = as_matrix(X)
        X = data.X
        if feature_names is None:
            feature_names = data.feature_names  # a DataFrame's columns, else x0, x1, ...
    if X.ndim != 2:
        raise InputError(f"X must be a 2-D matrix (rows x features), got shape {X.shape}")
    return X, None if feature_names is None else [str(n) for n in feature_names]
