"""A lower bound on the least k-means cost of an m-leaf tree over a box from each cell's nearest
cells (``optimal_bnb.py`` uses it where the scatter bounds are weak: few features, many leaves).

Notation as in ``_scatter_bounds.py``: the box holds cells g with count ``n_g``, mean ``mu_g`` and
within-cell scatter ``w_g = q_g - |s_g|^2 / n_g``; ``W = sum_g w_g``, ``N = sum_g n_g``,
``d_gh = |mu_g - mu_h|^2``. A tree cutting at bin edges sends each cell whole to a leaf, so its
leaves are a partition ``P`` of the cells into at most ``m`` parts.

For a cell g and a number of rows ``s >= n_g`` let ``G_g(s)`` be the least sum of ``d_gh`` over
``s - n_g`` rows taken from the other cells (cell h offers ``n_h`` rows, each at ``d_gh``): the
nearest rows first, so ``G_g`` is piecewise linear and convex in s (its slopes are the sorted
distances).

**Bound 7 (nearest cells).** For every ``lambda >= 0``,
``best(S, m) >= W + sum_g n_g min over s in [n_g, N] of (G_g(s) / 2 + lambda) / s - lambda m``.
*Proof.* Huygens splits a partition's cost into ``W`` plus the cells' means' scatter around their
part's mean, and a part ``A`` of ``N_A`` rows has mean scatter
``sum_{g, h in A} n_g n_h d_gh / (2 N_A) = sum_{g in A} n_g (sum_{h in A} n_h d_gh) / (2 N_A)``.
For g in A the inner sum is a sum of ``d_gh`` over the ``N_A - n_g`` rows of A outside g, at least
``G_g(N_A)``. So the cost is at least ``W + sum_g n_g G_g(s_g) / (2 s_g)`` with ``s_g`` the rows
of g's part, and ``sum_g n_g / s_g`` is the number of parts, at most m: adding
``lambda (sum_g n_g / s_g - m) <= 0`` and minimising each cell's term over its own ``s_g`` (which
only lowers it) proves it. The best ``lambda`` is found by bisection on the sign of
``sum_g n_g / s_g(lambda) - m`` (the concave function's supergradient); every ``lambda`` tried
gives a valid bound and the largest is kept.

It is a bound on every m-part partition (k-means' own optimum), blind to the tree's boxes, but it
charges every cell for the rows it must share a part with, which the per-coordinate and spectral
bounds do not when m - 1 >= d (r15, d31, aggregation: 2 features, 7-31 leaves).

Computation. Each cell keeps its ``NEIGHBOURS`` nearest other cells; past them every further row
costs at least the last one's distance, so the truncated ``G_g`` is below the true one (still a
bound) and still convex. On a run of rows from one cell ``(G_g(s) / 2 + lambda) / s`` is
linear-fractional, so its least value is at a run's end; over s it falls then rises (with ``G``
convex, ``s G'(s) - G(s)`` never decreases), so each cell's scan stops at the first rise. Memory
``cells x NEIGHBOURS``, time ``cells^2 d`` for the distances and ``cells x NEIGHBOURS`` per
``lambda``. The result is lowered by a relative ``SLACK`` of the box's summed squares, as the
scatter bounds are.
"""
from __future__ import annotations

import numba
import numpy as np

from exclust.algorithms.search._scatter_bounds import SLACK

# Nearest cells kept per cell (memory cells x this); farther rows are charged the last distance.
NEIGHBOURS = 256

# Bisection steps on lambda (each a valid bound; the largest is kept).
LAMBDA_STEPS = 40


@numba.njit(cache=True, nogil=True)
def _nearest(stats, cells, n_keep):
    """Per cell of the box: squared distances of its ``n_keep`` nearest other cells' means
    (increasing) and those cells' counts, arrays (cells, n_keep')."""
    n = cells.shape[0]
    d = stats.shape[1] - 2
    keep = min(n - 1, n_keep)
    means = np.empty((n, d))
    for a in range(n):
        g = cells[a]
        for c in range(d):
            means[a, c] = stats[g, 2 + c] / stats[g, 0]
    dist = np.empty((n, keep))
    mass = np.empty((n, keep))
    row = np.empty(n)
    for a in range(n):
        for b in range(n):
            value = 0.0
            for c in range(d):
                t = means[a, c] - means[b, c]
                value += t * t
            row[b] = value
        row[a] = np.inf
        order = np.argsort(row)
        for i in range(keep):
            dist[a, i] = row[order[i]]
            mass[a, i] = stats[cells[order[i]], 0]
    return dist, mass


@numba.njit(cache=True, nogil=True)
def _relaxed(lam, dist, mass, own, total):
    """(sum_g n_g min_s (G_g(s) / 2 + lam) / s, sum_g n_g / s_g at those minimisers)."""
    n, keep = dist.shape
    value = 0.0
    parts = 0.0
    for a in range(n):
        s = own[a]
        spent = 0.0
        best = lam / s
        arg = s
        rising = False
        for i in range(keep):
            if s >= total:
                break
            take = min(mass[a, i], total - s)
            s += take
            spent += take * dist[a, i]
            v = (0.5 * spent + lam) / s
            if v < best:
                best, arg = v, s
            elif v > best:
                rising = True
                break
        if not rising and keep > 0 and s < total:  # past the kept cells: each row at the last distance
            spent += (total - s) * dist[a, keep - 1]
            s = total
            v = (0.5 * spent + lam) / s
            if v < best:
                best, arg = v, s
        value += own[a] * best
        parts += own[a] / arg
    return value, parts


def neighbour_bound(stats: np.ndarray, cells: np.ndarray, m: int) -> float:
    """Bound 7 for ``m`` leaves over the box holding ``cells`` (rows of ``stats``: count, summed
    squared norm, summed coordinates)."""
    return float(neighbour_bounds(stats, cells, m)[m])


def neighbour_bounds(stats: np.ndarray, cells: np.ndarray, max_leaves: int) -> np.ndarray:
    """Bound 7 for 1..``max_leaves`` leaves over the box holding ``cells``: an array whose entry j
    bounds j leaves (entry 0 unused, 0), the nearest cells found once for all j."""
    out = np.zeros(max_leaves + 1)
    rows = stats[cells]
    count = rows[:, 0]
    if cells.shape[0] == 0:
        return out
    within = float(np.maximum(rows[:, 1] - (rows[:, 2:] ** 2).sum(axis=1) / count, 0.0).sum())
    margin = SLACK * abs(float(rows[:, 1].sum()))
    out[1:] = max(within - margin, 0.0)
    if cells.shape[0] <= 1:
        return out
    dist, mass = _nearest(stats, np.ascontiguousarray(cells, dtype=np.int64), NEIGHBOURS)
    total = float(count.sum())
    own = np.ascontiguousarray(count, dtype=np.float64)
    scale = max(float(rows[:, 1].sum()), 1e-300)
    for m in range(1, min(max_leaves, cells.shape[0] - 1) + 1):
        out[m] = max(within + _best_lambda(dist, mass, own, total, m, scale) - margin, 0.0)
    return out


def _best_lambda(dist: np.ndarray, mass: np.ndarray, own: np.ndarray, total: float, m: int, scale: float) -> float:
    """The largest ``relaxed(lambda) - lambda m`` over the lambdas tried (bisection)."""
    best = 0.0
    low, high = 0.0, scale
    for _ in range(200):  # a lambda large enough that the parts fall to m
        value, parts = _relaxed(high, dist, mass, own, total)
        best = max(best, value - high * m)
        if parts <= m:
            break
        low, high = high, high * 4.0
    for _ in range(LAMBDA_STEPS):
        mid = 0.5 * (low + high)
        value, parts = _relaxed(mid, dist, mass, own, total)
        best = max(best, value - mid * m)
        if parts > m:
            low = mid
        else:
            high = mid
    return best
