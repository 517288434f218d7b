"""Issue 28 through the search family: TreeSearch, LabelTree and CART cut sets of categories and
learn where missing values go; OptimalTree refuses both in one line."""
from __future__ import annotations

import itertools
import logging

import dask.array as da
import numpy as np
import pytest
from category_tables import clustered_customers

from exclust.algorithms.cart import CART
from exclust.algorithms.search.category_cuts import best_set_split, mistakes_side_cost, moments_of, own_cost
from exclust.algorithms.search.label_tree import LabelTree
from exclust.algorithms.search.optimal import OptimalTree
from exclust.algorithms.search.tree_search import TreeSearch
from exclust.errors import ParameterError
from exclust.sources.dataset import Dataset
from exclust.tree import CATEGORY_SET

VOCABULARY = ["at", "de", "fr", "nl", "pl"]


def _customers(rng, n: int = 1200):
    return clustered_customers(rng, n)


def _dataset(X, with_categories: bool = True) -> Dataset:
    missing = {name: int(c) for name, c in zip(["x0", "segment"], np.isnan(np.asarray(X)).sum(axis=0), strict=True)
               if c}
    return Dataset(X, ["x0", "segment"], categories={1: VOCABULARY} if with_categories else {}, missing=missing)


def _partitions(codes: np.ndarray):
    """Every set cut of the categories present (left set non-empty, not all), with each missing side."""
    held = np.unique(codes[~np.isnan(codes)]).astype(int)
    for size in range(1, held.size):
        for left in itertools.combinations(held.tolist(), size):
            for missing_left in (True, False):
                yield np.where(np.isnan(codes), missing_left, np.isin(codes, left))


def _kmeans_cost(Z, leaf_of) -> float:
    return float(sum(((Z[leaf_of == v] - Z[leaf_of == v].mean(axis=0)) ** 2).sum() for v in np.unique(leaf_of)))


# --------------------------------------------------------------------------- set cuts vs brute force
@pytest.mark.parametrize("n_categories", [3, 6])
def test_best_set_split_equals_brute_force(rng, n_categories):
    codes = rng.integers(0, n_categories, 60).astype(float)
    codes[rng.random(60) < 0.15] = np.nan
    Y = rng.normal(size=(60, 2)) + np.nan_to_num(codes)[:, None] % 2 * 3
    labels = rng.integers(0, 3, 60)
    for stats, side_cost in ((moments_of(Y), own_cost), (np.eye(3)[labels], mistakes_side_cost)):
        valid = ~np.isnan(codes)
        per = np.zeros((n_categories, stats.shape[1]))
        np.add.at(per, codes[valid].astype(int), stats[valid])
        cost, left_codes, side = best_set_split(per, stats[~valid].sum(axis=0), side_cost, per)
        brute = min(float(side_cost(stats[go].sum(axis=0)) + side_cost(stats[~go].sum(axis=0)))
                    for go in _partitions(codes))
        assert cost == pytest.approx(brute, rel=1e-9, abs=1e-9)
        go = np.where(np.isnan(codes), side == 0, np.isin(codes, left_codes))
        assert float(side_cost(stats[go].sum(axis=0)) + side_cost(stats[~go].sum(axis=0))) == pytest.approx(cost)


def test_tree_search_two_leaves_takes_the_best_set_cut_on_all_rows(rng):
    X, Z, centers, _ = _customers(rng, 400)
    X = X[:, 1:]  # the category alone: the one cut is a set of codes with a missing side
    ds = Dataset(X, ["segment"], categories={0: VOCABULARY}, missing={"segment": int(np.isnan(X).sum())})
    search = TreeSearch(2, starts=("imm",), random_state=0).fit(ds, centers[:2], Z=Z)
    brute = min(_kmeans_cost(Z, go.astype(int)) for go in _partitions(X[:, 0]))
    assert search.tree_.kind[0] == CATEGORY_SET
    assert search.cost_ == pytest.approx(brute, rel=1e-9)
    assert _kmeans_cost(Z, search.tree_.apply(X)) == pytest.approx(brute, rel=1e-9)


def test_label_tree_two_leaves_takes_the_best_set_cut(rng):
    X, _, _, cluster = _customers(rng, 300)
    labels = (cluster == 1).astype(int)
    X = X[:, 1:]
    ds = Dataset(X, ["segment"], categories={0: VOCABULARY}, missing={"segment": int(np.isnan(X).sum())})
    fitted = LabelTree(2, sample_rows=300).fit(ds, labels)

    def mistakes(go):
        return min(int((labels[go] != a).sum() + (labels[~go] != 1 - a).sum()) for a in (0, 1))

    assert fitted.tree_.kind[0] == CATEGORY_SET
    assert fitted.mistakes_ == min(mistakes(go) for go in _partitions(X[:, 0]))
    assert int((fitted.predict(ds.X) != labels).sum()) == fitted.mistakes_


def test_cart_two_clusters_takes_the_best_gini_set_cut(rng):
    n = 300
    codes = rng.integers(0, 5, n).astype(float)
    labels = (rng.random(n) < np.array([0.1, 0.9, 0.3, 0.7, 0.5])[codes.astype(int)]).astype(int)
    codes[rng.random(n) < 0.1] = np.nan
    ds = Dataset(codes[:, None], ["segment"], categories={0: VOCABULARY},
                 missing={"segment": int(np.isnan(codes).sum())})
    cart = CART(max_leaf_nodes=2, random_state=0).fit(ds, labels)

    def gini(go):
        total = 0.0
        for side in (go, ~go):
            shares = np.bincount(labels[side], minlength=2) / max(side.sum(), 1)
            total += side.sum() * (1.0 - (shares ** 2).sum())
        return total

    tree = cart.tree_
    assert tree.kind[0] == CATEGORY_SET and tree.categories == {0: VOCABULARY}
    found = tree.apply(codes[:, None]) == tree.left[0]
    assert gini(found) == pytest.approx(min(gini(go) for go in _partitions(codes)), rel=1e-9)
    assert (tree.predict(codes[:, None]) >= 0).all()


# --------------------------------------------------------------------------- missing values
def test_tree_search_routes_missing_rows_as_it_priced_them(rng):
    X, Z, centers, _ = _customers(rng)
    search = TreeSearch(3, random_state=0).fit(_dataset(X), centers, Z=Z)
    leaf = search.tree_.apply(X)
    assert np.isnan(X).any() and (leaf >= 0).all() and (search.predict(X) >= 0).all()
    assert search.cost_ == pytest.approx(_kmeans_cost(Z, leaf), rel=1e-9)
    internal = search.tree_.kind != 0
    assert set(search.tree_.missing_side[internal].tolist()) <= {0, 1}
    assert search.cost_ <= min(search.start_costs_.values()) * (1 + 1e-12)


def test_tree_search_starts_from_every_greedy_rule_on_categories(rng, caplog):
    """IMM, ExShallow and ExGreedy all cut category sets now: each starts the search (none is
    skipped), and the search is never above the cheapest of them on all rows."""
    X, Z, centers, _ = _customers(rng, 600)
    X = np.nan_to_num(X, nan=0.0)  # complete: the cost is measured on X itself, codes as numbers
    labels = ((Z[:, None, :] - centers[None]) ** 2).sum(axis=2).argmin(axis=1)
    centers = np.array([X[labels == c].mean(axis=0) for c in range(3)])  # in X's space
    with caplog.at_level(logging.INFO, logger="exclust"):
        search = TreeSearch(3, starts=("imm", "exshallow", "exgreedy"), random_state=0).fit(_dataset(X), centers)
    assert {"imm", "exshallow", "exgreedy"} <= set(search.start_costs_)
    assert not any("skipped" in r.getMessage() for r in caplog.records)
    assert search.cost_ <= min(search.start_costs_.values()) * (1 + 1e-12)


def test_tree_search_refuses_missing_values_in_its_own_space(rng):
    X, _, centers, _ = _customers(rng, 300)
    with pytest.raises(Exception, match="missing"):
        TreeSearch(3, random_state=0).fit(_dataset(X, with_categories=False), centers)


@pytest.mark.parametrize("algorithm", ["label-tree", "cart"])
def test_label_trees_route_missing_rows(rng, algorithm):
    X, _, _, cluster = _customers(rng, 600)
    ds = _dataset(X)
    model = LabelTree(3, sample_rows=600) if algorithm == "label-tree" else CART(random_state=0)
    model.fit(ds, cluster)
    predicted = model.predict(X)
    assert (predicted >= 0).all()
    assert (model.tree_.kind == CATEGORY_SET).any()
    assert (predicted == cluster).mean() > 0.8


def test_tree_search_on_dask_equals_in_memory(rng, dask_client):
    X, Z, centers, _ = _customers(rng, 900)
    local = TreeSearch(3, random_state=0).fit(_dataset(X), centers, Z=Z)
    lazy = _dataset(da.from_array(X, chunks=(250, 2)))
    lazy.missing = _dataset(X).missing
    dist = TreeSearch(3, random_state=0).fit(lazy, centers, Z=da.from_array(Z, chunks=(250, 2)))
    assert dist.tree_ == local.tree_
    assert dist.cost_ == pytest.approx(local.cost_, rel=1e-9)
    assert dist.start_costs_ == pytest.approx(local.start_costs_, rel=1e-9)
    assert (dist.predict(X) >= 0).all()


def test_optimal_tree_refuses_categories_and_missing_values(rng):
    X, _, centers, _ = _customers(rng, 200)
    with pytest.raises(ParameterError, match="OptimalTree.*'x0'.*missing"):
        OptimalTree(3).fit(_dataset(X), centers)
    X[:, 0] = np.nan_to_num(X[:, 0])
    X[:, 1] = np.nan_to_num(X[:, 1])
    with pytest.raises(ParameterError, match="OptimalTree.*'segment'.*category"):
        OptimalTree(3).fit(_dataset(X), centers)
