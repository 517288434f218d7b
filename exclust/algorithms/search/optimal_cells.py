"""The statistics the certified tree search reads: rows grouped by their vector of bin codes.

Every tree whose cuts sit at bin edges (``binning.BinMapper``: ``code <= b`` exactly when
``x <= edge b``) sends all rows of one code vector (a *cell*) to the same leaf, so a leaf is a
union of cells and its k-means cost (squared distances to its own mean) is exact from the cells'
counts, summed coordinates and summed squared norms:
``cost = sum ||x||^2 - ||sum x||^2 / count``. Those statistics are collected in one pass (numpy:
one call; Dask: per part, merged up the pass's tree), after which the search never reads a row.
Per coordinate, the summed squares are kept too: they give the exact within-cell scatter of each
coordinate, which the one-dimensional lower bound needs.

Rows are shifted by a common vector (the binning sample's mean) before summing, so that the
costs, differences of large sums, keep their digits. This module is shipped to the workers: it
imports numpy and the binning module only (no scikit-learn).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from exclust.algorithms.histogram.binning import BinMapper


@dataclass
class Cells:
    """Distinct code vectors (sorted) with per cell: ``stats`` (count, summed squared norm, summed
    coordinates: width d + 2) and ``squares`` (summed squared coordinates, d)."""

    codes: np.ndarray
    stats: np.ndarray
    squares: np.ndarray

    @property
    def n_cells(self) -> int:
        return int(self.codes.shape[0])

    @property
    def n_rows(self) -> int:
        return int(round(float(self.stats[:, 0].sum())))


def group_cells(codes: np.ndarray, stats: np.ndarray, squares: np.ndarray) -> Cells:
    """Rows (or partial cells) with equal code vectors summed into one cell each, sorted by code."""
    codes = np.ascontiguousarray(codes)
    if codes.shape[0] == 0:
        return Cells(codes, stats, squares)
    unique, inverse = np.unique(codes, axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    size = unique.shape[0]
    def summed(values: np.ndarray) -> np.ndarray:
        columns = [np.bincount(inverse, weights=values[:, w], minlength=size) for w in range(values.shape[1])]
        return np.ascontiguousarray(np.stack(columns, axis=1))

    return Cells(np.ascontiguousarray(unique), summed(stats), summed(squares))


def block_cells(X: np.ndarray, mapper: BinMapper, shift: np.ndarray) -> Cells:
    """One part's cells: its rows' codes and their statistics around ``shift``."""
    X = np.ascontiguousarray(X, dtype=np.float64)
    codes = mapper.transform(X)
    moved = X - shift
    squares = moved * moved
    stats = np.concatenate([np.ones((X.shape[0], 1)), squares.sum(axis=1, keepdims=True), moved], axis=1)
    return group_cells(codes, stats, squares)


def merge_cells(a: Cells, b: Cells) -> Cells:
    """Two parts' cells as one set (equal code vectors summed): the pass's combine."""
    return group_cells(np.concatenate([a.codes, b.codes]), np.concatenate([a.stats, b.stats]),
                       np.concatenate([a.squares, b.squares]))
