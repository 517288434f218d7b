"""Issue 28 through the histogram family: IMM and ExKMC on features holding NaN and categories,
against centers of another space Z, in memory and on a LocalCluster (ExShallow, ExGreedy and
KDTree on them: tests/test_shallow_categories.py)."""
from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
from category_tables import clustered_customers

from exclust.algorithms.histogram.base import encode_for_trees
from exclust.algorithms.histogram.exkmc import ExKMC
from exclust.algorithms.histogram.imm import grow_imm
from exclust.sources.dataset import Dataset


def _customers(rng, n: int = 3000):
    X, Z, centers, _ = clustered_customers(rng, n)
    return X, Z, centers


def _dataset(X, categories=None) -> Dataset:
    return Dataset(X, ["x0", "segment"], categories=categories or {})


def _surrogate_cost(ex: ExKMC, X: np.ndarray, Z: np.ndarray, centers: np.ndarray) -> float:
    leaf = ex.code_tree_.route(ex.mapper_.transform(X), ex.mapper_)
    value = np.asarray(ex.code_tree_.value)[leaf]
    return float(((Z - centers[value]) ** 2).sum())


def test_imm_cuts_a_category_set_and_counts_its_mistakes(rng):
    X, Z, centers = _customers(rng)
    data = encode_for_trees(_dataset(X, {1: ["a", "b", "c", "d", "e"]}), centers, 64, random_state=0, Z=Z)
    tree, mistakes = grow_imm(data)
    assert any(tree.left_codes), "the category follows the clusters: IMM cuts a set of its codes"
    leaf = tree.route(data.mapper.transform(X), data.mapper)
    labels = np.argmin(((Z[:, None, :] - centers[None]) ** 2).sum(2), axis=1)
    # Every row separated from its center is counted once, at the cut that separated it.
    assert mistakes == int((np.asarray(tree.value)[leaf] != labels).sum())
    assert sorted(np.asarray(tree.value)[tree.leaves()].tolist()) == [0, 1, 2]
    data.release()


@pytest.mark.parametrize("on_dask", [False, True])
def test_exkmc_cost_in_z_equals_numpy_recomputation(rng, on_dask, request):
    X, Z, centers = _customers(rng)
    X = X[:, :1]  # the numeric feature with its NaN: the tree's thresholds learn where missing rows go
    if on_dask:
        request.getfixturevalue("dask_client")
        data_X, data_Z = da.from_array(X, chunks=(700, 1)), da.from_array(Z, chunks=(700, 2))
    else:
        data_X, data_Z = X, Z
    ds = Dataset(data_X, ["x0"])
    ex = ExKMC(3, max_leaves=6, random_state=0).fit(ds, centers, Z=data_Z)
    expected = _surrogate_cost(ex, X, Z, centers)
    np.testing.assert_allclose(ex.surrogate_costs_[-1], expected, rtol=1e-5 if on_dask else 1e-9)
    missing_sides = [ex.code_tree_.missing_side[node] for node in range(ex.code_tree_.n_nodes)
                     if ex.code_tree_.feature[node] >= 0]
    assert missing_sides and all(side in (0, 1) for side in missing_sides)
    # The real-valued tree routes the raw rows, NaN included, as the engine routed their codes.
    np.testing.assert_array_equal(ex.full_tree_.missing_side, ex.code_tree_.missing_side)
    np.testing.assert_array_equal(ex.full_tree_.apply(X), ex.code_tree_.route(ex.mapper_.transform(X), ex.mapper_))
    assert np.isnan(X).any() and (ex.predict(X) >= 0).all()


def test_imm_tree_keeps_set_cuts_vocabulary_and_routes_unseen_categories_as_missing(rng):
    from exclust.algorithms.histogram.imm import IMM
    from exclust.tree import CATEGORY_SET

    X, Z, centers = _customers(rng)
    vocabulary = ["at", "de", "fr", "nl", "pl"]
    imm = IMM(3, max_bins=64, random_state=0).fit(_dataset(X, {1: vocabulary}), centers, Z=Z)
    tree = imm.tree_
    assert (tree.kind == CATEGORY_SET).any() and tree.categories == {1: vocabulary}
    assert "segment in {" in tree.rules_text()
    data = encode_for_trees(_dataset(X, {1: vocabulary}), centers, 64, random_state=0, Z=Z)
    code_tree, mistakes = grow_imm(data)
    np.testing.assert_array_equal(tree.apply(X), code_tree.route(data.mapper.transform(X), data.mapper))
    assert mistakes == imm.n_mistakes_
    data.release()
    unseen = X.copy()
    unseen[np.isnan(X[:, 1]), 1] = -1.0  # a category the tree never saw goes where missing values go
    np.testing.assert_array_equal(tree.predict(unseen), tree.predict(X))


def test_exkmc_with_a_category_and_z_prices_its_set_cuts_in_z(rng):
    X, Z, centers = _customers(rng)
    data = encode_for_trees(_dataset(X, {1: 5}), centers, 64, random_state=0, Z=Z)
    from exclust.algorithms.histogram.exkmc import expand_by_surrogate

    tree, _ = grow_imm(data)
    history = expand_by_surrogate(data, tree, 5)
    leaf = tree.route(data.mapper.transform(X), data.mapper)
    cost = float(((Z - centers[np.asarray(tree.value)[leaf]]) ** 2).sum())
    np.testing.assert_allclose(history["surrogate_costs"][-1], cost, rtol=1e-9)
    data.release()


@pytest.mark.parametrize("algorithm", ["imm", "exkmc"])
def test_an_explain_run_cuts_category_sets(algorithm):
    import pandas as pd

    from exclust.jobs.config import ExplainConfig
    from exclust.jobs.explain.steps import explain
    from exclust.tree import CATEGORY_SET

    rng = np.random.default_rng(5)
    centers = np.array([[0.0, 0.0], [6.0, 0.0], [0.0, 6.0]])
    y = rng.integers(0, 3, size=900)
    age = rng.normal(size=900)  # complete: the run's scoring pass still refuses NaN rows (scoring/metrics.py)
    frame = pd.DataFrame({"e0": centers[y, 0] + rng.normal(size=900), "e1": centers[y, 1] + rng.normal(size=900),
                          "country": np.array(["de", "fr", "it"], dtype=object)[y], "age": age})
    run = explain(ExplainConfig(input=frame, features=["age", "country"], cluster_on=["e0", "e1"], n_clusters=3,
                                algorithm=algorithm, reference="kmeans", cost_curve=False, standing=False))
    assert (run.tree.kind == CATEGORY_SET).any() and run.tree.categories[1] == ["de", "fr", "it"]
    assert run.metrics["ari_reference"] > 0.9  # the clusters follow the country: a set cut finds them
    age[::10] = np.nan
    labels = run.tree.predict(np.column_stack([age, np.array([0.0, 1.0, 2.0])[y]]))
    assert (labels >= 0).all()  # every row routed, missing ages included (each cut learned a side)


def test_rules_name_the_missing_side_only_for_features_that_held_missing_values():
    """Every cut learns a side, but where a feature held no missing value at fit that side is a default
    (the larger child): the rules and drawings name it only for the features that held some."""
    from exclust.algorithms.histogram.imm import IMM
    from exclust.tree import ThresholdTree

    rng = np.random.default_rng(3)
    centers = np.array([[0.0, 0.0], [6.0, 0.0], [0.0, 6.0], [6.0, 6.0]])
    X = np.concatenate([c + rng.normal(size=(60, 2)) for c in centers])
    complete = IMM(4, random_state=0).fit(Dataset(X, ["x0", "x1"]), centers).tree_
    assert "(or missing)" not in complete.rules_text() and "or missing" not in complete._repr_svg_()
    assert complete.meta["missing_at_fit"] == []
    holed = X.copy()
    holed[::7, 0] = np.nan
    tree = IMM(4, random_state=0).fit(Dataset(holed, ["x0", "x1"]), centers, Z=X).tree_  # distances from complete Z
    assert tree.meta["missing_at_fit"] == ["x0"]
    words = tree.rules_text()
    assert "x0" in words and "(or missing)" in words
    assert all("x1" not in part or "(or missing)" not in part.split("x1", 1)[1].split(" and ")[0]
               for part in words.splitlines())
    assert ThresholdTree.from_json(tree.to_json()).rules_text() == words
