"""MMDT (paper 000 Alg. 1 and App. B, paper 002 Alg. 1) on mixtures whose right tree is known."""
from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from exclust import MMDT
from exclust.algorithms.mmdt.mmdt import THRESHOLDS
from exclust.errors import InputError
from exclust.reference.summary import MixtureSummary

OPTIMIZED = ("gaussian", "chebyshev", "exact")


def _cuts(model):
    """(feature, threshold, components) of every internal node, root first."""
    return [(d["feature"], d["threshold"], d["components"]) for d in model.node_diagnostics_]


def _brute_force_objective(kind, theta, means, weights, sigmas):
    """Paper 002 eq. 4-6 written out with scipy, independent of the numba kernel."""
    s = np.abs(theta[:, None] - means[None, :]) / sigmas[None, :]
    if kind == "exact":
        terms = stats.norm.sf(s)
    elif kind == "gaussian":
        terms = np.exp(-0.5 * s**2)
    else:
        with np.errstate(divide="ignore"):
            terms = np.minimum(1.0, 1.0 / s**2)
    return terms @ (weights / weights.sum())


# ---------------------------------------------------------------- known trees
@pytest.mark.parametrize("threshold", THRESHOLDS)
def test_three_means_on_one_axis_give_two_cuts_on_that_axis(threshold):
    # Axis 0 is irrelevant: the means hardly differ there relative to its sigma.
    summary = MixtureSummary(means=[[0.0, 0.0], [0.1, 6.0], [0.05, 12.0]], sigma=[5.0, 1.0],
                             feature_names=["noise", "signal"])
    model = MMDT(threshold, random_state=0).fit(summary)
    cuts = _cuts(model)
    assert [c[0] for c in cuts] == [1, 1]
    thresholds = sorted(c[1] for c in cuts)
    assert 0.0 < thresholds[0] < 6.0 < thresholds[1] < 12.0
    assert model.tree_.features_used == ["signal"]
    np.testing.assert_array_equal(model.predict(summary.means), [0, 1, 2])


@pytest.mark.parametrize("threshold", OPTIMIZED + ("midpoint",))
def test_equal_weights_and_sigmas_cut_at_the_midpoint(threshold):
    summary = MixtureSummary(means=[[0.0], [6.0]], sigma=[1.0])
    model = MMDT(threshold, random_state=0).fit(summary)
    assert model.tree_.threshold[0] == pytest.approx(3.0, abs=1e-6)


@pytest.mark.parametrize("threshold", OPTIMIZED)
def test_unequal_weights_move_the_cut_toward_the_lighter_mean(threshold):
    heavy_left = MixtureSummary(means=[[0.0], [6.0]], sigma=[1.0], weights=[0.9, 0.1])
    heavy_right = MixtureSummary(means=[[0.0], [6.0]], sigma=[1.0], weights=[0.1, 0.9])
    t_left = MMDT(threshold, random_state=0).fit(heavy_left).tree_.threshold[0]
    t_right = MMDT(threshold, random_state=0).fit(heavy_right).tree_.threshold[0]
    assert 3.0 < t_left < 6.0  # light component at 6: the cut moves toward it
    assert 0.0 < t_right < 3.0
    assert t_left - 3.0 == pytest.approx(3.0 - t_right, rel=1e-6)  # mirror images


@pytest.mark.parametrize("threshold", OPTIMIZED)
def test_far_apart_means_do_not_underflow(threshold):
    # 50 sigmas from each mean the tails are ~1e-545: the objective is minimized in logs.
    equal = MixtureSummary(means=[[0.0], [100.0]], sigma=[1.0])
    assert MMDT(threshold).fit(equal).tree_.threshold[0] == pytest.approx(50.0, abs=1e-5)
    light_right = MixtureSummary(means=[[0.0], [100.0]], sigma=[1.0], weights=[0.9, 0.1])
    assert 50.0 < MMDT(threshold).fit(light_right).tree_.threshold[0] < 100.0


def test_exact_moves_the_cut_toward_the_narrower_component():
    summary = MixtureSummary(means=[[0.0], [6.0]], sigma_per_component=[[2.0], [0.5]])
    theta = MMDT("exact", random_state=0).fit(summary).tree_.threshold[0]
    assert 3.0 < theta < 6.0
    # First-order condition of eq. 4: the two weighted densities meet at theta.
    assert stats.norm.pdf(theta, 0, 2.0) == pytest.approx(stats.norm.pdf(theta, 6, 0.5), rel=1e-4)
    # With one pooled sigma (the bounds) the cut stays at the midpoint.
    assert MMDT("gaussian").fit(summary).tree_.threshold[0] == pytest.approx(3.0, abs=1e-6)


def test_midpoint_uses_the_largest_normalized_gap_not_the_largest_raw_gap():
    # Axis 0: gaps 10 and 2 with sigma 10 (normalized 1.0, 0.2); axis 1: gaps 3 and 1 with sigma 1.
    summary = MixtureSummary(means=[[0.0, 0.0], [10.0, 3.0], [12.0, 4.0]], sigma=[10.0, 1.0])
    model = MMDT("midpoint", random_state=0).fit(summary)
    (f0, t0, _), (f1, t1, _) = _cuts(model)
    assert (f0, t0) == (1, 1.5)
    assert (f1, t1) == (1, 3.5)
    assert model.node_diagnostics_[0]["normalized_separation"] == pytest.approx(3.0)


def test_paper002_axis_is_the_largest_normalized_range():
    # Raw ranges: 12 on axis 0, 4 on axis 1; normalized: 1.2 and 4.
    summary = MixtureSummary(means=[[0.0, 0.0], [10.0, 3.0], [12.0, 4.0]], sigma=[10.0, 1.0])
    for threshold in OPTIMIZED + ("random",):
        model = MMDT(threshold, random_state=0).fit(summary)
        assert model.node_diagnostics_[0]["feature"] == 1
        assert model.node_diagnostics_[0]["normalized_separation"] == pytest.approx(4.0)


@pytest.mark.parametrize("threshold", OPTIMIZED)
def test_threshold_is_the_minimizer_of_the_papers_objective(threshold):
    rng = np.random.default_rng(7)
    for _ in range(20):
        K = int(rng.integers(2, 8))
        means = rng.normal(0, 3, size=(K, 1))
        sig_k = rng.uniform(0.3, 2.0, size=(K, 1))
        weights = rng.uniform(0.1, 1.0, K)
        summary = MixtureSummary(means=means, sigma_per_component=sig_k, weights=weights)
        model = MMDT(threshold, random_state=0).fit(summary)
        theta = model.tree_.threshold[0]
        sig = sig_k[:, 0] if threshold == "exact" else np.full(K, summary.sigma[0])
        # The search keeps a margin of 1e-3 of the gap from every mean (the infimum may sit
        # on a mean, where no minimizer exists): brute force over the same allowed set.
        cuts = np.unique(means)
        grid = np.concatenate([
            np.linspace(a + 1e-3 * (b - a), b - 1e-3 * (b - a), 20_001)
            for a, b in zip(cuts[:-1], cuts[1:], strict=True)
        ])
        brute = _brute_force_objective(threshold, grid, means[:, 0], weights, sig).min()
        ours = _brute_force_objective(threshold, np.array([theta]), means[:, 0], weights, sig)[0]
        assert ours <= brute * (1 + 1e-6) + 1e-12
        assert model.node_diagnostics_[0]["objective"] == pytest.approx(ours, rel=1e-9, abs=1e-15)
        assert not np.isin(theta, means)


def test_chebyshev_cap_is_broken_by_the_uncapped_bound():
    # Both means within one sigma of every threshold: the capped bound is flat (= 1), and the
    # uncapped eq. 5 picks the midpoint for equal weights.
    summary = MixtureSummary(means=[[0.0], [0.5]], sigma=[1.0])
    model = MMDT("chebyshev", random_state=0).fit(summary)
    assert model.tree_.threshold[0] == pytest.approx(0.25, abs=1e-6)
    assert model.node_diagnostics_[0]["objective"] == pytest.approx(1.0)


def test_boundary_infimum_stays_strictly_inside():
    # Close means under the Gaussian bound: f is largest in the middle, its infimum at a mean.
    summary = MixtureSummary(means=[[0.0], [1.0]], sigma=[1.0])
    model = MMDT("gaussian", random_state=0).fit(summary)
    theta = model.tree_.threshold[0]
    assert 0.0 < theta < 1.0
    assert model.node_diagnostics_[0]["at_edge"]
    np.testing.assert_array_equal(model.predict(summary.means), [0, 1])


# ---------------------------------------------------------------- random variant and ties
def test_random_thresholds_are_uniform_on_the_range_and_reproducible():
    summary = MixtureSummary(means=[[0.0, 0.0], [1.0, 0.1]], sigma=[1.0, 1.0])
    thetas = np.array([MMDT("random", random_state=s).fit(summary).tree_.threshold[0] for s in range(400)])
    assert ((thetas > 0) & (thetas < 1)).all()
    assert stats.kstest(thetas, "uniform").pvalue > 1e-3
    a = MMDT("random", random_state=11).fit(summary).tree_
    b = MMDT("random", random_state=11).fit(summary).tree_
    assert a == b
    assert len(set(np.round(thetas, 12))) > 390


def test_ties_are_broken_at_random_but_reproducibly():
    # Two axes with the same normalized range: both must be chosen for some seeds.
    diagonal = MixtureSummary(means=[[0.0, 0.0], [1.0, 1.0]], sigma=[1.0, 1.0])
    axes = {MMDT("exact", random_state=s).fit(diagonal).tree_.feature[0] for s in range(30)}
    assert axes == {0, 1}
    # Three equally spaced means, equal weights: two mirror-image optimal thresholds.
    line = MixtureSummary(means=[[0.0], [5.0], [10.0]], sigma=[1.0])
    for threshold in ("exact", "gaussian", "midpoint"):
        roots = {round(MMDT(threshold, random_state=s).fit(line).tree_.threshold[0], 6) for s in range(30)}
        assert len(roots) == 2 and min(roots) < 5.0 < max(roots), threshold
        assert MMDT(threshold, random_state=3).fit(line).tree_ == MMDT(threshold, random_state=3).fit(line).tree_


# ---------------------------------------------------------------- structure
@pytest.mark.parametrize("threshold", THRESHOLDS)
def test_every_leaf_holds_exactly_one_mean_for_random_mixtures(threshold):
    for seed in range(12):
        rng = np.random.default_rng(seed)
        K = int(rng.integers(2, 51))
        d = int(rng.integers(1, 8))
        # Means on a coarse grid: many coinciding coordinates on every axis.
        means = np.unique(rng.integers(0, 6, size=(K, d)).astype(float), axis=0)
        K = means.shape[0]
        summary = MixtureSummary(
            means=means, sigma_per_component=rng.uniform(0.2, 3.0, size=(K, d)), weights=rng.uniform(0.01, 1.0, K)
        )
        model = MMDT(threshold, random_state=seed).fit(summary)
        tree = model.tree_
        assert tree.n_leaves == K and tree.n_clusters == K
        assert sorted(tree.value[tree.kind == 0].tolist()) == list(range(K))
        np.testing.assert_array_equal(model.predict(means), np.arange(K))
        assert len(model.node_diagnostics_) == K - 1
        for diag in model.node_diagnostics_:
            vals = means[diag["components"], diag["feature"]]
            assert vals.min() < diag["threshold"] < vals.max()
            assert not np.isin(diag["threshold"], vals)


def test_single_component_is_a_single_leaf():
    model = MMDT(random_state=0).fit(MixtureSummary(means=[[1.0, 2.0]], sigma=[1.0, 1.0]))
    assert model.tree_.n_leaves == 1 and model.node_diagnostics_ == []
    np.testing.assert_array_equal(model.predict(np.zeros((3, 2))), [0, 0, 0])


def test_tree_carries_names_and_meta():
    summary = MixtureSummary(means=[[0.0, 0.0], [4.0, 0.0]], sigma=[1.0, 1.0], feature_names=["age", "income"])
    model = MMDT("chebyshev", random_state=0).fit(summary)
    assert model.tree_.feature_names == ["age", "income"]
    assert model.tree_.meta["algorithm"] == "mmdt" and model.tree_.meta["threshold"] == "chebyshev"
    assert model.node_diagnostics_[0]["feature_name"] == "age"
    assert model.enr_ == pytest.approx(16.0)
    assert "age <= 2" in model.tree_.rules_text()


def test_diagnostics_cut_off_share():
    apart = MMDT("exact", random_state=0).fit(MixtureSummary(means=[[0.0], [20.0]], sigma=[1.0]))
    assert apart.node_diagnostics_[0]["cut_off_share"] < 1e-20
    close = MMDT("exact", random_state=0).fit(MixtureSummary(means=[[0.0], [1.0]], sigma=[1.0]))
    # Both components lose Phi(-0.5) ~ 0.31 of their points at the midpoint.
    assert close.node_diagnostics_[0]["cut_off_share"] == pytest.approx(stats.norm.sf(0.5), rel=1e-6)


def test_predict_recovers_a_well_separated_mixture():
    rng = np.random.default_rng(0)
    means = np.array([[0.0, 0.0], [10.0, 0.0], [0.0, 10.0], [10.0, 10.0]])
    y = rng.integers(0, 4, 4000)
    X = means[y] + rng.normal(size=(4000, 2))
    summary = MixtureSummary(means=means, sigma=[1.0, 1.0])
    for threshold in THRESHOLDS:
        pred = MMDT(threshold, random_state=0).fit(summary).predict(X)
        accuracy = (pred == y).mean()
        assert accuracy > (0.99 if threshold != "random" else 0.5), threshold


# ---------------------------------------------------------------- validation
def test_zero_sigma_on_a_feature_that_matters_is_refused_by_name():
    summary = MixtureSummary(means=[[0.0, 0.0], [1.0, 3.0]], sigma=[1.0, 0.0], feature_names=["a", "flat"])
    with pytest.raises(InputError, match="flat"):
        MMDT().fit(summary)


def test_zero_sigma_on_a_feature_where_all_means_agree_is_ignored():
    summary = MixtureSummary(means=[[0.0, 7.0], [3.0, 7.0]], sigma=[1.0, 0.0], feature_names=["a", "const"])
    model = MMDT().fit(summary)
    assert model.tree_.features_used == ["a"]


def test_identical_means_are_refused():
    summary = MixtureSummary(means=[[0.0, 1.0], [2.0, 1.0], [0.0, 1.0]], sigma=[1.0, 1.0])
    with pytest.raises(InputError, match=r"\[0, 2\]|identical"):
        MMDT().fit(summary)


def test_unknown_threshold_lists_the_choices():
    from exclust.errors import ParameterError

    with pytest.raises(ParameterError, match="threshold") as err:
        MMDT(threshold="median").fit(MixtureSummary(means=[[0.0], [1.0]], sigma=[1.0]))
    assert all(name in str(err.value) for name in ("midpoint", "gaussian", "chebyshev", "exact", "random"))


def test_fit_needs_a_summary_and_predict_needs_fit():
    from sklearn.exceptions import NotFittedError

    with pytest.raises(InputError, match="MixtureSummary"):
        MMDT().fit(np.zeros((3, 2)))
    with pytest.raises(NotFittedError):
        MMDT().predict(np.zeros((3, 2)))
