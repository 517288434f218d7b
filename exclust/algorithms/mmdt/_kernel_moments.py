"""Numba kernels of kernel MMDT: per-axis similarity moments, per-cluster sampling, RFF statistics.

Kernel codes: 0 = Gaussian profile g(t) = exp(-t^2), 1 = Laplace profile g(t) = exp(-t), both
applied to t = |a - b| / bandwidth (paper 002, eq. 23, with a per-axis scale).
"""
from __future__ import annotations

import numba
import numpy as np

from exclust.dataplane._row_hash import row_key

GAUSSIAN = 0
LAPLACE = 1


@numba.njit(cache=True, nogil=True, inline="always")
def _profile(code, t):
    if code == GAUSSIAN:
        return np.exp(-t * t)
    return np.exp(-t)


@numba.njit(cache=True, nogil=True)
def axis_similarity_moments(samples, counts, code, inv_bandwidth):
    """Mean and variance of kappa_i(x, y) for x from cluster k, y from cluster l, every axis i.

    ``samples`` is (K, s, d) with the first ``counts[k]`` rows of cluster k filled. Within a
    cluster (k == l) the pairs x == y are left out, so xi(i, k, k) estimates the expectation over
    two independent draws, as in eq. (24) and (126). Returns (xi, var), each (d, K, K).
    """
    K = samples.shape[0]
    d = samples.shape[2]
    xi = np.zeros((d, K, K))
    var = np.zeros((d, K, K))
    for k in range(K):
        for m in range(k, K):
            for i in range(d):
                s1 = 0.0
                s2 = 0.0
                pairs = 0
                for a in range(counts[k]):
                    xa = samples[k, a, i]
                    for b in range(counts[m]):
                        if k == m and a == b:
                            continue
                        v = _profile(code, abs(xa - samples[m, b, i]) * inv_bandwidth[i])
                        s1 += v
                        s2 += v * v
                        pairs += 1
                mean = s1 / pairs
                v2 = s2 / pairs - mean * mean
                if v2 < 0.0:
                    v2 = 0.0
                xi[i, k, m] = mean
                xi[i, m, k] = mean
                var[i, k, m] = v2
                var[i, m, k] = v2
    return xi, var


@numba.njit(cache=True, nogil=True)
def self_similarity(samples, counts, code, inv_bandwidth):
    """sigma_k^2 = E kappa(x, x') for two independent draws of cluster k (full product kernel, eq. 24)."""
    K = samples.shape[0]
    d = samples.shape[2]
    out = np.zeros(K)
    for k in range(K):
        total = 0.0
        pairs = 0
        for a in range(counts[k]):
            for b in range(counts[k]):
                if a == b:
                    continue
                prod = 1.0
                for i in range(d):
                    prod *= _profile(code, abs(samples[k, a, i] - samples[k, b, i]) * inv_bandwidth[i])
                total += prod
                pairs += 1
        out[k] = total / pairs
    return out


@numba.njit(cache=True, nogil=True)
def smallest_keys_per_cluster(labels, row_offset, seed, n_clusters, s):
    """Per cluster, the (at most) s rows with the smallest random keys: a uniform sample without replacement.

    Returns (rows (K, s) int64, -1 where unfilled; keys (K, s), inf where unfilled; counts (K)).
    One slot array per cluster; a new row replaces the current largest key, so the work is
    O(n + K s log(n)) in expectation.
    """
    K = n_clusters
    rows = np.full((K, s), -1, dtype=np.int64)
    keys = np.full((K, s), np.inf)
    worst = np.zeros(K, dtype=np.int64)  # slot holding the largest key of each cluster
    counts = np.zeros(K, dtype=np.int64)
    for r in range(labels.shape[0]):
        c = labels[r]
        if c < 0 or c >= K:
            continue
        counts[c] += 1
        key = row_key(seed, row_offset + r)
        w = worst[c]
        if key < keys[c, w]:
            keys[c, w] = key
            rows[c, w] = r
            best = 0
            for j in range(1, s):
                if keys[c, j] > keys[c, best]:
                    best = j
            worst[c] = best
    return rows, keys, counts


@numba.njit(cache=True, nogil=True)
def rff_group_sums(X, omega, labels, n_groups):
    """Per group: count, sum of ||z(x)||^2 and sum of z(x), with z the random Fourier feature map.

    z(x) = [cos(omega x), sin(omega x)] / sqrt(D/2) is computed row by row, so no n x D array is
    ever formed. ``labels`` is (n, G): G labellings at once (e.g. tree clusters and base clusters).
    Returns (G, n_groups, 2 + D): column 0 count, column 1 sum ||z||^2, then sum z.
    """
    n, d = X.shape
    half = omega.shape[0]
    G = labels.shape[1]
    scale = 1.0 / np.sqrt(half)
    out = np.zeros((G, n_groups, 2 + 2 * half))
    z = np.empty(2 * half)
    for r in range(n):
        sq = 0.0
        for j in range(half):
            p = 0.0
            for i in range(d):
                p += omega[j, i] * X[r, i]
            c = np.cos(p) * scale
            s = np.sin(p) * scale
            z[j] = c
            z[half + j] = s
            sq += c * c + s * s
        for g in range(G):
            c = labels[r, g]
            if c < 0 or c >= n_groups:
                continue
            out[g, c, 0] += 1.0
            out[g, c, 1] += sq
            for j in range(2 * half):
                out[g, c, 2 + j] += z[j]
    return out
