"""Split criteria of the histogram family: what a pass accumulates and how a cut is scored.

The engine (``engine.EncodedData``) keeps the encoded rows and runs passes; it knows no
criterion. A criterion says three things, as scikit-learn's ``Criterion`` objects plugged into
its ``Splitter`` do (and LightGBM's serial tree learner, which its data-parallel learner wraps):

1. ``holds_distances``: the per-row state it needs at encode time (the dot products
   ``<x, mu_j>``, or each row's distance to each center; ``None`` for either);
2. ``block(part, tree_arrays, routing, *args)``: a module-level function that accumulates its
   histograms on one kept part (a Dask task on the workers); ``pass_args`` builds the
   ``*args`` of one pass and ``unpack`` shapes the reduced (summed over parts) result;
3. ``best_split(...)``: the best cut from a node's reduced histograms (prefix sums over bins).

One pass is ``data.histograms(criterion, tree, slot, *request)`` (counted in ``n_passes``):
``slot[node]`` is the histogram a node's rows fall in (-1: none), ``request`` is the
criterion's own (``pass_args``' extra parameters).

A new criterion is one subclass: its ``block`` (usually one numba kernel call), ``pass_args``,
``unpack`` and ``best_split``; an algorithm grows its tree by calling
``data.histograms(MyCriterion(), tree, slot, ...)`` and ``criterion.best_split`` per node.

Missing values and category features (issue 28) live in the codes and in the cut search: the
blocks count every code of ``binning.BinMapper`` (one missing bin per feature, one bin per
category) and route by ``CodeTree.arrays(mapper)`` (thresholds, or a table of codes per node for
set cuts and missing bins sent left); ``Mistakes.best_split`` and ``SurrogateCost.best_split`` are
``cut_search``'s, which price every cut with the missing bin on either side (LightGBM's
``default_left``) and search set cuts of a category feature (exact for the surrogate cost; for
mistakes, exact over up to 10 categories holding centers, Fisher-ordered prefixes beyond, as
LightGBM's ``FindBestThresholdCategorical`` orders categories). The cut returned (``BinCut``)
carries the set and the missing side, which the tree records. ``ShallowCost`` and ``MedianCut``
know thresholds on numeric, complete features only: ExShallow, ExGreedy and KDTree refuse the others.

``MedianCut`` (KDTree) reads the raw rows instead of kept parts: KDTree encodes nothing, so its
pass is ``parts.map_reduce(MedianCut.block, X, ...)``.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from exclust.algorithms.histogram._code_histograms import box_statistics, mistake_histograms, surrogate_histograms
from exclust.algorithms.histogram.binning import BinMapper
from exclust.algorithms.histogram.cut_search import BinCut, best_mistake_cut, best_surrogate_cut, side_costs
from exclust.dataplane.parts import kernel_threads


def resume_nodes(part: dict, routing: tuple[int, bool, int]) -> tuple[np.ndarray, bool]:
    """Where each row of a kept part starts its routing through a tree of lineage
    ``routing[0]``, and whether the pass may write the reached leaves back (``routing[1]``).

    The part remembers, per row, the leaf its last routing through one lineage reached. A
    lineage only ever grows (``CodeTree.split`` turns leaves into cuts), so that leaf is still
    on the row's path and routing resumes there. A trial tree (``CodeTree.trial_copy``) reads
    its lineage's memory but never writes it: its extra nodes are not the lineage's. Memory of
    another lineage is discarded (or, for a trial, not used). A copy of a part made earlier
    (a Dask transfer or spill) carries older, still valid, leaves.
    """
    lineage, remember, known_nodes = routing
    # Usable when written by this lineage while it had no more nodes than the caller knows
    # (a trial copy taken before its lineage grew further must not read the newer leaves).
    if part.get("route_lineage") == lineage and part["route_size"] <= known_nodes:
        if remember:
            part["route_size"] = known_nodes
        return part["route_nodes"], remember
    n = part["codes"].shape[0]
    if not remember:
        return np.zeros(n, dtype=np.int32), False
    part.pop("route_lineage", None)
    part["route_nodes"] = np.zeros(n, dtype=np.int32)
    part["route_size"] = known_nodes
    part["route_lineage"] = lineage
    return part["route_nodes"], True


class Criterion:
    """A split criterion of the engine (see the module docstring for the contract)."""

    holds_distances: bool | None = None  # what EncodedData must keep: None, either
    # ``block(part, tree_arrays, routing, *pass_args)``: accumulates this criterion's histograms
    # on one kept part, where the part lives; a module-level function, so a Dask task can name it.
    block: Callable[..., Any]

    def pass_args(self, data, slot: np.ndarray, *request: Any) -> tuple:
        """The arguments of ``block`` after (part, tree_arrays, routing) for one pass."""
        return (slot, *request)

    def unpack(self, data, reduced: Any, args: tuple) -> Any:
        """The pass's histograms from ``block``'s results summed over parts."""
        return reduced

    def check(self, data) -> None:
        """Refuse encoded data that do not hold what ``block`` reads."""
        if self.holds_distances is not None and data.holds_distances != self.holds_distances:
            need = "distances to the centers" if self.holds_distances else "dot products with the centers"
            raise ValueError(f"{type(self).__name__} histograms need {need}: encode with the matching metric")

    def best_split(self, *hists: Any, **kwargs: Any) -> Any:
        """The best cut of one node from its reduced histograms."""
        raise NotImplementedError


# --------------------------------------------------------------------------- IMM: mistakes
def _block_mistakes(part, tree_arrays, routing, slot, member_pos, offset, n_bins):
    return mistake_histograms(
        part["codes"], part["labels"], *tree_arrays, *resume_nodes(part, routing), slot, member_pos, offset, n_bins,
        kernel_threads(),
    )


class Mistakes(Criterion):
    """IMM: rows separated from their reference center.

    Request: ``center_ok`` (n_slots, k) bool, the centers counted in each slot. Histograms: per
    slot s, (d, n_bins, m_s) counts of counted rows per reference cluster, one column per
    cluster counted there, in cluster order.
    """

    block = staticmethod(_block_mistakes)

    def pass_args(self, data, slot, center_ok):
        center_ok = np.asarray(center_ok, dtype=np.bool_)
        n_slots = int(center_ok.shape[0])
        widths = center_ok.sum(axis=1).astype(np.int64)
        member_pos = np.where(center_ok, np.cumsum(center_ok, axis=1) - 1, -1).astype(np.int64)
        offset = np.zeros(n_slots + 1, dtype=np.int64)
        np.cumsum(widths * (data.d * data.n_bins), out=offset[1:])
        return slot, member_pos, offset, data.n_bins

    def unpack(self, data, reduced, args) -> list[np.ndarray]:
        offset = args[2]
        cells = data.d * data.n_bins
        return [reduced[offset[s]:offset[s + 1]].reshape(data.d, data.n_bins, int((offset[s + 1] - offset[s]) // cells))
                for s in range(offset.shape[0] - 1)]

    def best_split(self, hist: np.ndarray, center_codes: np.ndarray, members: np.ndarray, mapper: BinMapper
                   ) -> BinCut | None:
        """IMM at one node: the cut of fewest mistakes among those that part its centers
        (threshold or category set, with its missing side): ``cut_search.best_mistake_cut``."""
        return best_mistake_cut(hist, center_codes, members, mapper)


# --------------------------------------------------------------------------- ExKMC: surrogate cost
def _block_surrogate(part, tree_arrays, routing, slot, n_slots, n_bins, n_features):
    return surrogate_histograms(
        part["codes"], part["dots"], part["labels"], *tree_arrays, *resume_nodes(part, routing), slot, n_slots,
        n_bins, n_features, kernel_threads(),
    )


class SurrogateCost(Criterion):
    """ExKMC: the k-means (or, from l1 distances, k-medians) cost against the fixed centers.

    Request: ``n_slots`` and ``n_features`` (default None: every feature; 1: the first only,
    which gives each slot's totals, ``leaf_cost``). Histograms: (n_slots, d, n_bins, k + 1)
    count and sums of ``<x, mu_j>`` (or of distances), and (n_slots, d, n_bins, k) rows per
    reference cluster (d: ``n_features``). ``center_sq`` (``EncodedData.center_sq``) is None
    when distances are held. A slot's histogram is the same to the bit whatever else its pass
    computes (see the kernel), so a leaf's histogram may be dropped and computed again.
    """

    block = staticmethod(_block_surrogate)

    def pass_args(self, data, slot, n_slots, n_features=None):
        return slot, n_slots, data.n_bins, data.d if n_features is None else int(n_features)

    @staticmethod
    def slot_bytes(data, n_features=None) -> int:
        """Bytes of one slot's histograms (sums and label counts) in a pass."""
        d = data.d if n_features is None else int(n_features)
        return d * data.n_bins * (2 * data.k + 1) * 8

    def best_split(self, hist: np.ndarray, labels: np.ndarray, center_sq: np.ndarray | None, mapper: BinMapper,
                   tol: float = 0.0) -> BinCut | None:
        """ExKMC at one leaf: the cut of least surrogate cost (threshold or exact category set,
        with its missing side), ties within ``tol`` broken as ``cut_search.best_surrogate_cut`` says."""
        return best_surrogate_cut(hist, labels, center_sq, mapper, tol)

    @staticmethod
    def leaf_cost(hist: np.ndarray, center_sq: np.ndarray | None, center: int) -> float:
        """Surrogate cost (less sum ||x||^2 with dot products) of a whole leaf with a given center,
        from feature 0's bins."""
        tot = hist[0].sum(axis=0)
        return float(side_costs(np.asarray(tot[0]), tot[1:], center_sq)[center])

    @staticmethod
    def cheapest_center(hist: np.ndarray, center_sq: np.ndarray | None) -> int:
        """The reference center of lowest surrogate cost for a leaf's rows."""
        tot = hist[0].sum(axis=0)
        return int(np.argmin(side_costs(np.asarray(tot[0]), tot[1:], center_sq)))


# --------------------------------------------------------------------------- ExShallow, ExGreedy
def _block_shallow(part, tree_arrays, routing, slot, member_group, n_groups, center_span, n_bins, n_splits,
                   bulk_min_rows):
    from exclust.algorithms.histogram._shallow_cut import shallow_histograms

    return shallow_histograms(
        part["codes"], part["dots"], *tree_arrays, *resume_nodes(part, routing), slot, member_group.shape[0],
        member_group, n_groups, center_span, n_bins, n_splits, kernel_threads(), bulk_min_rows,
    )


class ShallowCost(Criterion):
    """ExShallow and ExGreedy: the cost ratio of a cut (distance to the nearest center on each
    side) plus ``depth_factor`` times the projected mean leaf depth (0: ExGreedy).

    Request: ``member_group``, ``n_groups``, ``center_span``, ``n_splits`` and
    ``bulk_min_rows`` (see ``_shallow_cut.shallow_histograms``). Histograms: per slot,
    (d, n_bins, n_splits, 2) summed distances to the nearest center left / right of each
    center split, (d, n_bins) row counts, and the summed distance to the nearest of the slot's
    centers. A part's slots of at least ``bulk_min_rows`` rows fill a feature's bulk bin by
    difference (see the kernel).
    """

    holds_distances = True
    block = staticmethod(_block_shallow)

    def __init__(self, depth_factor: float = 0.0) -> None:
        self.depth_factor = float(depth_factor)

    def pass_args(self, data, slot, member_group, n_groups, center_span, n_splits, bulk_min_rows=1 << 62):
        return slot, member_group, n_groups, center_span, data.n_bins, n_splits, bulk_min_rows

    def unpack(self, data, reduced, args):
        cells, base = reduced
        n_splits = args[5]
        n_slots, d, n_bins, _ = cells.shape
        sums = np.cumsum(cells[..., 1:].reshape(n_slots, d, n_bins, n_splits, 2), axis=3)
        return sums, np.rint(cells[..., 0]).astype(np.int64), base

    def best_split(self, sums, counts, base, own_codes, bounded):
        """(feature, bin, score) of one node, ``feature`` -1 when its centers coincide: the
        depth-penalized cut among feasible ones (each side keeps as many rows as centers), else
        the least cost ratio among all that part the centers."""
        from exclust.algorithms.histogram._shallow_cut import best_shallow_cut

        cut = best_shallow_cut(sums, counts, base, own_codes, bounded, self.depth_factor, True)
        if cut[0] < 0:
            cut = best_shallow_cut(sums, counts, base, own_codes, bounded, 0.0, False)
        return cut


# --------------------------------------------------------------------------- KDTree: median cuts
def _block_box_statistics(X, mapper, tree_arrays, slot, n_slots, n_bins):
    X = np.ascontiguousarray(X, dtype=np.float64)
    return box_statistics(X, mapper.transform(X), *tree_arrays, slot, n_slots, n_bins)


class MedianCut(Criterion):
    """KDTree: the highest-variance feature cut at its median. Its block reads raw row blocks
    (``map_reduce``), not kept parts: per slot, counts (d, B), sums (d,) and squares (d,)."""

    block = staticmethod(_block_box_statistics)

    def best_split(self, counts: np.ndarray, sums: np.ndarray, sq: np.ndarray):
        """(feature, bin) of the highest-variance feature's median, or None if no feature can be cut.

        Features whose points all share one bin cannot be cut; of the rest, the highest variance
        wins. The cut is the bin edge whose left side holds the number of points closest to half
        (lower edge on ties), always with points on both sides.
        """
        n = counts[0].sum()
        if n < 2:
            return None
        var = sq / n - (sums / n) ** 2
        cuttable = (counts > 0).sum(axis=1) >= 2
        if not cuttable.any():
            return None
        f = int(np.argmax(np.where(cuttable, var, -np.inf)))
        cum = np.cumsum(counts[f])
        ok = (cum > 0) & (cum < n)
        b = int(np.argmin(np.where(ok, np.abs(2 * cum - n), np.iinfo(np.int64).max)))
        return f, b
