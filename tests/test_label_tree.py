"""LabelTree: fewest mistakes against any clustering's labels, every cluster naming a leaf."""
from __future__ import annotations

import itertools
import json

import numpy as np
import pytest
from scipy.optimize import linear_sum_assignment

from exclust.algorithms.cart import CART
from exclust.algorithms.search.label_tree import LabelTree
from exclust.errors import InputError, ParameterError


def matched_mistakes(pred: np.ndarray, y: np.ndarray, k: int) -> int:
    """Rows (noise left out) whose cluster differs after the best one-to-one match of clusters to labels."""
    keep = y >= 0
    table = np.zeros((k, k), dtype=np.int64)
    np.add.at(table, (pred[keep], y[keep]), 1)
    r, c = linear_sum_assignment(-table)
    return int(keep.sum() - table[r, c].sum())


def brute_force(X: np.ndarray, y: np.ndarray, k: int, max_leaves: int) -> int:
    """Fewest mistakes of any tree over the midpoint cuts with at most ``max_leaves`` leaves, every
    cluster naming a leaf: every partition such a tree makes, every labelling of its leaves."""
    keep = y >= 0
    X, y = X[keep], y[keep]
    cuts = [(f, t) for f in range(X.shape[1])
            for t in (lambda v: (v[:-1] + v[1:]) / 2)(np.unique(X[:, f]))]
    memo: dict = {}

    def partitions(rows: frozenset, m: int) -> set:
        key = (rows, m)
        if key not in memo:
            found = {frozenset([rows])}
            if m > 1:
                for f, t in cuts:
                    left = frozenset(i for i in rows if X[i, f] <= t)
                    right = rows - left
                    if left and right:
                        for j in range(1, m):
                            for a in partitions(left, j):
                                for b in partitions(right, m - j):
                                    found.add(a | b)
            memo[key] = found
        return memo[key]

    best = np.inf
    for parts in partitions(frozenset(range(len(y))), max_leaves):
        parts = [np.fromiter(p, dtype=np.int64) for p in parts]
        for labelling in itertools.product(range(k), repeat=len(parts)):
            if len(set(labelling)) < k:
                continue
            best = min(best, sum(int((y[p] != c).sum()) for p, c in zip(parts, labelling, strict=True)))
    return int(best)


@pytest.mark.parametrize("seed", range(6))
def test_mistakes_equal_a_brute_force_on_tiny_instances(seed):
    rng = np.random.default_rng(seed)
    n, k = 9, 3
    X = np.round(rng.normal(size=(n, 2)), 1)
    y = rng.integers(0, k, size=n)
    y[:k] = np.arange(k)  # every cluster present
    if seed % 2:
        y[-1] = -1  # noise: no leaf, no mistake
    for leaves in (3, 4):
        model = LabelTree(k, n_leaves=leaves, random_state=0).fit(X, y)
        assert model.exact_
        expected = brute_force(X, y, k, leaves)
        assert model.mistakes_ == expected
        assert model.tree_.n_leaves <= leaves
        assert set(model.tree_.value[model.tree_.kind == 0].tolist()) == set(range(k))
        assert int(((model.predict(X) != y) & (y >= 0)).sum()) == expected


def _hidden_cluster(n=300, seed=0):
    """Two big clusters and a small third one scattered inside the first: no leaf of it has a
    majority, so CART's k-leaf tree names no leaf for it."""
    rng = np.random.default_rng(seed)
    X = np.concatenate([rng.normal(0, 1, size=(n, 2)), rng.normal(8, 1, size=(n, 2)), rng.normal(0, 1, size=(6, 2))])
    y = np.repeat([0, 1, 2], [n, n, 6])
    return X, y


def test_every_cluster_gets_a_leaf_where_cart_leaves_one_out():
    X, y = _hidden_cluster()
    cart = CART(max_leaf_nodes=3, random_state=0).fit(X, y)
    assert 2 not in set(cart.predict(X).tolist())  # the case is the one meant
    model = LabelTree(3, random_state=0).fit(X, y)
    assert not model.exact_
    assert set(model.predict(X).tolist()) == {0, 1, 2}
    assert matched_mistakes(model.predict(X), y, 3) == model.mistakes_
    # A leaf for cluster 2 costs mistakes that CART, naming no leaf for it, does not make; the
    # search keeps to CART's cuts relabelled to cover every cluster or does better.
    assert model.cart_mistakes_ is not None and model.mistakes_ <= model.cart_mistakes_


def moons(n=400, seed=0):
    from sklearn.datasets import make_moons

    return make_moons(n_samples=n, noise=0.08, random_state=seed)


def test_at_or_below_carts_mistakes_on_two_moons():
    X, y = moons()
    for leaves in (2, 4, 6):
        model = LabelTree(2, n_leaves=leaves, random_state=0).fit(X, y)
        cart = CART(max_leaf_nodes=leaves, random_state=0).fit(X, y)
        assert model.tree_.n_leaves <= leaves
        assert matched_mistakes(model.predict(X), y, 2) == model.mistakes_
        assert model.mistakes_ <= matched_mistakes(cart.predict(X), y, 2)


def test_numpy_and_dask_give_the_same_tree(dask_client):
    import dask.array as da

    X, y = moons(600, seed=1)
    in_memory = LabelTree(2, n_leaves=4, sample_rows=500, random_state=3).fit(X, y).tree_
    lazy = LabelTree(2, n_leaves=4, sample_rows=500, random_state=3).fit(
        da.from_array(X, chunks=(137, 2)), da.from_array(y, chunks=137)).tree_
    assert in_memory.to_dict() == lazy.to_dict()


def test_bad_input_is_one_clear_error():
    X, y = moons(50)
    with pytest.raises(ParameterError, match="n_leaves"):
        LabelTree(3, n_leaves=2).fit(X, y)
    with pytest.raises(InputError, match="n_clusters is 2"):
        LabelTree(2).fit(X, np.where(y == 1, 5, 0))
    with pytest.raises(InputError, match="needs the cluster labels"):
        LabelTree(2).fit(X, None)


def test_cli_runs_it_on_a_label_column(tmp_path, dask_client):
    from exclust.cli import main
    from exclust.datasets.synthetic import write_gmm_parquet

    write_gmm_parquet(tmp_path / "data", 3000, n_components=3, n_features=2, rows_per_file=1000, random_state=6,
                      noise_scale=3.0)
    code = main(["explain", "--input", str(tmp_path / "data"), "--features", "x0,x1", "--algorithm", "label-tree",
                 "--k", "3", "--leaves", "5", "--reference", "labels:truth", "--truth", "truth",
                 "--scheduler", dask_client.scheduler.address, "--out", str(tmp_path / "out"), "--quiet"])
    assert code == 0
    metrics = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert (metrics["algorithm"], metrics["reference"]) == ("label-tree", "labels:truth")
    assert 3 <= metrics["n_leaves"] <= 5  # at most the budget; fewer when they already make no mistake
    tree = json.loads((tmp_path / "out" / "tree.json").read_text())
    assert '"label-tree"' in json.dumps(tree) and '"n_leaves": 5' in json.dumps(tree)
    assert metrics["error_rate"] < 0.05

