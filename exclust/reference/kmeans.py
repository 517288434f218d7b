"""k-means reference clustering: scikit-learn in memory, distributed Lloyd on a dask array.

Every Lloyd iteration is a map over the row parts returning per-center counts, sums and the
inertia (numba kernel ``_lloyd.lloyd_step``), tree-reduced by ``parts.map_reduce``;
the centers move on the driver. Seeding is k-means|| (``seeding.parallel_seeding``) or
scikit-learn's k-means on an exact uniform sample. On a dask array the data are persisted on
the workers once per fit (``base.prepare``, when they fit in half the cluster's
memory), so that each iteration is a single ``compute`` of one task per part plus the reduction.
"""
from __future__ import annotations

import time

import numpy as np

from exclust.dataplane import arrays, parts
from exclust.dataplane.parts import map_reduce
from exclust.dataplane.residency import keep_parts
from exclust.errors import InputError
from exclust.estimator import RANDOM_STATE, ExclustEstimator, StrOptions
from exclust.reference import base
from exclust.reference.passes import (
    lloyd_block,
    lloyd_labelled_block,
    lloyd_summary,
    nearest_center_block,
    nearest_cost_block,
)
from exclust.reference.seeding import parallel_seeding
from exclust.sources.extras import require_extra

_KMEANS_BACKENDS = ("auto", "sklearn", "lloyd", "dask-ml")
_KMEANS_INITS = ("k-means||", "sample")
# k-means|| ends by clustering its few weighted candidates in memory: restarts there cost no pass.
_RECLUSTER_N_INIT = 10


def _recluster_weighted(candidates: np.ndarray, weights: np.ndarray, n_clusters: int, rs) -> np.ndarray:
    """k-means||'s last step: weighted k-means++ / Lloyd on the few candidates, best of 10."""
    from sklearn.cluster import KMeans as SKKMeans

    km = SKKMeans(n_clusters, n_init=_RECLUSTER_N_INIT, random_state=base.draw_seed(rs))
    return km.fit(candidates, sample_weight=weights).cluster_centers_


def kmeans_parallel_init(X, n_clusters: int, random_state, rounds: int = 5, oversampling: float = 2.0):
    """k-means|| seeding (Bahmani et al. 2012) in ``rounds + 2`` passes; returns (centers, passes).

    ``seeding.parallel_seeding`` with squared l2 distances (the D^2 rule); the weighted candidates
    are reclustered by k-means++ / Lloyd with 10 restarts, in memory, as the paper asks.
    """
    return parallel_seeding(X, n_clusters, random_state, recluster=_recluster_weighted, distance="sqeuclidean",
                            rounds=rounds, oversampling=oversampling)


class KMeans(ExclustEstimator):
    """k-means reference clustering: scikit-learn in memory, distributed Lloyd on a dask array.

    ``backend="auto"`` picks, by measurement (``bench/bench_kmeans.py``: 1M x 10 sample of the
    paper-000 Appendix G mixture, k = 10, one seeding each; dask on a LocalCluster of 2 worker
    processes; a 2-core machine shared with other jobs, so two runs are shown and only ratios
    within a run mean much; inertia of every method scored by the same kernel):

    ======================================  ================  ==================  ==============
    method                                  seconds (2 runs)  x scikit-learn      inertia ratio
    ======================================  ================  ==================  ==============
    scikit-learn KMeans (numpy, k-means++)  6.8 / 3.7         1                   1
    dask-ml KMeans (dask, k-means||)        54.9 / 65.2       8.1 / 17.4          1.010
    exclust Lloyd (dask, k-means||)         3.0 / 6.7         0.45 / 1.8          0.856
    exclust Lloyd (numpy threads)           5.7 / 3.7         0.84 / 0.99         1.0 / 0.856
    ======================================  ================  ==================  ==============

    (the numpy row used k-means++ seeding in the first run, k-means|| in the second). dask-ml is
    8-17x slower, so dask arrays go to ``"lloyd"``: k-means|| seeding (``kmeans_parallel_init``:
    ``init_rounds`` rounds, each one pass, the candidates weighted and reclustered with 10
    restarts in memory, as the paper asks and dask-ml skips), then Lloyd
    iterations, each one numba pass over the chunks returning per-center counts, sums and the
    inertia, with the center update on the driver; the last pass's centers are kept with its
    statistics (no extra pass to measure moved centers). In memory, scikit-learn and exclust's Lloyd
    took the same time, so numpy input stays with scikit-learn (``"sklearn"``: its empty-cluster
    relocation, and the reference users know); ``backend="lloyd"`` reached a 14% lower inertia
    on this sample through its seeding. ``"dask-ml"`` runs dask-ml's own KMeans.
    Convergence follows scikit-learn: stop when the squared center shift is at most
    ``tol`` times the mean per-feature variance of the data. A center that loses all its
    points keeps its previous position (scikit-learn moves it to a far point instead).

    ``init="sample"`` (what the explain pipeline uses on a dask array) seeds Lloyd with
    scikit-learn's k-means (10 restarts) on an exact uniform sample of ``sample_rows`` rows, one
    pass or none when ``fit(..., sample=)`` hands one over; a small ``max_iter`` then refines
    the centers with a few full passes.

    Fitted: ``cluster_centers_``, ``labels_`` (numpy for numpy input, a lazy dask array for dask
    input), ``inertia_``, ``n_iter_``, ``statistics_`` (per-center count, sum and sum of squares
    of the rows nearest each final center, from the last pass; Lloyd backend), ``n_passes_``
    (passes over the data made by the fit; for the scikit-learn backend, iterations + 1 for the
    k-means++ seeding, a lower bound).

    Parameters
    ----------
    n_clusters : int, default=8
        Number of clusters (centers).
    n_init : int or "auto", default="auto"
        Seedings tried; the one of least inertia is kept ("auto": scikit-learn's rule in memory, 1 on Dask).
    max_iter : int, default=300
        Most Lloyd iterations (each one pass over the data on Dask).
    tol : float, default=1e-4
        Stop when the squared center shift is at most ``tol`` times the mean per-feature variance.
    random_state : None, int or numpy Generator, default=None
        Seeds the seeding and the sample.
    backend : {"auto", "sklearn", "lloyd", "dask-ml"}, default="auto"
        Who runs the iterations (see above); ``"dask-ml"`` needs ``pip install 'exclust[dask-ml]'``.
    init_rounds : int, default=5
        Rounds of k-means|| seeding, each one pass.
    verbose : bool, default=False
        Log each fit's summary line.
    init : {"k-means||", "sample"}, default="k-means||"
        How Lloyd is seeded on Dask: k-means|| rounds, or scikit-learn's k-means on a uniform sample.
    sample_rows : int, default=200000
        Rows of that sample (``init="sample"``).
    """

    _parameter_constraints = {
        "n_clusters": base.AT_LEAST_ONE,
        "n_init": [StrOptions({"auto"}), *base.AT_LEAST_ONE],
        "max_iter": base.AT_LEAST_ONE,
        "tol": base.NON_NEGATIVE,
        "random_state": RANDOM_STATE,
        "backend": [StrOptions(set(_KMEANS_BACKENDS))],
        "init_rounds": base.AT_LEAST_ONE,
        "verbose": ["verbose"],
        "init": [StrOptions(set(_KMEANS_INITS))],
        "sample_rows": base.AT_LEAST_ONE,
    }

    # Fitted attributes, set by whichever backend fits (declared for the type checker).
    inertia_: float
    n_iter_: int
    n_passes_: int

    def __init__(
        self,
        n_clusters: int = 8,
        n_init: int | str = "auto",
        max_iter: int = 300,
        tol: float = 1e-4,
        random_state: int | np.random.RandomState | None = None,
        backend: str = "auto",
        init_rounds: int = 5,
        verbose: bool = False,
        init: str = "k-means||",
        sample_rows: int = 200_000,
    ) -> None:
        self.n_clusters = n_clusters
        self.n_init = n_init
        self.max_iter = max_iter
        self.tol = tol
        self.random_state = random_state
        self.backend = backend
        self.init_rounds = init_rounds
        self.verbose = verbose
        self.init = init
        self.sample_rows = sample_rows

    def fit(self, X, y=None, *, sample: np.ndarray | None = None) -> KMeans:
        """Fit the centers; returns self.

        ``sample``: a uniform sample of X's rows already drawn (``init="sample"`` then costs no
        pass for it).
        """
        self._check_params()
        data, source, passes = base.prepare(self._fit_input(X), int(self.n_clusters))
        self._fit_matrix(data.X, sample, distributed=data.distributed)
        self.n_passes_ += passes
        if data.distributed and self.backend_ == "sklearn":
            self.labels_ = self.predict(source)
        return self

    def _fit_matrix(self, X, sample: np.ndarray | None = None, *, distributed: bool) -> KMeans:
        """Fit on a validated matrix (numpy, or dask with one column chunk: ``distributed``)."""
        self._check_params()
        k, max_iter, tol, backend = int(self.n_clusters), int(self.max_iter), float(self.tol), self.backend
        n_init = 1 if self.n_init == "auto" else int(self.n_init)
        if backend == "auto":
            backend = "lloyd" if distributed else "sklearn"
        if backend == "sklearn" and distributed:
            raise InputError("backend='sklearn' needs in-memory data; use backend='lloyd' for a dask array")
        self.backend_ = backend
        self.n_features_in_ = int(X.shape[1])
        rs = base.random_stream(self.random_state)
        start = time.perf_counter()
        if backend == "sklearn":
            self._fit_sklearn(X, k, n_init, max_iter, tol, rs)
        elif backend == "dask-ml":
            self._fit_dask_ml(X, k, n_init, max_iter, tol, rs, distributed)
        else:
            self._fit_lloyd(X, k, n_init, max_iter, tol, rs, sample, distributed)
        base.report(self.verbose, "k-means (%s): k=%d, inertia %.6g, %d iterations, %d passes, %.2fs",
                    backend, k, self.inertia_, self.n_iter_, self.n_passes_, time.perf_counter() - start)
        return self

    def _fit_sklearn(self, X, k, n_init, max_iter, tol, rs) -> None:
        from sklearn.cluster import KMeans as SKKMeans

        km = SKKMeans(k, n_init=n_init, max_iter=max_iter, tol=tol, random_state=rs).fit(X)
        self.cluster_centers_ = km.cluster_centers_
        self.labels_ = km.labels_.astype(np.int64)
        self.inertia_ = float(km.inertia_)
        self.n_iter_ = int(km.n_iter_)
        self.n_passes_ = int(km.n_iter_) + 1

    def _fit_dask_ml(self, X, k, n_init, max_iter, tol, rs, distributed: bool) -> None:
        DMKMeans = require_extra("dask_ml.cluster", "KMeans(backend='dask-ml')", "dask-ml").KMeans

        Xd = arrays.as_lazy(X, (max(1, X.shape[0] // 8), X.shape[1])) if not distributed else X
        best = None
        for _ in range(n_init):
            km = DMKMeans(n_clusters=k, init="k-means||", init_max_iter=self.init_rounds, max_iter=max_iter, tol=tol,
                          random_state=base.draw_seed(rs))
            km.fit(Xd)
            if best is None or km.inertia_ < best.inertia_:
                best = km
        assert best is not None  # n_init >= 1 fits
        self.cluster_centers_ = np.asarray(best.cluster_centers_)
        labels = best.labels_.astype(np.int64)
        self.labels_ = labels if distributed else arrays.to_memory(labels)
        # dask-ml's inertia_ is not the sum of squared distances; score its centers like the others.
        self.n_iter_ = int(best.n_iter_)
        self.inertia_ = float(map_reduce(lloyd_block, X, args=(self.cluster_centers_,))[1])
        self.n_passes_ = int(best.n_iter_) + 1

    def _initial_centers(self, X, k, rs, sample, distributed: bool) -> tuple[np.ndarray, int]:
        """(centers, passes): k-means|| (on numpy too: its passes run on threads), or
        scikit-learn's k-means with 10 restarts on a uniform sample of ``sample_rows`` rows."""
        if self.init == "k-means||":
            return kmeans_parallel_init(X, k, rs, rounds=self.init_rounds)
        from sklearn.cluster import KMeans as SKKMeans

        passes = 0
        if sample is None:
            (sample,) = parts.uniform_sample(X, size=int(self.sample_rows), random_state=base.draw_seed(rs))
            passes = int(distributed)
        sample = np.asarray(sample, dtype=np.float64)
        if sample.shape[0] > self.sample_rows:  # a uniform subsample of a uniform sample is uniform
            order = np.random.default_rng(base.draw_seed(rs)).permutation(sample.shape[0])
            keep = np.sort(order[: int(self.sample_rows)])
            sample = sample[keep]
        if np.unique(sample, axis=0).shape[0] < k:
            raise InputError(f"the data hold fewer than {k} distinct points; ask for fewer clusters")
        km = SKKMeans(k, n_init=_RECLUSTER_N_INIT, random_state=base.draw_seed(rs)).fit(sample)
        return np.ascontiguousarray(km.cluster_centers_, dtype=np.float64), passes

    def _fit_lloyd(self, X, k, n_init, max_iter, tol, rs, sample, distributed: bool) -> None:
        """Lloyd passes: each measures the current centers (counts, sums, inertia) and moves
        them to the means, except the last one (``max_iter`` reached, or a move of at most the
        tolerance), whose centers are kept with their statistics: no extra pass to measure the
        final centers, and labels, statistics and inertia all belong to the same centers.

        Every pass also keeps each row's nearest center where its part was computed (one byte a
        row), and only the last pass's labels are kept: they are ``labels_``, the same labels
        ``predict`` gives (one search), so no later pass has to search the centers again."""
        best: tuple | None = None
        passes = 0
        for init in range(n_init):
            centers, p = self._initial_centers(X, k, rs, sample, distributed)
            passes += p
            tol_abs = None
            for n_iter in range(1, max_iter + 1):
                kept = keep_parts(lloyd_labelled_block, X, centers, summarize=lloyd_summary)
                stats, inertia = kept.summary
                passes += 1
                if tol_abs is None:
                    n = stats.total
                    total_var = (stats.sums_sq.sum(axis=0) - stats.sums.sum(axis=0) ** 2 / n) / n
                    tol_abs = tol * float(np.mean(total_var))
                new = stats.means
                empty = stats.counts == 0
                new[empty] = centers[empty]
                shift = float(((new - centers) ** 2).sum())
                base.report(self.verbose, "k-means init %d iteration %d: inertia %.6g, center shift %.3g",
                            init + 1, n_iter, inertia, shift)
                if shift <= tol_abs or n_iter == max_iter:
                    break
                centers = np.ascontiguousarray(new)
            if best is None or inertia < best[1]:
                best = (centers, float(inertia), n_iter, stats, kept)
        assert best is not None  # n_init >= 1 fits
        self.cluster_centers_, self.inertia_, self.n_iter_, self.statistics_, kept = best
        self.n_passes_ = passes
        self.labels_ = kept.column("labels", np.int64)

    def predict(self, X):
        """Index of the nearest center for every row, -1 for a row holding NaN or inf: numpy in,
        numpy out; dask in, lazy dask out."""
        X = self._predict_input(X)
        centers = np.ascontiguousarray(self.cluster_centers_, dtype=np.float64)
        return parts.label_rows(nearest_center_block, X, centers)

    def score(self, X, y=None) -> float:
        """Minus the k-means cost of X (squared distances to the nearest centers), as scikit-learn's
        ``KMeans.score``: one pass; rows holding NaN or inf are refused."""
        X = self._predict_input(X)
        centers = np.ascontiguousarray(self.cluster_centers_, dtype=np.float64)
        cost, nonfinite = map_reduce(nearest_cost_block, X, args=(centers, "sqeuclidean"))
        base.refuse_nonfinite(nonfinite)
        return -float(cost)

    def fit_predict(self, X, y=None):
        """Fit, then return ``labels_``."""
        return self.fit(X).labels_
