"""A small table for the category and missing-value tests of the tree builders (issue 28)."""
from __future__ import annotations

import numpy as np


def clustered_customers(rng: np.random.Generator, n: int):
    """Three clusters in a 2-D space Z; the explanation features: a noisy copy of z0 holding NaN,
    and a category following the cluster (codes 0..4, two categories per cluster, some NaN).
    Returns ``(X, Z, centers, cluster)``."""
    centers = np.array([[-4.0, 0.0], [0.0, 4.0], [4.0, 0.0]])
    cluster = rng.integers(0, 3, n)
    Z = centers[cluster] + rng.normal(size=(n, 2)) * 0.6
    x0 = Z[:, 0] + rng.normal(size=n) * 0.3
    x0[rng.random(n) < 0.1] = np.nan
    category = np.array([[0, 3], [1, 4], [2, 2]])[cluster, rng.integers(0, 2, n)].astype(float)
    category[rng.random(n) < 0.05] = np.nan
    return np.stack([x0, category], 1), Z, centers, cluster
