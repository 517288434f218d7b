"""Explainability-to-noise ratio (paper 000 Def. 1, paper 002 Def. 2) and paper 002's bounds."""
from __future__ import annotations

import math

import numpy as np
import pytest

from exclust import MMDT, explainability_to_noise_ratio, mmdt_bounds
from exclust.algorithms.mmdt.bounds import PAPER002_CONSTANT, closest_pair, mixing_alpha
from exclust.reference.summary import MixtureSummary


def _enr_by_loops(means, sigma):
    """Definition 2 of paper 002 written as the loops of the formula."""
    K, d = means.shape
    best = math.inf
    for k in range(K):
        for other in range(K):
            if k != other:
                best = min(best, max((means[k, j] - means[other, j]) ** 2 / sigma[j] ** 2 for j in range(d)))
    return best


def test_enr_both_conventions_on_a_hand_computed_example():
    # Pairs: (0,1): max(9/1, 1/4) = 9; (0,2): max(0, 16/4) = 4; (1,2): max(9, 9/4) = 9.
    summary = MixtureSummary(means=[[0.0, 0.0], [3.0, 1.0], [0.0, 4.0]], sigma=[1.0, 2.0])
    assert explainability_to_noise_ratio(summary) == pytest.approx(4.0)
    assert explainability_to_noise_ratio(summary, convention="paper002") == pytest.approx(4.0)
    assert explainability_to_noise_ratio(summary, convention="paper000") == pytest.approx(2.0)
    q, pair = closest_pair(summary)
    assert q == pytest.approx(4.0) and pair == (0, 2)


def test_enr_matches_the_formula_on_random_mixtures():
    rng = np.random.default_rng(3)
    for _ in range(10):
        K, d = int(rng.integers(2, 12)), int(rng.integers(1, 6))
        means, sigma = rng.normal(size=(K, d)) * 4, rng.uniform(0.5, 2.0, d)
        summary = MixtureSummary(means=means, sigma=sigma)
        assert explainability_to_noise_ratio(summary) == pytest.approx(_enr_by_loops(means, sigma), rel=1e-12)
        q, (k, other) = closest_pair(summary)
        assert np.max((means[k] - means[other]) ** 2 / sigma**2) == pytest.approx(q, rel=1e-12)


def test_enr_with_a_zero_sigma_feature():
    # Axis 1 has sigma 0: pairs that differ there are infinitely separated, the others are not.
    summary = MixtureSummary(means=[[0.0, 0.0], [0.0, 1.0], [1.0, 0.0]], sigma=[1.0, 0.0])
    q, pair = closest_pair(summary)
    assert q == pytest.approx(1.0) and pair == (0, 2)


def test_enr_edge_cases():
    assert explainability_to_noise_ratio(MixtureSummary(means=[[1.0, 2.0]], sigma=[1.0, 1.0])) == math.inf
    with pytest.raises(ValueError, match="paper002.*paper000"):
        explainability_to_noise_ratio(MixtureSummary(means=[[0.0], [1.0]], sigma=[1.0]), convention="snr")


def test_mmdt_enr_attribute_uses_paper002():
    summary = MixtureSummary(means=[[0.0, 0.0], [3.0, 1.0], [0.0, 4.0]], sigma=[1.0, 2.0])
    model = MMDT(random_state=0).fit(summary)
    assert model.enr_ == pytest.approx(4.0)
    assert model.enr_ / 2 == pytest.approx(explainability_to_noise_ratio(summary, "paper000"))


def test_alpha_from_the_weights():
    assert mixing_alpha(np.array([0.5, 0.25, 0.25])) == pytest.approx(1.5)
    assert mixing_alpha(np.full(4, 0.25)) == pytest.approx(1.0)


def test_bounds_formulas_on_a_hand_computed_mixture():
    # K = 3, q = 4 (see above), weights (0.5, 0.25, 0.25) -> alpha = 1.5, beta = 1.
    summary = MixtureSummary(means=[[0.0, 0.0], [3.0, 1.0], [0.0, 4.0]], sigma=[1.0, 2.0], weights=[0.5, 0.25, 0.25])
    b = mmdt_bounds(summary)
    c = 4 + 2 * math.pi**2 / 3
    assert PAPER002_CONSTANT == pytest.approx(c)
    assert b["q"] == pytest.approx(4.0) and b["q_paper000"] == pytest.approx(2.0)
    assert b["alpha"] == pytest.approx(1.5) and b["beta"] == 1.0
    assert b["price_upper_theorem4"]["value"] == pytest.approx(1 + c * 1.5 * 3 * 2 / 2.0)
    gaussian_beta = math.sqrt(math.pi / 2)
    assert b["price_upper_theorem4_gaussian"]["value"] == pytest.approx(1 + c * 1.5 * gaussian_beta * 3 * 2 / 2.0)
    assert b["error_upper_theorem8"]["value"] == pytest.approx(c * 1.5 * 3 * 2 / 4.0)
    assert b["error_upper_theorem8"]["vacuous"]  # > 1: kept, and said so
    assert b["error_lower_theorem9"]["value"] == pytest.approx(2 / 16)
    assert b["error_lower_theorem9"]["applies"]  # q = 4 >= K = 3
    assert b["error_lower_paper000_theorem3"]["value"] == pytest.approx(2 / (2 * math.exp(2.0)))
    assert b["error_lower_paper000_theorem3"]["applies"]  # e^2 ~ 7.4 > 2K = 6
    assert "Theorem 4" in b["price_upper_theorem4"]["name"] and "Theorem 8" in b["error_upper_theorem8"]["name"]
    # alpha and beta given explicitly
    b2 = mmdt_bounds(summary, alpha=2.0, beta=1.3)
    assert b2["price_upper_theorem4"]["value"] == pytest.approx(1 + c * 2.0 * 1.3 * 3 * 2 / 2.0)
    with pytest.raises(ValueError, match="alpha"):
        mmdt_bounds(summary, alpha=0.5)


def test_bounds_shrink_as_separation_grows():
    rng = np.random.default_rng(0)
    means = rng.normal(size=(5, 3))
    previous = None
    for scale in (1.0, 2.0, 5.0, 20.0, 100.0):
        b = mmdt_bounds(MixtureSummary(means=means * scale, sigma=np.ones(3)))
        now = (
            b["q"],
            b["price_upper_theorem4"]["value"],
            b["error_upper_theorem8"]["value"],
            b["error_lower_theorem9"]["value"],
        )
        if previous is not None:
            assert now[0] > previous[0]
            assert all(n < p for n, p in zip(now[1:], previous[1:], strict=True))
        previous = now
    assert not b["error_upper_theorem8"]["vacuous"]  # far enough apart: a useful bound


def test_theorem8_bound_holds_for_the_tree_mmdt_grows():
    # A Gaussian mixture far enough apart for eq. 21 to say something; sampled error <= bound.
    rng = np.random.default_rng(1)
    means = np.array([[0.0, 0.0], [9.0, 1.0], [2.0, 9.0]])
    summary = MixtureSummary(means=means, sigma=[1.0, 1.0])
    bound = mmdt_bounds(summary)["error_upper_theorem8"]["value"]
    assert bound < 1
    y = rng.integers(0, 3, 20_000)
    X = means[y] + rng.normal(size=(20_000, 2))
    for threshold in ("chebyshev", "exact", "midpoint"):
        error = (MMDT(threshold, random_state=0).fit(summary).predict(X) != y).mean()
        assert error <= bound


def test_single_component_bounds():
    b = mmdt_bounds(MixtureSummary(means=[[0.0]], sigma=[1.0]))
    assert b["q"] == math.inf
    assert b["price_upper_theorem4"]["value"] == 1.0
    assert b["error_upper_theorem8"]["value"] == 0.0
