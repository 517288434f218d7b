"""ExKMC: fidelity to the authors' implementation, greedy steps optimal by brute force, prefixes, Dask."""
from __future__ import annotations

import json

import dask.array as da
import numpy as np
import pytest
from conftest import SHARED_FIXTURES, shared_dataset
from sklearn import datasets

from exclust.algorithms.histogram import exkmc
from exclust.algorithms.histogram.binning import edges_from_sample
from exclust.algorithms.histogram.criteria import SurrogateCost
from exclust.algorithms.histogram.engine import CodeTree, EncodedData
from exclust.algorithms.histogram.exkmc import ExKMC
from exclust.algorithms.histogram.imm import IMM
from exclust.dataplane.parts import kernel_threading
from exclust.scoring.curves import kmeans_costs


def kmeans_cost(X, labels):
    return sum(((X[labels == c] - X[labels == c].mean(0)) ** 2).sum() for c in np.unique(labels))


def surrogate_cost(tree, X, centers, objective="kmeans"):
    diff = X - centers[tree.predict(X)]
    return float((np.abs(diff) if objective == "kmedians" else diff ** 2).sum())


def per_center_costs(X, centers, objective="kmeans"):
    diff = X[:, None, :] - centers[None]
    return (np.abs(diff) if objective == "kmedians" else diff ** 2).sum(-1)  # (n, k)


def _fixture_data(name):
    loaders = {"iris": datasets.load_iris, "wine": datasets.load_wine, "breast_cancer": datasets.load_breast_cancer}
    if name in loaders:
        return loaders[name]().data.astype(np.float64)
    return shared_dataset(name)[0]


def _fixture():
    path = SHARED_FIXTURES / "exkmc_reference.json"
    if not path.exists():
        pytest.skip("../shared/fixtures/exkmc_reference.json is absent (needs ../shared beside the checkout)")
    return json.loads(path.read_text())


@pytest.mark.parametrize("name", ["iris", "wine", "breast_cancer", "r15", "d31"])
def test_reaches_reference_implementation_cost_ratios(name):
    ref = _fixture()[name]
    X = _fixture_data(name)
    centers = np.asarray(ref["centers"])
    k = ref["k"]
    leaves = sorted(int(L) for L in ref["exkmc"])
    # Exact search (every midpoint a candidate), as the authors' sorting implementation.
    model = ExKMC(k, leaves[-1], max_bins=65536).fit(X, centers)
    trees = [model.tree_at(L) for L in leaves]
    costs = kmeans_costs(X, trees, k)
    for L, tree, cost in zip(leaves, trees, costs, strict=True):
        expected = ref["exkmc"][str(L)]["cost_ratio"]
        assert cost / ref["reference_cost"] <= expected + 0.005, (name, L)
        assert np.isclose(cost, kmeans_cost(X, tree.predict(X)))
    # k leaves is IMM's tree.
    assert trees[0].n_leaves == k


def _brute_best_gain(X, centers, rows, label, cands, objective="kmeans"):
    """Largest drop of surrogate cost from cutting one leaf, by trying every threshold directly."""
    sub = X[rows]
    per_center = per_center_costs(sub, centers, objective)
    now = per_center[:, label].sum()
    best = now
    for f in range(X.shape[1]):
        for t in cands[f]:
            left = sub[:, f] <= t
            if left.all() or not left.any():
                continue
            cost = per_center[left].sum(0).min() + per_center[~left].sum(0).min()
            best = min(best, cost)
    return now - best


@pytest.mark.parametrize("objective", ["kmeans", "kmedians"])
def test_every_expansion_step_is_the_brute_force_greedy_step(objective):
    rng = np.random.default_rng(3)
    k = 4
    C = rng.integers(-8, 8, size=(k, 2)).astype(float)
    X = (C[rng.integers(0, k, 300)] + rng.integers(-4, 5, size=(300, 2))).astype(float)
    centers = C + rng.normal(scale=0.4, size=C.shape)
    labels = np.argmin(per_center_costs(X, centers, objective), 1)
    cands = []
    for f in range(2):
        v = np.unique(X[:, f])
        cands.append(v[:-1] + np.diff(v) / 2)
    model = ExKMC(k, 3 * k, max_bins=256, objective=objective).fit(X, centers)
    assert model.mapper_.exact.all()
    steps = 0
    for L in range(k, model.leaf_counts_[-1]):
        before, after = model.tree_at(L), model.tree_at(L + 1)
        leaf_of = before.apply(X)
        gains = []
        for leaf in np.unique(leaf_of):
            rows = np.flatnonzero(leaf_of == leaf)
            if (labels[rows] != before.value[leaf]).any():
                gains.append(_brute_best_gain(X, centers, rows, before.value[leaf], cands, objective))
        drop = surrogate_cost(before, X, centers, objective) - surrogate_cost(after, X, centers, objective)
        assert drop == pytest.approx(max(gains), rel=1e-9, abs=1e-7)
        steps += 1
        # Recorded surrogate costs are the real ones.
        assert model.surrogate_costs_[L + 1 - k] == pytest.approx(
            surrogate_cost(after, X, centers, objective), rel=1e-9
        )
    assert steps >= k


def test_surrogate_cost_never_increases_and_ends_at_the_reference(rng):
    C = rng.uniform(-5, 5, (5, 3))
    X = C[rng.integers(0, 5, 1500)] + 1.5 * rng.normal(size=(1500, 3))
    model = ExKMC(5, 200).fit(X, C)
    s = np.asarray(model.surrogate_costs_)
    assert (np.diff(s) <= 1e-9 * s[0]).all()  # Theorem 1
    ref = ((X[:, None] - C) ** 2).sum(-1).min(1).sum()
    if model.tree_.n_leaves < 200:  # stopped early: every leaf is pure, the reference is reproduced
        assert s[-1] == pytest.approx(ref, rel=1e-9)
        assert np.array_equal(model.predict(X), np.argmin(((X[:, None] - C) ** 2).sum(-1), 1))


def test_prefix_trees_equal_separate_fits(rng):
    C = rng.uniform(-6, 6, (4, 3))
    X = C[rng.integers(0, 4, 1200)] + 2.0 * rng.normal(size=(1200, 3))
    big = ExKMC(4, 12).fit(X, C)
    for L in (4, 7, 10):
        assert big.tree_at(L) == ExKMC(4, L).fit(X, C).tree_


def test_base_tree_none_starts_from_one_leaf(rng):
    C = np.array([[0.0, 0.0], [6.0, 0.0], [0.0, 6.0]])
    X = C[rng.integers(0, 3, 900)] + rng.normal(size=(900, 2))
    model = ExKMC(3, 6, base_tree="none").fit(X, C)
    assert model.leaf_counts_[0] == 1 and model.tree_.n_leaves <= 6
    assert kmeans_cost(X, model.predict(X)) / ((X[:, None] - C) ** 2).sum(-1).min(1).sum() < 1.05
    tiny = ExKMC(3, 2, base_tree="none").fit(X, C)  # fewer leaves than clusters is allowed without IMM
    assert tiny.tree_.n_leaves == 2


def test_binned_routing_equals_raw_routing_with_quantile_bins(rng):
    X = rng.standard_t(3, size=(6000, 3))
    C = X[:5]
    model = ExKMC(5, 15, max_bins=32).fit(X, C)
    assert not model.mapper_.exact.any()
    codes = model.mapper_.transform(X)
    by_codes = np.asarray(model.code_tree_.value)[model.code_tree_.route(codes)]
    np.testing.assert_array_equal(model.tree_.predict(X), by_codes)


def test_dask_input_matches_numpy(dask_client, rng):
    C = rng.uniform(-10, 10, (4, 3))
    X = C[rng.integers(0, 4, 4000)] + rng.normal(size=(4000, 3))
    local = ExKMC(4, 8, max_bins=64).fit(X, C)
    dist = ExKMC(4, 8, max_bins=64).fit(da.from_array(X, chunks=(900, 3)), C)
    assert dist.tree_.n_leaves == local.tree_.n_leaves
    assert kmeans_cost(X, dist.predict(X)) == pytest.approx(kmeans_cost(X, local.predict(X)), rel=1e-3)
    assert dist.n_passes_ >= 3 and isinstance(dist.predict(da.from_array(X, chunks=1000)), da.Array)


def test_bad_parameters_are_named(rng):
    X = rng.normal(size=(100, 2))
    C = np.zeros((3, 2))
    with pytest.raises(ValueError, match="max_leaves"):
        ExKMC(3, 2).fit(X, C)
    with pytest.raises(ValueError, match="max_leaves"):
        ExKMC(3, 0, base_tree="none").fit(X, C)
    with pytest.raises(ValueError, match="base_tree"):
        ExKMC(3, 4, base_tree="cart").fit(X, C)
    with pytest.raises(ValueError, match="centers"):
        ExKMC(3, 4).fit(X, np.zeros((2, 2)))
    with pytest.raises(ValueError, match="max_bins"):
        ExKMC(3, 4, max_bins=1).fit(X, C)


def test_kmedians_ends_at_the_l1_reference_and_runs_on_dask(dask_client, rng):
    C = rng.uniform(-5, 5, (4, 3))
    X = C[rng.integers(0, 4, 2000)] + 1.5 * rng.normal(size=(2000, 3))
    model = ExKMC(4, 200, objective="kmedians").fit(X, C)
    s = np.asarray(model.surrogate_costs_)
    l1 = per_center_costs(X, C, "kmedians")
    assert s[0] == pytest.approx(surrogate_cost(model.tree_at(4), X, C, "kmedians"), rel=1e-9)
    assert (np.diff(s) <= 1e-9 * s[0]).all()
    if model.tree_.n_leaves < 200:  # every leaf pure: the l1 reference assignment is reproduced
        assert s[-1] == pytest.approx(l1.min(1).sum(), rel=1e-9)
        assert np.array_equal(model.predict(X), np.argmin(l1, 1))
    local = ExKMC(4, 8, max_bins=64, objective="kmedians").fit(X, C)
    dist = ExKMC(4, 8, max_bins=64, objective="kmedians").fit(da.from_array(X, chunks=(500, 3)), C)
    assert dist.tree_ == local.tree_


def test_expansion_computes_smaller_sides_ahead_in_few_passes(rng):
    """One pass per split would cost (leaves - k) expansion passes; computing the smaller side of
    every leaf that may still split, ahead, leaves the tree unchanged (the brute-force test above)
    in fewer passes."""
    C = rng.uniform(-6, 6, (6, 4))
    X = C[rng.integers(0, 6, 6000)] + 2.5 * rng.normal(size=(6000, 4))
    imm = IMM(6).fit(X, C)
    model = ExKMC(6, 30).fit(X, C)
    splits = len(model.split_order_)
    assert splits == 24
    expansion_passes = model.n_passes_ - imm.n_passes_
    # One pass scores IMM's leaves; then far fewer than one per split.
    assert 2 <= expansion_passes <= 1 + splits // 2, expansion_passes


def test_a_leaf_histogram_is_the_same_to_the_bit_in_any_pass(rng):
    """The surrogate kernel sums every cell over its slot's rows in row order, whatever other
    slots the pass holds and however many threads run it: a leaf's histogram dropped to save
    memory is computed again to the bit."""
    C = rng.uniform(-4, 4, (7, 5))
    X = C[rng.integers(0, 7, 3000)] + rng.normal(size=(3000, 5))
    data = EncodedData(X, edges_from_sample(X, max_bins=32), C)
    tree = CodeTree()
    left, right = tree.split(0, 0, 15)
    tree.split(left, 2, 10)
    leaves = tree.leaves()
    slot = np.full(tree.n_nodes, -1, dtype=np.int64)
    slot[leaves] = np.arange(len(leaves))
    with kernel_threading(2):
        together, together_counts = data.histograms(SurrogateCost(), tree, slot, len(leaves))
    for s, leaf in enumerate(leaves):
        alone = np.full(tree.n_nodes, -1, dtype=np.int64)
        alone[leaf] = 0
        with kernel_threading(1):
            h, counts = data.histograms(SurrogateCost(), tree, alone, 1)
        np.testing.assert_array_equal(h[0], together[s])
        np.testing.assert_array_equal(counts[0], together_counts[s])
        first, _ = data.histograms(SurrogateCost(), tree, alone, 1, 1)  # the first feature only
        np.testing.assert_array_equal(first[0], together[s][:1])


def test_histograms_in_several_passes_give_the_same_tree(rng, monkeypatch):
    """At many clusters a leaf's histograms are tens of MB, so ExKMC computes them in passes of
    at most ``HISTOGRAM_BYTES`` and keeps only those of leaves that may still be split. With
    room for one leaf only (a pass per leaf, a split's sides computed both), the tree, its split
    order and its surrogate costs are those of one pass for every leaf."""
    C = rng.uniform(-6, 6, (6, 4))
    X = C[rng.integers(0, 6, 3000)] + 2.5 * rng.normal(size=(3000, 4))
    whole = ExKMC(6, 20).fit(X, C)
    imm_only = ExKMC(6, 6).fit(X, C)
    monkeypatch.setattr(exkmc, "HISTOGRAM_BYTES", 1)
    tight = ExKMC(6, 20).fit(X, C)
    assert len(whole.split_order_) == 14
    assert tight.tree_ == whole.tree_ and tight.split_order_ == whole.split_order_
    np.testing.assert_allclose(tight.surrogate_costs_, whole.surrogate_costs_, rtol=1e-12)
    assert tight.n_passes_ > whole.n_passes_
    # No split to make (k leaves): IMM's tree, and its cost from one feature's histograms.
    tight_imm = ExKMC(6, 6).fit(X, C)
    assert tight_imm.tree_ == imm_only.tree_
    assert np.array_equal(tight_imm.predict(X), IMM(6).fit(X, C).predict(X))
    assert tight_imm.surrogate_costs_ == imm_only.surrogate_costs_ == whole.surrogate_costs_[:1]
    assert tight_imm.surrogate_costs_[0] == pytest.approx(surrogate_cost(tight_imm.tree_, X, C), rel=1e-9)
