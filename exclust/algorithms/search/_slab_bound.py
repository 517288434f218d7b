"""Bound 9 (slabs): Bound 1 made additive. A side's lower bound carried to a larger side of the same
cut feature gains the bound of the slab between them (``optimal_node.py`` lifts Bound 6's
per-position bounds with it, ``optimal_bnb.py`` each probe's side bounds).

Notation as in ``optimal_bnb.py``: ``best(S, m)`` is the least k-means cost of a tree of at most m
leaves over the cells of S, cuts at bin edges, each cell whole in one leaf.

**Superadditivity.** If X and Y are disjoint then ``best(X u Y, m) >= best(X, m) + best(Y, m)``.
*Proof.* Take a tree of at most m leaves over ``X u Y`` and keep its cuts: it is a tree of at most
m leaves over X and one over Y (some leaves may be empty). A leaf's squared distances to its own
mean split into those of its X rows and of its Y rows, each at least their distances to their own
part's mean (the mean minimises them). Summing over the leaves, the tree costs at least its two
restrictions, which cost at least ``best(X, m)`` and ``best(Y, m)``. By induction the same holds for
any partition of a set into disjoint pieces. Bound 1 (``best(A, m) <= best(B, m)`` for A inside B)
is the special case that drops the second term, whose bound is 0.

**Bound 9.** On a cut feature f, the side ``L_q`` (bins <= q) of a node is ``L_p`` together with
the node's cells in the bins ``p < b <= q`` for p < q, each bin's cells a *slab* ``Z_b``; likewise
``R_q = R_p u Z_{q+1} u ... u Z_p`` for q < p. So, for any lower bounds ``lb``,

    best(L_q, m) >= lb(L_p, m) + sum over p < b <= q of lb(Z_b, m),
    best(R_q, m) >= lb(R_p, m) + sum over q < b <= p of lb(Z_b, m),

and with no side to start from (``L_p`` empty) a side is bounded by its slabs alone. The slabs are
bounded by Bound 4 (``_scatter_bounds``: the slab's one-leaf cost less the m - 1 largest
eigenvalues of its cells' scatter matrix, at least the slab's within-cell scatter, 0 for an empty
bin), from the per-bin moments the node makes for Bound 4 anyway, so all positions cost one batch
of ``n_bins`` small eigendecompositions per feature and prefix sums. Where a probe's side bound
was carried unchanged to its neighbours (Bound 1), it now grows with the slabs between them: in the
(1, m - 1) shapes, where the one-leaf side's exact cost falls as the cut moves, the many-leaf
side's carried bound rises by about as much, so a probe closes more than its own position.

The lifted values are lowered by a rounding margin (the caller's, ``_first_cut_bound.margin_of``),
since a difference of prefix sums added to a bound may round up.
"""
from __future__ import annotations

import numpy as np

from exclust.algorithms.search._scatter_bounds import _spectral


def slab_prefix(moments: tuple[np.ndarray, np.ndarray], split_bins: np.ndarray,
                max_leaves: int) -> tuple[np.ndarray, np.ndarray]:
    """The slabs' Bound 4 summed over the bins up to each cut position: (prefix (positions,
    max_leaves + 1), total (max_leaves + 1,)), column m for at most m leaves; ``moments`` are one
    feature's per-bin moments (``_scatter_bounds.moments_by_bin``), ``split_bins`` the positions'
    last left bins. The slabs beyond position p sum to ``total - prefix[p]``."""
    rows, outer = moments
    per_bin = _spectral(rows, outer, max_leaves)
    cumulative = np.cumsum(per_bin, axis=0)
    return cumulative[split_bins], cumulative[-1]


def lift_left(bounds: np.ndarray, prefix: np.ndarray, margin: float) -> np.ndarray:
    """Bound 9 for the left sides ``L_q`` from ``bounds`` (positions,), valid for each ``L_p``:
    ``max over p <= q of bounds[p] + slabs in (p, q]``, and the slabs up to q alone; never below
    Bound 1's running maximum (the margin is taken off the slabs' terms only)."""
    carried = np.maximum.accumulate(bounds - prefix) + prefix
    return np.maximum(np.maximum.accumulate(bounds), np.maximum(carried, prefix) - margin)


def lift_right(bounds: np.ndarray, prefix: np.ndarray, total: float, margin: float) -> np.ndarray:
    """Bound 9 for the right sides ``R_p``: ``max over p >= q of bounds[p] + slabs in (q, p]``, and
    the slabs beyond q alone (``prefix`` and ``total`` as ``slab_prefix`` gives them for one m)."""
    carried = np.maximum.accumulate((bounds + prefix)[::-1])[::-1] - prefix
    return np.maximum(np.maximum.accumulate(bounds[::-1])[::-1], np.maximum(carried, total - prefix) - margin)


def carry_left(low_left: np.ndarray, mid: int, bound: float, prefix: np.ndarray, margin: float) -> None:
    """A probe's bound for ``L_mid`` carried to every ``L_q``, q >= mid, with the slabs in between
    (in place; Bound 1 alone at ``mid``)."""
    np.maximum(low_left[mid:], bound, out=low_left[mid:])
    np.maximum(low_left[mid:], bound + (prefix[mid:] - prefix[mid]) - margin, out=low_left[mid:])


def carry_right(low_right: np.ndarray, mid: int, bound: float, prefix: np.ndarray, margin: float) -> None:
    """A probe's bound for ``R_mid`` carried to every ``R_q``, q <= mid, with the slabs in between."""
    np.maximum(low_right[:mid + 1], bound, out=low_right[:mid + 1])
    np.maximum(low_right[:mid + 1], bound + (prefix[mid] - prefix[:mid + 1]) - margin, out=low_right[:mid + 1])
