"""k-medians reference clustering (l1) on Dask: Lloyd-style alternation with exact medians.

Each iteration assigns every row to its nearest center in l1 and moves every center to the
coordinate-wise median of its rows, the l1-optimal center of a fixed cluster. Medians do not
merge across partitions, so they come from the histogram bisection that ``metrics`` uses for
the k-medians price (``kmedians_cost.cluster_medians``): one pass for counts and ranges, then a few
histogram passes until each median bin holds one distinct value; the center is then exactly the
point of rank ceil(n/2) of the cluster on that feature (the lower median). The assignment is
computed inside each of those passes (lazy labels on a dask array), so nothing row-sized ever
reaches the driver.

Seeding is k-medians||: the oversampling of k-means|| (``seeding.parallel_seeding``, Bahmani et
al. 2012) with l1 distances in place of squared l2 ones (D^1 sampling, the k-medians++ rule):
one random first row, ``init_rounds`` passes each drawing every row with probability
``oversampling * k * dist / cost``, one pass weighting each candidate by the rows nearest to
it, then weighted k-medians++ and weighted Lloyd on the few candidates in memory, best of 10.
The draws are keyed by each row's global id, so numpy input and any chunking of the same
data as a dask array draw the same candidates and reach the same centers.

Stopping: when the total l1 shift of the centers is at most ``tol`` times the mean l1 distance
of a row to its center in the first iteration (``tol=0``: when no center moves, the exact fixed
point). A center that loses all its rows keeps its position (as ``reference.KMeans``).
"""
from __future__ import annotations

import time
from typing import Any

import numpy as np

from exclust.dataplane import _center_distances as K
from exclust.dataplane import parts
from exclust.dataplane.parts import map_reduce
from exclust.errors import InputError
from exclust.estimator import RANDOM_STATE, ExclustEstimator, StrOptions
from exclust.reference import base
from exclust.reference.passes import l1_counts_block, nearest_cost_block, nearest_l1_block
from exclust.reference.seeding import parallel_seeding
from exclust.scoring.kmedians_cost import cluster_medians

_RECLUSTER_N_INIT = 10
_RECLUSTER_MAX_ITER = 100


# --------------------------------------------------------------------------- chunk functions
def _labels(X, centers: np.ndarray):
    """Nearest center in l1 per row: numpy now, or a lazy dask array (recomputed in each pass)."""
    return parts.map_rows(nearest_l1_block, X, centers, dtype=np.int64)


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


def _recluster_weighted(candidates: np.ndarray, weights: np.ndarray, n_clusters: int, rs) -> np.ndarray:
    """k-medians||'s last step: weighted k-medians++ / l1 Lloyd on the few candidates, best of 10."""
    rng = np.random.default_rng(base.draw_seed(rs))
    best = _weighted_kmedians(candidates, weights, n_clusters, rng)
    for _ in range(_RECLUSTER_N_INIT - 1):
        C, cost = _weighted_kmedians(candidates, weights, n_clusters, rng)
        if cost < best[1]:
            best = (C, cost)
    return best[0]


def kmedians_parallel_init(X, n_clusters: int, random_state, rounds: int = 5, oversampling: float = 2.0):
    """k-medians|| seeding (module docstring) in ``rounds + 2`` passes; returns (centers, passes)."""
    return parallel_seeding(X, n_clusters, random_state, recluster=_recluster_weighted, distance="l1",
                            rounds=rounds, oversampling=oversampling)


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

    Parameters
    ----------
    n_clusters : int, default=8
        Number of clusters (centers).
    max_iter : int, default=100
        Most iterations, each one pass over the data.
    tol : float, default=1e-4
        Stop when the centers move less than this (relative to the data's spread).
    init : "k-medians||" or array of shape (n_clusters, n_features), default="k-medians||"
        The seeding: k-medians|| rounds over the data, or given centers.
    init_rounds : int, default=5
        Rounds of the k-medians|| seeding, each one pass.
    random_state : None, int or numpy Generator, default=None
        Seeds the seeding.
    verbose : bool, default=False
        Log each fit's summary line.
    """

    _parameter_constraints = {
        "n_clusters": base.AT_LEAST_ONE,
        "max_iter": base.AT_LEAST_ONE,
        "tol": base.NON_NEGATIVE,
        "init": [StrOptions({"k-medians||"}), "array-like"],
        "init_rounds": base.AT_LEAST_ONE,
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

    def fit(self, X, y=None) -> KMedians:
        """Fit the centers; returns self."""
        self._check_params()
        k, max_iter, tol = int(self.n_clusters), int(self.max_iter), float(self.tol)
        data, source, passes = base.prepare(self._fit_input(X), k)
        X, distributed = data.X, data.distributed
        rs = base.random_stream(self.random_state)
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
            passes += 0 if distributed else 1  # numpy labels are a pass of their own
            found = cluster_medians(X, labels, k)
            passes += found["passes"]
            new = np.where(found["counts"][:, None] > 0, found["medians"], centers)
            shift = float(np.abs(new - centers).sum())
            costs = found["costs"]
            if tol_abs is None:
                tol_abs = tol * float(costs.sum()) / max(int(found["counts"].sum()), 1)
            centers = np.ascontiguousarray(new)
            base.report(self.verbose, "k-medians iteration %d: l1 cost %.6g, center shift %.3g", n_iter, costs.sum(),
                        shift)
            if shift <= tol_abs:
                break
        if shift == 0 and costs is not None:  # the last assignment: the nearest-center one of the final centers
            inertia = float(costs.sum())
        else:
            _, inertia = map_reduce(l1_counts_block, X, args=(centers,))
            passes += 1
        self.cluster_centers_ = centers
        self.inertia_ = float(inertia)
        self.n_iter_ = n_iter
        self.n_passes_ = passes
        # The rows fit validated (the caller's own names were checked there): labelled as predict labels.
        self.labels_ = parts.label_rows(nearest_l1_block, source if distributed else X, centers)
        base.report(self.verbose, "k-medians: k=%d, l1 cost %.6g, %d iterations, %d passes, %.2fs",
                    k, self.inertia_, n_iter, passes, time.perf_counter() - start)
        return self

    def predict(self, X):
        """Nearest center in l1 for every row, -1 for a row holding NaN or inf: numpy in, numpy out;
        dask in, lazy dask out."""
        X = self._predict_input(X)
        return parts.label_rows(nearest_l1_block, X, np.ascontiguousarray(self.cluster_centers_, dtype=np.float64))

    def score(self, X, y=None) -> float:
        """Minus the k-medians cost of X (l1 distances to the nearest centers), as ``KMeans.score``:
        one pass; rows holding NaN or inf are refused."""
        X = self._predict_input(X)
        centers = np.ascontiguousarray(self.cluster_centers_, dtype=np.float64)
        cost, nonfinite = map_reduce(nearest_cost_block, X, args=(centers, "l1"))
        base.refuse_nonfinite(nonfinite)
        return -float(cost)

    def fit_predict(self, X, y=None):
        return self.fit(X).labels_
