"""k-medians reference clustering (l1) on Dask: Lloyd-style alternation with exact medians.

Each iteration assigns every row to its nearest center in l1 and moves every center to the
coordinate-wise median of its rows, the l1-optimal center of a fixed cluster. Medians do not
merge across partitions, so they come from the histogram bisection that ``metrics`` uses for
the k-medians price (``kmedians_cost.cluster_medians``): one pass for counts and ranges, then a few
histogram passes until each median bin holds one distinct value; the center is then exactly the
point of rank ceil(n/2) of the cluster on that feature (the lower median). The assignment is
computed inside each of those passes (lazy labels on a dask array), so nothing row-sized ever
reaches the driver.

Seeding is k-medians|| : k-means|| (Bahmani et al. 2012, as ``reference.kmeans_parallel_init``
runs it) with l1 distances in place of squared l2 ones (D^1 sampling, the k-medians++ rule):
one random first row, ``init_rounds`` passes each drawing every row with probability
``oversampling * k * dist / cost``, one pass weighting each candidate by the rows nearest to
it, then weighted k-medians++ and weighted Lloyd on the few candidates in memory, best of 10.
The draws are keyed by each row's global position, so numpy input and any chunking of the same
data as a dask array draw the same candidates and reach the same centers.

Stopping: when the total l1 shift of the centers is at most ``tol`` times the mean l1 distance
of a row to its center in the first iteration (``tol=0``: when no center moves, the exact fixed
point). A center that loses all its rows keeps its position (as ``reference.KMeans``).
"""
from __future__ import annotations

import time
from typing import Any

import numpy as np

from exclust import _kernels_l1 as K
from exclust.data import Dataset, InputError, is_dask_array
from exclust.estimator import RANDOM_STATE, ExclustEstimator, StrOptions
from exclust.kmedians_cost import cluster_medians
from exclust.reference import (
    AT_LEAST_ONE,
    NON_NEGATIVE,
    _check_predict_input,
    _concat_sample,
    _prepare,
    _report,
    _seed,
)
from exclust.stats import add_parts, map_reduce

_RECLUSTER_N_INIT = 10
_RECLUSTER_MAX_ITER = 100


# --------------------------------------------------------------------------- chunk functions
def _assign_block(X: np.ndarray, centers: np.ndarray) -> np.ndarray:
    return K.nearest_center_l1(np.ascontiguousarray(X, dtype=np.float64), centers)[0]


def _sample_block(X: np.ndarray, rows: np.ndarray, candidates: np.ndarray, scale: float, seed: int) -> tuple:
    drawn, cost = K.l1_sample(np.ascontiguousarray(X, dtype=np.float64), np.asarray(rows, dtype=np.int64),
                              candidates, scale, seed)
    return np.asarray(X)[drawn], cost


def _counts_block(X: np.ndarray, centers: np.ndarray) -> tuple:
    return K.l1_assignment_counts(np.ascontiguousarray(X, dtype=np.float64), centers)


def _labels(X, centers: np.ndarray):
    """Nearest center in l1 per row: numpy now, or a lazy dask array (recomputed in each pass)."""
    if is_dask_array(X):
        return X.map_blocks(_assign_block, centers, dtype=np.int64, drop_axis=1, chunks=(X.chunks[0],))
    return _assign_block(X, centers)


def _row_numbers(X):
    if is_dask_array(X):
        import dask.array as da

        return da.arange(X.shape[0], chunks=X.chunks[0], dtype=np.int64)
    return np.arange(X.shape[0], dtype=np.int64)


# --------------------------------------------------------------------------- in memory, weighted
def weighted_lower_median(values: np.ndarray, weights: np.ndarray) -> float:
    """Smallest value whose cumulative weight reaches half the total (the lower weighted median)."""
    order = np.argsort(values, kind="stable")
    cum = np.cumsum(weights[order])
    return float(values[order][np.searchsorted(cum, cum[-1] / 2.0, side="left")])


def _weighted_kmedians(P: np.ndarray, w: np.ndarray, k: int, rng: np.random.Generator) -> tuple[np.ndarray, float]:
    """Weighted k-medians++ then weighted l1 Lloyd on a few points in memory; (centers, cost)."""
    first = rng.choice(P.shape[0], p=w / w.sum())
    centers = [P[first]]
    dist = np.abs(P - P[first]).sum(axis=1)
    for _ in range(1, k):
        mass = w * dist
        pick = rng.choice(P.shape[0], p=mass / mass.sum()) if mass.sum() > 0 else int(rng.integers(P.shape[0]))
        centers.append(P[pick])
        dist = np.minimum(dist, np.abs(P - P[pick]).sum(axis=1))
    C = np.array(centers)
    labels = None
    for _ in range(_RECLUSTER_MAX_ITER):
        new_labels, _ = K.nearest_center_l1(P, np.ascontiguousarray(C))
        if labels is not None and np.array_equal(new_labels, labels):
            break
        labels = new_labels
        for c in range(k):
            members = labels == c
            if members.any():
                C[c] = [weighted_lower_median(P[members, j], w[members]) for j in range(P.shape[1])]
    _, dist = K.nearest_center_l1(P, np.ascontiguousarray(C))
    return np.ascontiguousarray(C), float((w * dist).sum())


def kmedians_parallel_init(X, n_clusters: int, random_state, rounds: int = 5, oversampling: float = 2.0):
    """k-medians|| seeding (module docstring) in ``rounds + 2`` passes; returns (centers, passes)."""
    rs = random_state if isinstance(random_state, np.random.RandomState) else np.random.RandomState(random_state)
    n = X.shape[0]
    first = int(rs.randint(n))
    row = X[first : first + 1]
    candidates = np.ascontiguousarray(row.compute() if is_dask_array(row) else row, dtype=np.float64)
    rows = _row_numbers(X)
    ell = oversampling * n_clusters
    scale, passes = 0.0, 0
    for r in range(rounds + 1 + 10):
        seed = _seed(rs)
        drawn, cost = map_reduce(_sample_block, [X, rows], (candidates, scale, seed), _concat_sample)
        passes += 1
        candidates = np.ascontiguousarray(np.vstack([candidates, drawn]))
        if cost == 0:
            break
        if r >= rounds and len(np.unique(candidates, axis=0)) >= n_clusters:
            break
        # Past the planned rounds only when too few candidates were drawn: draw more boldly.
        scale = ell / cost * (1.0 if r < rounds else 2.0 ** (r - rounds + 1))
    counts, _ = map_reduce(_counts_block, [X], (candidates,), add_parts)
    passes += 1
    keep = counts > 0
    if len(np.unique(candidates[keep], axis=0)) < n_clusters:
        raise InputError(f"the data hold fewer than {n_clusters} distinct points; ask for fewer clusters")
    rng = np.random.default_rng(_seed(rs))
    best = None
    for _ in range(_RECLUSTER_N_INIT):
        C, cost = _weighted_kmedians(candidates[keep], counts[keep].astype(np.float64), n_clusters, rng)
        if best is None or cost < best[1]:
            best = (C, cost)
    return best[0], passes


# --------------------------------------------------------------------------- estimator
class KMedians(ExclustEstimator):
    """k-medians (l1) reference clustering: numpy in memory or a dask array, same algorithm.

    Parameters: ``n_clusters``; ``max_iter``; ``tol`` (relative center shift, module docstring);
    ``init`` ("k-medians||" or a (k, d) array of starting centers); ``init_rounds`` (sampling
    rounds of k-medians||); ``random_state``; ``verbose``.

    Fitted: ``cluster_centers_``, ``labels_`` (numpy for numpy input, a lazy dask array for dask
    input), ``inertia_`` (sum over rows of the l1 distance to the nearest center),
    ``n_iter_``, ``n_passes_`` (passes over the data: validation, seeding, each iteration's
    median passes, and a final scoring pass unless the last iteration moved nothing).
    """

    _parameter_constraints = {
        "n_clusters": AT_LEAST_ONE,
        "max_iter": AT_LEAST_ONE,
        "tol": NON_NEGATIVE,
        "init": [StrOptions({"k-medians||"}), "array-like"],
        "init_rounds": AT_LEAST_ONE,
        "random_state": RANDOM_STATE,
        "verbose": ["verbose"],
    }

    def __init__(self, n_clusters: int = 8, max_iter: int = 100, tol: float = 1e-4, init: Any = "k-medians||",
                 init_rounds: int = 5, random_state: Any = None, verbose: bool = False) -> None:
        self.n_clusters = n_clusters
        self.max_iter = max_iter
        self.tol = tol
        self.init = init
        self.init_rounds = init_rounds
        self.random_state = random_state
        self.verbose = verbose

    def fit(self, X, y=None) -> "KMedians":
        """Fit the centers; returns self."""
        self._check_params()
        k, max_iter, tol = int(self.n_clusters), int(self.max_iter), float(self.tol)
        data, source, passes = _prepare(X, k)
        X = data.X
        self.feature_names_in_ = list(data.feature_names)
        self.n_features_in_ = int(X.shape[1])
        rs = self.random_state if isinstance(self.random_state, np.random.RandomState) else np.random.RandomState(self.random_state)
        start = time.perf_counter()
        if isinstance(self.init, str):
            centers, p = kmedians_parallel_init(X, k, rs, rounds=self.init_rounds)
            passes += p
        else:
            centers = np.ascontiguousarray(self.init, dtype=np.float64)
            if centers.shape != (k, self.n_features_in_) or not np.isfinite(centers).all():
                raise InputError(f"init must be a finite ({k}, {self.n_features_in_}) array, got shape {centers.shape}")
        tol_abs, shift, costs, n_iter = None, np.inf, None, 0
        for n_iter in range(1, max_iter + 1):
            labels = _labels(X, centers)
            passes += 0 if is_dask_array(X) else 1  # numpy labels are a pass of their own
            found = cluster_medians(X, labels, k)
            passes += found["passes"]
            new = np.where(found["counts"][:, None] > 0, found["medians"], centers)
            shift = float(np.abs(new - centers).sum())
            costs = found["costs"]
            if tol_abs is None:
                tol_abs = tol * float(costs.sum()) / max(int(found["counts"].sum()), 1)
            centers = np.ascontiguousarray(new)
            _report(self.verbose, "k-medians iteration %d: l1 cost %.6g, center shift %.3g", n_iter, costs.sum(), shift)
            if shift <= tol_abs:
                break
        if shift == 0:  # the last assignment is the nearest-center one of the final centers
            inertia = float(costs.sum())
        else:
            _, inertia = map_reduce(_counts_block, [X], (centers,), add_parts)
            passes += 1
        self.cluster_centers_ = centers
        self.inertia_ = float(inertia)
        self.n_iter_ = n_iter
        self.n_passes_ = passes
        self.labels_ = self.predict(source if is_dask_array(source) else X)
        _report(self.verbose, "k-medians: k=%d, l1 cost %.6g, %d iterations, %d passes, %.2fs",
                k, self.inertia_, n_iter, passes, time.perf_counter() - start)
        return self

    def predict(self, X):
        """Nearest center in l1 for every row: numpy in, numpy out; dask in, lazy dask out."""
        self._check_fitted()
        X = _check_predict_input(X.X if isinstance(X, Dataset) else X, self.n_features_in_)
        return _labels(X, self.cluster_centers_)

    def fit_predict(self, X, y=None):
        return self.fit(X).labels_
