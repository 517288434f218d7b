"""Bin edges per feature and the bin codes of every value (the first two passes of IMM / ExKMC).

A feature's edges ``e_0 < e_1 < ... < e_{m-1}`` cut the line into ``m + 1`` bins; the code of a
value ``v`` is the number of edges strictly below it. Hence ``code(v) <= b`` exactly when
``v <= e_b``: a split "code <= b" found on the codes is the real-valued cut ``x <= e_b``, and a
tree built on codes routes the raw data identically.

Edges of a feature:

- **exact** when the feature has at most ``max_bins`` distinct values: every midpoint between
  neighbouring distinct values, so every threshold a sorting algorithm could pick is available;
- **quantiles** otherwise, taken from an exact uniform sample of at most ``DEFAULT_SAMPLE_SIZE``
  (100 000) rows chosen by global row id (``imm.binning_sample``: one pass on Dask, none when
  the run already drew a larger sample, and the same edges for any chunking); a quarter of the
  edges go instead to the middles of the widest gaps between neighbouring sample values, since
  quantiles are sparsest exactly where clusters part. This is the one
  approximation of the engine: a threshold can only fall on one of ``max_bins - 1`` sample
  quantiles, so a split may sit up to one bin (about ``1 / max_bins`` of the points of the
  feature) away from the best exact split. On data larger than the sample, a feature whose
  sample shows few distinct values gets the midpoints of those values; values never sampled
  still get a code (the bin between their neighbouring edges), only no edge of their own.
- **extra edges** (the reference centers' coordinates, for IMM) are added to a feature's
  edges, so that cuts placed exactly at a center coordinate are candidates, as in IMM's
  sorting implementation. With ``between_extra`` (ExShallow), an exact feature's midpoints are
  taken between the distinct values *and* the extra values together, so a cut can also fall
  just below a center: every way a threshold can part the values and the centers is a bin.

Kinds of features (issue 28):

- a **category** feature (``categories``: feature -> its vocabulary, or its number of
  categories C) holds the codes 0.0 .. C-1 of the sources' encoding; its bins are those codes,
  one bin per category, with no edges, and a cut on it sends a set of codes left
  (``engine.CodeTree.split_set``);
- a **missing bin**, code ``n_bins[f]`` after the value bins, holds a feature's NaN (and, on
  a category feature, any value that is not one of its codes). Edges ignore NaN. A feature has
  one when its sample holds NaN, when the caller asks (``missing``), and always when it is a
  category; a feature without one adds no code, so data without NaN keep their codes, their
  edges and their code type.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from exclust.algorithms.histogram._bin_coding import encode_rows, search_tables

MAX_CODE_BINS = 65536  # uint16
DEFAULT_SAMPLE_SIZE = 100_000
MAX_GRID_CELLS = 1 << 16  # per feature; 128 KiB of uint16 cell bases


def check_max_bins(max_bins) -> int:
    """Validate ``max_bins`` (2 .. 65536: the codes are uint8 or uint16)."""
    if isinstance(max_bins, bool) or not isinstance(max_bins, (int, np.integer)):
        raise ValueError(f"max_bins must be an integer between 2 and {MAX_CODE_BINS}, got {max_bins!r}")
    if not 2 <= int(max_bins) <= MAX_CODE_BINS:
        raise ValueError(
            f"max_bins={max_bins} is outside [2, {MAX_CODE_BINS}]: bin codes are stored as uint8 "
            f"(up to 256 bins) or uint16 (up to {MAX_CODE_BINS}); pick a value in that range"
        )
    return int(max_bins)


def _midpoints(values: np.ndarray) -> np.ndarray:
    """Edges halfway between sorted distinct values, each strictly below its upper neighbour."""
    lo, hi = values[:-1], values[1:]
    mid = lo + (hi - lo) / 2.0
    # Between two adjacent floats the midpoint rounds onto the upper one; the lower one still separates.
    return np.where(mid < hi, mid, lo)


@dataclass
class BinMapper:
    """Per-feature bin edges (or categories) and missing bins; ``transform`` turns raw rows into bin codes.

    ``n_categories[f]``: C for a category feature (its codes are its bins), 0 for a numeric one
    (None: every feature numeric). ``missing[f]``: whether feature f has a missing bin (None:
    none has). A category feature always has one.
    """

    edges: list[np.ndarray]
    exact: np.ndarray  # bool per feature: edges are every midpoint of the distinct values
    n_categories: np.ndarray = None  # type: ignore[assignment]  # filled by __post_init__
    missing: np.ndarray = None  # type: ignore[assignment]
    _grid: tuple | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        d = len(self.edges)
        self.n_categories = (np.zeros(d, dtype=np.int64) if self.n_categories is None
                             else np.asarray(self.n_categories, dtype=np.int64))
        missing = np.zeros(d, dtype=bool) if self.missing is None else np.asarray(self.missing, dtype=bool)
        self.missing = missing | (self.n_categories > 0)

    @property
    def n_features(self) -> int:
        return len(self.edges)

    @property
    def is_category(self) -> np.ndarray:
        """Whether each feature is a category feature (bool per feature)."""
        return self.n_categories > 0

    @property
    def n_bins(self) -> np.ndarray:
        """Number of value bins of each feature: edges + 1, or its categories; the missing bin
        is not counted (``n_codes`` counts it)."""
        return np.where(self.is_category, self.n_categories, [e.size + 1 for e in self.edges]).astype(np.int64)

    @property
    def missing_bin(self) -> np.ndarray:
        """Code of each feature's missing bin (``n_bins[f]``), -1 for a feature without one."""
        return np.where(self.missing, self.n_bins, -1).astype(np.int64)

    @property
    def n_codes(self) -> np.ndarray:
        """Number of codes of each feature: its value bins and its missing bin."""
        return self.n_bins + self.missing

    @property
    def max_n_bins(self) -> int:
        """The histograms' width: the most codes of a feature (missing bin included)."""
        return int(self.n_codes.max())

    @property
    def code_dtype(self):
        return np.uint8 if self.max_n_bins <= 256 else np.uint16

    def padded_edges(self) -> tuple[np.ndarray, np.ndarray]:
        """Edges as one (d, max edges + 1) array padded with +inf (at least one +inf after each
        feature's edges, which the coding kernel reads), and the count per feature."""
        n_edges = np.array([e.size for e in self.edges], dtype=np.int64)
        pad = np.full((self.n_features, int(n_edges.max()) + 1), np.inf)
        for f, e in enumerate(self.edges):
            pad[f, : e.size] = e
        return pad, n_edges

    def search_grid(self, edges: np.ndarray, n_edges: np.ndarray, cells: int | None = None):
        """Per feature a uniform grid over its edges: origin, 1 / cell width, and per cell the
        number of edges in the cells before it (``search_tables``), exact for the kernel's own cell
        function, the finer grids of crowded cells, and the features' kinds (``n_categories``,
        ``missing_bin``). ``cells`` defaults to a power of two at
        least 16 times the edges of the largest feature (at least 1024), so that on data without
        heavy tails nearly every cell holds at most one edge (measured in bench/bench_coding.py:
        4096 cells for 255 edges, 164 KiB of uint16 cell bases at 20 features)."""
        if cells is None:
            cells = min(MAX_GRID_CELLS, max(1024, 1 << (16 * max(1, int(n_edges.max())) - 1).bit_length()))
        d = self.n_features
        origin = np.zeros(d)
        inv_width = np.zeros(d)
        for f, e in enumerate(self.edges):
            # With one edge or none (or a span too narrow or too wide for a finite 1 / width)
            # inv_width stays 0: every value shares cell 0, and that cell is searched.
            if e.size < 2:
                continue
            with np.errstate(over="ignore", divide="ignore"):
                scale = cells / (e[-1] - e[0])
            if np.isfinite(scale):
                origin[f], inv_width[f] = e[0], scale
        return (origin, inv_width, *search_tables(edges, n_edges, origin, inv_width, cells), self.n_categories,
                self.missing_bin)

    def grid(self) -> tuple:
        """The arrays the coding kernels take: padded edges, the search grid's origin and
        1 / cell width per feature, its exact tables (``search_tables``) and the features' kinds."""
        if self._grid is None:
            edges, n_edges = self.padded_edges()
            self._grid = (edges, *self.search_grid(edges, n_edges))
        return self._grid

    def transform(self, X: np.ndarray) -> np.ndarray:
        """Bin codes (uint8 or uint16) of a block of rows.

        A NaN of a feature without a missing bin has no code: ValueError naming the features.
        """
        X = np.ascontiguousarray(X, dtype=np.float64)
        codes = np.empty(X.shape, dtype=self.code_dtype)
        unbinned = encode_rows(X, *self.grid(), codes)
        if unbinned.any():
            raise ValueError(f"NaN in feature(s) {np.flatnonzero(unbinned).tolist()}, which have no missing bin")
        return codes

    def threshold(self, feature: int, split_bin: int) -> float:
        """The real-valued cut ``x[feature] <= t`` equivalent to ``code <= split_bin``."""
        if self.is_category[feature]:
            raise ValueError(f"feature {feature} is a category feature: its cuts are sets of codes, not thresholds")
        return float(self.edges[feature][split_bin])

    def with_missing(self, features) -> BinMapper:
        """The same bins with a missing bin added to ``features`` (found holding NaN that the
        sample missed)."""
        missing = self.missing.copy()
        missing[np.asarray(features, dtype=np.int64)] = True
        return BinMapper(self.edges, self.exact, self.n_categories, missing)


def category_counts(categories: Mapping[int, Any] | None, d: int) -> np.ndarray:
    """Categories per feature (0: numeric) from ``{feature: vocabulary or count}``."""
    counts = np.zeros(d, dtype=np.int64)
    for f, vocabulary in (categories or {}).items():
        c = int(vocabulary) if isinstance(vocabulary, (int, np.integer)) else len(vocabulary)
        if not 1 <= c <= MAX_CODE_BINS - 1:
            raise ValueError(f"feature {f} has {c} categories; a category feature has 1 to {MAX_CODE_BINS - 1}")
        counts[int(f)] = c
    return counts


def edges_from_sample(
    sample: np.ndarray,
    max_bins: int = 256,
    extra_edges: np.ndarray | None = None,
    between_extra: bool = False,
    categories: Mapping[int, Any] | None = None,
    missing: np.ndarray | None = None,
) -> BinMapper:
    """Bin edges per feature from a sample of rows (the whole data when it is small).

    ``extra_edges`` (m x d, e.g. reference centers) are added to each feature's edges. The
    quantile edges leave room for them so a feature rarely exceeds ``max_bins`` bins; an exact
    feature keeps all its midpoints and may exceed it by at most ``m`` (the code type grows
    from uint8 to uint16 only if some feature needs more than 256 bins).

    ``categories`` (default None: all numeric): feature -> its vocabulary (``Dataset.categories``)
    or its number of categories; those features get one bin per code and no edges
    (``extra_edges`` ignored there). ``missing`` (bool per feature, default None): features to
    give a missing bin even where the sample holds no NaN. NaN are left out of the edges.
    """
    max_bins = check_max_bins(max_bins)
    sample = np.asarray(sample, dtype=np.float64)
    d = sample.shape[1]
    n_categories = category_counts(categories, d)
    has_nan = np.isnan(sample).any(axis=0)
    wanted = has_nan if missing is None else has_nan | np.asarray(missing, dtype=bool)
    n_extra = 0 if extra_edges is None else int(np.asarray(extra_edges).shape[0])
    edges: list[np.ndarray] = []
    exact = np.zeros(d, dtype=bool)
    for f in range(d):
        if n_categories[f]:
            edges.append(np.empty(0))
            exact[f] = True
            continue
        col = np.sort(sample[:, f])
        if has_nan[f]:
            col = col[~np.isnan(col)]  # sorted last, dropped
        if col.size == 0:  # nothing but NaN: one value bin
            edges.append(np.empty(0))
            continue
        distinct = col[np.concatenate([[True], col[1:] != col[:-1]])]
        extra = np.unique(np.asarray(extra_edges, dtype=np.float64)[:, f]) if n_extra else np.empty(0)
        n_codes = distinct.size + (2 if between_extra else 1) * extra.size
        if distinct.size <= max_bins and n_codes <= MAX_CODE_BINS:
            e = _midpoints(np.union1d(distinct, extra) if between_extra else distinct)
            exact[f] = True
        else:
            budget = max(1, max_bins - 1 - extra.size)
            n_gaps = budget // 4
            n_quant = budget - n_gaps
            # Order statistics of the sorted column (no interpolation): every edge is a value.
            ranks = np.round(np.linspace(0.0, 1.0, n_quant + 2)[1:-1] * (col.size - 1)).astype(np.int64)
            e = np.unique(col[ranks])
            if n_gaps:
                # Quantiles are sparse exactly where points are: between clusters. The widest
                # gaps of the sample get an edge at their middle, so a cut can fall in them.
                gaps = np.diff(distinct)
                widest = np.argpartition(-gaps, min(n_gaps, gaps.size) - 1)[:n_gaps]
                e = np.union1d(e, _midpoints(distinct)[widest])
            # A quantile equal to the maximum would leave an empty top bin; it cannot split.
            e = e[e < distinct[-1]]
        if extra.size:
            e = np.union1d(e, extra)
        edges.append(np.ascontiguousarray(e, dtype=np.float64))
    return BinMapper(edges=edges, exact=exact, n_categories=n_categories, missing=wanted)
