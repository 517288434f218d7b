"""TreeSearch beyond 12 leaves: the lookahead on the start's small subtrees, priced on all rows."""
from __future__ import annotations

import dask.array as da
import numpy as np
import pytest

from exclust.algorithms.histogram.binning import edges_from_sample
from exclust.algorithms.search.optimal_tree import count_leaves, leaf_cost
from exclust.algorithms.search.row_statistics import FlatTree, RowStatistics, own_cost
from exclust.algorithms.search.subtree_moves import (
    choose_on_all_rows,
    leaf_offset,
    propose,
    small_subtrees,
    subtree_at,
)
from exclust.algorithms.search.tree_search import SUBTREE_SAMPLE_ROWS_PER_LEAF, TreeSearch


def blobs(seed, k, n, d, scale):
    rng = np.random.default_rng(seed)
    centers = rng.uniform(-10, 10, (k, d))
    return centers[rng.integers(0, k, n)] + rng.normal(scale=scale, size=(n, d)), centers


def balanced(leaves: int, feature: int = 0, low: float = 0.0, high: float = 1.0):
    """A nested tree of ``leaves`` leaves cutting ``feature`` at midpoints."""
    if leaves == 1:
        return None
    mid = (low + high) / 2
    left = balanced(leaves // 2, feature, low, mid)
    return (feature, mid, left, count_leaves(left), balanced(leaves - leaves // 2, feature, mid, high))


def test_the_small_subtrees_are_maximal_and_disjoint_and_their_leaves_numbered():
    tree = balanced(30)
    paths = small_subtrees(tree, 12)
    sizes = [count_leaves(subtree_at(tree, p)) for p in paths]
    assert all(3 <= s <= 12 for s in sizes)
    offsets = [leaf_offset(tree, p) for p in paths]
    assert offsets == sorted(offsets)
    assert all(a + s <= b for a, s, b in zip(offsets, sizes, offsets[1:], strict=False))  # disjoint
    for p in paths:  # maximal: the parent holds more than 12 leaves
        assert count_leaves(subtree_at(tree, p[:-1])) > 12


def test_a_dearer_proposal_is_not_taken_and_a_cheaper_one_is():
    X, centers = blobs(3, 16, 4000, 2, 1.0)
    mapper = edges_from_sample(X, max_bins=64)
    stats = RowStatistics(X, mapper, centers.mean(axis=0))
    try:
        start = balanced(16, 0, X[:, 0].min(), X[:, 0].max())
        found, nodes = propose(X[:2000], centers, start, 12, 100, 4, 2)
        assert found  # cuts on one feature only: the lookahead finds cheaper subtrees
        assert nodes > 0  # the subtrees' lookahead's nodes are counted
        better, saved, replaced = choose_on_all_rows(stats, start, found)
        (before, after), _ = stats.tree_moments([FlatTree.of(start), FlatTree.of(better)])
        assert replaced >= 1 and saved > 0
        assert own_cost(after).sum() == pytest.approx(own_cost(before).sum() - saved, rel=1e-9)
        # Offered only the start's own subtrees back, dearer ones swapped in: nothing replaced.
        worse = {p: [subtree_at(start, p)] for p in found}
        assert choose_on_all_rows(stats, start, worse)[2] == 0
        undone, _, replaced_back = choose_on_all_rows(stats, better, {p: [subtree_at(start, p)] for p in found})
        assert replaced_back == 0 and undone == better
    finally:
        stats.release()


def test_beyond_twelve_clusters_the_search_uses_its_subtrees_and_dask_gives_the_same_tree(dask_client):
    X, centers = blobs(5, 14, 5000, 3, 2.5)
    local = TreeSearch(14, random_state=0).fit(X, centers)
    assert local.n_search_rows_ == SUBTREE_SAMPLE_ROWS_PER_LEAF * 14
    assert local.cost_ <= min(local.start_costs_.values()) * (1 + 1e-9)
    labels = local.predict(X)
    assert local.cost_ == pytest.approx(sum(leaf_cost(X[labels == v]) for v in np.unique(labels)), rel=1e-9)
    dist = TreeSearch(14, random_state=0).fit(da.from_array(X, chunks=(1300, 3)), centers)
    assert dist.tree_ == local.tree_
    assert dist.cost_ == pytest.approx(local.cost_, rel=1e-12)
    # Beyond 12 leaves the nodes are the subtrees' lookaheads' (there is no whole-tree lookahead).
    assert local.n_sample_nodes_ > 0 and dist.n_sample_nodes_ == local.n_sample_nodes_
