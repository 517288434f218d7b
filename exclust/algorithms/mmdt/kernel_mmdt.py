"""Kernel MMDT: explain a kernel clustering with two-sided interval cuts (paper 002, Section 5).

The data are modelled as a mixture whose components are the clusters of a base clustering
(kernel k-means, approximated by k-means on random Fourier features, or labels the user gives).
Everything the tree needs is the per-axis expected similarity

    xi(i, k, l) = E[kappa_i(x, y)],  x from cluster k, y from cluster l      (eq. 29)

estimated from ``samples_per_cluster`` rows drawn per cluster in one pass on the workers. The tree
is then grown on the driver, with work independent of the number of rows:

1. at a node with components N(t), take the axis i and pair k != l in N(t) minimizing xi(i, k, l);
2. sort xi(i, k, m) over m in N(t); theta lies halfway across the largest gap between neighbours;
3. take a prototype x^(k) of cluster k; a point goes to the far child when kappa_i(x, x^(k)) < theta,
   i.e. outside the interval |x_i - x^(k)_i| <= h_i g^-1(theta), and to the near child otherwise;
4. component m goes to the near child when xi(i, k, m) > theta, to the far child when below (eq. 30-31).

In the ThresholdTree the near child (inside the band) is the left child of an INTERVAL node.

The axis-aligned kappa-similarity tau = max_{k != l} min_i xi(i, k, l) (eq. 28) and the price bound
of Theorem 12 (eq. 32) are evaluated from the same samples. The kernel price of explainability
(eq. 26, empirical) is measured in one more pass with random Fourier features.
"""
from __future__ import annotations

import math
import time
from typing import Any

import numpy as np

from exclust.algorithms.mmdt._kernel_moments import axis_similarity_moments, self_similarity, smallest_keys_per_cluster
from exclust.algorithms.mmdt.similarity import (
    RandomFourierFeatures,
    check_bandwidth,
    kernel_code,
    kernel_cost_from_statistics,
    profile_inverse,
    rff_group_statistics,
)
from exclust.dataplane import arrays, parts
from exclust.errors import InputError
from exclust.estimator import Integral, Interval, Real, StrOptions, TreeExplainer
from exclust.sources.dataset import Dataset, as_matrix
from exclust.tree import TreeBuilder

PROTOTYPES = ("random", "best")


# ----------------------------------------------------------------------------- per-cluster samples
def _sample_block(row_offset: int, X: np.ndarray, labels: np.ndarray, seed: int, n_clusters: int, s: int):
    labels = np.ascontiguousarray(np.asarray(labels).reshape(-1), dtype=np.int64)
    rows, keys, counts = smallest_keys_per_cluster(labels, int(row_offset), np.uint64(seed), n_clusters, s)
    X = np.asarray(X, dtype=np.float64)
    values = np.where((rows >= 0)[:, :, None], X[np.maximum(rows, 0)], np.nan)
    n_outside = int(labels.shape[0] - counts.sum())
    return keys, values, counts, n_outside


def _merge_samples(samples: list):
    keys = np.concatenate([p[0] for p in samples], axis=1)
    values = np.concatenate([p[1] for p in samples], axis=1)
    s = samples[0][0].shape[1]
    order = np.argsort(keys, axis=1, kind="stable")[:, :s]
    keys = np.take_along_axis(keys, order, axis=1)
    values = np.take_along_axis(values, order[:, :, None], axis=1)
    counts = sum(p[2] for p in samples)
    return keys, values, counts, sum(p[3] for p in samples)


def _merge_two_samples(a: tuple, b: tuple) -> tuple:
    """Pairwise form of ``_merge_samples`` for ``tree_reduce``: the s smallest keys of the union are kept."""
    return _merge_samples([a, b])


def sample_per_cluster(X: Any, labels: Any, n_clusters: int, samples_per_cluster: int, seed: int):
    """One pass: up to s rows per cluster, uniformly without replacement, plus every cluster's size.

    Each row gets a random key hashed from (seed, global row index); a chunk keeps the s smallest
    keys per cluster and partial results are merged in a tree, so only K x s rows reach the driver
    and the sample does not depend on the chunking. Returns (samples (K, s, d) NaN-padded in key
    order, taken (K), sizes (K), rows whose label lies outside [0, K)).
    """
    K, s = int(n_clusters), int(samples_per_cluster)
    labels = parts.align(labels.reshape(-1) if hasattr(labels, "reshape") else labels, X, "labels")
    # Merging parts keeps the s smallest keys of their union; the last merge also puts a single
    # part's in key order.
    keys, values, counts, n_out = _merge_samples([parts.map_reduce(
        _sample_block, X, labels, args=(seed, K, s), combine=_merge_two_samples, with_offset=True)])
    taken = np.isfinite(keys).sum(axis=1).astype(np.int64)
    return np.ascontiguousarray(values), taken, np.asarray(counts, dtype=np.int64), int(n_out)


# ----------------------------------------------------------------------------- theory
def axis_aligned_similarity(xi: np.ndarray) -> float:
    """tau = max over pairs k != l of min over axes i of xi(i, k, l) (paper 002, eq. 28)."""
    K = xi.shape[1]
    if K < 2:
        return float("nan")
    per_pair = xi.min(axis=0)
    return float(per_pair[~np.eye(K, dtype=bool)].max())


def theorem12_bound(tau: float, sigma2: float, epsilon2: float, alpha: float, n_clusters: int) -> dict[str, float]:
    """Theorem 12 of paper 002: the error-rate bound (eq. 135) and the price bound (eq. 32).

    ``error_rate_bound`` = (4 + 2 pi^2 / 3) alpha eps^2 K (K - 1) / (sigma^2 - tau), infinite when
    sigma^2 <= tau (the theorem then says nothing). ``price_bound`` is eq. (32) as printed,
    1 + (1 + sigma^2)/(1 - sigma^2) max(1, error bound). The proof's last step ("a probability never
    exceeds 1") supports min(1, .) instead, which gives the tighter ``price_bound_min_form``; both
    are valid upper bounds under the theorem's assumptions.
    """
    K = int(n_clusters)
    gap = sigma2 - tau
    err = (4 + 2 * math.pi**2 / 3) * alpha * epsilon2 * K * (K - 1) / gap if gap > 0 else math.inf
    factor = (1 + sigma2) / (1 - sigma2) if sigma2 < 1 else math.inf
    return {
        "tau": float(tau),
        "sigma2": float(sigma2),
        "epsilon2": float(epsilon2),
        "alpha": float(alpha),
        "n_clusters": K,
        "error_rate_bound": float(err),
        "price_bound": float(1 + factor * max(1.0, err)),
        "price_bound_min_form": float(1 + factor * min(1.0, err)),
    }


# ----------------------------------------------------------------------------- tree
def _choose_prototype(mode, rng, samples, taken, k, i, half_width, near, far, weights):
    """Index of x^(k) among cluster k's samples.

    "random" is the paper's rule (x^(k) drawn from nu^(k); Theorem 12 holds in expectation over
    this draw): a uniform pick among the sampled rows of cluster k, i.e. a draw from the cluster.
    "best" tries every sampled row of cluster k as x^(k) and keeps the one whose interval sends the
    least cluster weight of the node's sampled rows to the wrong child; it uses only the samples,
    so it stays independent of n, and it removes the variance of a single unlucky draw (a prototype
    on the rim of its cluster) that the theorem only controls on average.
    """
    if mode == "random":
        return int(rng.integers(taken[k]))
    cand = samples[k, : taken[k], i]
    cost = np.zeros(cand.shape[0])
    for m, want_near in [(m, True) for m in near] + [(m, False) for m in far]:
        pts = samples[m, : taken[m], i]
        inside = np.abs(pts[None, :] - cand[:, None]) <= half_width
        wrong = (~inside if want_near else inside).mean(axis=1)
        cost += weights[m] * wrong
    return int(np.argmin(cost))


def build_kernel_tree(samples, taken, weights, kernel, bandwidth, *, prototype="random", random_state=None,
                      feature_names=None, xi=None):
    """Grow the kernel MMDT tree from per-cluster samples; returns (tree, per-node decisions).

    Every leaf holds exactly one cluster. Raises InputError when two clusters cannot be told apart
    on any axis (all xi(i, k, m) of the chosen axis equal), which happens when the bandwidth is so
    small that every similarity underflows, or so large that every similarity is 1.
    """
    code = kernel_code(kernel)
    K, _, d = samples.shape
    h = check_bandwidth(bandwidth, d)
    if xi is None:
        xi, _ = axis_similarity_moments(samples, taken, code, 1.0 / h)
    rng = np.random.default_rng(random_state)
    builder = TreeBuilder(n_features=d)
    root = builder.add_node()
    decisions = []
    stack = [(root, list(range(K)))]
    while stack:
        node, comps = stack.pop()
        if len(comps) == 1:
            builder.make_leaf(node, comps[0])
            continue
        c = np.asarray(comps)
        sub = xi[:, c][:, :, c].copy()
        sub[:, np.arange(len(c)), np.arange(len(c))] = np.inf  # only pairs k != l
        # xi is symmetric in (k, l), so the minimum always ties between the two orientations of a
        # pair, and the paper does not say which of the two supplies the prototype. We take the
        # orientation whose sorted xi(i, k, .) has the widest largest gap (the Delta of the proof of
        # Theorem 12: a wider gap, a smaller Chebyshev bound on the mistakes); further ties at random.
        ties = np.argwhere(sub == sub.min())
        widest = np.array([np.diff(np.sort(xi[t[0], c[t[1]], c])).max() for t in ties])
        if widest.max() <= 0:
            # Degenerate case the paper does not meet: the minimal similarity is shared by every
            # xi(i, k, .) of its axis (e.g. a bandwidth so small that all similarities underflow
            # to 0 there). Fall back to any (axis, k) whose sorted similarities have a gap.
            sub_all = xi[:, c][:, :, c]
            gap_all = np.diff(np.sort(sub_all, axis=2), axis=2).max(axis=2)  # (d, len(c))
            if gap_all.max() <= 0:
                raise InputError(
                    f"clusters {sorted(comps)} cannot be told apart on any feature with bandwidth {bandwidth!r}: "
                    "every per-axis similarity is equal; pick a bandwidth near the spread of the features"
                )
            cand = np.argwhere(gap_all == gap_all.max())
            i, a = cand[rng.integers(len(cand))]
            off = sub_all[i, a].copy()
            off[a] = np.inf
            b = int(np.argmin(off))
        else:
            ties = ties[widest == widest.max()]
            i, a, b = ties[rng.integers(len(ties))]
        k, ell = int(c[a]), int(c[b])  # the paper's pair (k, l)
        vals = xi[i, k, c]
        order = np.sort(vals)
        gaps = np.diff(order)
        best = np.flatnonzero(gaps == gaps.max())
        j = int(best[rng.integers(len(best))])
        theta = 0.5 * (order[j] + order[j + 1])
        near = [int(m) for m, v in zip(c, vals, strict=True) if v > theta]  # t_right: kappa_i(x, x^(k)) >= theta
        far = [int(m) for m, v in zip(c, vals, strict=True) if v < theta]  # paper's t_left
        half_width = float(h[i] * profile_inverse(kernel, theta))
        p = _choose_prototype(prototype, rng, samples, taken, k, i, half_width, near, far, weights)
        center = float(samples[k, p, i])
        inside, outside = builder.split_interval(node, int(i), center, half_width)
        decisions.append({
            "node": int(node), "feature": int(i), "k": k, "l": ell, "xi_min": float(xi[i, k, ell]),
            "theta": float(theta), "prototype": samples[k, p].tolist(), "center": center,
            "half_width": half_width, "near": sorted(near), "far": sorted(far),
        })
        stack.append((outside, far))
        stack.append((inside, near))
    tree = builder.build(feature_names=feature_names, n_clusters=K)
    return tree, decisions


# ----------------------------------------------------------------------------- estimator
class KernelMMDT(TreeExplainer):
    """Kernel MMDT (paper 002, Section 5): a K-leaf tree of interval cuts explaining a kernel clustering.

    Parameters
    ----------
    n_clusters : int, default=8
        Number of clusters K (>= 2); each leaf stands for one.
    kernel : {"gaussian", "laplace"}, default="gaussian"
        "gaussian" (g(t) = exp(-t^2)) or "laplace" (g(t) = exp(-t)), applied per axis to ``|x_i - y_i| / h_i``.
    bandwidth : float, array-like of shape (n_features,) or "scale", default="scale"
        h: one positive number, one per feature, or "scale": h_i = sqrt(d) std_i,
        scikit-learn's gamma="scale" rule (gamma = 1 / (d Var X)) applied per feature, so every
        feature counts in its own units; it costs one moments pass over the data.
    samples_per_cluster : int, default=256
        Rows drawn per cluster to estimate xi(i, k, l) (a cluster smaller than this
        gives all its rows; a cluster needs at least 2).
    n_components : int, default=256
        Dimension D of the random Fourier features (kernel k-means base and kernel price).
    prototype : {"best", "random"}, default="best"
        "random" (paper: x^(k) drawn from cluster k) or "best" (the sampled row of cluster k
        whose interval misroutes the least sampled weight).
    compute_price : bool, default=True
        Measure ``kernel_price_`` in one extra pass.
    kmeans_n_init : int or "auto", default="auto"
        Restarts of the k-means on random Fourier features (the base clustering). Kernel k-means
        has many local optima, so restarts pay; "auto" is 5 restarts in memory and 1 on a dask
        array, where each restart costs a dozen passes.
    kmeans_max_iter : int, default=100
        Lloyd iterations of that k-means.
    random_state : None or int, default=None
        Seed of every random choice (frequencies, k-means, samples, prototypes, ties).

    Fitted attributes: ``tree_``, ``bandwidth_`` (per feature), ``labels_`` (base labels when the
    base was fitted here), ``base_``
    (the k-means on features), ``rff_``, ``xi_`` (d, K, K), ``xi_variance_``, ``tau_``,
    ``sigma2_`` (per cluster), ``theorem12_`` (dict), ``theorem12_bound_``, ``kernel_price_``,
    ``cluster_sizes_``, ``samples_`` (K, s, d), ``samples_taken_``, ``decisions_`` (per internal
    node: axis, pair, theta, prototype), ``n_passes_``, ``timings_`` (seconds per step: validate,
    base, sample, tree, price), ``feature_names_in_``, ``n_features_in_``.
    """

    _numbers_only = "fits a mixture over numbers"  # category features and NaN refused at fit, as in a run

    _parameter_constraints = {
        "n_clusters": [Interval(Integral, 2, None, closed="left")],
        "kernel": [str],  # a name of exclust.algorithms.mmdt.similarity.KERNELS in any case, checked by kernel_code
        "bandwidth": [StrOptions({"scale"}), Interval(Real, 0, None, closed="neither"), "array-like"],
        # two draws per cluster are needed to estimate its self-similarity
        "samples_per_cluster": [Interval(Integral, 2, None, closed="left")],
        "n_components": [Interval(Integral, 2, None, closed="left")],
        "prototype": [StrOptions(set(PROTOTYPES))],
        "compute_price": ["boolean"],
        "kmeans_n_init": [StrOptions({"auto"}), Interval(Integral, 1, None, closed="left")],
        "kmeans_max_iter": [Interval(Integral, 1, None, closed="left")],
        "random_state": [None, Interval(Integral, 0, None, closed="left")],
    }

    def __init__(self, n_clusters: int = 8, *, kernel: str = "gaussian", bandwidth: Any = "scale",
                 samples_per_cluster: int = 256, n_components: int = 256, prototype: str = "best",
                 compute_price: bool = True, kmeans_n_init: int | str = "auto", kmeans_max_iter: int = 100,
                 random_state: int | None = None) -> None:
        self.n_clusters = n_clusters
        self.kernel = kernel
        self.bandwidth = bandwidth
        self.samples_per_cluster = samples_per_cluster
        self.n_components = n_components
        self.prototype = prototype
        self.compute_price = compute_price
        self.kmeans_n_init = kmeans_n_init
        self.kmeans_max_iter = kmeans_max_iter
        self.random_state = random_state

    # ------------------------------------------------------------------ validation
    def _check_labels(self, labels: Any, n: int):
        lab, distributed = arrays.entering_array(labels)
        if distributed:
            if lab.ndim != 1 or (not math.isnan(lab.shape[0]) and lab.shape[0] != n):
                raise InputError(f"labels must be 1-D with one entry per row ({n}); got shape {lab.shape}")
            return lab.astype(np.int64)
        if lab.ndim != 1 or lab.shape[0] != n:
            raise InputError(f"labels must be 1-D with one entry per row ({n}); got shape {lab.shape}")
        if lab.dtype.kind == "f":
            if not np.isfinite(lab).all() or (lab != np.round(lab)).any():
                raise InputError("labels must be integer cluster ids 0..n_clusters-1")
        elif lab.dtype.kind not in "iu":
            raise InputError(f"labels must be integer cluster ids 0..n_clusters-1, not dtype {lab.dtype}")
        lab = lab.astype(np.int64)
        if lab.min() < 0 or lab.max() >= self.n_clusters:
            raise InputError(
                f"labels range over [{lab.min()}, {lab.max()}], outside 0..{self.n_clusters - 1} "
                f"for n_clusters={self.n_clusters}"
            )
        return lab

    def _resolve_bandwidth(self, X: Any, feature_names: list[str], distributed: bool) -> tuple[np.ndarray, int]:
        """Per-feature bandwidths and the passes spent finding them (one for "scale"); ``distributed``:
        X is a Dask array."""
        if not isinstance(self.bandwidth, str):
            return check_bandwidth(self.bandwidth, X.shape[1]), 0
        if self.bandwidth != "scale":
            raise InputError(
                f"bandwidth must be a positive number, one per feature, or 'scale', not {self.bandwidth!r}"
            )
        from exclust.sources.dataset import check_spread

        if distributed:
            import dask.array as da

            n = X.shape[0]
            s1, s2 = da.compute(X.sum(axis=0), (X * X).sum(axis=0))
            std = np.sqrt(np.maximum(s2 / n - (s1 / n) ** 2, 0.0))
        else:
            std = np.asarray(X).std(axis=0)
        check_spread(std, feature_names)
        return check_bandwidth(np.sqrt(X.shape[1]) * std, X.shape[1]), 1

    # ------------------------------------------------------------------ fit
    def fit(self, X: Any, labels: Any = None) -> KernelMMDT:
        """Fit the base clustering (unless ``labels`` are given), sample per cluster, grow the tree, score it."""
        self._check_params()
        X = self._fit_input(X)
        kernel_code(self.kernel)
        K = int(self.n_clusters)
        clock = time.perf_counter()
        timings: dict[str, float] = {}

        def lap(name: str) -> None:
            nonlocal clock
            now = time.perf_counter()
            timings[name] = now - clock
            clock = now

        passes = 0 if isinstance(X, Dataset) else 1  # as_matrix checks finiteness in one pass
        ds = as_matrix(X, n_clusters=K)
        lap("validate")
        X = ds.X
        n, d = X.shape
        h, moment_passes = self._resolve_bandwidth(X, ds.feature_names, ds.distributed)
        passes += moment_passes
        self.bandwidth_ = h
        seeds = np.random.SeedSequence(self.random_state).generate_state(4, dtype=np.uint32)
        rff_seed, kmeans_seed, sample_seed, tree_seed = (int(v) for v in seeds)
        self.rff_ = RandomFourierFeatures(self.kernel, h, self.n_components, rff_seed).fit(d)

        if labels is None:
            from exclust.reference import KMeans

            # The features are finite by construction: hand them over as a validated Dataset so
            # k-means does not spend a pass re-checking them (it persists them when they fit).
            n_init = self.kmeans_n_init
            if n_init == "auto":
                n_init = 1 if ds.distributed else 5
            Z = Dataset(self.rff_.transform(X), [f"rff{j}" for j in range(int(self.n_components))])
            self.base_ = KMeans(
                n_clusters=K, n_init=n_init, max_iter=self.kmeans_max_iter, random_state=kmeans_seed
            ).fit(Z)
            base_labels = self.base_.labels_
            self.labels_ = base_labels
            passes += int(getattr(self.base_, "n_passes_", getattr(self.base_, "n_iter_", 0) + 1))
        else:
            base_labels = self._check_labels(labels, n)
            self.base_ = None
        lap("base")

        samples, taken, sizes, n_outside = sample_per_cluster(
            X, base_labels, K, int(self.samples_per_cluster), sample_seed
        )
        passes += 1
        lap("sample")
        if n_outside:
            raise InputError(f"{n_outside} label(s) lie outside 0..{K - 1} for n_clusters={K}")
        small = np.flatnonzero(sizes < 2)
        if small.size:
            raise InputError(
                f"cluster(s) {small.tolist()} have fewer than 2 rows (sizes {sizes[small].tolist()}); kernel MMDT "
                "needs two draws per cluster to estimate its similarities: lower n_clusters or merge those clusters"
            )
        weights = sizes / sizes.sum()
        code = kernel_code(self.kernel)
        xi, var = axis_similarity_moments(samples, taken, code, 1.0 / h)
        tree, decisions = build_kernel_tree(
            samples, taken, weights, self.kernel, h, prototype=self.prototype, random_state=tree_seed,
            feature_names=ds.feature_names, xi=xi,
        )
        sigma2 = self_similarity(samples, taken, code, 1.0 / h)
        tau = axis_aligned_similarity(xi)
        # Theorem 12 assumes one sigma^2 for every component (eq. 24) and Var kappa_i <= eps^2 for all
        # axes and pairs (eq. 25); with estimated clusters we take the smallest sigma_k^2 (the proof
        # needs xi(i, k, k) >= sigma^2 for the chosen k) and the largest variance.
        self.theorem12_ = theorem12_bound(tau, float(sigma2.min()), float(var.max()), float(K * weights.max()), K)
        self.theorem12_bound_ = self.theorem12_["price_bound"]
        lap("tree")  # driver only: similarity moments, tree, Theorem 12 (independent of n)

        tree.meta.update({
            "algorithm": "kernel_mmdt", "kernel": str(self.kernel).lower(), "bandwidth": h.tolist(),
            "prototype": self.prototype, "samples_per_cluster": int(self.samples_per_cluster),
            # JSON has no infinity: a bound that says nothing (sigma^2 <= tau) is stored as null
            "tau": tau, "theorem12": {k: (v if math.isfinite(v) else None) for k, v in self.theorem12_.items()},
        })
        self.tree_ = tree
        self.decisions_ = decisions
        self.xi_ = xi
        self.xi_variance_ = var
        self.tau_ = tau
        self.sigma2_ = sigma2
        self.samples_ = samples
        self.samples_taken_ = taken
        self.cluster_sizes_ = sizes
        self.n_features_in_ = d

        self.kernel_price_ = None
        if self.compute_price:
            stats = rff_group_statistics(X, [tree, base_labels], K, self.rff_)
            passes += 1
            self.tree_kernel_cost_ = kernel_cost_from_statistics(stats[0])
            self.base_kernel_cost_ = kernel_cost_from_statistics(stats[1])
            self.kernel_price_ = (
                self.tree_kernel_cost_ / self.base_kernel_cost_ if self.base_kernel_cost_ > 0 else float("nan")
            )
            lap("price")
        self.n_passes_ = passes
        self.timings_ = timings
        return self

    def fit_predict(self, X: Any, labels: Any = None):
        """fit(X, labels) then the tree's cluster of every row of X."""
        ds = as_matrix(X, n_clusters=self.n_clusters)
        return self.fit(ds, labels).predict(ds)  # the Dataset, whose names predict checks
