"""Numba kernels for MMDT's one-dimensional threshold search (paper 002, eq. 4-6).

At a node, after the axis is chosen, MMDT looks for the threshold theta strictly between the
smallest and largest of the node's means on that axis that minimizes the weighted probability
that a point lies on the other side of theta from its own component's mean:

    f(theta) = sum_k pbar_k * g(|theta - mu_k| / sigma_k)

with g the Gaussian tail bound exp(-s^2/2) (eq. 6), the Chebyshev bound min(1, 1/s^2) (eq. 5)
or the exact Gaussian tail Phi(-s) (eq. 4). The work depends on the number of components at
the node, never on the number of data points.

Also here: the per-node normalized ranges R_j / sigma_j (paper 002's axis rule) and, for paper
000's midpoint rule, the largest normalized gaps read from per-axis sorted component lists that
are sorted once at the root and filtered down the tree.

The Chebyshev bound is capped at 1: it bounds a probability, and a value above 1 says nothing,
so a component within one sigma of theta counts fully (weight pbar_k) rather than
unboundedly. Where the cap makes the objective flat, the uncapped eq. 5 breaks the tie.
"""
from __future__ import annotations

import math

import numba
import numpy as np

GAUSSIAN_BOUND = 0  # eq. 6
CHEBYSHEV_BOUND = 1  # eq. 5, capped at 1
EXACT_GAUSSIAN = 2  # eq. 4 with Gaussian components

_INV_SQRT2 = 1.0 / math.sqrt(2.0)
_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)
_NEGLIGIBLE = 40.0  # log terms this far below the largest add less than e^-40 each
_TOL = 1e-12  # on log f: thresholds whose objectives agree to this relative precision tie
_GOLDEN = 0.3819660112501051  # 2 - golden ratio


@numba.njit(cache=True, nogil=True)
def _term(kind, theta, mu, sigma, capped):
    """One component's probability (or bound) of being on the far side of theta."""
    dist = abs(theta - mu)
    if sigma <= 0.0:
        # A point mass sits exactly on its mean: never cut off unless the cut is on it.
        return 1.0 if dist == 0.0 else 0.0
    s = dist / sigma
    if kind == GAUSSIAN_BOUND:
        return math.exp(-0.5 * s * s)
    if kind == CHEBYSHEV_BOUND:
        if s == 0.0:
            return 1.0 if capped else math.inf
        v = 1.0 / (s * s)
        return min(v, 1.0) if capped else v
    return 0.5 * math.erfc(s * _INV_SQRT2)


@numba.njit(cache=True, nogil=True)
def separation_probability(kind, theta, means, weights, sigmas):
    """The objective f(theta): weighted chance that a point is cut off from its own mean."""
    total = 0.0
    for k in range(means.shape[0]):
        total += weights[k] * _term(kind, theta, means[k], sigmas[k], True)
    return total


@numba.njit(cache=True, nogil=True)
def _log_term(kind, theta, mu, sigma):
    """log of one component's term; in logs so that far-apart means do not underflow to 0."""
    dist = abs(theta - mu)
    if sigma <= 0.0:
        return 0.0 if dist == 0.0 else -math.inf
    s = dist / sigma
    if kind == GAUSSIAN_BOUND:
        return -0.5 * s * s
    if kind == CHEBYSHEV_BOUND:
        return 0.0 if s <= 1.0 else -2.0 * math.log(s)
    if s < 8.0:
        return math.log(0.5 * math.erfc(s * _INV_SQRT2))
    # log Phi(-s) by its asymptotic series; relative error below 1e-7 for s >= 8.
    r = 1.0 / (s * s)
    series = 1.0 - r * (1.0 - 3.0 * r * (1.0 - 5.0 * r * (1.0 - 7.0 * r * (1.0 - 9.0 * r))))
    return -0.5 * s * s - math.log(s) - _HALF_LOG_2PI + math.log(series)


@numba.njit(cache=True, nogil=True)
def _log_add(a, b):
    if a == -math.inf:
        return b
    if b == -math.inf:
        return a
    if a < b:
        a, b = b, a
    return a + math.log1p(math.exp(b - a))


@numba.njit(cache=True, nogil=True)
def _objective(kind, theta, means, log_weights, sigmas, scratch):
    """(log f, tie-breaker): the uncapped Chebyshev sum orders thresholds where the capped one is flat
    (for the other objectives the tie-breaker is log f itself).

    ``scratch`` (one float per component) holds the log terms between the two passes of the
    log-sum-exp, so each term's transcendental functions are evaluated once. For the exact tail,
    a component whose Chernoff bound log w - s^2/2 lies more than ``_NEGLIGIBLE`` below one
    exactly evaluated term cannot change f beyond rounding, and its erfc is skipped.
    """
    top = -math.inf
    n = means.shape[0]
    if kind == CHEBYSHEV_BOUND:
        # A power law does not underflow: sum in linear space, capped and uncapped in one pass.
        f = 0.0
        g = 0.0
        for k in range(n):
            sig = sigmas[k]
            dist = abs(theta - means[k])
            w = math.exp(log_weights[k])
            if sig <= 0.0:
                t = 1.0 if dist == 0.0 else 0.0
                f += w * t
                g += w * t
            elif dist <= sig:
                f += w
                g += w * (sig / dist) ** 2 if dist > 0.0 else math.inf
            else:
                u = (sig / dist) ** 2
                f += w * u
                g += w * u
        return (math.log(f) if f > 0.0 else -math.inf), g
    if kind == EXACT_GAUSSIAN:
        best_bound = -math.inf
        kbest = 0
        for k in range(n):
            v = log_weights[k] + _log_term(GAUSSIAN_BOUND, theta, means[k], sigmas[k])
            scratch[k] = v
            if v > best_bound:
                best_bound = v
                kbest = k
        floor = log_weights[kbest] + _log_term(kind, theta, means[kbest], sigmas[kbest]) - _NEGLIGIBLE
        for k in range(n):
            if scratch[k] < floor:
                scratch[k] = -math.inf
            else:
                scratch[k] = log_weights[k] + _log_term(kind, theta, means[k], sigmas[k])
                if scratch[k] > top:
                    top = scratch[k]
    else:
        for k in range(n):
            v = log_weights[k] + _log_term(kind, theta, means[k], sigmas[k])
            scratch[k] = v
            if v > top:
                top = v
    if top == -math.inf:
        return top, 0.0
    acc = 0.0
    for k in range(n):
        if scratch[k] > top - _NEGLIGIBLE:
            acc += math.exp(scratch[k] - top)
    f = top + math.log(acc)
    return f, f


@numba.njit(cache=True, nogil=True)
def _better(f1, g1, f2, g2, tol):
    """Lexicographic 'strictly better': lower log f, or log f equal within tol and lower tie-breaker."""
    if f1 < f2 - tol:
        return True
    if f1 > f2 + tol:
        return False
    return g1 < g2


@numba.njit(cache=True, nogil=True)
def interval_minima(kind, means, weights, sigmas, cuts, n_grid, margin, refine_within, n_refine, n_probe):
    """Best threshold on every open interval between consecutive distinct values in ``cuts``.

    ``cuts`` holds the sorted distinct means on the axis. An interval (a, b) is first bounded
    below by the terms of the means at a and b evaluated at the far end (every term is >= 0 and
    decreases with the distance to its mean); intervals whose lower bound exceeds the objective
    at the centre of one of the ``n_probe`` intervals of smallest lower bound cannot hold the
    minimum and are skipped (+inf in the result). The others are searched on a grid of
    ``n_grid`` points spanning [a + margin*(b-a), b - margin*(b-a)], so a threshold is never a
    mean, and those whose grid minimum is within a factor (1 + ``refine_within``) of the best
    are refined by a golden-section search between the neighbouring grid points. The objective
    is handled as log f throughout. Returns (theta, log f, tie_breaker) per interval.
    """
    m = cuts.shape[0] - 1
    n = means.shape[0]
    log_w = np.empty(n)
    scratch = np.empty(n)
    for k in range(n):
        log_w[k] = math.log(weights[k]) if weights[k] > 0 else -math.inf
    theta = np.empty(m)
    fval = np.full(m, math.inf)
    gval = np.full(m, math.inf)
    best_pos = np.zeros(m, dtype=np.int64)
    lower = np.full(m, -math.inf)
    for k in range(n):
        i = np.searchsorted(cuts, means[k])
        if i < m:
            lower[i] = _log_add(lower[i], log_w[k] + _log_term(kind, cuts[i + 1], means[k], sigmas[k]))
        if i > 0:
            lower[i - 1] = _log_add(lower[i - 1], log_w[k] + _log_term(kind, cuts[i - 1], means[k], sigmas[k]))
    best_upper = math.inf
    order = np.argsort(lower)
    for r in range(min(m, n_probe)):
        a = order[r]
        ub, _ = _objective(kind, 0.5 * (cuts[a] + cuts[a + 1]), means, log_w, sigmas, scratch)
        if ub < best_upper:
            best_upper = ub
    step = (1.0 - 2.0 * margin) / (n_grid - 1)
    for a in range(m):
        if lower[a] > best_upper + 1e-9:
            continue
        lo = cuts[a]
        gap = cuts[a + 1] - lo
        bf = math.inf
        bg = math.inf
        bi = 0
        for i in range(n_grid):
            t = lo + gap * (margin + step * i)
            f, g = _objective(kind, t, means, log_w, sigmas, scratch)
            if i == 0 or _better(f, g, bf, bg, _TOL):
                bf, bg, bi = f, g, i
        theta[a] = lo + gap * (margin + step * bi)
        fval[a] = bf
        gval[a] = bg
        best_pos[a] = bi
    overall = fval.min()
    for a in range(m):
        if fval[a] > overall + math.log1p(refine_within):
            continue
        lo = cuts[a]
        gap = cuts[a + 1] - lo
        i = best_pos[a]
        x0 = lo + gap * (margin + step * max(i - 1, 0))
        x3 = lo + gap * (margin + step * min(i + 1, n_grid - 1))
        x1 = x0 + _GOLDEN * (x3 - x0)
        x2 = x3 - _GOLDEN * (x3 - x0)
        f1, g1 = _objective(kind, x1, means, log_w, sigmas, scratch)
        f2, g2 = _objective(kind, x2, means, log_w, sigmas, scratch)
        for _ in range(n_refine):
            if _better(f1, g1, f2, g2, _TOL):
                x3, x2, f2, g2 = x2, x1, f1, g1
                x1 = x0 + _GOLDEN * (x3 - x0)
                f1, g1 = _objective(kind, x1, means, log_w, sigmas, scratch)
            else:
                x0, x1, f1, g1 = x1, x2, f2, g2
                x2 = x3 - _GOLDEN * (x3 - x0)
                f2, g2 = _objective(kind, x2, means, log_w, sigmas, scratch)
        if _better(f1, g1, fval[a], gval[a], _TOL):
            theta[a], fval[a], gval[a] = x1, f1, g1
        if _better(f2, g2, fval[a], gval[a], _TOL):
            theta[a], fval[a], gval[a] = x2, f2, g2
    return theta, fval, gval


@numba.njit(cache=True, nogil=True)
def normalized_ranges(means, comps, inv_sigma):
    """Range of the node's means on every axis divided by sigma_j (R_j / sigma_j of paper 002)."""
    d = means.shape[1]
    lo = means[comps[0]].copy()
    hi = means[comps[0]].copy()
    for r in range(1, comps.shape[0]):
        row = means[comps[r]]
        for j in range(d):
            v = row[j]
            if v < lo[j]:
                lo[j] = v
            elif v > hi[j]:
                hi[j] = v
    out = np.empty(d)
    for j in range(d):
        out[j] = (hi[j] - lo[j]) * inv_sigma[j]
    return out


@numba.njit(cache=True, nogil=True)
def axis_gaps(means_t, order_t, inv_sigma):
    """Largest gap between neighbouring means on every axis, divided by sigma_j (paper 000 Alg. 1).

    ``means_t`` is the d x K transposed means; ``order_t[j]`` lists the node's components sorted
    by their mean on axis j.
    """
    d, n = order_t.shape
    out = np.zeros(d)
    for j in range(d):
        row = means_t[j]
        g = 0.0
        prev = row[order_t[j, 0]]
        for i in range(1, n):
            cur = row[order_t[j, i]]
            if cur - prev > g:
                g = cur - prev
            prev = cur
        out[j] = g * inv_sigma[j]
    return out


@numba.njit(cache=True, nogil=True)
def tied_gaps(means_t, order_t, inv_sigma, per_axis, rtol):
    """Every (axis, lower mean, upper mean) whose normalized gap is within rtol of the largest.

    Only the axes whose largest gap ties the best (``per_axis``, from ``axis_gaps``) are
    scanned again. Returns (best gap, axes, lower means, upper means).
    """
    d, n = order_t.shape
    best = per_axis.max()
    floor = best * (1.0 - rtol)
    count = 0
    for j in range(d):
        if per_axis[j] >= floor:
            count += n - 1
    axes = np.empty(count, dtype=np.int64)
    lows = np.empty(count)
    highs = np.empty(count)
    count = 0
    for j in range(d):
        if per_axis[j] < floor:
            continue
        row = means_t[j]
        for i in range(1, n):
            lo = row[order_t[j, i - 1]]
            hi = row[order_t[j, i]]
            if (hi - lo) * inv_sigma[j] >= floor:
                axes[count] = j
                lows[count] = lo
                highs[count] = hi
                count += 1
    return best, axes[:count], lows[:count], highs[:count]


@numba.njit(cache=True, nogil=True)
def split_orders(order_t, goes_left, n_left):
    """The children's per-axis sorted component lists, filtered from the parent's.

    ``goes_left`` is 1/0 per component id. Branch-free: every id is written to both children
    and only the cursor of its own side advances (one slack column absorbs the other write).
    """
    d, n = order_t.shape
    n_right = n - n_left
    left = np.empty((d, n_left + 1), dtype=np.int64)
    right = np.empty((d, n_right + 1), dtype=np.int64)
    for j in range(d):
        a = 0
        b = 0
        lrow = left[j]
        rrow = right[j]
        orow = order_t[j]
        for i in range(n):
            k = orow[i]
            g = goes_left[k]
            lrow[a] = k
            rrow[b] = k
            a += g
            b += 1 - g
    return left[:, :n_left], right[:, :n_right]
