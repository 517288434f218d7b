"""Bin edges and codes, histograms and their subtraction, routing by codes vs by floats."""
from __future__ import annotations

import dask.array as da
import numpy as np
import pytest

from exclust.algorithms.histogram.binning import check_max_bins, edges_from_sample
from exclust.algorithms.histogram.criteria import Mistakes, SurrogateCost
from exclust.algorithms.histogram.engine import CodeTree, EncodedData


def test_exact_edges_are_midpoints_of_distinct_values():
    X = np.array([[1.0, 5.0], [3.0, 5.0], [2.0, 7.0], [3.0, 5.0]])
    m = edges_from_sample(X, max_bins=256)
    assert m.exact.all()
    np.testing.assert_allclose(m.edges[0], [1.5, 2.5])
    np.testing.assert_allclose(m.edges[1], [6.0])
    np.testing.assert_array_equal(m.transform(X), [[0, 0], [2, 0], [1, 1], [2, 0]])
    assert m.code_dtype == np.uint8


def test_code_at_most_b_iff_value_at_most_edge(rng):
    # Values equal to edges, between edges and outside them; quantile (inexact) binning.
    X = rng.normal(size=(3000, 3))
    m = edges_from_sample(X[:1000], max_bins=32)
    assert not m.exact.any() and (m.n_bins <= 32).all()
    probe = np.concatenate([X, np.stack([np.concatenate([e, [-1e9, 1e9]])[:5] for e in m.edges], 1)])
    codes = m.transform(probe).astype(np.int64)
    for f, e in enumerate(m.edges):
        for b in range(e.size):
            np.testing.assert_array_equal(codes[:, f] <= b, probe[:, f] <= e[b])


def test_extra_edges_and_uint16_codes(rng):
    X = rng.normal(size=(2000, 2))
    centers = np.array([[0.123456, 5.0], [-0.5, -0.25]])
    m = edges_from_sample(X, max_bins=300, extra_edges=centers)
    assert m.code_dtype == np.uint16 and m.max_n_bins <= 300 + 2
    for f in range(2):
        assert np.isin(centers[:, f], m.edges[f]).all()
    codes = m.transform(centers)
    for j in range(2):
        for f in range(2):
            assert m.edges[f][codes[j, f]] == centers[j, f]  # a center sits on its bin's upper edge


def _adversarial_values(rng, edges: np.ndarray, column: np.ndarray) -> np.ndarray:
    """Every edge, its float neighbours on both sides, values far outside, and the data."""
    big = np.finfo(np.float64).max
    outside = [np.inf, -np.inf, big, -big, 1e300, -1e300, 0.0, -0.0, 5e-324, -5e-324]
    near = [edges, np.nextafter(edges, np.inf), np.nextafter(edges, -np.inf)]
    return np.concatenate([column, *near, outside, rng.permutation(np.repeat(edges, 2))])


def _assert_codes_are_searchsorted(mapper, probes: list[np.ndarray], cells=None):
    from exclust.algorithms.histogram._bin_coding import encode_rows

    n = max(p.size for p in probes)
    X = np.stack([np.resize(p, n) for p in probes], axis=1)  # resize repeats: duplicates too
    if cells is None:
        codes = mapper.transform(X)
    else:
        edges, n_edges = mapper.padded_edges()
        codes = np.empty(X.shape, dtype=mapper.code_dtype)
        encode_rows(X, edges, *mapper.search_grid(edges, n_edges, cells=cells), codes)
    for f, e in enumerate(mapper.edges):
        expected = np.searchsorted(e, X[:, f], side="left")
        wrong = np.flatnonzero(codes[:, f] != expected)
        assert wrong.size == 0, (f, X[wrong[:3], f], codes[wrong[:3], f], expected[wrong[:3]])


def _grid_aligned_edges(rng, lo: float, hi: float, cells: int) -> np.ndarray:
    """255 edges on the kernel grid's cell boundaries (up to rounding) over [lo, hi], where a
    cell function that differs from the kernel's by one rounding puts an edge in the cell before."""
    steps = np.concatenate([[0, cells], rng.choice(np.arange(1, cells), 253, replace=False)])
    return np.unique(lo + steps * ((hi - lo) / cells))


@pytest.mark.parametrize("max_bins", [256, 3000])  # uint8 and uint16 codes
def test_codes_equal_searchsorted_for_adversarial_values(rng, max_bins):
    n = 20_000
    data = np.stack([
        rng.normal(size=n),
        rng.standard_cauchy(size=n),  # heavy tails: most edges crowd a few grid cells
        np.exp(rng.normal(scale=4.0, size=n)),  # log-normal: uneven, all positive
        rng.integers(-3, 4, size=n).astype(float),  # integer-valued: exact midpoint edges
        rng.integers(0, 2, size=n).astype(float),  # two values: one edge
        np.full(n, 7.25),  # all equal: no edge
        np.where(rng.random(n) < 0.5, rng.normal(size=n) * 1e-300, rng.normal(size=n) * 1e300),
        rng.normal(size=n) * 1e-310,  # subnormal values and edges
    ], axis=1)
    mapper = edges_from_sample(data[: n // 2], max_bins=max_bins)
    assert mapper.code_dtype == (np.uint8 if max_bins <= 256 else np.uint16)
    sizes = [e.size for e in mapper.edges]
    assert sizes[4] == 1 and sizes[5] == 0 and max(sizes) > 1
    probes = [_adversarial_values(rng, e, data[:, f]) for f, e in enumerate(mapper.edges)]
    _assert_codes_are_searchsorted(mapper, probes)
    for cells in (1, 3, 64):  # few cells: most values meet a cell of several edges (the search)
        _assert_codes_are_searchsorted(mapper, probes, cells=cells)


@pytest.mark.parametrize("level", ["cells", "sub-cells"])
def test_codes_equal_searchsorted_for_edges_on_grid_boundaries(rng, level):
    """Edges on the boundaries of the kernel's cells (the default 4096-cell grid of 255
    edges), or of the 8192 sub-cells of one crowded cell holding them all (a 1-cell grid)."""
    from exclust.algorithms.histogram.binning import BinMapper

    cells, grid_cells = (4096, None) if level == "cells" else (8192, 1)
    edges = [
        *(_grid_aligned_edges(rng, lo, hi, cells)
          for lo, hi in [(0.1, 0.7), (-3.3, 1e3 / 3), (1e-5, 1.0), (-7e9, -1.1)]),
        np.array([-1e308, 0.0, 1e308]),  # a span too wide for a finite 1 / width
        np.array([5e-324, 1e-323, 1.5e-323]),  # a span too narrow for it
        np.array([1.0, np.nextafter(1.0, 2.0)]),
    ]
    mapper = BinMapper(edges=edges, exact=np.zeros(len(edges), dtype=bool))
    padded, n_edges = mapper.padded_edges()
    grid = mapper.search_grid(padded, n_edges, cells=grid_cells)
    if level == "cells":
        assert grid[2].shape[1] == cells + 1  # the default grid: cell bases
        origin, inv_width = grid[0], grid[1]
    else:
        assert grid[4].size == len(edges) and (np.diff(grid[6])[:4] == cells + 1).all()  # all crowded
        origin, inv_width = grid[4], grid[5]
    # Values inside each gap (written so as not to overflow on the widest span) and around it.
    inside = [np.concatenate([e[:-1] + rng.random(e.size - 1) * (e[1:] / 2 - e[:-1] / 2),
                              rng.normal(size=100)]) for e in edges]
    probes = [_adversarial_values(rng, e, x) for e, x in zip(edges, inside, strict=True)]
    for f in range(4):  # the grid's own boundaries, where a cell function's rounding shows
        bounds = origin[f] + np.arange(cells + 1) / inv_width[f]
        probes[f] = np.concatenate([probes[f], bounds, np.nextafter(bounds, np.inf), np.nextafter(bounds, -np.inf)])
    _assert_codes_are_searchsorted(mapper, probes, cells=grid_cells)


@pytest.mark.parametrize("l1", [None, False, True])  # encode_and_project, then encode_and_measure
def test_encoding_passes_code_like_transform(rng, l1):
    from exclust.algorithms.histogram._bin_coding import encode_and_measure, encode_and_project

    X = np.concatenate([rng.standard_cauchy(size=(3000, 3)), rng.integers(0, 3, size=(3000, 1))], axis=1)
    mapper = edges_from_sample(X[:1000], max_bins=64)
    X = np.concatenate([X, np.stack([np.resize(np.nextafter(e, -np.inf), 50) for e in mapper.edges], 1)])
    centers = X[:5]
    codes = np.empty(X.shape, dtype=mapper.code_dtype)
    out, labels = np.empty((X.shape[0], 5)), np.empty(X.shape[0], dtype=np.uint8)
    if l1 is None:
        sq, unbinned = encode_and_project(X, *mapper.grid(), X, np.ascontiguousarray(centers.T), (centers**2).sum(1),
                                          codes, out, labels)
        np.testing.assert_allclose(out, X @ centers.T)
    else:
        sq, unbinned = encode_and_measure(X, *mapper.grid(), X, centers, l1, codes, out, labels)
        diff = X[:, None, :] - centers[None]
        np.testing.assert_allclose(out, np.abs(diff).sum(2) if l1 else (diff**2).sum(2))
    np.testing.assert_allclose(sq, (X**2).sum())
    assert not unbinned.any()
    np.testing.assert_array_equal(codes, mapper.transform(X))
    for f, e in enumerate(mapper.edges):
        np.testing.assert_array_equal(codes[:, f], np.searchsorted(e, X[:, f], side="left"))


@pytest.mark.parametrize("bad", [1, 0, 65537, 2.5, True, "256"])
def test_max_bins_outside_code_range_is_rejected(bad):
    with pytest.raises(ValueError, match="max_bins"):
        check_max_bins(bad)


def test_binning_sample_is_exact_uniform_and_independent_of_chunking(rng):
    from exclust.algorithms.histogram.base import binning_sample
    from exclust.sources.dataset import as_matrix

    X = rng.normal(size=(250_000, 3))
    whole, passes = binning_sample(as_matrix(X), random_state=4)
    assert passes == 0 and whole.shape == (100_000, 3)
    for chunks in (250_000, 90_001, 31_000):
        drawn, passes = binning_sample(as_matrix(da.from_array(X, chunks=(chunks, 3))), random_state=4)
        assert passes == 1
        np.testing.assert_array_equal(drawn, whole)


def _direct_histograms(codes, labels, dots, leaf_of_row, leaves, n_bins):
    d, k = codes.shape[1], dots.shape[1]
    out = np.zeros((len(leaves), d, n_bins, k + 1))
    for s, leaf in enumerate(leaves):
        rows = leaf_of_row == leaf
        for f in range(d):
            np.add.at(out[s, f, :, 0], codes[rows, f], 1.0)
            for j in range(k):
                np.add.at(out[s, f, :, 1 + j], codes[rows, f], dots[rows, j])
    return out


def test_histograms_match_direct_counting_and_sibling_subtraction(rng):
    X = rng.normal(size=(4000, 3))
    centers = rng.normal(size=(4, 3))
    m = edges_from_sample(X, max_bins=16, extra_edges=centers)
    data = EncodedData(X, m, centers)
    tree = CodeTree()
    left, right = tree.split(0, 1, 7)
    ll, lr = tree.split(left, 0, 3)
    codes = m.transform(X)
    dots = X @ centers.T
    labels = np.argmin((centers**2).sum(1) - 2 * dots, axis=1)
    leaf_of_row = tree.route(codes)
    slot = np.full(tree.n_nodes, -1)
    slot[[ll, lr, right]] = [0, 1, 2]
    hist, label_counts = data.histograms(SurrogateCost(), tree, slot, 3)
    expect = _direct_histograms(codes, labels, dots, leaf_of_row, [ll, lr, right], m.max_n_bins)
    np.testing.assert_allclose(hist, expect, rtol=1e-12, atol=1e-9)
    for s, leaf in enumerate([ll, lr, right]):
        np.testing.assert_array_equal(label_counts[s, 0].sum(0), np.bincount(labels[leaf_of_row == leaf], minlength=4))
    # The parent's histogram minus one child's is the other child's.
    slot_parent = np.full(tree.n_nodes, -1)
    whole = CodeTree()
    whole.split(0, 1, 7)
    slot_parent[1] = 0
    parent, _ = data.histograms(SurrogateCost(), whole, slot_parent[:3], 1)
    np.testing.assert_allclose(parent[0] - hist[0], hist[1], atol=1e-8)
    assert data.n_passes == 3
    assert data.label_counts.sum() == 4000 and np.isclose(data.sum_sq, (X**2).sum())


def test_mistake_histograms_drop_rows_of_absent_centers(rng):
    X = rng.normal(size=(1000, 2))
    centers = np.array([[-1.0, 0.0], [1.0, 0.0], [0.0, 2.0]])
    m = edges_from_sample(X, max_bins=64, extra_edges=centers)
    data = EncodedData(X, m, centers)
    tree = CodeTree()
    slot = np.array([0])
    ok = np.array([[True, False, True]])
    hist = data.histograms(Mistakes(), tree, slot, ok)[0]
    labels = data._kept.parts[0]["labels"]
    assert hist.shape == (2, data.n_bins, 2)  # one column per counted center: 0 and 2
    assert hist[0, :, 0].sum() == (labels == 0).sum() and hist[1, :, 1].sum() == (labels == 2).sum()
    assert hist[0].sum() == (labels != 1).sum()  # rows of the absent center 1 are left out


def test_a_criterion_refuses_encoded_data_it_cannot_read(rng):
    from exclust.algorithms.histogram.criteria import ShallowCost

    X = rng.normal(size=(200, 2))
    centers = np.array([[-1.0, 0.0], [1.0, 0.0]])
    m = edges_from_sample(X, max_bins=16, extra_edges=centers)
    data = EncodedData(X, m, centers)  # dot products, not distances
    with pytest.raises(ValueError, match="distances"):
        data.histograms(ShallowCost(), CodeTree(), np.array([0]), np.full((1, 2, 2), -1), np.ones((1, 2), np.int64),
                        np.zeros((1, 2, 2), np.int64), 1)
    assert data.n_passes == 1  # refused before the pass: only the encoding counted
