"""A node of the certified search (``optimal_bnb.py``): one box's cells with what its cut positions
need, every cut's two sides' exact one- and two-leaf costs (one sweep per feature) and their lower
bounds for three or more leaves at every position at once (Bound 6 of ``optimal_bnb``, with Bound 4
of ``_scatter_bounds`` and Bound 8 of ``_first_cut_bound``, carried along the positions by Bound 1
or Bound 9 of ``_slab_bound``; each proved in its module).

Bound 8's preparation is split by what it costs: the segments of each feature's bins (from the
node's histograms, no pass over the cells) are made when the node is searched with four or more
leaves, because the sweeps keep their per-segment minima; the pair tables (one pass over the
node's cells, O(cells x d^3)) only when some feature's Bound 4 sums leave a position open, which
many nodes never reach.
"""
from __future__ import annotations

import numpy as np

from exclust.algorithms.search._first_cut_bound import (
    box_eigen_sums,
    first_cut_bounds,
    margin_of,
    pair_tables,
    segment_map,
    segments_for,
)
from exclust.algorithms.search._optimal_bounds import best_two_by_segments, node_histograms
from exclust.algorithms.search._scatter_bounds import moments_by_bin, position_spectral_bounds
from exclust.algorithms.search._slab_bound import carry_left, carry_right, lift_left, lift_right, slab_prefix

# Bound 6's spectral part (every cut position's sides) costs O(cells x d^2) per feature, so
# O(cells x d^3) per node: with more features than this the sides of three or more leaves start
# from 0 (Bound 1 and the probes alone), as before Bound 6.
SPECTRAL_MAX_FEATURES = 16


def leaf_costs(stats: np.ndarray) -> np.ndarray:
    """k-means cost of leaves from their (count, summed squared norm, summed coordinates) rows."""
    stats = np.asarray(stats, dtype=np.float64)
    count = stats[..., 0]
    sums = stats[..., 2:]
    with np.errstate(invalid="ignore", divide="ignore"):
        value = stats[..., 1] - np.where(count > 0, (sums * sums).sum(axis=-1) / np.maximum(count, 1e-300), 0.0)
    return np.maximum(value, 0.0)


class SearchNode:
    """A node's cells with its histograms' prefix sums: every cut's two sides' statistics.

    ``codes`` (G, d) and ``stats`` (G, d + 2) are all the cells, ``cells`` the node's indices into
    them, ``n_bins`` the bins per feature."""

    def __init__(self, codes: np.ndarray, stats: np.ndarray, cells: np.ndarray, n_bins: int) -> None:
        self.codes = codes
        self.stats = stats
        self.cells = cells
        self.n_bins = n_bins
        hist = node_histograms(codes, stats, cells, n_bins)
        self.hist = hist  # kept for every feature's two-leaf sides (``two_leaf_sides``)
        self.total = hist[0].sum(axis=0)
        self.cost = leaf_costs(self.total)
        # Bound 8's segments (``prepare_first_cut``) and its pair tables, made on first use.
        self.segments: tuple[np.ndarray, int] | None = None
        self._pairs: tuple[np.ndarray, float, dict] | None = None
        # Bound 9's slab sums per feature (``position_bounds`` with ``use_slabs``), for the probes'
        # carried bounds too, and their rounding margin.
        self.slabs: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self.slab_margin = 0.0
        # Cut positions per feature: after each occupied bin but the last (a cut must leave cells
        # on both sides); the left side's statistics at each.
        self.positions: list[np.ndarray] = []
        self.left: list[np.ndarray] = []
        for f in range(hist.shape[0]):
            occupied = np.flatnonzero(hist[f, :, 0] > 0)
            prefix = np.cumsum(hist[f], axis=0)
            self.positions.append(occupied[:-1])
            self.left.append(prefix[occupied[:-1]])

    def side_costs(self, f: int) -> tuple[np.ndarray, np.ndarray]:
        """Each cut position's left and right leaf costs on feature f."""
        left = self.left[f]
        return leaf_costs(left), leaf_costs(self.total[None, :] - left)

    def two_leaf_sides(self, f: int) -> tuple:
        """Each cut position's left and right best costs of at most two leaves on feature f, with
        their trees: one sweep (``best_two_by_segments``, from the node's own histograms); with the
        segments prepared, Bound 8's per-segment minima too (else None)."""
        if self.segments is None:
            seg_of, n_segments = np.zeros(self.hist.shape[:2], dtype=np.int64), 0
        else:
            seg_of, n_segments = self.segments
        lb, la, rb, ra, ls, rs = best_two_by_segments(self.codes, self.stats, self.cells, f, self.hist, seg_of,
                                                      n_segments)
        at = self.positions[f]
        return lb[at], la[at], rb[at], ra[at], (ls[at], rs[at]) if self.segments is not None else None

    def prepare_first_cut(self) -> None:
        """Bound 8's segments of each feature's bins (from the histograms: no pass over the cells)."""
        n_segments = segments_for(self.cells.shape[0])
        self.segments = (segment_map(self.hist, n_segments), n_segments)

    def first_cut_bounds(self, f: int, segments: tuple[np.ndarray, np.ndarray],
                         max_leaves: int) -> tuple[np.ndarray, np.ndarray]:
        """Bound 8 at every cut position's sides on feature f (``_first_cut_bound``); the pair
        tables are made by the first call of the node."""
        assert self.segments is not None
        seg_of, n_segments = self.segments
        if self._pairs is None:
            self._pairs = (pair_tables(self.codes, self.stats, self.cells, seg_of, n_segments),
                           margin_of(self.stats, self.cells), {})
        table, margin, known = self._pairs
        sums = box_eigen_sums(table, f, max_leaves - 2, known)  # a node has one max_leaves: one top per dict
        return first_cut_bounds(f, self.positions[f], seg_of, sums, *segments, self.side_costs(f), max_leaves, margin)

    def position_bounds(self, f: int, m: int, exact, segments, limit: float, use_slabs: bool = False) -> dict:
        """Per left share j whose sides are not both exact: (left, right) lower bounds at every cut
        position of f (Bound 6). A side of one or two leaves is exact (``exact``: the positions'
        one- and two-leaf sides); one of more is Bound 4, or Bound 8 where the segments were
        prepared and some position's Bound 4 sum is below ``limit``, lifted by Bound 1 (L_p grows
        with p: a running maximum from the left; R_p from the right), or with ``use_slabs`` by
        Bound 9 (``_slab_bound``: the slabs in between added; kept in ``slabs`` for the probes)."""
        positions = self.positions[f]
        if m <= 3:  # every share's two sides are exact
            return {}
        if len(self.positions) > SPECTRAL_MAX_FEATURES:
            zeros = np.zeros((positions.size, m))
            spectral = (zeros, zeros)
        else:
            moments = moments_by_bin(self.codes, self.stats, self.cells, f, self.n_bins)
            spectral = position_spectral_bounds(self.codes, self.stats, self.cells, f, positions, self.n_bins, m - 1,
                                                moments)
            if use_slabs:
                self.slabs[f] = slab_prefix(moments, positions, m - 1)
                self.slab_margin = margin_of(self.stats, self.cells)
        slabs = self.slabs.get(f)

        def lifted(bounds: tuple[np.ndarray, np.ndarray]) -> dict:
            out = {}
            for j in range(1, m):
                if j > 2 or m - j > 2:
                    if j <= 2:
                        low_left = np.array(exact[j - 1][0], dtype=np.float64)
                    elif slabs is None:
                        low_left = np.maximum.accumulate(bounds[0][:, j])
                    else:
                        low_left = lift_left(bounds[0][:, j], slabs[0][:, j], self.slab_margin)
                    if m - j <= 2:
                        low_right = np.array(exact[m - j - 1][1], dtype=np.float64)
                    elif slabs is None:
                        low_right = np.maximum.accumulate(bounds[1][::-1, m - j])[::-1].copy()
                    else:
                        low_right = lift_right(bounds[1][:, m - j], slabs[0][:, m - j], float(slabs[1][m - j]),
                                               self.slab_margin)
                    out[j] = (low_left, low_right)
            return out

        lows = lifted(spectral)
        if segments is not None and \
                any(float((low_left + low_right).min()) < limit for low_left, low_right in lows.values()):
            first = self.first_cut_bounds(f, segments, m - 1)
            lows = lifted((np.maximum(spectral[0], first[0]), np.maximum(spectral[1], first[1])))
        return lows

    def carry(self, f: int, j: int, m: int, mid: int, bounds: tuple[float, float],
              lows: tuple[np.ndarray, np.ndarray]) -> None:
        """A probe's side bounds at position ``mid`` of (f, j) carried in place to the sides that hold
        them (``lows``: the share's per-position bounds): ``L_p``, p >= mid and ``R_p``, p <= mid.
        Bound 1, or Bound 9 (the slabs in between added) for a side of three or more leaves where
        ``position_bounds`` made the feature's slabs."""
        (lb_left, lb_right), (low_left, low_right) = bounds, lows
        slabs = self.slabs.get(f)
        if slabs is not None and j >= 3:
            carry_left(low_left, mid, lb_left, slabs[0][:, j], self.slab_margin)
        else:
            np.maximum(low_left[mid:], lb_left, out=low_left[mid:])
        if slabs is not None and m - j >= 3:
            carry_right(low_right, mid, lb_right, slabs[0][:, m - j], self.slab_margin)
        else:
            np.maximum(low_right[:mid + 1], lb_right, out=low_right[:mid + 1])
