"""Bound 9 (``_slab_bound``, ``OptimalTree(use_slabs=True)``): a side's bound carried to the larger
sides of its feature with the slabs in between added. Never above a side's optimum (brute force),
never below Bound 1's carried bound, above it somewhere; the search with it finds the same optimum
and a stopped search keeps a valid bound."""
from __future__ import annotations

import numpy as np
import pytest
from test_optimal_certified import _root_and_a_sub_box, brute_force

from exclust.algorithms.search._first_cut_bound import margin_of
from exclust.algorithms.search._scatter_bounds import moments_by_bin, position_spectral_bounds
from exclust.algorithms.search._slab_bound import carry_left, carry_right, lift_left, lift_right, slab_prefix
from exclust.algorithms.search.optimal import OptimalTree
from exclust.algorithms.search.optimal_tree import optimal_tree


def _few_values(seed: int, rows: int, spread: int = 2, values: int = 2) -> np.ndarray:
    """Rows whose first feature takes ``values`` values (so each bin's slab holds several rows) and whose
    ``spread`` others are spread out: a slab's Bound 4 for m leaves is above 0 only where its cells'
    scatter has rank above m - 1."""
    rng = np.random.default_rng(seed)
    return np.column_stack([rng.integers(0, values, rows) * 2.0, np.round(rng.normal(size=(rows, spread)) * 3, 1)])


def _blobs(seed: int, rows: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centers = rng.normal(size=(4, 2)) * 4
    return np.round(centers[rng.integers(0, 4, rows)] + rng.normal(size=(rows, 2)), 0)


def test_slab_lifted_side_bounds_are_at_most_every_sides_optimum_and_at_least_bound_one():
    raised = 0
    for seed in range(4):
        X = _few_values(seed, 18, spread=3, values=3)
        mapper, cells, codes, nodes = _root_and_a_sub_box(X, 1)
        for chosen, rows_in in nodes:
            margin = margin_of(cells.stats, chosen)
            for f in range(X.shape[1]):
                positions = np.unique(cells.codes[chosen, f])[:-1]
                if positions.size == 0:
                    continue
                moments = moments_by_bin(cells.codes, cells.stats, chosen, f, mapper.max_n_bins)
                left, right = position_spectral_bounds(cells.codes, cells.stats, chosen, f, positions,
                                                       mapper.max_n_bins, 4, moments)
                prefix, total = slab_prefix(moments, positions, 4)
                for m in (3,):  # brute force over four features: three leaves keep it to seconds
                    optimum_left = [brute_force(X[rows_in & (codes[:, f] <= b)], m) for b in positions]
                    optimum_right = [brute_force(X[rows_in & (codes[:, f] > b)], m) for b in positions]
                    lifted_left = lift_left(left[:, m], prefix[:, m], margin)
                    lifted_right = lift_right(right[:, m], prefix[:, m], float(total[m]), margin)
                    assert np.all(lifted_left <= np.array(optimum_left) + 1e-9)
                    assert np.all(lifted_right <= np.array(optimum_right) + 1e-9)
                    old_left = np.maximum.accumulate(left[:, m])
                    old_right = np.maximum.accumulate(right[::-1, m])[::-1]
                    assert np.all(lifted_left >= old_left) and np.all(lifted_right >= old_right)
                    # A probe's tightest possible result (the side's optimum) carried to its neighbours,
                    # against Bound 1's carry of the same value.
                    for mid in range(positions.size):
                        low_left, low_right = lifted_left.copy(), lifted_right.copy()
                        carry_left(low_left, mid, optimum_left[mid], prefix[:, m], margin)
                        carry_right(low_right, mid, optimum_right[mid], prefix[:, m], margin)
                        assert np.all(low_left <= np.array(optimum_left) + 1e-9)
                        assert np.all(low_right <= np.array(optimum_right) + 1e-9)
                        plain_left = np.concatenate([lifted_left[:mid],
                                                     np.maximum(lifted_left[mid:], optimum_left[mid])])
                        plain_right = np.concatenate([np.maximum(lifted_right[:mid + 1], optimum_right[mid]),
                                                      lifted_right[mid + 1:]])
                        assert np.all(low_left >= plain_left) and np.all(low_right >= plain_right)
                        raised += int(np.any(low_left > plain_left + 1e-9) or np.any(low_right > plain_right + 1e-9))
    assert raised > 0  # the slabs do add something to the carried bounds on these sets


@pytest.mark.parametrize("make", [_few_values, _blobs])
def test_the_search_with_slabs_finds_the_brute_force_optimum_and_a_stopped_one_stays_below_it(make):
    for seed in range(3):
        X = make(seed, 11)
        for k in (4, 5):
            optimum = brute_force(X, k)
            model = OptimalTree(k, max_bins=256, use_slabs=True).fit(X)
            assert model.cost_ == pytest.approx(optimum, rel=1e-9, abs=1e-9)
            assert model.proven_optimal_ and model.lower_bound_ == model.cost_
            for max_nodes in (1, 3, 8):
                stopped = OptimalTree(k, max_bins=256, max_nodes=max_nodes, use_slabs=True,
                                      probe_nodes=1, probe_min_leaves=3, probe_max_leaves=99).fit(X)
                assert stopped.lower_bound_ <= optimum + 1e-9 <= stopped.cost_ + 2e-9
                assert stopped.proven_optimal_ == (stopped.lower_bound_ == stopped.cost_)


def test_slabs_are_the_default_and_change_no_optimum():
    X = _few_values(5, 40, spread=3, values=4)
    default = OptimalTree(5, max_bins=256).fit(X)
    slabs, plain = (OptimalTree(5, max_bins=256, use_slabs=use).fit(X) for use in (True, False))
    assert (default.nodes_searched_, default.sweeps_) == (slabs.nodes_searched_, slabs.sweeps_)
    assert default.cost_ == pytest.approx(plain.cost_, rel=1e-9) and default.proven_optimal_ and plain.proven_optimal_


def test_six_leaves_with_slabs_equal_the_midpoint_oracle():
    X = _blobs(7, 16)
    _, oracle = optimal_tree(X, 6)
    for probe_nodes in (None, 1):
        model = OptimalTree(6, max_bins=256, use_slabs=True, probe_nodes=probe_nodes).fit(X)
        assert model.cost_ == pytest.approx(oracle, rel=1e-9, abs=1e-9) and model.proven_optimal_
