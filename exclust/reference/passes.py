"""The per-block work of the reference fits, shipped to the Dask workers: Lloyd passes and
predictions of k-means, the l1 assignments of k-medians, the E-steps and predictions of the
Gaussian mixture, and the draws and counts of k-means|| / k-medians|| seeding.

This module imports no scikit-learn. A worker that runs one of these functions imports its
module first, and the estimators' modules (``kmeans``, ``kmedians``, ``gaussian_mixture``,
``seeding`` through ``reference_base``) import scikit-learn, which costs a worker process
about 1.2 s (scikit-learn pulls in scipy.stats): measured in the explain job at 10M rows,
where both workers paid it at the first Lloyd pass. ``tests/test_worker_imports.py`` keeps it so.
"""
from __future__ import annotations

import numpy as np

from exclust.dataplane import _center_distances as distances
from exclust.dataplane import parts
from exclust.dataplane.stats import ClusterStatistics
from exclust.reference import _gaussian_estep as estep
from exclust.reference._lloyd import lloyd_step

# distance name -> numba kernel giving (label, distance) of every row to its nearest center.
NEAREST = {"sqeuclidean": distances.nearest_center, "l1": distances.nearest_center_l1}


def _rows(X: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(X, dtype=np.float64)


# --------------------------------------------------------------------------- k-means
def lloyd_block(X: np.ndarray, centers: np.ndarray):
    """One Lloyd pass on a block: (per-center statistics, the block's inertia)."""
    counts, sums, sums_sq, inertia = lloyd_step(_rows(X), centers, np.empty(0, dtype=np.uint8))
    return ClusterStatistics(counts, sums, sums_sq), inertia


def lloyd_labelled_block(X: np.ndarray, centers: np.ndarray) -> dict:
    """One Lloyd pass on a block that also keeps each row's nearest center (``nearest_center_block``'s
    labels, bit for bit: the same search), in one byte a row while k <= 256."""
    labels = np.empty(X.shape[0], dtype=parts.label_dtype(centers.shape[0]))
    counts, sums, sums_sq, inertia = lloyd_step(_rows(X), centers, labels)
    return {"labels": labels, "statistics": ClusterStatistics(counts, sums, sums_sq), "inertia": inertia}


def lloyd_summary(part: dict) -> tuple:
    """What a labelled Lloyd pass reduces over the parts: (statistics, inertia)."""
    return part["statistics"], part["inertia"]


def nearest_cost_block(X: np.ndarray, centers: np.ndarray, distance: str) -> np.ndarray:
    """``score``'s pass: [cost of the finite rows to their nearest center, rows holding NaN or inf]."""
    X = _rows(X)
    finite = np.isfinite(X).all(axis=1)
    _, dist = NEAREST[distance](np.ascontiguousarray(X[finite]), centers)
    return np.array([float(dist.sum()), float(X.shape[0] - finite.sum())])


def nearest_center_block(X: np.ndarray, centers: np.ndarray) -> np.ndarray:
    """k-means prediction: the nearest center (squared l2) of every row."""
    return distances.nearest_center(_rows(X), centers)[0]


# --------------------------------------------------------------------------- k-medians
def nearest_l1_block(X: np.ndarray, centers: np.ndarray) -> np.ndarray:
    """k-medians prediction: the nearest center in l1 of every row."""
    return distances.nearest_center_l1(_rows(X), centers)[0]


def l1_counts_block(X: np.ndarray, centers: np.ndarray) -> tuple:
    return distances.l1_assignment_counts(_rows(X), centers)


# --------------------------------------------------------------------------- Gaussian mixture
def gmm_estep_block(X, means, factor, const, diag):
    return estep.gmm_estep(_rows(X), means, factor, const, diag)


def gmm_assign_block(X, means, factor, const, diag):
    return estep.gmm_assign(_rows(X), means, factor, const, diag)


def gmm_proba_block(X, means, factor, const, diag):
    return np.exp(estep.gmm_log_resp(_rows(X), means, factor, const, diag)[0])


def gmm_loglik_block(X, means, factor, const, diag):
    return estep.gmm_log_resp(_rows(X), means, factor, const, diag)[1]


def gmm_loglik_sum_block(X, means, factor, const, diag):
    """[log-likelihood of the finite rows, finite rows, rows holding NaN or inf]."""
    X = _rows(X)
    finite = np.isfinite(X).all(axis=1)
    total = estep.gmm_loglik_sum(np.ascontiguousarray(X[finite]), means, factor, const, diag)
    return np.array([total, float(finite.sum()), float(X.shape[0] - finite.sum())])


# --------------------------------------------------------------------------- k-means|| / k-medians|| seeding
def seeding_draw_block(offset: int, X: np.ndarray, candidates: np.ndarray, scale: float, seed: int,
                       distance: str) -> tuple:
    """One round on a part: (rows drawn with probability ``scale * dist``, the part's cost)."""
    X = _rows(X)
    _, dist = NEAREST[distance](X, candidates)
    if scale > 0:
        u = parts.row_uniforms(seed, offset, offset + X.shape[0])
        return X[u < scale * dist], float(dist.sum())
    return np.empty((0, X.shape[1])), float(dist.sum())


def concat_draws(a: tuple, b: tuple) -> tuple:
    return np.concatenate([a[0], b[0]]), a[1] + b[1]


def seeding_count_block(X: np.ndarray, candidates: np.ndarray, distance: str) -> np.ndarray:
    """Rows of the part nearest to each candidate (ties: the lowest index)."""
    labels, _ = NEAREST[distance](_rows(X), candidates)
    return np.bincount(labels, minlength=candidates.shape[0]).astype(np.int64)
