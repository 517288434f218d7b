"""Numba kernels of the Gaussian mixture: E-steps, responsibilities, hard assignments and the
log-likelihood of a chunk, in blocks of rows (``ESTEP_BLOCK``) so temporaries stay small."""
from __future__ import annotations

import math

import numba
import numpy as np

LOG_2PI = math.log(2.0 * math.pi)


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
