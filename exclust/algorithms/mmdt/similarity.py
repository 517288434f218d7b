"""Distance-based product kernels, their random Fourier features, and the kernel price of explainability.

Paper 002, Section 5 works with a bounded product kernel
``kappa(x, y) = prod_i kappa_i(x, y) = prod_i g(|x_i - y_i| / h_i)`` (eq. 23) where the profile g is
positive, decreasing and g(0) = 1. Two profiles are offered, as in the paper:

- ``"gaussian"``: g(t) = exp(-t^2), so kappa(x, y) = exp(-sum_i (x_i - y_i)^2 / h_i^2),
- ``"laplace"``:  g(t) = exp(-t),   so kappa(x, y) = exp(-sum_i |x_i - y_i| / h_i).

The bandwidth h (one number, or one per feature) rescales each axis; h = 1 is the paper's kernel.

Kernel k-means costs are measured with random Fourier features (Rahimi and Recht): a map z into
R^D with z(x).z(y) ~ kappa(x, y) and ||z(x)||^2 = 1 exactly. The kernel k-means cost of a
labelling is then ``sum_c (sum_{x in c} ||z(x)||^2 - ||sum_{x in c} z(x)||^2 / n_c)``: per cluster
a count, a sum of squares and a D-vector, accumulated on the chunks in one pass and tree-reduced.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from exclust.algorithms.mmdt._kernel_moments import GAUSSIAN, LAPLACE, rff_group_sums
from exclust.dataplane.parts import map_reduce, map_rows
from exclust.errors import InputError

KERNELS = {"gaussian": GAUSSIAN, "laplace": LAPLACE}


def kernel_code(kernel: str) -> int:
    """The numba code of a kernel name; InputError naming the choices for an unknown one."""
    if not isinstance(kernel, str) or kernel.lower() not in KERNELS:
        raise InputError(f"kernel must be one of {sorted(KERNELS)}, not {kernel!r}")
    return KERNELS[kernel.lower()]


def check_bandwidth(bandwidth: Any, n_features: int) -> np.ndarray:
    """Per-feature bandwidths h_i > 0 from one number or one per feature; InputError otherwise."""
    try:
        h = np.asarray(bandwidth, dtype=np.float64)
    except (TypeError, ValueError):
        raise InputError(f"bandwidth must be a positive number or one per feature, not {bandwidth!r}") from None
    if h.ndim == 0:
        h = np.full(n_features, float(h))
    if h.shape != (n_features,):
        raise InputError(
            f"bandwidth has {h.size} values for {n_features} features; give one number or one per feature"
        )
    if not (np.isfinite(h) & (h > 0)).all():
        raise InputError(f"bandwidth must be finite and > 0 (got {bandwidth!r}); try the features' standard deviation")
    return h


def profile(kernel: str, t: Any) -> np.ndarray:
    """g(t) of the kernel's profile, for t >= 0 in bandwidth units."""
    t = np.asarray(t, dtype=np.float64)
    return np.exp(-t * t) if kernel_code(kernel) == GAUSSIAN else np.exp(-t)


def profile_inverse(kernel: str, theta: Any) -> np.ndarray:
    """g^-1(theta) for theta in (0, 1]: the distance (in bandwidth units) at which g falls to theta."""
    theta = np.asarray(theta, dtype=np.float64)
    if ((theta <= 0) | (theta > 1) | ~np.isfinite(theta)).any():
        raise ValueError(f"g^-1 is defined on (0, 1]; got {theta}")
    t = -np.log(theta)
    return np.sqrt(t) if kernel_code(kernel) == GAUSSIAN else t


def axis_similarity(kernel: str, a: Any, b: Any, bandwidth: float = 1.0) -> np.ndarray:
    """kappa_i(a, b) = g(|a - b| / h) on one axis (broadcasting)."""
    return profile(kernel, np.abs(np.asarray(a, float) - np.asarray(b, float)) / float(bandwidth))


def kernel_matrix(kernel: str, X: Any, Y: Any, bandwidth: Any = 1.0) -> np.ndarray:
    """The exact product kernel kappa(x, y) between the rows of two small in-memory matrices."""
    X = np.atleast_2d(np.asarray(X, np.float64))
    Y = np.atleast_2d(np.asarray(Y, np.float64))
    h = check_bandwidth(bandwidth, X.shape[1])
    diff = np.abs(X[:, None, :] - Y[None, :, :]) / h
    if kernel_code(kernel) == GAUSSIAN:
        return np.exp(-(diff**2).sum(axis=2))
    return np.exp(-diff.sum(axis=2))


class RandomFourierFeatures:
    """z(x) in R^D with z(x).z(y) ~ kappa(x, y): D/2 frequencies, a cosine and a sine each.

    The spectral measure of a product kernel is a product over axes: for the Gaussian profile
    exp(-(t/h)^2) the frequency on axis i is N(0, 2/h_i^2), for the Laplace profile exp(-|t|/h)
    it is Cauchy(0, 1/h_i). Pairing cos and sin of the same frequency gives ||z(x)|| = 1 exactly,
    matching kappa(x, x) = 1, and halves the variance of the random-phase variant.
    """

    def __init__(self, kernel: str = "gaussian", bandwidth: Any = 1.0, n_components: int = 256,
                 random_state: int | None = 0) -> None:
        self.kernel = kernel
        self.bandwidth = bandwidth
        self.n_components = n_components
        self.random_state = random_state

    def fit(self, n_features: int) -> RandomFourierFeatures:
        """Draw the frequencies for data with ``n_features`` columns."""
        code = kernel_code(self.kernel)
        h = check_bandwidth(self.bandwidth, n_features)
        D = self.n_components
        if isinstance(D, bool) or not isinstance(D, (int, np.integer)) or D < 2 or D % 2:
            raise InputError(f"n_components (random Fourier features) must be an even integer >= 2, not {D!r}")
        rng = np.random.default_rng(self.random_state)
        half = int(D) // 2
        if code == GAUSSIAN:
            omega = rng.standard_normal((half, n_features)) * (np.sqrt(2.0) / h)
        else:
            omega = rng.standard_cauchy((half, n_features)) / h
        self.omega_ = np.ascontiguousarray(omega)
        self.n_features_in_ = int(n_features)
        return self

    def _block(self, X: np.ndarray) -> np.ndarray:
        p = np.asarray(X, np.float64) @ self.omega_.T
        return np.hstack([np.cos(p), np.sin(p)]) / np.sqrt(self.omega_.shape[0])

    def transform(self, X: Any):
        """z(X): numpy in, numpy out; a dask array in, a lazy dask array (a map over row chunks) out."""
        return map_rows(self._block, X, dtype=np.float64, width=2 * self.omega_.shape[0])


# ----------------------------------------------------------------------------- one-pass statistics
def _label_matrix_block(X: np.ndarray, labellings: Sequence[Any]) -> np.ndarray:
    from exclust.tree import ThresholdTree

    cols = []
    for lab in labellings:
        if isinstance(lab, ThresholdTree):
            cols.append(lab.predict(X))
        else:
            cols.append(np.asarray(lab, dtype=np.int64).reshape(-1))
    return np.ascontiguousarray(np.stack(cols, axis=1), dtype=np.int64)


def _group_sums_block(X: np.ndarray, omega: np.ndarray, n_groups: int, *labellings) -> np.ndarray:
    X = np.ascontiguousarray(X, dtype=np.float64)
    return rff_group_sums(X, omega, _label_matrix_block(X, labellings), n_groups)


def rff_group_statistics(X: Any, labellings: Sequence[Any], n_groups: int, rff: RandomFourierFeatures) -> np.ndarray:
    """One pass: per labelling and group, (count, sum ||z||^2, sum z). Each labelling is labels or a tree.

    Labels may be numpy or dask arrays (aligned with X's rows); a ThresholdTree is routed on the
    chunk itself. Returns an array (len(labellings), n_groups, 2 + D).
    """
    from exclust.tree import ThresholdTree

    trees = [lab if isinstance(lab, ThresholdTree) else None for lab in labellings]
    columns = [lab for lab in labellings if not isinstance(lab, ThresholdTree)]
    return np.asarray(map_reduce(_group_sums_part, X, *columns, args=(trees, rff.omega_, int(n_groups))))


def _group_sums_part(X: np.ndarray, *rest) -> np.ndarray:
    """One part: the labellings in order, trees routed here, label columns as read with the rows."""
    *columns, trees, omega, n_groups = rest
    given = iter(columns)
    labellings = [tree if tree is not None else next(given) for tree in trees]
    return _group_sums_block(X, omega, n_groups, *labellings)


def kernel_cost_from_statistics(stats: np.ndarray) -> float:
    """Kernel k-means cost sum_c (sum ||z||^2 - ||sum z||^2 / n_c) of one labelling's (K, 2 + D) statistics."""
    counts = stats[:, 0]
    live = counts > 0
    sums = stats[live, 2:]
    return float(stats[live, 1].sum() - ((sums * sums).sum(axis=1) / counts[live]).sum())


def kernel_kmeans_cost(X: Any, labels: Any, n_clusters: int, *, kernel: str = "gaussian",
                       bandwidth: Any = 1.0, n_components: int = 256, random_state: int | None = 0) -> float:
    """Kernel k-means cost of a labelling (labels or a ThresholdTree), by random Fourier features, in one pass."""
    rff = RandomFourierFeatures(kernel, bandwidth, n_components, random_state).fit(X.shape[1])
    stats = rff_group_statistics(X, [labels], int(n_clusters), rff)
    return kernel_cost_from_statistics(stats[0])


def kernel_price(X: Any, tree_labels: Any, base_labels: Any, n_clusters: int, *, kernel: str = "gaussian",
                 bandwidth: Any = 1.0, n_components: int = 256, random_state: int | None = 0,
                 rff: RandomFourierFeatures | None = None) -> float:
    """Kernel price of explainability: kernel k-means cost of the tree's clusters / of the base clusters.

    ``tree_labels`` is a ThresholdTree (routed on the chunks) or its labels; ``base_labels`` the
    reference labels. Both costs come from one pass over X with the same random Fourier features
    (``rff`` when given, else drawn from ``kernel``, ``bandwidth``, ``n_components``, ``random_state``).
    """
    if rff is None:
        rff = RandomFourierFeatures(kernel, bandwidth, n_components, random_state).fit(X.shape[1])
    stats = rff_group_statistics(X, [tree_labels, base_labels], int(n_clusters), rff)
    tree_cost = kernel_cost_from_statistics(stats[0])
    base_cost = kernel_cost_from_statistics(stats[1])
    if base_cost <= 0:
        return float("nan") if tree_cost <= 0 else float("inf")
    return tree_cost / base_cost
