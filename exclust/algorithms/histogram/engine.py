"""The split-search engine of IMM, ExKMC and ExShallow: encoded partitions and histogram passes (the tree on
codes: code_tree.py).

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

The criterion's prefix sums over the bins then score every candidate cut of every feature at once, and
(IMM, ExKMC) a sibling's histogram is its parent's minus the one computed (see the algorithms).
ExShallow's histograms (``_shallow_cut.py``) depend on each node's own centers, so every
node that splits is computed.
``EncodedData.n_passes`` counts every pass over the rows.
"""
from __future__ import annotations

import logging
from typing import Any

import numpy as np

from exclust.algorithms.histogram.binning import BinMapper
from exclust.algorithms.histogram.code_tree import CodeTree
from exclust.algorithms.histogram.criteria import Criterion
from exclust.algorithms.histogram.kept_values import HELD_VALUES_SHARE, encode_in_chunks, encode_rows, values_recipe
from exclust.dataplane.parts import align, is_lazy, label_dtype
from exclust.dataplane.residency import held_array, keep_parts, memory_where, reduce_kept, share_that_fits
from exclust.errors import InputError
from exclust.sources.dataset import Dataset

logger = logging.getLogger("exclust")

# --------------------------------------------------------------------------- encoded partitions
METRICS = (None, "sqeuclidean", "l1")
VALUES = ("held", "recomputed", "none")  # what a kept part keeps of its per-center values


def _encode_block(block: np.ndarray, mapper: BinMapper, centers: np.ndarray, dots_dtype, metric=None,
                  values: str = "held", held_share: float = 1.0) -> dict:
    """Pass 2 on one partition: codes, nearest-center labels, sum of ||z||^2 and, per center,
    the dot products (``metric`` None) or the distances (under key "dots" either way).

    ``block`` holds the tree's features X, then, when the clustering space is another one, its
    columns Z (``EncodedData``'s ``Z``): the codes come from X, the per-center values from Z.
    ``values`` "recomputed": the part holds the values of its first ``held_share`` of rows
    (``"dots"``) and, for the rest, keeps the clustering space's rows and how their values are
    made (``kept_values.values_recipe``), which ``kept_values.value_chunks`` recomputes in each
    pass; "none": neither (a pass that reads values is refused).
    """
    block = np.ascontiguousarray(block, dtype=np.float64)
    n, k = block.shape[0], centers.shape[0]
    # Held for the whole build: plain mappings (``held_array``), not numpy's huge-page memory.
    codes = held_array((n, mapper.n_features), mapper.code_dtype)
    labels = held_array((n,), label_dtype(k))
    part: dict = {"codes": codes, "labels": labels, "n": n}
    held = n if values == "held" else int(held_share * n) if values == "recomputed" else 0
    sq, unbinned = 0.0, np.zeros(mapper.n_features, dtype=np.int64)
    if held:
        part["dots"] = held_array((held, k), dots_dtype)
        sq, unbinned = encode_rows(block[:held], mapper, centers, metric, codes[:held], part["dots"], labels[:held])
    if held < n:
        rest_sq, rest_unbinned = encode_in_chunks(block[held:], mapper, centers, dots_dtype, metric, codes[held:],
                                                  labels[held:])
        sq, unbinned = sq + rest_sq, unbinned + rest_unbinned
        if values == "recomputed":
            part.update(values_recipe(block[held:], mapper, centers, dots_dtype, metric))
    part["sq"], part["unbinned"] = float(sq), unbinned
    return part


def _block_summary(part, k):
    """(sum of ||z||^2, rows per reference cluster, NaN per feature without a missing bin) of
    one encoded partition."""
    return np.asarray([part["sq"]]), np.bincount(part["labels"], minlength=k).astype(np.int64), part["unbinned"]


def with_clustering_space(X, Z, what: str = "Z"):
    """X and the clustering space's columns Z side by side as one matrix of X's kind and row
    parts (Z None: X itself); Z must be finite (the distances to the centers need complete rows)."""
    if Z is None:
        return X
    Z = align(Z, X, what)
    if Z.ndim != 2:
        raise InputError(f"{what} must be a matrix, one row per row of X, got shape {Z.shape}")
    if is_lazy(X):
        import dask.array as da

        return da.concatenate([X.astype(np.float64), Z.astype(np.float64)], axis=1)
    Z = np.asarray(Z, dtype=np.float64)
    if not np.isfinite(Z).all():
        raise InputError(f"{what} holds NaN or infinite values; the clustering space needs complete rows")
    return np.concatenate([np.asarray(X, dtype=np.float64), Z], axis=1)


class EncodedData:
    """The per-row state of IMM / ExKMC / ExShallow (codes, labels, per-center values) kept where
    it was made.

    For numpy input the state is one in-process block; for a Dask array it is one persisted
    block per partition on the workers. Every method that reads the rows is one pass, counted
    in ``n_passes``. ``metric`` None keeps the dot products ``<x, mu_j>`` (the k-means surrogate
    of ExKMC); "sqeuclidean" or "l1" keeps each row's distance to each center instead, and the
    labels are the nearest centers under that distance (``holds_distances``).

    ``Z`` (default None: X itself): the clustering space, row-aligned with X, in which the
    centers live; the codes come from X, every per-center value from Z. Without Z, X must be
    complete (InputError otherwise). A feature whose NaN the binning sample missed gets its
    missing bin here, at the price of a second encoding pass.

    ``values`` (default None: "held" when they take at most ``HELD_VALUES_SHARE`` of the memory
    they would live in, else "recomputed" with what fits of that share beside the rows held):
    "held" keeps the (rows, k) per-center values; "recomputed" keeps those of the first
    ``held_share`` of each part's rows (0 when asked for by name) and, for the others, the rows,
    whose values every pass that reads them makes again (``kept_values.value_chunks``: the same
    values, d multiply-adds per center and row a pass); "none" keeps neither (IMM: it reads only
    codes and labels).
    """

    def __init__(self, data, mapper: BinMapper, centers: np.ndarray, *, n_passes: int = 0, metric=None,
                 Z=None, values: str | None = None) -> None:
        if metric not in METRICS:
            raise ValueError(f"metric must be one of {METRICS}, got {metric!r}")
        self.metric = metric
        self.mapper = mapper
        self.centers = np.ascontiguousarray(centers, dtype=np.float64)
        self.centers_in_feature_space = Z is None  # else the centers are points of Z's space
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
        block = with_clustering_space(X, Z)
        self.held_share = 0.0
        if values is None:
            values_bytes = int(X.shape[0]) * self.k * np.dtype(dots_dtype).itemsize
            memory = memory_where(data.distributed)
            self.held_share = share_that_fits(values_bytes, memory, HELD_VALUES_SHARE)
            if self.held_share < 1.0:
                # Partly held: the rows the others are recomputed from take their place in that
                # share first (at 10M x 20 on two 3.5 GiB workers they fill it nearly alone, and
                # values held beside them pushed the workers past Dask's spill threshold).
                self.held_share = share_that_fits(values_bytes, memory, HELD_VALUES_SHARE, int(block.nbytes))
            values = "held" if self.held_share >= 1.0 else "recomputed"
            if values == "recomputed":  # a fit that will be slower than it could be: say why, and what helps
                logger.info("the per-center values (%.1f GB for %d centers) exceed %.0f%% of the %s memory: "
                            "%.0f%% of the rows' values held, the others recomputed in every pass (slower; more "
                            "memory holds them)", values_bytes / 1e9, self.k, 100 * HELD_VALUES_SHARE,
                            "workers'" if data.distributed else "free", 100 * self.held_share)
        if values not in VALUES:
            raise ValueError(f"values must be one of {VALUES} or None, got {values!r}")
        self.values = values
        self._kept = keep_parts(_encode_block, block, mapper, self.centers, dots_dtype, metric, self.values,
                                self.held_share, summarize=_block_summary, summarize_args=(self.k,))
        self.n_passes += 1
        sq, self.label_counts, unbinned = self._kept.summary
        if unbinned.any():
            self._kept.release()
            self.mapper = mapper = mapper.with_missing(np.flatnonzero(unbinned))
            self.n_bins = int(mapper.max_n_bins)
            self._kept = keep_parts(_encode_block, block, mapper, self.centers, dots_dtype, metric, self.values,
                                    self.held_share, summarize=_block_summary, summarize_args=(self.k,))
            self.n_passes += 1
            sq, self.label_counts, _ = self._kept.summary
        self.distributed = self._kept.distributed
        self.n_rows = int(X.shape[0])
        self.sum_sq = float(sq[0])
        if not np.isfinite(self.sum_sq):
            self._kept.release()
            raise InputError(
                "Z holds NaN or infinite values; the clustering space needs complete rows" if Z is not None else
                "the data hold missing or infinite values: the distances to the centers need complete rows; pass Z, "
                "the columns the clustering was fitted on (cluster_on)")

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
        (see ``criteria.Criterion.pass_args``). The tree's cuts go to the kernels as thresholds
        where those route every code as the tree does, else as a table of codes per node
        (``CodeTree.arrays``)."""
        criterion.check(self)
        self.n_passes += 1
        args = criterion.pass_args(self, slot, *request)
        reduced = reduce_kept(self._kept, criterion.block, tree.arrays(self.mapper), tree.routing(), *args)
        return criterion.unpack(self, reduced, args)

    def release(self) -> None:
        """Forget the per-row state (frees worker memory once the tree is built)."""
        self._kept.release()
