"""MixtureSummary: the only input MMDT needs (weights, means, variances, feature names).

Built directly (``MixtureSummary(means=..., sigma=..., weights=...)``), from a fitted Gaussian
mixture, from k-means, or from any labels in one statistics pass (see the ``from_*`` methods).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from exclust.data import InputError


@dataclass
class MixtureSummary:
    """Weights p_k, means mu_k, per-axis sigma_j (pooled within components) and per-component sigma_kj.

    ``sigma`` is the coordinate-wise standard deviation of paper 002 (one value per axis,
    the square root of the weight-averaged within-component variance). ``sigma_per_component``
    holds each component's own standard deviations (used by the ``exact`` threshold); when not
    given it is ``sigma`` for every component. ``covariances`` (K x d x d) is kept when known.
    """

    means: np.ndarray
    sigma: np.ndarray | None = None
    weights: np.ndarray | None = None
    sigma_per_component: np.ndarray | None = None
    covariances: np.ndarray | None = None
    feature_names: list[str] | None = None
    counts: np.ndarray | None = None  # points per component when built from data
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.means = np.atleast_2d(np.asarray(self.means, dtype=np.float64))
        K, d = self.means.shape
        if K < 1 or d < 1:
            raise InputError(f"a mixture needs at least one component and one feature, got means of shape {self.means.shape}")
        if not np.isfinite(self.means).all():
            raise InputError("mixture means must be finite")
        if self.weights is None:
            self.weights = np.full(K, 1.0 / K)
        self.weights = np.asarray(self.weights, dtype=np.float64).reshape(-1)
        if self.weights.shape != (K,) or (self.weights < 0).any() or not np.isfinite(self.weights).all():
            raise InputError(f"weights must be {K} non-negative numbers, got {self.weights!r}")
        total = self.weights.sum()
        if total <= 0:
            raise InputError("mixture weights sum to zero")
        self.weights = self.weights / total
        if self.sigma_per_component is not None:
            self.sigma_per_component = np.asarray(self.sigma_per_component, dtype=np.float64).reshape(K, d)
            if (self.sigma_per_component < 0).any() or not np.isfinite(self.sigma_per_component).all():
                raise InputError("per-component standard deviations must be finite and >= 0")
        if self.sigma is None:
            if self.sigma_per_component is None:
                raise InputError("give sigma (one standard deviation per axis) or sigma_per_component")
            self.sigma = np.sqrt(self.weights @ self.sigma_per_component**2)
        self.sigma = np.asarray(self.sigma, dtype=np.float64)
        if self.sigma.ndim == 0:
            self.sigma = np.full(d, float(self.sigma))
        if self.sigma.shape != (d,):
            raise InputError(f"sigma must hold one value per feature ({d}), got shape {self.sigma.shape}")
        if (self.sigma < 0).any() or not np.isfinite(self.sigma).all():
            raise InputError("sigma must be finite and >= 0")
        if self.sigma_per_component is None:
            self.sigma_per_component = np.tile(self.sigma, (K, 1))
        if self.covariances is not None:
            self.covariances = np.asarray(self.covariances, dtype=np.float64).reshape(K, d, d)
        if self.feature_names is None:
            self.feature_names = [f"x{j}" for j in range(d)]
        self.feature_names = [str(s) for s in self.feature_names]
        if len(self.feature_names) != d:
            raise InputError(f"{len(self.feature_names)} feature names for {d} features")

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

    def subset(self, components: Sequence[int]) -> "MixtureSummary":
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
