"""Lower bounds on the least k-means cost of an m-leaf tree over a box, from the box's between-cell
scatter matrix (``optimal_bnb.py`` uses them where a side must hold three or more leaves).

Notation. A box holds cells g (``optimal_cells.py``) with count ``n_g``, summed (shifted)
coordinates ``s_g`` and summed squared norm ``q_g``; ``n``, ``s``, ``q`` are the box's totals and
``cost = q - |s|^2 / n`` its one-leaf cost. A tree cutting at bin edges sends each cell whole to a
leaf, so its leaves are a partition ``P`` of the cells into at most ``m`` parts. Write
``W = sum_g (q_g - |s_g|^2 / n_g)`` (the within-cell scatter, a number fixed by the box),
``C = sum_g s_g s_g^T / n_g - s s^T / n`` (the scatter matrix of the cells' means, weighted by
their counts, d x d, positive semidefinite) and ``B(P) = sum_parts n_P (mu_P - mu)(mu_P - mu)^T``
(the scatter of the parts' means). Huygens' identity, applied twice, gives
``cost(P) = W + trace(C) - trace(B(P)) = cost - trace(B(P))``, so a lower bound on the cost of every
m-part partition is an upper bound on ``trace(B(P))``. Two facts about ``B = B(P)``:

* ``0 <= B <= C`` (Loewner order): ``C - B`` is the sum over parts of the scatter of the cells'
  means around their part's mean, a sum of positive semidefinite matrices;
* ``rank(B) <= m - 1``: it is a sum of m terms ``n_P v_P v_P^T`` whose vectors ``v_P = mu_P - mu``
  satisfy ``sum_P n_P v_P = 0``.

**Bound 4 (spectral).** ``best(S, m) >= cost - (lambda_1 + ... + lambda_{m-1})``, the eigenvalues of
``C`` in decreasing order. *Proof.* ``B`` has at most ``m - 1`` nonzero eigenvalues, each at most the
same-ranked eigenvalue of ``C`` (``B <= C`` and Weyl's monotonicity theorem), so ``trace(B) <=
lambda_1 + ... + lambda_{m-1}``. It is Ding and He's k-means bound ("K-means clustering via
principal component analysis", ICML 2004) on the cells; it is cheap from the cells' moments, so it
is computed for every cut position of a feature at once (``position_spectral_bounds``, prefix sums
over the bins of that feature).

**Bound 5 (spectral with one-dimensional directions).** Let ``u_1..u_d`` be orthonormal
eigenvectors of ``C`` (eigenvalues ``lambda_i`` decreasing) and ``beta_i = lambda_i - K_i`` where
``K_i`` is the least weighted 1-D m-means cost of the cells' means projected on ``u_i`` (weights
``n_g``; ``weighted_kmeans_1d``). Then ``trace(B) <= min(sum_i beta_i, min over r >= m - 1 of
[sum_{i <= r} beta_i + the m - 1 least of (lambda_i - beta_i), i <= r])``, and ``best(S, m) >= cost``
minus that. *Proof.* ``trace(B) = sum_i u_i^T B u_i``. Along ``u_i``, ``u_i^T B u_i`` is the scatter
of the parts' projected means, that is ``lambda_i`` (the projected cells' scatter) less the
scatter of the projected cells within their parts, which is at least ``K_i``: so ``u_i^T B u_i <=
beta_i``. For a set ``J`` of directions, ``sum_{i in J} u_i^T B u_i`` is the trace of ``U_J^T B U_J``,
of rank at most ``m - 1`` and at most ``U_J^T C U_J = diag(lambda_J)``, so it is at most the sum of
the ``m - 1`` largest ``lambda_i`` in ``J`` (Weyl again). Take ``J = T`` together with every
direction after ``r``, with ``T`` any ``m - 1`` directions among the first ``r``: the ``m - 1``
largest of ``J`` are ``T`` (eigenvalues decrease), the directions outside ``J`` get ``beta_i``, so
``trace(B) <= sum_{i <= r, i not in T} beta_i + sum_{i in T} lambda_i``, least for the ``T`` of least
excess ``lambda_i - beta_i >= 0``. With ``J`` empty it is ``sum_i beta_i`` (the per-coordinate bound
of ``optimal_bnb``'s Bound 3 in the eigenvectors' basis, with ``W`` for the within-cell part,
whose trace does not depend on the basis). Bound 5 is at least Bound 4 (``r = m - 1``, ``T`` the
first ``m - 1``).

Both are lowered by a relative ``SLACK`` of the box's summed squares, so that rounding in the
moments and the eigenvalues never lifts them above the optimum (a bound a hair too high could
prune the optimum).
"""
from __future__ import annotations

import numba
import numpy as np

from exclust.algorithms.search._optimal_bounds import weighted_kmeans_1d

# Relative margin taken off each bound (of the box's summed squared norm): covers rounding in the
# moments' differences and in the eigenvalues, many orders above either.
SLACK = 1e-9

# Bound 5 runs its 1-D programme along this many leading eigenvectors at most; along the others
# ``beta_i = lambda_i`` (the between-scatter along a direction is at most the cells' scatter
# there), still valid, so wide data (digits: 64) do not pay 64 programmes per box.
MAX_DIRECTIONS = 16


@numba.njit(cache=True, nogil=True)
def moments_by_bin(codes, stats, cells, feature, n_bins):
    """Per bin of ``feature``: summed (count, squared norm, coordinates) rows and summed
    ``s_g s_g^T / n_g`` over the node's cells in that bin."""
    width = stats.shape[1]
    d = width - 2
    rows = np.zeros((n_bins, width))
    outer = np.zeros((n_bins, d, d))
    for i in range(cells.shape[0]):
        g = cells[i]
        b = codes[g, feature]
        for w in range(width):
            rows[b, w] += stats[g, w]
        count = stats[g, 0]
        if count <= 0.0:
            continue
        for a in range(d):
            sa = stats[g, 2 + a] / count
            for c in range(a, d):
                outer[b, a, c] += sa * stats[g, 2 + c]
    for b in range(n_bins):
        for a in range(d):
            for c in range(a + 1, d):
                outer[b, c, a] = outer[b, a, c]
    return rows, outer


def scatter_eigenvalues(count: np.ndarray, sums: np.ndarray, outer: np.ndarray) -> np.ndarray:
    """The eigenvalues of the scatter matrices ``outer - s s^T / n`` of boxes given by their row
    counts (...), summed coordinates (..., d) and summed ``s_g s_g^T / n_g`` (..., d, d): (..., d),
    decreasing, clamped at 0 (rounding); all 0 for an empty box."""
    safe = np.maximum(count, 1e-300)
    scatter = outer - sums[..., :, None] * sums[..., None, :] / safe[..., None, None]
    scatter[count <= 0] = 0.0
    return np.maximum(np.linalg.eigvalsh(scatter)[..., ::-1], 0.0)


def _spectral(rows: np.ndarray, outer: np.ndarray, max_leaves: int) -> np.ndarray:
    """Bound 4 for boxes given by their summed rows (..., width) and summed outer products
    (..., d, d): an array (..., max_leaves + 1) whose column j bounds j leaves (column 0 unused, 1 is
    the one-leaf cost)."""
    count = rows[..., 0]
    sums = rows[..., 2:]
    safe = np.maximum(count, 1e-300)
    eigen = scatter_eigenvalues(count, sums, outer)
    cost = np.maximum(rows[..., 1] - (sums * sums).sum(axis=-1) / safe, 0.0)
    out = np.zeros((*count.shape, max_leaves + 1))
    taken = np.zeros(count.shape)
    for j in range(1, max_leaves + 1):
        if j >= 2 and j - 2 < eigen.shape[-1]:
            taken = taken + eigen[..., j - 2]
        out[..., j] = cost - taken - SLACK * np.abs(rows[..., 1])
    out = np.maximum(out, 0.0)
    out[count <= 0] = 0.0
    return out


def position_spectral_bounds(codes: np.ndarray, stats: np.ndarray, cells: np.ndarray, feature: int,
                             split_bins: np.ndarray, n_bins: int, max_leaves: int,
                             moments: tuple[np.ndarray, np.ndarray] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Bound 4 for both sides of every cut on ``feature`` at once: (left, right), arrays
    (positions, max_leaves + 1), row p for the cut after bin ``split_bins[p]``, column j the bound
    for j leaves on that side. Prefix sums of the per-bin moments (``moments``: ``moments_by_bin``'s,
    when the caller has them), one batched eigendecomposition."""
    rows, outer = moments_by_bin(codes, stats, cells, int(feature), int(n_bins)) if moments is None else moments
    left_rows = np.cumsum(rows, axis=0)[split_bins]
    left_outer = np.cumsum(outer, axis=0)[split_bins]
    right_rows = rows.sum(axis=0)[None, :] - left_rows
    right_outer = outer.sum(axis=0)[None, :, :] - left_outer
    return _spectral(left_rows, left_outer, max_leaves), _spectral(right_rows, right_outer, max_leaves)


def _explained(eigen: np.ndarray, beta: np.ndarray, m: int) -> float:
    """Bound 5's upper bound on ``trace(B)`` from the eigenvalues and the ``beta_i`` (see the module)."""
    explained = float(beta.sum())  # J empty
    excess = np.maximum(eigen - beta, 0.0)
    for r in range(m - 1, eigen.shape[0] + 1):
        if r == 0:
            continue
        least = np.sort(excess[:r])[: m - 1]
        explained = min(explained, float(beta[:r].sum() + least.sum()))
    return explained


def box_bound(stats: np.ndarray, cells: np.ndarray, m: int, cutoff: float = np.inf) -> float:
    """Bound 5 (hence also Bound 4) for ``m`` leaves over the box holding ``cells``; Bound 4 alone
    when it already reaches ``cutoff`` (the 1-D programmes are then skipped).

    With a finite ``cutoff`` the programmes also stop, direction by direction (largest eigenvalue
    first), once Bound 5 cannot reach ``cutoff`` whatever the directions not yet run give: the
    remaining directions then keep ``beta_i = lambda_i`` (valid, as beyond ``MAX_DIRECTIONS``), so
    the bound returned is valid but may be below Bound 5; it is below ``cutoff`` either way, so
    nothing it would prune is lost. *Proof that the test is safe.* Each term of Bound 5's minimum
    (``sum_i beta_i``; for each r and T, ``sum_{i <= r, i not in T} beta_i + sum_{i in T} lambda_i``)
    does not decrease when any ``beta_i`` grows, so neither does their minimum ``explained``; the
    directions not yet run have ``beta_i >= 0``, so ``explained`` with them at 0 is at most its
    final value, and ``cost`` less it bounds the final Bound 5 from above. When that is below
    ``cutoff``, so is Bound 5. On ten-feature Gaussian mixtures Bound 5 equals Bound 4 in every box
    of the search (bench/README.md), and the test stops after about m - 1 programmes instead of d.
    """
    rows = stats[cells]
    count = rows[:, 0]
    total = rows.sum(axis=0)
    n = float(total[0])
    if cells.shape[0] <= 1 or n <= 0:
        return 0.0
    means = rows[:, 2:] / count[:, None]
    centred = means - total[2:] / n
    scatter = (centred * count[:, None]).T @ centred
    eigen, vectors = np.linalg.eigh(scatter)
    eigen, vectors = np.maximum(eigen[::-1], 0.0), vectors[:, ::-1]
    cost = max(float(total[1]) - float(total[2:] @ total[2:]) / n, 0.0)
    margin = SLACK * abs(float(total[1]))
    spectral = cost - float(eigen[: m - 1].sum()) - margin
    if spectral >= cutoff:
        return max(spectral, 0.0)
    projected = centred @ vectors[:, :MAX_DIRECTIONS]
    beta = eigen.copy()
    directions = min(eigen.shape[0], MAX_DIRECTIONS)
    for i in range(directions):
        kept = float(weighted_kmeans_1d(np.ascontiguousarray(projected[:, i]), count, int(m)))
        beta[i] = max(eigen[i] - kept, 0.0)
        if i + 1 < directions and np.isfinite(cutoff):
            hopeful = beta.copy()
            hopeful[i + 1:] = 0.0  # the directions not run at their most favourable
            if cost - _explained(eigen, hopeful, m) - margin < cutoff:
                break  # Bound 5 cannot reach the cutoff: the rest keep beta = lambda
    return max(cost - _explained(eigen, beta, m) - margin, spectral, 0.0)
