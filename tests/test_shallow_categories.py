"""Issue 28 through ExShallow, ExGreedy and KDTree: set cuts on category features and learned
missing sides, in memory and on a LocalCluster."""
from __future__ import annotations

import itertools

import dask.array as da
import numpy as np
import pytest

from exclust.algorithms.histogram._shallow_cut import cut_score
from exclust.algorithms.histogram.base import encode_for_trees
from exclust.algorithms.histogram.exgreedy import ExGreedy
from exclust.algorithms.histogram.exshallow import ExShallow, grow_shallow
from exclust.algorithms.histogram.kdtree import KDTree
from exclust.sources.dataset import Dataset
from exclust.tree import CATEGORY_SET, LEAF
from exclust.tree.node_kinds import MISSING_LEFT, MISSING_RIGHT

CENTERS = np.array([[-4.0, 0.0], [0.0, 4.0], [4.0, 0.0], [0.0, -4.0]])


def _table(rng, n: int = 1200):
    """Clusters in a 2-D space Z; the features: a category (codes 0..5, each cluster's rows mostly
    in its own two categories, 6% NaN) and a noisy copy of z0 with 10% NaN."""
    cluster = rng.integers(0, 4, n)
    Z = CENTERS[cluster] + rng.normal(size=(n, 2)) * 0.8
    own = np.array([[0, 4], [1, 5], [2, 2], [3, 3]])[cluster, rng.integers(0, 2, n)]
    segment = np.where(rng.random(n) < 0.15, rng.integers(0, 6, n), own).astype(float)
    segment[rng.random(n) < 0.06] = np.nan
    x0 = Z[:, 0] + rng.normal(size=n) * 0.5
    x0[rng.random(n) < 0.1] = np.nan
    return np.stack([segment, x0], 1), Z


def _brute_force_scores(segment, Z, centers, center_category, depth_factor):
    """The ShallowCost score of every set cut of the category (every subset of its 6 codes on the
    left, the missing rows on either side), from the rows themselves: (score, left set, side)."""
    dist = ((Z[:, None, :] - centers[None]) ** 2).sum(2)
    base = dist.min(1).sum()
    missing = np.isnan(segment)
    k = len(centers)
    out = []
    for size in range(1, 6):
        for left_set in itertools.combinations(range(6), size):
            centers_left = np.isin(center_category, left_set)
            if centers_left.all() or not centers_left.any():
                continue
            for side in (MISSING_LEFT, MISSING_RIGHT):
                row_left = np.where(missing, side == MISSING_LEFT, np.isin(segment, left_set))
                cost = (dist[row_left][:, centers_left].min(1).sum() + dist[~row_left][:, ~centers_left].min(1).sum())
                k_left = int(centers_left.sum())
                score = cut_score(cost, base, int(row_left.sum()), int((~row_left).sum()), k_left, k - k_left,
                                  False, False, depth_factor, True)
                out.append((score, left_set, side))
    return out


def _subtree_values(tree, node: int) -> list[int]:
    """The centers of the leaves under ``node``."""
    if tree.kind[node] == LEAF:
        return [int(tree.value[node])]
    return _subtree_values(tree, int(tree.left[node])) + _subtree_values(tree, int(tree.right[node]))


@pytest.mark.parametrize("depth_factor", [0.0, 0.03])
def test_root_set_cut_equals_a_brute_force_over_subsets(rng, depth_factor):
    X, Z = _table(rng)
    segment = X[:, 0]
    data = encode_for_trees(Dataset(segment[:, None], ["segment"], categories={0: list("abcdef")}), CENTERS, 64,
                            random_state=0, metric="sqeuclidean", between_extra=True, Z=Z)
    tree, _ = grow_shallow(data, depth_factor)
    data.release()
    assert tree.left_codes[0], "the only feature is a category: the root is a set cut"
    labels = ((Z[:, None, :] - CENTERS[None]) ** 2).sum(2).argmin(1)
    center_category = np.array([np.bincount(segment[(labels == j) & ~np.isnan(segment)].astype(int),
                                            minlength=6).argmax() for j in range(4)])
    scores = _brute_force_scores(segment, Z, CENTERS, center_category, depth_factor)
    best = min(score for score, _, _ in scores)
    chosen = [score for score, left_set, side in scores
              if left_set == tree.left_codes[0] and side == tree.missing_side[0]]
    assert chosen, "the chosen cut is one of the brute force's candidates"
    np.testing.assert_allclose(chosen[0], best, rtol=1e-12)


@pytest.mark.parametrize("on_dask", [False, True])
def test_missing_values_go_where_the_cut_learned_in_memory_and_on_dask(rng, on_dask, request):
    X, Z = _table(rng)
    X = X[:, 1:]  # the numeric feature with its NaN
    fitted = ExGreedy(4, random_state=0).fit(Dataset(X, ["x0"]), CENTERS, Z=Z)
    if on_dask:
        request.getfixturevalue("dask_client")
        other = ExGreedy(4, random_state=0).fit(Dataset(da.from_array(X, chunks=(300, 1)), ["x0"]), CENTERS,
                                                 Z=da.from_array(Z, chunks=(300, 2)))
        for field in ("feature", "threshold", "missing_side", "value"):
            np.testing.assert_array_equal(getattr(other.tree_, field), getattr(fitted.tree_, field))
    tree = fitted.tree_
    root_side = int(tree.missing_side[0])
    assert root_side in (MISSING_LEFT, MISSING_RIGHT)
    # The root's side is the cheaper (ExGreedy: the score is the cost ratio): recompute both from the rows.
    dist = ((Z[:, None, :] - CENTERS[None]) ** 2).sum(2)
    values, missing = X[:, 0], np.isnan(X[:, 0])
    value_left = values <= tree.threshold[0]
    centers_left = np.isin(np.arange(4), _subtree_values(tree, int(tree.left[0])))

    def cost(missing_left):
        left = np.where(missing, missing_left, value_left)
        return dist[left][:, centers_left].min(1).sum() + dist[~left][:, ~centers_left].min(1).sum()

    assert (cost(True) <= cost(False)) == (root_side == MISSING_LEFT) or cost(True) == cost(False)
    # predict routes every row, NaN included, as the tree's sides say.
    assert (fitted.predict(X) >= 0).all()
    nan_leaf = tree.apply(np.array([[np.nan]]))[0]
    node, path = 0, []
    while tree.kind[node] != LEAF:
        path.append(node)
        node = tree.left[node] if tree.missing_side[node] == MISSING_LEFT else tree.right[node]
    assert nan_leaf == node and path


def test_exgreedy_and_kdtree_fit_a_table_with_a_category_and_nan(rng):
    X, Z = _table(rng)
    ds = Dataset(X, ["segment", "x0"], categories={0: list("abcdef")})
    greedy = ExGreedy(4, random_state=0).fit(ds, CENTERS, Z=Z)
    assert (greedy.tree_.kind == CATEGORY_SET).any(), "the category follows the clusters: a set cut"
    assert greedy.tree_.categories[0] == list("abcdef")
    labels = greedy.predict(X)
    assert np.isnan(X).any() and (labels >= 0).all()
    truth = ((Z[:, None, :] - CENTERS[None]) ** 2).sum(2).argmin(1)
    assert (labels == truth).mean() > 0.7
    shallow = ExShallow(4, random_state=0).fit(ds, CENTERS, Z=Z)
    assert (shallow.predict(X) >= 0).all()
    # KDTree: centers in the features' space (the category's coordinate is not used).
    centers = np.stack([np.nanmean(X[truth == j], axis=0) for j in range(4)])
    kd = KDTree(4, random_state=0).fit(ds, centers)
    assert int((kd.tree_.kind == LEAF).sum()) == 4
    assert (kd.predict(X) >= 0).all()
    sides = kd.tree_.missing_side[kd.tree_.kind != LEAF]
    assert ((sides == MISSING_LEFT) | (sides == MISSING_RIGHT)).all()
