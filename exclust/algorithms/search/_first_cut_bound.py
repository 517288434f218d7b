"""Bound 8 (a side's first cut): a lower bound on the least k-means cost of a tree of at most m >= 3
leaves over every cut position's side at once, from the side's exact two-leaf cuts and the
spectral bound of boxes around the pieces (``optimal_bnb.py`` uses it for the sides of three or
more leaves of a node searched with four or more).

Notation as in ``_scatter_bounds.py``: a set X of cells has one-leaf cost ``cost(X)``, scatter
matrix of its cells' means ``C_X`` and ``E_r(X)``, the sum of the r largest eigenvalues of
``C_X`` (``E_0 = 0``). Bound 4 is ``best(X, j) >= cost(X) - E_{j-1}(X)``.

**Two facts.**

* *Sub-boxes.* If ``X`` is a subset of ``Y`` then ``C_X <= C_Y`` (Loewner), so ``E_r(X) <= E_r(Y)``
  for every r. *Proof.* ``C_Y = sum_{g in Y} n_g (mu_g - mu_Y)(mu_g - mu_Y)^T``; dropping the cells
  outside X removes positive semidefinite terms, and around its own mean X's terms sum to
  ``C_X + n_X (mu_X - mu_Y)(mu_X - mu_Y)^T >= C_X`` (Huygens). Each eigenvalue of the smaller
  matrix is then at most the same-ranked one of the larger (Weyl's monotonicity), so are their
  partial sums. Hence ``best(X, j) >= cost(X) - E_{j-1}(Y)`` for any box ``Y`` holding X.
* *The first cut.* A tree of at most m leaves over a side S is one leaf or has a first cut
  (g, t) splitting S into non-empty ``A_t = S n {x_g <= t}`` and ``B_t = S n {x_g > t}`` whose
  subtrees have at most j and m - j leaves, 1 <= j <= m - 1; so
  ``best(S, m) >= min(cost(S), min over g, t, j of best(A_t, j) + best(B_t, m - j))``. A cut after
  an empty bin makes the same pieces as the cut after the last occupied bin before it, so the
  occupied bins are all the cuts.

**Bound 8.** Split each feature's bins into segments (``segment_map``). For the side ``S_p`` of the
cut after bin p of feature f (``L_p``: bins <= p, ``R_p``: bins > p), p in f's segment i, and a cut
of S_p after bin t of feature g, t in g's segment s: ``A_t`` lies in the box ``Y_A`` of the node's
cells with f-segment <= i (>= i for ``R_p``) and g-segment <= s, and ``B_t`` in ``Y_B`` (g-segment
>= s). By the two facts (Bound 4 for each piece, with ``E_0 = 0``, i.e. the exact one-leaf cost)

    best(S_p, m) >= min(cost(S_p), min over g, s of [V(p, g, s) - max over j of
                        (E_{j-1}(Y_A) + E_{m-j-1}(Y_B))])

where ``V(p, g, s)`` is the least of ``cost(A_t) + cost(B_t)`` over S_p's cuts after bins of
segment s of g: exactly what the node's streamed sweep scores for its two-leaf sides
(``_optimal_bounds.best_two_by_segments``), kept per segment. The boxes ``Y`` need only each
pair of features' table of cells summed by (f-segment, g-segment) (``pair_tables``), so one pass
per node and one batch of small eigendecompositions serve every position of every feature. With
every bin its own segment and every piece's matrix its own, this is the one-level recursion over
the first cut with exact one-leaf pieces; the segments trade tightness for time. It is lowered by
``SLACK`` of the node's summed squares (rounding), like Bounds 4-5.
"""
from __future__ import annotations

import numba
import numpy as np

from exclust.algorithms.search._scatter_bounds import SLACK, scatter_eigenvalues

# Segments per feature for the boxes around the pieces: the eigendecompositions per node are
# d^2 x 4 x segments^2 (10 features, 16 segments: 102,400 of 10 x 10, about a second).
MAX_SEGMENTS = 16


def segment_map(hist: np.ndarray, n_segments: int) -> np.ndarray:
    """(d, n_bins) segment of each bin per feature, non-decreasing in the bin: the node's occupied
    bins (``hist`` (d, n_bins, width)) cut into ``n_segments`` runs of about equal numbers."""
    d, n_bins = hist.shape[:2]
    out = np.zeros((d, n_bins), dtype=np.int64)
    for f in range(d):
        occupied = np.flatnonzero(hist[f, :, 0] > 0)
        if occupied.size == 0:
            continue
        rank = np.clip(np.searchsorted(occupied, np.arange(n_bins), side="right") - 1, 0, None)
        out[f] = rank * n_segments // occupied.size
    return out


def segments_for(n_cells: int) -> int:
    """Segments per feature for a node of ``n_cells`` cells: fewer on small nodes, whose sweeps cost
    less than the fixed eigendecompositions."""
    return int(min(MAX_SEGMENTS, max(2, np.sqrt(n_cells) / 4)))


@numba.njit(cache=True, nogil=True)
def pair_tables(codes, stats, cells, seg_of, n_segments):
    """Per pair of features f <= g and per (f-segment, g-segment): the summed count, coordinates
    and ``s s^T / n`` (upper triangle) of the node's cells there: (d, d, S, S, 1 + d + d(d+1)/2)."""
    d = codes.shape[1]
    width = 1 + d + d * (d + 1) // 2
    table = np.zeros((d, d, n_segments, n_segments, width))
    v = np.empty(width)
    for i in range(cells.shape[0]):
        c = cells[i]
        n = stats[c, 0]
        v[0] = n
        for a in range(d):
            v[1 + a] = stats[c, 2 + a]
        k = 1 + d
        for a in range(d):
            sa = stats[c, 2 + a] / n if n > 0 else 0.0
            for b in range(a, d):
                v[k] = sa * stats[c, 2 + b]
                k += 1
        for f in range(d):
            sf = seg_of[f, codes[c, f]]
            for g in range(f, d):
                sg = seg_of[g, codes[c, g]]
                for w in range(width):
                    table[f, g, sf, sg, w] += v[w]
    return table


def box_eigen_sums(table: np.ndarray, f: int, top: int | None = None, known: dict | None = None) -> np.ndarray:
    """``E_r`` of the boxes around the pieces of feature ``f``'s sides: (d_g, 4, S, S, top + 1),
    orientation o = 2 a + b with a = 0 for f-segment <= i (1: >= i) and b = 0 for g-segment <= s
    (1: >= s); r = 0..top (default d: every partial sum; sides of at most m leaves need r <= m - 2).
    Made per feature, only for features whose sides need it. The box of (f, g, a, b, i, s) is the
    box of (g, f, b, a, s, i), so with ``known`` (a node's dict, one ``top`` per dict) each pair of
    features' boxes are decomposed once and serve both features."""
    d = table.shape[0]
    top = d if top is None else min(int(top), d)
    known = {} if known is None else known
    missing = sorted({(min(f, g), max(f, g)) for g in range(d)} - known.keys())
    if missing:
        for pair, sums in zip(missing, _pair_eigen_sums(table, missing, top), strict=True):
            known[pair] = sums
    out = np.empty((d, 4, *table.shape[2:4], top + 1))
    for g in range(d):
        sums = known[(min(f, g), max(f, g))]
        # Stored with a for the lower feature: for f > g swap the orientations' roles and the segments.
        out[g] = sums if f <= g else sums[[0, 2, 1, 3]].transpose(0, 2, 1, 3)
    return out


def _pair_eigen_sums(table: np.ndarray, pairs: list[tuple[int, int]], top: int) -> np.ndarray:
    """``E_0..E_top`` of every box of the pairs (f, g), f <= g: (pairs, 4, S, S, top + 1), orientation
    2 a + b with a for f's segments (axis 2) and b for g's (axis 3), as in ``box_eigen_sums``."""
    d = table.shape[0]
    full = np.stack([table[f, g] for f, g in pairs])
    boxes = np.empty((len(pairs), 4, *full.shape[1:]))
    for a in (0, 1):
        along_f = np.cumsum(full, axis=1) if a == 0 else np.cumsum(full[:, ::-1], axis=1)[:, ::-1]
        for b in (0, 1):
            boxes[:, 2 * a + b] = np.cumsum(along_f, axis=2) if b == 0 else \
                np.cumsum(along_f[:, :, ::-1], axis=2)[:, :, ::-1]
    count = boxes[..., 0]
    sums = boxes[..., 1:1 + d]
    moments = np.empty((*count.shape, d, d))
    upper = np.triu_indices(d)
    moments[..., upper[0], upper[1]] = boxes[..., 1 + d:]
    moments[..., upper[1], upper[0]] = boxes[..., 1 + d:]
    eigen = scatter_eigenvalues(count, sums, moments)
    out = np.zeros((*count.shape, top + 1))
    out[..., 1:] = np.cumsum(eigen[..., :top], axis=-1)
    return out


def first_cut_bounds(f: int, positions: np.ndarray, seg_of: np.ndarray, eigen_sums: np.ndarray,
                     left_seg: np.ndarray, right_seg: np.ndarray, one_leaf: tuple[np.ndarray, np.ndarray],
                     max_leaves: int, margin: float) -> tuple[np.ndarray, np.ndarray]:
    """Bound 8 for both sides of every cut position of feature ``f``: (left, right), arrays
    (positions, max_leaves + 1), column m for at most m leaves (0 below column 3). ``eigen_sums`` is
    ``box_eigen_sums(table, f)``, ``left_seg`` and ``right_seg`` are ``best_two_by_segments``'
    per-segment minima at those positions, ``one_leaf`` the sides' one-leaf costs, ``margin`` the
    rounding slack taken off."""
    top = eigen_sums.shape[-1] - 1
    segment = seg_of[f, positions]
    out = []
    for side, values in ((0, left_seg), (1, right_seg)):
        bound = np.zeros((positions.size, max_leaves + 1))
        # (positions, g, s, r): the boxes around A_t (g-segment <= s) and B_t (>= s) of each position.
        around_a = eigen_sums[:, 2 * side][:, segment].transpose(1, 0, 2, 3)
        around_b = eigen_sums[:, 2 * side + 1][:, segment].transpose(1, 0, 2, 3)
        for m in range(3, max_leaves + 1):
            taken = np.zeros(values.shape)
            for j in range(1, m):
                taken = np.maximum(taken, around_a[..., min(j - 1, top)] + around_b[..., min(m - j - 1, top)])
            least = (values - taken).reshape(positions.size, -1).min(axis=1)
            bound[:, m] = np.maximum(np.minimum(least, one_leaf[side]) - margin, 0.0)
        out.append(bound)
    return out[0], out[1]


def margin_of(stats: np.ndarray, cells: np.ndarray) -> float:
    """The rounding slack of Bound 8 for a node: ``SLACK`` times its summed squared norm, four times
    (two pieces, each a difference of sums)."""
    return 4.0 * SLACK * float(np.abs(stats[cells, 1]).sum())
