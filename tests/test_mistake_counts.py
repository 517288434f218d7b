"""IMM's compact counts (``cut_search.MistakeCounts``, issue 27): the cut search on (d, B) planes
gives the same cut as the per-center (d, B, m) computation it replaced, and the kernel's counts,
added and subtracted as IMM does, equal those of the per-center histograms."""
from __future__ import annotations

import numpy as np
import pytest
from category_tables import clustered_customers

from exclust.algorithms.histogram.base import encode_for_trees
from exclust.algorithms.histogram.binning import BinMapper
from exclust.algorithms.histogram.code_tree import MISSING_LEFT, MISSING_RIGHT, CodeTree
from exclust.algorithms.histogram.criteria import CompactMistakes, Mistakes
from exclust.algorithms.histogram.cut_search import (
    MistakeCounts,
    _set_cut_mistakes,
    _split_missing,
    best_mistake_cut,
    center_codes,
    side_of_missing,
)
from exclust.sources.dataset import Dataset


def _per_center_mistake_cut(hist, codes, members, mapper):
    """The search before issue 27: several passes over the (d, B, m) histogram. Returns
    (feature, bin, set, missing side, mistakes) or None."""
    d, B, _ = hist.shape
    values, miss = _split_missing(hist.astype(np.int64), mapper)
    left = np.cumsum(values, axis=1)
    total = left[:, -1:, :]
    cc = codes[members].T
    bins = np.arange(B)
    center_left = cc[:, None, :] <= bins[None, :, None]
    mistakes = np.where(center_left, total - left, left).sum(axis=2)
    miss_l = np.where(center_left, 0, miss[:, None, :]).sum(axis=2)
    miss_r = np.where(center_left, miss[:, None, :], 0).sum(axis=2)
    rows_left = left.sum(axis=2)
    side = side_of_missing(miss_l, miss_r, rows_left, total.sum(axis=2) - rows_left)
    mistakes = mistakes + np.minimum(miss_l, miss_r)
    lo, hi = cc.min(axis=1), cc.max(axis=1)
    valid = (bins[None, :] >= lo[:, None]) & (bins[None, :] < hi[:, None])
    valid &= (bins[None, :] < (mapper.n_bins[:, None] - 1)) & ~mapper.is_category[:, None]
    sets = {}
    for f in np.flatnonzero(mapper.is_category).tolist():
        found = _set_cut_mistakes(values[f, : int(mapper.n_bins[f])], miss[f], cc[f])
        if found is None:
            continue
        mistakes[f, 0], mask, missing_left = found
        sets[f] = tuple(np.flatnonzero(mask).tolist())
        side[f, 0] = MISSING_LEFT if missing_left else MISSING_RIGHT
        valid[f, 0] = True
    if not valid.any():
        return None
    mistakes = np.where(valid, mistakes, np.iinfo(np.int64).max)
    f, b = divmod(int(np.argmin(mistakes)), B)
    return f, -1 if f in sets else b, sets.get(f, ()), int(side[f, b]), float(mistakes[f, b])


def _mapper(rng) -> BinMapper:
    """Two or three numeric features (some with a missing bin) and one or two category features."""
    n_numeric, n_category = int(rng.integers(2, 4)), int(rng.integers(1, 3))
    edges = [np.arange(int(rng.integers(1, 7)), dtype=float) for _ in range(n_numeric)] + [np.empty(0)] * n_category
    n_categories = np.array([0] * n_numeric + [int(rng.integers(2, 6)) for _ in range(n_category)])
    missing = rng.random(n_numeric + n_category) < 0.7
    return BinMapper(edges, np.ones(n_numeric + n_category, dtype=bool), n_categories=n_categories, missing=missing)


@pytest.mark.parametrize("seed", range(40))
def test_compact_mistake_cut_equals_the_per_center_search(seed):
    rng = np.random.default_rng(2700 + seed)
    mapper = _mapper(rng)
    d, B, k = mapper.n_features, int(mapper.n_codes.max()), int(rng.integers(2, 7))
    members = np.sort(rng.choice(k, size=int(rng.integers(2, k + 1)), replace=False))
    codes = np.stack([rng.integers(0, int(n), size=k) for n in mapper.n_bins], axis=1)  # (k, d)
    hist = rng.integers(0, 4, size=(d, B, members.size)) * (rng.random((d, B, members.size)) < 0.6)
    for f in range(d):
        hist[f, int(mapper.n_codes[f]):] = 0  # codes a feature does not have hold no row
    expected = _per_center_mistake_cut(hist, codes, members, mapper)
    for counts in (hist, MistakeCounts.from_histogram(hist, codes[members], mapper)):
        cut = best_mistake_cut(counts, codes, members, mapper)
        got = None if cut is None else (cut.feature, cut.split_bin, cut.left_codes, cut.missing_side, cut.score)
        assert got == expected


def test_kernel_counts_add_and_subtract_as_imm_takes_them(rng):
    X, Z, centers, _ = clustered_customers(rng, 2000)
    ds = Dataset(X, ["x0", "segment"], categories={1: ["a", "b", "c", "d", "e"]})
    data = encode_for_trees(ds, centers, 64, random_state=0, Z=Z)
    mapper, k = data.mapper, data.k
    root_slot = np.array([0])
    root = data.histograms(Mistakes(), CodeTree(), root_slot, np.ones((1, k), dtype=bool))[0]
    codes = center_codes(root, mapper)
    parent = MistakeCounts.from_histogram(root, codes, mapper)
    tree = CodeTree()
    small, big = tree.split(0, 0, int(np.median(codes[:, 0])), MISSING_LEFT)
    own, other = np.array([0]), np.array([1, 2])  # center 0 to the small side, 1 and 2 to the big one
    slot = np.array([-1, 0, 1])
    target = np.array([[0, 1, 1], [1, -1, -1]])
    column = np.array([[0, 0, 1], [-1, -1, -1]])
    counted = data.histograms(CompactMistakes(), tree, slot, target, column, [1, 2], codes)
    # The big side: the parent's counts less the small side's own rows and the cut's mistakes.
    rest = MistakeCounts(parent.planes - counted[0].planes - counted[1].planes,
                         parent.categories[:, :, other] - counted[1].categories)
    for node, centers_there, got in ((small, own, counted[0]), (big, other, rest)):
        one = np.full(3, -1)
        one[node] = 0
        ok = np.isin(np.arange(k), centers_there)[None]
        expected = MistakeCounts.from_histogram(data.histograms(Mistakes(), tree, one, ok)[0], codes[centers_there],
                                                mapper)
        np.testing.assert_array_equal(got.planes, expected.planes)
        np.testing.assert_array_equal(got.categories, expected.categories)
        assert got.planes[0, 0].sum() > 0
    data.release()
