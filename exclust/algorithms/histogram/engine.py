"""The split-search engine of IMM, ExKMC and ExShallow: encoded partitions, the tree on codes, histogram passes.

Data flow (the design's "How data flows", ../shared/DESIGN.md outside the repository):

1. bin edges per feature from a sample (binning.py),
2. one pass that turns each partition into bin codes, reference labels and the dot products
   ``<x, mu_j>`` with the reference centers (or, with a ``metric``, the distance of every row to
   every center: squared Euclidean for ExShallow, l1 for the k-medians objective); the result
   stays where it was computed (in this process for numpy input, persisted on the workers for
   Dask input),
3. per round, one pass (``EncodedData.histograms``) that routes every row through the current
   tree *by its codes* and sums, per requested leaf, a split criterion's histogram over
   (feature, bin) (criteria.py: what is summed and how cuts are scored); partitions'
   histograms are added in a tree reduction, so only histograms reach the driver.

The criterion's prefix sums over the bins then score every candidate threshold of every feature at once, and
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
from exclust.algorithms.histogram.binning import BinMapper
from exclust.algorithms.histogram.criteria import Criterion
from exclust.dataplane.parts import label_dtype
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
    # passes (see ``criteria.resume_nodes``); ``remember`` False for a trial copy, which only reads it.
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
        and record each row's routing (``criteria.resume_nodes``)."""
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

    def histograms(self, criterion: Criterion, tree: CodeTree, slot: np.ndarray, *request: Any) -> Any:
        """One pass: ``criterion``'s histograms of the rows routed through ``tree``, per slot
        (``slot[node]``, -1 for none), summed over the parts; ``request`` is the criterion's own
        (see ``criteria.Criterion.pass_args``)."""
        criterion.check(self)
        self.n_passes += 1
        args = criterion.pass_args(self, slot, *request)
        reduced = reduce_kept(self._kept, criterion.block, tree.arrays(), tree.routing(), *args)
        return criterion.unpack(self, reduced, args)

    def release(self) -> None:
        """Forget the per-row state (frees worker memory once the tree is built)."""
        self._kept.release()
