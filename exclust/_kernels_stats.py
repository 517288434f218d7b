"""Numba kernels for per-cluster sufficient statistics, Lloyd steps and Gaussian-mixture E-steps.

Each kernel reads one chunk of rows and returns small arrays (K, K x d, K x d x d); the callers in
``stats.py`` and ``reference.py`` sum them over chunks. Plain numpy in and out, GIL released.
Label-wise scatter matrices are accumulated on the upper triangle only and mirrored by the
caller (``mirror_upper``): half the work per row, same result.
"""
from __future__ import annotations

import math

import numba
import numpy as np

LOG_2PI = math.log(2.0 * math.pi)


@numba.njit(cache=True, nogil=True)
def accumulate_cluster_stats(X, labels, n_clusters, full_scatter):
    """Per-label count, sum, sum of squares (and upper-triangle scatter); label -1 skipped.

    Returns (counts, sums, sums_sq, scatter, n_bad) where n_bad counts labels outside
    [-1, n_clusters): the caller turns a non-zero n_bad into an error.
    """
    n, d = X.shape
    counts = np.zeros(n_clusters, dtype=np.int64)
    sums = np.zeros((n_clusters, d))
    sums_sq = np.zeros((n_clusters, d))
    scatter = np.zeros((n_clusters if full_scatter else 0, d, d))
    n_bad = 0
    for i in range(n):
        k = labels[i]
        if k == -1:
            continue
        if k < -1 or k >= n_clusters:
            n_bad += 1
            continue
        counts[k] += 1
        for a in range(d):
            xa = X[i, a]
            sums[k, a] += xa
            sums_sq[k, a] += xa * xa
            if full_scatter:
                for b in range(a, d):
                    scatter[k, a, b] += xa * X[i, b]
    return counts, sums, sums_sq, scatter, n_bad


@numba.njit(cache=True, nogil=True)
def max_label(labels):
    """Largest label of a chunk (-1 when the chunk holds only noise or no rows)."""
    m = -1
    for i in range(labels.shape[0]):
        if labels[i] > m:
            m = labels[i]
    return m


@numba.njit(cache=True, nogil=True)
def mirror_upper(scatter):
    """Copy the upper triangle of every K x d x d slice onto its lower triangle (in place)."""
    K, d, _ = scatter.shape
    for k in range(K):
        for a in range(d):
            for b in range(a + 1, d):
                scatter[k, b, a] = scatter[k, a, b]
    return scatter


# --------------------------------------------------------------------------- k-means (Lloyd)
@numba.njit(cache=True, nogil=True, inline="always")
def nearest_center_of(X, i, centers):
    """(label, squared distance) of row i to its nearest center; inlined wherever rows meet centers."""
    best = np.inf
    arg = 0
    for k in range(centers.shape[0]):
        s = 0.0
        for j in range(centers.shape[1]):
            t = X[i, j] - centers[k, j]
            s += t * t
        if s < best:
            best = s
            arg = k
    return arg, best


@numba.njit(cache=True, nogil=True)
def nearest_center(X, centers):
    """(label, squared distance) of every row to its nearest center."""
    n = X.shape[0]
    labels = np.empty(n, dtype=np.int64)
    dist = np.empty(n)
    for i in range(n):
        labels[i], dist[i] = nearest_center_of(X, i, centers)
    return labels, dist


@numba.njit(cache=True, nogil=True)
def assigned_sq_distances(X, labels, centers):
    """Squared distance of every row to its given center: ``nearest_center``'s distances, bit
    for bit, when ``labels`` are its labels (same sums in the same order), for k / d the work."""
    n, d = X.shape
    dist = np.empty(n)
    for i in range(n):
        c = labels[i]
        s = 0.0
        for j in range(d):
            t = X[i, j] - centers[c, j]
            s += t * t
        dist[i] = s
    return dist


@numba.njit(cache=True, nogil=True)
def lloyd_step(X, centers, labels):
    """One Lloyd pass over a chunk: per-center counts, sums, sums of squares, and the inertia;
    each row's nearest center is written into ``labels`` unless it is empty (length 0)."""
    n, d = X.shape
    K = centers.shape[0]
    counts = np.zeros(K, dtype=np.int64)
    sums = np.zeros((K, d))
    sums_sq = np.zeros((K, d))
    inertia = 0.0
    record = labels.shape[0] > 0
    for i in range(n):
        arg, best = nearest_center_of(X, i, centers)
        if record:
            labels[i] = arg
        inertia += best
        counts[arg] += 1
        for j in range(d):
            x = X[i, j]
            sums[arg, j] += x
            sums_sq[arg, j] += x * x
    return counts, sums, sums_sq, inertia


# --------------------------------------------------------------------------- Gaussian mixture
@numba.njit(cache=True, nogil=True)
def _weighted_log_prob_row(x, means, factor, const, diag, diff, out):
    """log(w_k) + log N(x | mu_k, Sigma_k) for every k, into out (diff is a length-d work buffer).

    ``factor`` is the transposed Cholesky factor of each precision: scikit-learn's upper
    triangular ``prec_chol`` with ``||(x - mu) @ prec_chol||^2`` the Mahalanobis distance, stored
    as ``factor[k] = prec_chol[k].T`` so the inner loop reads memory in order. For diagonal
    covariances it is K x 1 x d holding 1/sigma. ``const`` folds log w_k, log det and -d/2 log 2 pi.
    """
    K, d = means.shape
    for k in range(K):
        s = 0.0
        if diag:
            for j in range(d):
                t = (x[j] - means[k, j]) * factor[k, 0, j]
                s += t * t
        else:
            for a in range(d):
                diff[a] = x[a] - means[k, a]
            for j in range(d):
                y = 0.0
                for a in range(j + 1):
                    y += diff[a] * factor[k, j, a]
                s += y * y
        out[k] = const[k] - 0.5 * s


@numba.njit(cache=True, nogil=True)
def _log_sum_exp(v):
    m = -np.inf
    for k in range(v.shape[0]):
        if v[k] > m:
            m = v[k]
    if m == -np.inf:
        return m
    s = 0.0
    for k in range(v.shape[0]):
        s += math.exp(v[k] - m)
    return m + math.log(s)


# Rows per block of the full-covariance E-step: each block is projected on every component's
# precision factor, and its responsibility-weighted rows multiplied by its rows, in one BLAS
# call each, faster than scalar loops.
ESTEP_BLOCK = 512


@numba.njit(cache=True, nogil=True)
def gmm_estep(X, means, factor, const, diag):
    """One E-step over a chunk, fused with the M-step's sufficient statistics.

    Returns (resp sums K, resp-weighted sums K x d, resp-weighted second moments, log-likelihood
    sum): second moments are the full K x d x d scatter for full covariances, K x 1 x d squares
    for diagonal ones.
    """
    n, d = X.shape
    K = means.shape[0]
    nk = np.zeros(K)
    sums = np.zeros((K, d))
    lp = np.empty(K)
    diff = np.empty(d)
    ll = 0.0
    if diag:
        second = np.zeros((K, 1, d))
        for i in range(n):
            x = X[i]
            _weighted_log_prob_row(x, means, factor, const, diag, diff, lp)
            norm = _log_sum_exp(lp)
            ll += norm
            for k in range(K):
                r = math.exp(lp[k] - norm)
                nk[k] += r
                for a in range(d):
                    ra = r * x[a]
                    sums[k, a] += ra
                    second[k, 0, a] += ra * x[a]
        return nk, sums, second, ll
    # Mahalanobis terms of a block for all components in one BLAS call, as scikit-learn does:
    # (x - mu_k) @ P_k = x @ P_k - mu_k @ P_k, with the P_k side by side (d x K*d).
    stacked = np.empty((d, K * d))
    shift = np.zeros(K * d)
    for k in range(K):
        for j in range(d):
            for a in range(d):
                stacked[a, k * d + j] = factor[k, j, a]
                shift[k * d + j] += means[k, a] * factor[k, j, a]
    flat = np.zeros((K * d, d))
    weighted = np.empty((ESTEP_BLOCK, K * d))
    for start in range(0, n, ESTEP_BLOCK):
        stop = min(n, start + ESTEP_BLOCK)
        block = np.ascontiguousarray(X[start:stop])
        projected = np.dot(block, stacked)
        for row in range(stop - start):
            for k in range(K):
                s = 0.0
                for j in range(d):
                    t = projected[row, k * d + j] - shift[k * d + j]
                    s += t * t
                lp[k] = const[k] - 0.5 * s
            norm = _log_sum_exp(lp)
            ll += norm
            for k in range(K):
                r = math.exp(lp[k] - norm)
                nk[k] += r
                for a in range(d):
                    ra = r * block[row, a]
                    sums[k, a] += ra
                    weighted[row, k * d + a] = ra
        flat += np.dot(weighted[: stop - start].T, block)
    return nk, sums, flat.reshape(K, d, d), ll


@numba.njit(cache=True, nogil=True)
def gmm_log_resp(X, means, factor, const, diag):
    """(log responsibilities n x K, log-likelihood of each row) for predict and score."""
    n, d = X.shape
    K = means.shape[0]
    out = np.empty((n, K))
    norms = np.empty(n)
    lp = np.empty(K)
    diff = np.empty(X.shape[1])
    for i in range(n):
        _weighted_log_prob_row(X[i], means, factor, const, diag, diff, lp)
        norm = _log_sum_exp(lp)
        norms[i] = norm
        for k in range(K):
            out[i, k] = lp[k] - norm
    return out, norms


@numba.njit(cache=True, nogil=True)
def gmm_assign(X, means, factor, const, diag):
    """Most probable component of every row."""
    n = X.shape[0]
    K = means.shape[0]
    out = np.empty(n, dtype=np.int64)
    lp = np.empty(K)
    diff = np.empty(X.shape[1])
    for i in range(n):
        _weighted_log_prob_row(X[i], means, factor, const, diag, diff, lp)
        best = 0
        for k in range(1, K):
            if lp[k] > lp[best]:
                best = k
        out[i] = best
    return out


@numba.njit(cache=True, nogil=True)
def gmm_loglik_sum(X, means, factor, const, diag):
    """Sum over rows of log p(x): the per-chunk part of ``score``."""
    K = means.shape[0]
    lp = np.empty(K)
    diff = np.empty(X.shape[1])
    total = 0.0
    for i in range(X.shape[0]):
        _weighted_log_prob_row(X[i], means, factor, const, diag, diff, lp)
        total += _log_sum_exp(lp)
    return total


@numba.njit(cache=True, nogil=True)
def finite_summary(X):
    """Validation of a block in one read of each row, no temporaries: [rows holding a non-finite
    value, non-finite count per column..., largest finite magnitude per column...]."""
    n, d = X.shape
    out = np.zeros(1 + 2 * d)
    for i in range(n):
        row_bad = False
        for j in range(d):
            v = X[i, j]
            if np.isfinite(v):
                a = abs(v)
                if a > out[1 + d + j]:
                    out[1 + d + j] = a
            else:
                out[1 + j] += 1.0
                row_bad = True
        if row_bad:
            out[0] += 1.0
    return out
