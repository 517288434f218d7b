"""The split-search engine of IMM, ExKMC and ExShallow: encoded partitions, histograms, prefix-sum scoring.

Data flow (the design's "How data flows", ../shared/DESIGN.md outside the repository):

1. bin edges per feature from a sample (binning.py),
2. one pass that turns each partition into bin codes, reference labels and the dot products
   ``<x, mu_j>`` with the reference centers (or, with a ``metric``, the distance of every row to
   every center: squared Euclidean for ExShallow, l1 for the k-medians objective); the result
   stays where it was computed (in this process for numpy input, persisted on the workers for
   Dask input),
3. per round, one pass that routes every row through the current tree *by its codes* and sums,
   per requested leaf, a histogram over (feature, bin); partitions' histograms are added in a
   tree reduction, so only histograms reach the driver.

Prefix sums over the bins then score every candidate threshold of every feature at once, and
(IMM, ExKMC) a sibling's histogram is its parent's minus the one computed (see the algorithms).
ExShallow's histograms (``_shallow_cut.py``) depend on each node's own centers, so every
node that splits is computed.
``EncodedData.n_passes`` counts every pass over the rows.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from exclust.algorithms.histogram._bin_coding import encode_and_measure, encode_and_project
from exclust.algorithms.histogram._code_histograms import mistake_histograms, surrogate_histograms
from exclust.algorithms.histogram.binning import BinMapper
from exclust.dataplane.parts import kernel_threads, label_dtype
from exclust.dataplane.residency import keep_parts, reduce_kept
from exclust.sources.dataset import Dataset
from exclust.tree import LEAF, ONE_SIDED, ThresholdTree


# --------------------------------------------------------------------------- the tree on codes
@dataclass
class CodeTree:
    """A tree being grown on bin codes: node ``i`` sends a row left when ``code[feature] <= split_bin``."""

    feature: list[int] = field(default_factory=lambda: [-1])
    split_bin: list[int] = field(default_factory=lambda: [-1])  # -1: leaf
    left: list[int] = field(default_factory=lambda: [-1])
    right: list[int] = field(default_factory=lambda: [-1])
    value: list[int] = field(default_factory=lambda: [-1])  # reference center of a leaf
    # Identity of this growing tree, under which kept parts remember each row's leaf between
    # passes (see ``_resume_nodes``); ``remember`` False for a trial copy, which only reads it.
    lineage: int = field(default_factory=lambda: int.from_bytes(os.urandom(8), "little") >> 1)
    remember: bool = True
    lineage_nodes: int | None = None  # a trial copy: how many nodes its lineage had when copied

    @property
    def n_nodes(self) -> int:
        return len(self.feature)

    def leaves(self) -> list[int]:
        return [i for i, b in enumerate(self.split_bin) if b < 0]

    def split(self, node: int, feature: int, split_bin: int) -> tuple[int, int]:
        """Replace leaf ``node`` by the cut ``code[feature] <= split_bin``; returns (left, right)."""
        if self.split_bin[node] >= 0:
            # Routing memory relies on a tree that only grows: a cut is never replaced.
            raise ValueError(f"node {node} is already split")
        kids = []
        for _ in range(2):
            self.feature.append(-1)
            self.split_bin.append(-1)
            self.left.append(-1)
            self.right.append(-1)
            self.value.append(-1)
            kids.append(self.n_nodes - 1)
        self.feature[node], self.split_bin[node] = int(feature), int(split_bin)
        self.left[node], self.right[node] = kids
        return kids[0], kids[1]

    def trial_copy(self) -> CodeTree:
        """A copy to split further on trial: same node ids and lineage, so its passes resume
        from the rows' remembered leaves, but it writes no memory of its own."""
        return CodeTree(list(self.feature), list(self.split_bin), list(self.left), list(self.right), list(self.value),
                        lineage=self.lineage, remember=False, lineage_nodes=self.n_nodes)

    def routing(self) -> tuple[int, bool, int]:
        """(lineage, remember, nodes of the lineage this tree knows): how the kernels resume
        and record each row's routing (``_resume_nodes``)."""
        known = self.n_nodes if self.lineage_nodes is None else self.lineage_nodes
        return self.lineage, self.remember, known

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(feature, split_bin, left, right) as int64 arrays for the kernels."""
        return (
            np.asarray(self.feature, dtype=np.int64),
            np.asarray(self.split_bin, dtype=np.int64),
            np.asarray(self.left, dtype=np.int64),
            np.asarray(self.right, dtype=np.int64),
        )

    def route(self, codes: np.ndarray) -> np.ndarray:
        """Leaf node of every row of a code block."""
        from exclust.algorithms.histogram._code_histograms import route_all_codes

        return route_all_codes(np.ascontiguousarray(codes), *self.arrays())

    def to_threshold_tree(
        self,
        mapper: BinMapper,
        n_clusters: int,
        feature_names=None,
        meta: dict[str, Any] | None = None,
    ) -> ThresholdTree:
        """The same tree with real-valued thresholds (bin edges); node ids are kept, so a greedy
        algorithm's split order names nodes of both trees (``ThresholdTree.prune`` gives its prefixes)."""
        feature, split_bin, left, right = self.arrays()
        split = split_bin >= 0
        threshold = [mapper.threshold(f, b) if b >= 0 else np.nan for f,
                     b in zip(feature.tolist(), split_bin.tolist(), strict=True)]
        return ThresholdTree(
            np.where(split, ONE_SIDED, LEAF), np.where(split, feature, -1), threshold,
            np.where(split, left, -1), np.where(split, right, -1),
            np.where(split, -1, np.asarray(self.value, dtype=np.int64)),  # a leaf's center; -1 on cuts
            n_features=mapper.n_features, feature_names=feature_names, n_clusters=n_clusters, meta=meta,
        )


# --------------------------------------------------------------------------- encoded partitions
METRICS = (None, "sqeuclidean", "l1")


def _encode_block(X: np.ndarray, mapper: BinMapper, centers: np.ndarray, dots_dtype, metric=None) -> dict:
    """Pass 2 on one partition: codes, nearest-center labels, sum of ||x||^2 and, per center,
    the dot products (``metric`` None) or the distances (under key "dots" either way)."""
    X = np.ascontiguousarray(X, dtype=np.float64)
    n, k = X.shape[0], centers.shape[0]
    codes = np.empty(X.shape, dtype=mapper.code_dtype)
    dots = np.empty((n, k), dtype=dots_dtype)
    labels = np.empty(n, dtype=label_dtype(k))
    if metric is None:
        sq = encode_and_project(
            X, *mapper.grid(), np.ascontiguousarray(centers.T), np.einsum("ij,ij->i", centers, centers),
            codes, dots, labels,
        )
    else:
        sq = encode_and_measure(X, *mapper.grid(), centers, metric == "l1", codes, dots, labels)
    return {"codes": codes, "labels": labels, "dots": dots, "sq": float(sq), "n": n}


def _resume_nodes(part: dict, routing: tuple[int, bool, int]) -> tuple[np.ndarray, bool]:
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


def _block_mistakes(part, tree_arrays, routing, slot, member_pos, offset, n_bins):
    return mistake_histograms(
        part["codes"], part["labels"], *tree_arrays, *_resume_nodes(part, routing), slot, member_pos, offset, n_bins,
        kernel_threads(),
    )


def _block_surrogate(part, tree_arrays, routing, slot, n_slots, n_bins):
    return surrogate_histograms(
        part["codes"], part["dots"], part["labels"], *tree_arrays, *_resume_nodes(part, routing), slot, n_slots,
        n_bins, kernel_threads(),
    )


def _block_shallow(part, tree_arrays, routing, slot, member_group, n_groups, center_span, n_bins, n_splits,
                   bulk_min_rows):
    from exclust.algorithms.histogram._shallow_cut import shallow_histograms

    return shallow_histograms(
        part["codes"], part["dots"], *tree_arrays, *_resume_nodes(part, routing), slot, member_group.shape[0],
        member_group, n_groups, center_span, n_bins, n_splits, kernel_threads(), bulk_min_rows,
    )


def _block_summary(part, k):
    """(sum of ||x||^2, rows per reference cluster) of one encoded partition."""
    return np.asarray([part["sq"]]), np.bincount(part["labels"], minlength=k).astype(np.int64)


class EncodedData:
    """The per-row state of IMM / ExKMC / ExShallow (codes, labels, per-center values) kept where
    it was made.

    For numpy input the state is one in-process block; for a Dask array it is one persisted
    block per partition on the workers. Every method that reads the rows is one pass, counted
    in ``n_passes``. ``metric`` None keeps the dot products ``<x, mu_j>`` (the k-means surrogate
    of ExKMC); "sqeuclidean" or "l1" keeps each row's distance to each center instead, and the
    labels are the nearest centers under that distance (``holds_distances``).
    """

    def __init__(self, data, mapper: BinMapper, centers: np.ndarray, *, n_passes: int = 0, metric=None) -> None:
        if metric not in METRICS:
            raise ValueError(f"metric must be one of {METRICS}, got {metric!r}")
        self.metric = metric
        self.mapper = mapper
        self.centers = np.ascontiguousarray(centers, dtype=np.float64)
        self.k = int(self.centers.shape[0])
        self.d = int(mapper.n_features)
        self.n_bins = int(mapper.max_n_bins)
        self.n_passes = n_passes
        # ``data``: a Dataset, or a validated matrix (taken as one as it is: no pass). Where the
        # rows live was decided when they entered (``Dataset.distributed``). On the workers the
        # dot products (or distances) are kept as float32 to halve their memory; every sum over
        # them is accumulated in float64.
        data = data if isinstance(data, Dataset) else Dataset(data, [])
        X = data.X
        dots_dtype = np.float32 if data.distributed else np.float64
        self._kept = keep_parts(_encode_block, X, mapper, self.centers, dots_dtype, metric,
                                summarize=_block_summary, summarize_args=(self.k,))
        self.distributed = self._kept.distributed
        self.n_passes += 1
        self.n_rows = int(X.shape[0])
        sq, self.label_counts = self._kept.summary
        self.sum_sq = float(sq[0])

    @property
    def holds_distances(self) -> bool:
        """Whether the per-center values are distances (summed as costs) rather than dot products."""
        return self.metric is not None

    @property
    def center_sq(self) -> np.ndarray | None:
        """||mu_j||^2 for the dot-product form of the surrogate cost; None when distances are held."""
        return None if self.holds_distances else np.einsum("ij,ij->i", self.centers, self.centers)

    @property
    def cost_offset(self) -> float:
        """What the scored costs leave out: the sum of ||x||^2 with dot products, nothing with distances."""
        return 0.0 if self.holds_distances else self.sum_sq

    def _reduce(self, fn, *args):
        return reduce_kept(self._kept, fn, *args)

    def mistake_histograms(self, tree: CodeTree, slot: np.ndarray, center_ok: np.ndarray) -> list[np.ndarray]:
        """IMM histograms: per slot s, (d, n_bins, m_s) counts of counted rows per reference
        cluster, one column per cluster counted there (``center_ok[s]``), in cluster order."""
        self.n_passes += 1
        center_ok = np.asarray(center_ok, dtype=np.bool_)
        n_slots = int(center_ok.shape[0])
        widths = center_ok.sum(axis=1).astype(np.int64)
        member_pos = np.where(center_ok, np.cumsum(center_ok, axis=1) - 1, -1).astype(np.int64)
        offset = np.zeros(n_slots + 1, dtype=np.int64)
        np.cumsum(widths * (self.d * self.n_bins), out=offset[1:])
        flat = self._reduce(_block_mistakes, tree.arrays(), tree.routing(), slot, member_pos, offset, self.n_bins)
        return [flat[offset[s]:offset[s + 1]].reshape(self.d, self.n_bins, int(widths[s])) for s in range(n_slots)]

    def surrogate_histograms(self, tree: CodeTree, slot: np.ndarray, n_slots: int):
        """ExKMC histograms: (n_slots, d, n_bins, k + 1) count and sums of <x, mu_j>, and
        (n_slots, d, n_bins, k) rows per reference cluster."""
        self.n_passes += 1
        return self._reduce(_block_surrogate, tree.arrays(), tree.routing(), slot, n_slots, self.n_bins)

    def shallow_histograms(self, tree: CodeTree, slot: np.ndarray, member_group: np.ndarray,
                           n_groups: np.ndarray, center_span: np.ndarray, n_splits: int,
                           bulk_min_rows: int = 1 << 62):
        """ExShallow histograms (needs distances): per slot, (d, n_bins, n_splits, 2) summed
        distances to the nearest center left / right of each center split, (d, n_bins) row
        counts, and the summed distance to the nearest of the slot's centers. A part's slots of
        at least ``bulk_min_rows`` rows fill a feature's bulk bin by difference (see the kernel)."""
        if not self.holds_distances:
            raise ValueError("ExShallow histograms need distances: encode with a metric")
        self.n_passes += 1
        cells, base = self._reduce(
            _block_shallow, tree.arrays(), tree.routing(), slot, member_group, n_groups, center_span, self.n_bins,
            n_splits, bulk_min_rows,
        )
        n_slots, d, n_bins, _ = cells.shape
        sums = np.cumsum(cells[..., 1:].reshape(n_slots, d, n_bins, n_splits, 2), axis=3)
        return sums, np.rint(cells[..., 0]).astype(np.int64), base

    def release(self) -> None:
        """Forget the per-row state (frees worker memory once the tree is built)."""
        self._kept.release()


# --------------------------------------------------------------------------- scoring
def best_mistake_split(hist: np.ndarray, center_codes: np.ndarray, members: np.ndarray, n_bins: np.ndarray):
    """IMM at one node: the (feature, bin, mistakes) of fewest mistakes among cuts that split its centers.

    ``hist`` (d, B, m) counts the node's alive rows per member center (column c: center
    ``members[c]``), ``center_codes`` (k, d) are the centers' own bin codes, ``members`` the
    node's centers in increasing order. A row is a mistake when it falls on the other side from
    its center. Ties go to the lowest feature, then the lowest bin (the order of a sorting
    implementation scanning features then thresholds).
    Returns None when no cut separates the centers (identical centers).
    """
    d, B, _ = hist.shape
    h = hist.astype(np.int64)  # (d, B, m)
    left = np.cumsum(h, axis=1)  # rows of each cluster at or below each bin
    total = left[:, -1:, :]
    cc = center_codes[members].T  # (d, m)
    bins = np.arange(B)
    center_left = cc[:, None, :] <= bins[None, :, None]  # (d, B, m): center goes left at cut b
    mistakes = np.where(center_left, total - left, left).sum(axis=2)  # (d, B)
    lo, hi = cc.min(axis=1), cc.max(axis=1)
    valid = (bins[None, :] >= lo[:, None]) & (bins[None, :] < hi[:, None])
    valid &= bins[None, :] < (n_bins[:, None] - 1)
    if not valid.any():
        return None
    mistakes = np.where(valid, mistakes, np.iinfo(np.int64).max)
    flat = int(np.argmin(mistakes))
    f, b = divmod(flat, B)
    return f, b, int(mistakes[f, b])


def side_costs(n: np.ndarray, dots: np.ndarray, center_sq: np.ndarray | None) -> np.ndarray:
    """Surrogate cost of a set of rows with each center: from sums of dot products, less the
    shared sum of ||x||^2; or, when ``center_sq`` is None, the sums are distances already."""
    if center_sq is None:
        return dots
    return n[..., None] * center_sq - 2.0 * dots


def best_surrogate_split(hist: np.ndarray, labels: np.ndarray, center_sq: np.ndarray | None, n_bins: np.ndarray,
                         tol: float = 0.0):
    """ExKMC at one leaf: (feature, bin, split cost, left center, right center), costs less sum ||x||^2.

    Both sides of every threshold come from prefix sums of the (d, B, k + 1) histogram; each
    side takes its cheapest center. Only cuts with rows on both sides count. Cuts within
    ``tol`` of the cheapest are equally good; among them the one that leaves the fewest rows on
    a side other than their own center's wins, then the one that carves off the largest side
    holding only its own center's rows (so a zero-gain cut still isolates the points that a
    later cut can fix), then the lowest feature and bin. ``labels`` (d, B, k) counts rows per
    reference cluster. Returns None when no cut leaves rows on both sides.
    """
    d, B, _ = hist.shape
    pref = np.cumsum(hist, axis=1)
    tot = pref[:, -1:, :]
    nl, dl = pref[..., 0], pref[..., 1:]
    nr, dr = tot[..., 0] - nl, tot[..., 1:] - dl
    cl = side_costs(nl, dl, center_sq)
    cr = side_costs(nr, dr, center_sq)
    jl, jr = cl.argmin(axis=2), cr.argmin(axis=2)
    cost = np.take_along_axis(cl, jl[..., None], 2)[..., 0] + np.take_along_axis(cr, jr[..., None], 2)[..., 0]
    bins = np.arange(B)
    # A cut must leave rows on both sides; of several edges giving the same partition (empty
    # bins between two values, e.g. an edge at a center coordinate) only the last one counts.
    next_bin_rows = np.concatenate([hist[:, 1:, 0], np.zeros((d, 1))], axis=1)
    valid = (nl > 0.5) & (nr > 0.5) & (bins[None, :] < (n_bins[:, None] - 1)) & (next_bin_rows > 0.5)
    if not valid.any():
        return None
    cost = np.where(valid, cost, np.inf)
    near = cost <= cost.min() + tol
    lab_l = np.cumsum(labels, axis=1)
    lab_r = lab_l[:, -1:, :] - lab_l
    own_l = np.take_along_axis(lab_l, jl[..., None], 2)[..., 0]
    own_r = np.take_along_axis(lab_r, jr[..., None], 2)[..., 0]
    wrong = (nl - own_l) + (nr - own_r)
    pure = np.maximum(np.where(own_l == nl, nl, 0.0), np.where(own_r == nr, nr, 0.0))
    wrong = np.where(near, wrong, np.inf)
    pure = np.where(near & (wrong <= wrong.min()), pure, -1.0)
    flat = int(np.argmax(pure))
    f, b = divmod(flat, B)
    return f, b, float(cost[f, b]), int(jl[f, b]), int(jr[f, b])


def leaf_surrogate_cost(hist: np.ndarray, center_sq: np.ndarray | None, center: int) -> float:
    """Surrogate cost (less sum ||x||^2 with dot products) of a whole leaf with a given center,
    from feature 0's bins."""
    tot = hist[0].sum(axis=0)
    return float(side_costs(np.asarray(tot[0]), tot[1:], center_sq)[center])


def cheapest_center(hist: np.ndarray, center_sq: np.ndarray | None) -> int:
    """The reference center of lowest surrogate cost for a leaf's rows."""
    tot = hist[0].sum(axis=0)
    return int(np.argmin(side_costs(np.asarray(tot[0]), tot[1:], center_sq)))
