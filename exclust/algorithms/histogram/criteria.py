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
carries the set and the missing side, which the tree records. ``ShallowCost`` prices its cuts
the same way, each with the missing bin on either side, and cuts category features by sets
(``_shallow_sets``); ``MedianCut`` sends the missing bin where the halves come out closest to
equal and cuts a category feature by a prefix of its categories by rows (see each class).

``MedianCut`` (KDTree) reads the raw rows instead of kept parts: KDTree encodes nothing, so its
pass is ``parts.map_reduce(MedianCut.block, X, ...)``.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from exclust.algorithms.histogram._code_histograms import (
    box_statistics,
    mistake_counts,
    mistake_histograms,
    surrogate_histograms,
)
from exclust.algorithms.histogram.binning import BinMapper
from exclust.algorithms.histogram.cut_search import (
    BinCut,
    MistakeCounts,
    best_mistake_cut,
    best_surrogate_cut,
    side_costs,
    side_of_missing,
)
from exclust.algorithms.histogram.kept_values import needed_rows, over_value_chunks
from exclust.dataplane.parts import kernel_threads
from exclust.tree.node_kinds import MISSING_LEFT


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
    reads_values = True  # whether ``block`` reads the per-center values (``kept_values``)
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
        if self.reads_values and data.values == "none":
            raise ValueError(f"{type(self).__name__} histograms need the per-center values: encode with values "
                             "other than 'none'")
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

    reads_values = False
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

    def best_split(self, hist: np.ndarray | MistakeCounts, center_codes: np.ndarray, members: np.ndarray,
                   mapper: BinMapper) -> BinCut | None:
        """IMM at one node: the cut of fewest mistakes among those that part its centers
        (threshold or category set, with its missing side): ``cut_search.best_mistake_cut``."""
        return best_mistake_cut(hist, center_codes, members, mapper)


def _block_mistake_counts(part, tree_arrays, routing, slot, target, column, offset, widths, center_codes,
                          missing_bin, category_features, n_bins):
    return mistake_counts(
        part["codes"], part["labels"], *tree_arrays, *resume_nodes(part, routing), slot, target, column, offset,
        widths, center_codes, missing_bin, category_features, n_bins, kernel_threads(),
    )


class CompactMistakes(Criterion):
    """IMM below the root: the same mistakes from ``cut_search.MistakeCounts``, O(d B) numbers per
    histogram on numeric features instead of (d, B, m) (the per-center axis stays on category
    features only), so a node's cut search does not grow with its centers.

    Request: ``target`` (n_slots, k), the histogram a row of cluster j reaching slot s's leaf
    counts in (-1: none); ``column`` (n_slots, k), its column among that histogram's category
    counts (-1: not counted there); ``widths`` (n_histograms,), their columns; ``center_codes``
    (k, d) the centers' codes. A leaf may count some clusters in one histogram and others in
    another: IMM counts the mistakes of a cut apart, to take them off the parent's counts.
    """

    reads_values = False
    block = staticmethod(_block_mistake_counts)

    def pass_args(self, data, slot, target, column, widths, center_codes):
        mapper = data.mapper
        category_features = np.flatnonzero(mapper.is_category).astype(np.int64)
        widths = np.asarray(widths, dtype=np.int64)
        offset = np.zeros(widths.shape[0] + 1, dtype=np.int64)
        np.cumsum(data.n_bins * (4 * data.d + category_features.shape[0] * widths), out=offset[1:])
        return (slot, np.asarray(target, dtype=np.int64), np.asarray(column, dtype=np.int64), offset, widths,
                np.ascontiguousarray(center_codes, dtype=np.int64), mapper.missing_bin.astype(np.int64),
                category_features, data.n_bins)

    def unpack(self, data, reduced, args) -> list[MistakeCounts]:
        offset, widths, n_category = args[3], args[4], args[7].shape[0]
        planes = 4 * data.d * data.n_bins
        out = []
        for h in range(widths.shape[0]):
            flat = reduced[offset[h]:offset[h + 1]]
            out.append(MistakeCounts(flat[:planes].reshape(4, data.d, data.n_bins),
                                     flat[planes:].reshape(n_category, data.n_bins, int(widths[h]))))
        return out

    def best_split(self, hist: MistakeCounts, center_codes: np.ndarray, members: np.ndarray, mapper: BinMapper
                   ) -> BinCut | None:
        """As ``Mistakes.best_split``, from a node's ``MistakeCounts``."""
        return best_mistake_cut(hist, center_codes, members, mapper)


# --------------------------------------------------------------------------- ExKMC: surrogate cost
def _block_surrogate(part, tree_arrays, routing, slot, n_slots, n_bins, n_features):
    resume, remember = resume_nodes(part, routing)
    return over_value_chunks(part, lambda start, stop, dots: surrogate_histograms(
        part["codes"][start:stop], dots, part["labels"][start:stop], *tree_arrays, resume[start:stop], remember,
        slot, n_slots, n_bins, n_features, kernel_threads(),
    ), needed_rows(part, tree_arrays, resume, slot))


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
                   bulk_min_rows, missing_bin, sets):
    resume, remember = resume_nodes(part, routing)
    return over_value_chunks(part, lambda start, stop, dots: shallow_rows(
        part["codes"][start:stop], dots, tree_arrays, resume[start:stop], remember, slot, member_group, n_groups,
        center_span, n_bins, n_splits, bulk_min_rows, missing_bin, sets), needed_rows(part, tree_arrays, resume, slot),
        slots_centers(member_group))


def slots_centers(member_group: np.ndarray) -> np.ndarray:
    """The centers of a shallow pass's slots (a bool mask over k): the only values its kernels
    read (each row reads its own node's centers)."""
    return np.asarray((member_group[:, 0, :] >= 0).any(axis=0))


def shallow_rows(codes, dots, tree_arrays, resume, remember, slot, member_group, n_groups, center_span, n_bins,
                 n_splits, bulk_min_rows, missing_bin, sets):
    """``ShallowCost``'s histograms of some rows of a part (their codes, distances and resume nodes)."""
    from exclust.algorithms.histogram._shallow_cut import shallow_histograms

    cells, base = shallow_histograms(
        codes, dots, *tree_arrays, resume, remember, slot, member_group.shape[0], member_group, n_groups,
        center_span, n_bins, n_splits, kernel_threads(), bulk_min_rows, missing_bin,
    )
    if sets is None:
        return cells, base
    from exclust.algorithms.histogram._shallow_sets import set_histograms

    set_features, group, set_groups, masks, width = sets
    # The first kernel left every row's leaf in ``resume``: this one routes in no step.
    return cells, base, set_histograms(codes, dots, *tree_arrays, resume, remember, slot, member_group.shape[0],
                                       set_features, group, set_groups, masks, n_bins, width, kernel_threads())


class ShallowCost(Criterion):
    """ExShallow and ExGreedy: the cost ratio of a cut (distance to the nearest center on each
    side) plus ``depth_factor`` times the projected mean leaf depth (0: ExGreedy).

    Request: ``member_group``, ``n_groups``, ``center_span``, ``n_splits``, ``bulk_min_rows``
    (see ``_shallow_cut.shallow_histograms``) and ``sets``: None, or the category features'
    layout for ``_shallow_sets.set_histograms`` (features, groups per slot, group counts, masks,
    width). Histograms: per slot, (d, n_bins, n_splits, 2) summed distances to the nearest
    center left / right of each center split, (d, n_bins) row counts, the summed distance to
    the nearest of the slot's centers, and (with ``sets``) the category features' set
    histograms (None without). A part's slots of at least ``bulk_min_rows`` rows fill a
    feature's bulk bin by difference (see the kernel). Each feature's missing bin is priced on
    both sides of every cut; category features are cut by sets (``_shallow_sets``).
    """

    holds_distances = True
    block = staticmethod(_block_shallow)

    def __init__(self, depth_factor: float = 0.0, tie: float = 0.0) -> None:
        self.depth_factor = float(depth_factor)
        self.tie = float(tie)  # scores within it of the best are ties (``best_shallow_cut``)

    def pass_args(self, data, slot, member_group, n_groups, center_span, n_splits, bulk_min_rows=1 << 62,
                  sets=None):
        return (slot, member_group, n_groups, center_span, data.n_bins, n_splits, bulk_min_rows,
                data.mapper.missing_bin, sets)

    def unpack(self, data, reduced, args):
        cells, base = reduced[:2]
        n_splits = args[5]
        n_slots, d, n_bins, _ = cells.shape
        sums = np.cumsum(cells[..., 1:].reshape(n_slots, d, n_bins, n_splits, 2), axis=3)
        return sums, np.rint(cells[..., 0]).astype(np.int64), base, (reduced[2] if len(reduced) > 2 else None)

    def best_split(self, sums, counts, base, own_codes, bounded, missing_bin, set_cuts=()) -> BinCut | None:
        """The cut of one node (a ``BinCut`` with its missing side), None when its centers
        coincide: the depth-penalized cut among feasible ones (each side keeps as many rows as
        centers), else the least cost ratio among all that part the centers. Threshold cuts
        come from ``_shallow_cut.best_shallow_cut`` (``own_codes``: the node's centers' codes,
        equal on category features), set cuts from ``_shallow_sets.best_set_cut`` for each of
        ``set_cuts``: tuples (cells, feature, n_categories, member_codes, group, n_groups, masks)
        of its arguments; ties go to the lowest feature."""
        from exclust.algorithms.histogram._shallow_cut import best_shallow_cut
        from exclust.algorithms.histogram._shallow_sets import best_set_cut

        for factor, require_rows in ((self.depth_factor, True), (0.0, False)):
            f, b, score, side = best_shallow_cut(sums, counts, base, own_codes, bounded, factor, require_rows,
                                                 missing_bin, self.tie)
            best = BinCut(int(f), int(b), (), int(side), float(score)) if f >= 0 else None
            for cells, feature, n_categories, member_codes, group, n_groups, masks in set_cuts:
                found_set = best_set_cut(cells, feature, n_categories, member_codes, group, n_groups, masks, base,
                                         bounded, factor, require_rows)
                found = None if found_set is None else BinCut(feature, -1, found_set[1], found_set[2], found_set[0])
                if found is not None and (best is None or found.score < best.score
                                          or (found.score == best.score and found.feature < best.feature)):
                    best = found
            if best is not None:
                return best
        return None


# --------------------------------------------------------------------------- KDTree: median cuts
def _block_box_statistics(X, mapper, tree_arrays, slot, n_slots, n_bins):
    X = np.ascontiguousarray(X, dtype=np.float64)
    return box_statistics(X, mapper.transform(X), *tree_arrays, slot, n_slots, n_bins)


class MedianCut(Criterion):
    """KDTree: the highest-variance feature cut at its median. Its block reads raw row blocks
    (``map_reduce``), not kept parts: per slot, counts (d, B), sums (d,) and squares (d,) (of
    the values that are not NaN).

    Missing values and category features (issue 28), the KD-tree's way: a cut halves the node's
    rows, so the missing bin goes to the side that leaves the halves closest to equal (the
    imbalance is the cut's cost; ``cut_search.side_of_missing``, so on a tie, and with no
    missing rows, to the larger child). A numeric feature's variance is over its values; a
    category feature's is that of its one-hot columns summed, ``1 - sum_c p_c^2`` (the spread a
    k-means geometry gives it). A category feature is cut by a set: its categories ordered by
    rows (most first, then by code), the prefix whose rows come closest to half of the node's.
    """

    reads_values = False
    block = staticmethod(_block_box_statistics)

    def best_split(self, counts: np.ndarray, sums: np.ndarray, sq: np.ndarray, mapper: BinMapper | None = None
                   ) -> BinCut | None:
        """The cut of the highest-variance feature at its median, or None if no feature can be cut.

        Features whose values all share one bin cannot be cut; of the rest, the highest variance
        wins. The cut is the bin edge (or, on a category feature, the prefix of its categories
        by rows) whose left side holds the number of points closest to half (lower edge on
        ties), always with values on both sides; ``BinCut.score`` is the variance.
        """
        n = counts[0].sum()
        if n < 2:
            return None
        if mapper is None or not (mapper.is_category.any() or mapper.missing.any()):
            # Numbers, complete rows: every feature's values fill every code.
            var = sq / n - (sums / n) ** 2
            cuttable = (counts > 0).sum(axis=1) >= 2
            if not cuttable.any():
                return None
            f = int(np.argmax(np.where(cuttable, var, -np.inf)))
            return self._halving(f, counts[f], 0, n, float(var[f]))
        values = [counts[f, : int(nb)] for f, nb in enumerate(mapper.n_bins.tolist())]
        n_values = np.array([v.sum() for v in values])
        safe = np.maximum(n_values, 1)
        shares = [v / safe[f] for f, v in enumerate(values)]
        var = np.where(mapper.is_category, [1.0 - (p * p).sum() for p in shares], sq / safe - (sums / safe) ** 2)
        cuttable = np.array([(v > 0).sum() >= 2 for v in values])
        if not cuttable.any():
            return None
        f = int(np.argmax(np.where(cuttable, var, -np.inf)))
        missing = int(counts[f, mapper.missing_bin[f]]) if mapper.missing[f] else 0
        if not mapper.is_category[f]:
            return self._halving(f, values[f], missing, n, float(var[f]))
        order = np.lexsort((np.arange(values[f].size), -values[f]))
        order = order[values[f][order] > 0]  # the categories holding rows, most first
        return self._halving(f, values[f][order], missing, n, float(var[f]), order, values[f].size)

    @staticmethod
    def _halving(f: int, values: np.ndarray, missing: int, n: int, var: float, order=None, n_categories: int = 0
                 ) -> BinCut:
        """The cut of ``values`` (rows per bin, or per category of ``order`` out of
        ``n_categories``) whose left side is closest to half of ``n``, the ``missing`` rows on
        the side that balances best."""
        cum = np.cumsum(values)
        n_values = cum[-1]
        ok = (cum > 0) & (cum < n_values)
        off_left, off_right = np.abs(2 * (cum + missing) - n), np.abs(2 * cum - n)
        side = side_of_missing(off_left.astype(np.float64), off_right.astype(np.float64), cum.astype(np.float64),
                               (n_values - cum).astype(np.float64))
        off = np.where(side == MISSING_LEFT, off_left, off_right)
        b = int(np.argmin(np.where(ok, off, np.iinfo(np.int64).max)))
        if n_categories == 0:
            return BinCut(f, b, (), int(side[b]), var)
        left = np.isin(np.arange(n_categories), order[: b + 1])
        if 2 * cum[b] > n_values:  # categories without rows here go with the larger child
            left = ~np.isin(np.arange(n_categories), order[b + 1:])
        return BinCut(f, -1, tuple(np.flatnonzero(left).tolist()), int(side[b]), var)
