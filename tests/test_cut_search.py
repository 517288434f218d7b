"""Issue 28 in the histogram engine: missing bins, category codes, set cuts and learned missing
sides, each checked against a brute force over every partition on small random instances."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from exclust.algorithms.histogram.binning import BinMapper, edges_from_sample
from exclust.algorithms.histogram.code_tree import MISSING_LEFT, MISSING_RIGHT, CodeTree
from exclust.algorithms.histogram.criteria import SurrogateCost
from exclust.algorithms.histogram.cut_search import (
    best_mistake_cut,
    best_surrogate_cut,
    center_codes,
    side_costs,
)
from exclust.algorithms.histogram.engine import EncodedData
from exclust.errors import InputError


def _category_mapper(n_categories: int) -> BinMapper:
    return BinMapper([np.empty(0)], np.ones(1, dtype=bool), n_categories=np.array([n_categories]))


def _surrogate_hist(rng, C: int, k: int, distances: bool, empty: int = 1):
    """One category feature: (1, C + 1, k + 1) counts and sums (the missing bin last), labels (1, C + 1, k)."""
    counts = rng.integers(1, 20, size=C + 1).astype(np.float64)
    counts[rng.choice(C, size=min(empty, C - 2), replace=False)] = 0.0  # categories without rows
    sums = rng.normal(size=(C + 1, k)) * counts[:, None] + (rng.random((C + 1, k)) * 40 if distances else 0.0)
    sums[counts == 0] = 0.0
    labels = np.zeros((C + 1, k), dtype=np.int64)
    for q in range(C + 1):
        labels[q] = rng.multinomial(int(counts[q]), np.ones(k) / k)
    return np.concatenate([counts[:, None], sums], axis=1)[None], labels[None]


def _pair_cost(stats_left, stats_right, center_sq) -> float:
    cost = 0.0
    for s in (stats_left, stats_right):
        cost += float(side_costs(np.asarray(s[0]), s[1:], center_sq).min())
    return cost


def _cut_cost(hist, cut, mapper, center_sq) -> float:
    h = hist[cut.feature]
    codes = np.arange(h.shape[0])
    left = cut.goes_left(codes, mapper)
    return _pair_cost(h[left].sum(axis=0), h[~left].sum(axis=0), center_sq)


@pytest.mark.parametrize("distances", [False, True])
@pytest.mark.parametrize("seed", range(12))
def test_surrogate_set_cut_equals_brute_force_over_subsets(seed, distances):
    rng = np.random.default_rng(seed)
    C, k = int(rng.integers(2, 8)), int(rng.integers(2, 5))
    hist, labels = _surrogate_hist(rng, C, k, distances)
    center_sq = None if distances else rng.random(k) * 3
    mapper = _category_mapper(C)
    cut = best_surrogate_cut(hist, labels, center_sq, mapper)
    assert cut is not None and cut.is_set and cut.split_bin == -1
    h = hist[0]
    held = np.flatnonzero(h[:C, 0] > 0)
    best = np.inf
    for r in range(1, held.size):
        for subset in itertools.combinations(held.tolist(), r):
            left = np.isin(np.arange(C + 1), subset)
            for missing_left in (False, True):
                left[C] = missing_left
                best = min(best, _pair_cost(h[left].sum(0), h[~left].sum(0), center_sq))
    np.testing.assert_allclose(cut.score, best, rtol=1e-10, atol=1e-8)
    np.testing.assert_allclose(_cut_cost(hist, cut, mapper, center_sq), cut.score, rtol=1e-10, atol=1e-8)
    # Both sides hold rows of categories; the side's centers are its cheapest.
    left_rows = h[list(cut.left_codes), 0].sum()
    assert 0 < left_rows < h[:C, 0].sum()


def _mistakes(h, miss, cats, left_of_category, missing_left) -> int:
    center_left = left_of_category[cats]
    wrong = sum(int(h[q][center_left != left_of_category[q]].sum()) for q in range(h.shape[0]))
    return wrong + int(miss[center_left != missing_left].sum())


@pytest.mark.parametrize("seed", range(15))
def test_mistake_set_cut_equals_brute_force_over_subsets(seed):
    rng = np.random.default_rng(100 + seed)
    C, m = int(rng.integers(2, 7)), int(rng.integers(2, 6))
    cats = rng.integers(0, C, size=m)
    if np.unique(cats).size < 2:
        cats[:2] = [0, 1]
    hist = rng.integers(0, 15, size=(1, C + 1, m))
    mapper = _category_mapper(C)
    center_codes = cats[:, None]
    cut = best_mistake_cut(hist, center_codes, np.arange(m), mapper)
    assert cut is not None and cut.is_set
    h, miss = hist[0, :C], hist[0, C]
    best = None
    for sides in itertools.product((False, True), repeat=C):
        left = np.array(sides)
        if left[cats].all() or not left[cats].any():
            continue  # the centers must be parted
        for missing_left in (False, True):
            got = _mistakes(h, miss, cats, left, missing_left)
            best = got if best is None else min(best, got)
    assert cut.score == best
    left = np.isin(np.arange(C), cut.left_codes)
    assert _mistakes(h, miss, cats, left, cut.missing_side == MISSING_LEFT) == best
    assert left[cats].any() and not left[cats].all()


def test_mistakes_with_many_center_categories_take_fisher_prefixes():
    rng = np.random.default_rng(7)
    C, m = 14, 12
    cats = np.arange(m)  # twelve categories hold a center: beyond the exact search
    hist = rng.integers(0, 5, size=(1, C + 1, m))
    hist[0, cats, np.arange(m)] += 50  # each center's rows mostly in its own category
    cut = best_mistake_cut(hist, cats[:, None], np.arange(m), _category_mapper(C))
    assert cut is not None and cut.is_set
    left = np.isin(np.arange(C), cut.left_codes)
    assert left[cats].any() and not left[cats].all()
    assert cut.score == _mistakes(hist[0, :C], hist[0, C], cats, left, cut.missing_side == MISSING_LEFT)


def _numeric_mapper(n_bins: int, d: int = 1) -> BinMapper:
    return BinMapper([np.arange(n_bins - 1, dtype=float)] * d, np.ones(d, dtype=bool), missing=np.ones(d, dtype=bool))


@pytest.mark.parametrize("seed", range(10))
def test_missing_side_is_the_cheaper_one_for_threshold_cuts(seed):
    rng = np.random.default_rng(200 + seed)
    n_bins, k = int(rng.integers(3, 9)), int(rng.integers(2, 4))
    mapper = _numeric_mapper(n_bins)
    counts = rng.integers(1, 30, size=n_bins + 1).astype(float)
    sums = rng.random((n_bins + 1, k)) * counts[:, None] * 5
    hist = np.concatenate([counts[:, None], sums], 1)[None]
    labels = np.ones((1, n_bins + 1, k), dtype=np.int64)
    cut = best_surrogate_cut(hist, labels, None, mapper)
    h = hist[0]
    costs = {}
    for b in range(n_bins - 1):
        for missing_left in (False, True):
            left = np.arange(n_bins + 1) <= b
            left[n_bins] = missing_left
            costs[b, missing_left] = _pair_cost(h[left].sum(0), h[~left].sum(0), None)
    np.testing.assert_allclose(cut.score, min(costs.values()), rtol=1e-12)
    chosen, other = costs[cut.split_bin, cut.missing_side == MISSING_LEFT], costs[cut.split_bin,
                                                                                 cut.missing_side != MISSING_LEFT]
    assert chosen <= other
    # IMM: the missing rows go where they make fewer mistakes.
    counts3 = rng.integers(0, 20, size=(1, n_bins + 1, 2))
    codes = np.array([[0], [n_bins - 1]])
    mcut = best_mistake_cut(counts3, codes, np.arange(2), mapper)
    miss = counts3[0, n_bins]
    assert (mcut.missing_side == MISSING_LEFT) == (miss[1] < miss[0] or (
        miss[1] == miss[0] and counts3[0, : mcut.split_bin + 1].sum() > counts3[0, mcut.split_bin + 1: n_bins].sum()))


def test_no_missing_rows_send_the_missing_bin_to_the_larger_child():
    mapper = _numeric_mapper(4)
    counts = np.array([5.0, 1.0, 20.0, 30.0, 0.0])  # no missing row
    sums = np.stack([counts * 0.0, counts * 3.0], 1)
    hist = np.concatenate([counts[:, None], sums], 1)[None]
    labels = np.stack([[5, 1, 0, 0, 0], [0, 0, 20, 30, 0]], 1)[None]
    cut = best_surrogate_cut(hist, labels, None, mapper)
    assert cut.split_bin == 1 and cut.missing_side == MISSING_RIGHT  # 6 rows left, 50 right
    mirrored = best_surrogate_cut(hist[:, [3, 2, 1, 0, 4]], labels[:, [3, 2, 1, 0, 4]], None, mapper)
    assert mirrored.split_bin == 1 and mirrored.missing_side == MISSING_LEFT


def test_center_codes_are_their_clusters_most_common_category_or_median_bin():
    hist = np.zeros((2, 4, 2), dtype=np.int64)
    hist[0, :, 0] = [1, 1, 5, 9]  # numeric: 3 value bins, the missing bin (code 3) does not count
    hist[0, :, 1] = [6, 1, 0, 0]
    hist[1, :, 0] = [1, 7, 2, 9]  # category: the missing bin (code 3) does not count
    hist[1, :, 1] = [4, 0, 3, 0]
    mapper = BinMapper([np.array([0.5, 1.5]), np.empty(0)], np.ones(2, dtype=bool), n_categories=np.array([0, 3]),
                       missing=np.array([True, True]))
    np.testing.assert_array_equal(center_codes(hist, mapper), [[2, 1], [0, 0]])
    np.testing.assert_array_equal(center_codes(hist, mapper, np.array([[1, 9], [2, 9]])), [[1, 1], [2, 0]])


def test_binning_missing_bins_and_category_codes():
    X = np.array([[1.0, 0.0], [np.nan, 2.0], [3.0, np.nan], [2.0, 1.0], [5.0, 7.0], [4.0, -1.0]])
    m = edges_from_sample(X, max_bins=256, categories={1: ["a", "b", "c"]})
    assert m.missing.tolist() == [True, True] and m.n_bins.tolist() == [5, 3]
    np.testing.assert_allclose(m.edges[0], [1.5, 2.5, 3.5, 4.5])  # NaN left out of the edges
    codes = m.transform(X)
    np.testing.assert_array_equal(codes[:, 0], [0, 5, 2, 1, 4, 3])
    # Category codes are their bins; NaN, an unseen code (-1) or a code past the vocabulary: the missing bin.
    np.testing.assert_array_equal(codes[:, 1], [0, 2, 3, 1, 3, 3])
    assert m.code_dtype == np.uint8 and m.max_n_bins == 6
    with pytest.raises(ValueError, match="category"):
        m.threshold(1, 0)
    plain = edges_from_sample(X[[0, 3, 4]][:, :1], max_bins=256)
    assert not plain.missing.any()
    with pytest.raises(ValueError, match="no missing bin"):
        plain.transform(np.array([[np.nan]]))


def test_255_edges_without_nan_keep_uint8_codes():
    X = np.arange(256, dtype=float)[:, None]
    assert edges_from_sample(X, max_bins=256).code_dtype == np.uint8
    with_nan = np.concatenate([X, [[np.nan]]])
    assert edges_from_sample(with_nan, max_bins=256).code_dtype == np.uint16  # 256 values + the missing bin


def test_routing_by_codes_follows_set_cuts_and_missing_sides(rng):
    mapper = BinMapper([np.array([0.5, 1.5, 2.5]), np.empty(0)], np.ones(2, dtype=bool),
                       n_categories=np.array([0, 5]), missing=np.array([True, False]))
    codes = np.stack([rng.integers(0, 5, 500), rng.integers(0, 6, 500)], 1).astype(np.uint8)
    tree = CodeTree()
    left, right = tree.split(0, 0, 1, MISSING_LEFT)  # code <= 1 or missing (code 4)
    ll, lr = tree.split_set(left, 1, [0, 3], MISSING_RIGHT)  # category 0 or 3; missing (5) right
    with pytest.raises(ValueError, match="set cuts"):
        tree.arrays()
    leaf = tree.route(codes, mapper)
    go_left = (codes[:, 0] <= 1) | (codes[:, 0] == 4)
    in_set = np.isin(codes[:, 1], [0, 3])
    expect = np.where(go_left, np.where(in_set, ll, lr), right)
    np.testing.assert_array_equal(leaf, expect)
    # Threshold-only trees whose missing bins go right route by split_bin alone, as before.
    plain = CodeTree()
    plain.split(0, 0, 2, MISSING_RIGHT)
    assert plain.arrays(mapper)[1].ndim == 1
    np.testing.assert_array_equal(plain.route(codes, mapper), np.where(codes[:, 0] <= 2, 1, 2))


def test_encoded_data_bins_nan_of_x_and_measures_in_z(rng):
    n = 3000
    Z = rng.normal(size=(n, 2))
    X = np.stack([Z[:, 0] + rng.normal(size=n) * 0.1, rng.integers(0, 3, n).astype(float)], 1)
    X[rng.random(n) < 0.1, 0] = np.nan
    X[rng.random(n) < 0.05, 1] = np.nan
    centers = np.array([[-1.0, 0.0], [1.0, 0.5]])
    sample_without_nan = np.nan_to_num(X[:500], nan=0.0)  # the sample misses the NaN: found while encoding
    mapper = edges_from_sample(sample_without_nan, max_bins=32, categories={1: 3})
    assert not mapper.missing[0]
    data = EncodedData(X, mapper, centers, Z=Z)
    assert data.mapper.missing.all() and data.n_passes == 2
    np.testing.assert_allclose(data.sum_sq, (Z**2).sum())
    dots = Z @ centers.T
    np.testing.assert_array_equal(data.label_counts, np.bincount(
        np.argmin((centers**2).sum(1) - 2 * dots, axis=1), minlength=2))
    hist, _ = data.histograms(SurrogateCost(), CodeTree(), np.array([0]), 1)
    miss0, miss1 = data.mapper.missing_bin
    assert hist[0, 0, miss0, 0] == np.isnan(X[:, 0]).sum() and hist[0, 1, miss1, 0] == np.isnan(X[:, 1]).sum()
    np.testing.assert_allclose(hist[0, 0, miss0, 1:], dots[np.isnan(X[:, 0])].sum(0))
    with pytest.raises(InputError, match="Z"):
        EncodedData(X, data.mapper, centers)
