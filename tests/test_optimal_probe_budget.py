"""OptimalTree's probes with their own node budget (``probe_nodes``, iterative deepening at the
first ``probe_depth`` levels): the same optimum as brute force, bounds never above it when the
search is stopped, and stopped probes that do come back with twice the nodes."""
from __future__ import annotations

import numpy as np
import pytest
from test_optimal_certified import brute_force

from exclust.algorithms.search.optimal import OptimalTree
from exclust.algorithms.search.optimal_tree import optimal_tree

BUDGETS = [(1, 1), (3, 1), (1, 2), (2, 9)]  # (probe_nodes, probe_depth)


def _blobs(seed: int, rows: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centers = rng.normal(size=(4, 2)) * 4
    return np.round(centers[rng.integers(0, 4, rows)] + rng.normal(size=(rows, 2)), 1)


@pytest.mark.parametrize("probe_nodes, probe_depth", BUDGETS)
def test_probes_with_their_own_budget_find_the_brute_force_optimum(probe_nodes, probe_depth):
    for seed in range(2):
        X = _blobs(seed, 10)
        for k in (4, 5):
            model = OptimalTree(k, max_bins=256, probe_nodes=probe_nodes, probe_depth=probe_depth,
                                probe_min_leaves=3, probe_max_leaves=99).fit(X)
            assert model.cost_ == pytest.approx(brute_force(X, k), rel=1e-9, abs=1e-9)
            assert model.proven_optimal_ and model.lower_bound_ == model.cost_


@pytest.mark.parametrize("probe_nodes, probe_depth", BUDGETS)
def test_six_leaves_with_probe_budgets_equal_the_midpoint_oracle(probe_nodes, probe_depth):
    X = _blobs(7, 16)
    _, oracle = optimal_tree(X, 6)
    model = OptimalTree(6, max_bins=256, probe_nodes=probe_nodes, probe_depth=probe_depth,
                        probe_min_leaves=3, probe_max_leaves=99).fit(X)
    assert model.cost_ == pytest.approx(oracle, rel=1e-9, abs=1e-9)
    assert model.proven_optimal_
    default = OptimalTree(6, max_bins=256).fit(X)  # budgets for the root's five-leaf sides
    assert default.cost_ == pytest.approx(oracle, rel=1e-9, abs=1e-9) and default.proven_optimal_


def test_a_stopped_search_with_probe_budgets_keeps_a_valid_bound():
    for seed in range(2):
        X = _blobs(10 + seed, 10)
        for k in (4, 5):
            optimum = brute_force(X, k)
            for probe_nodes, probe_depth in BUDGETS:
                for max_nodes in (1, 3, 8, 20):
                    model = OptimalTree(k, max_bins=256, max_nodes=max_nodes, probe_nodes=probe_nodes,
                                        probe_depth=probe_depth, probe_min_leaves=3, probe_max_leaves=99).fit(X)
                    assert model.lower_bound_ <= optimum + 1e-9 <= model.cost_ + 2e-9
                    assert model.proven_optimal_ == (model.lower_bound_ == model.cost_)


def test_a_probe_stopped_by_its_budget_comes_back_with_twice_the_nodes():
    """With one node per probe, some root position is probed again with 2 (then 4...) nodes; at the
    default (budgets for sides of five or more leaves) no probe of a five-leaf tree is budgeted, and
    its search is the one without budgets, node for node."""
    X = _blobs(3, 40)
    deepened = OptimalTree(5, max_bins=256, probe_nodes=1, probe_min_leaves=3, probe_max_leaves=99).fit(X)
    budgets = [probe["budget"] for probe in deepened.root_probes_]
    assert 1 in budgets and 2 in budgets
    assert all(probe["nodes"] <= probe["budget"] + 1 for probe in deepened.root_probes_)
    default, plain = OptimalTree(5, max_bins=256).fit(X), OptimalTree(5, max_bins=256, probe_nodes=None).fit(X)
    assert {probe["budget"] for probe in default.root_probes_} == {0}
    assert (default.nodes_searched_, default.sweeps_, default.cost_) == (plain.nodes_searched_, plain.sweeps_,
                                                                         plain.cost_)
    assert deepened.cost_ == pytest.approx(plain.cost_, rel=1e-9) and deepened.proven_optimal_ and plain.proven_optimal_
