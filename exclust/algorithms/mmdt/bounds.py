"""The explainability-to-noise ratio of a mixture and the papers' explicit bounds built on it.

Two conventions exist for the same quantity (both papers in ``../shared/papers``):

- paper 002, Definition 2 (eq. 3): ENR(nu) = min_{k != l} max_j (mu_kj - mu_lj)^2 / sigma_j^2;
- paper 000, Definition 1:         q       = min_{k != l} max_j (mu_kj - mu_lj)^2 / (2 sigma_j^2),

so paper 000's q is paper 002's ENR divided by 2. Paper 002's theorems (4, 8, 9) are stated
in its own convention; paper 000's (1-3) in its own. Every figure here says which it uses.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from exclust.reference.summary import MixtureSummary

CONVENTIONS = ("paper002", "paper000")
# (4 + 2 pi^2 / 3): the constant of paper 002, Theorems 4 and 8 (Appendix A.1, eq. 66-67).
PAPER002_CONSTANT = 4.0 + 2.0 * math.pi**2 / 3.0


def _normalized_sq_gaps(diff: np.ndarray, sigma: np.ndarray) -> np.ndarray:
    """(mu_k - mu_l)^2 / sigma^2 per axis; 0 where both are 0, inf where only sigma is 0."""
    with np.errstate(divide="ignore", invalid="ignore"):
        out = diff**2 / sigma**2
    out[(diff == 0) & (sigma == 0)] = 0.0
    return out


def closest_pair(summary: MixtureSummary) -> tuple[float, tuple[int, int]]:
    """The paper-002 ENR and the pair of components (k, l) that attains it.

    max_j (mu_kj - mu_lj)^2 / sigma_j^2 is the squared Chebyshev (L-infinity) distance between
    the means in sigma units, so all pairs come from one C-level ``pdist`` call.
    """
    from scipy.spatial.distance import pdist

    means, sigma = summary.means, summary.sigma
    K = means.shape[0]
    if K < 2:
        return math.inf, (-1, -1)
    varies = np.ptp(means, axis=0) > 0
    if (sigma[varies] > 0).all():
        cols = np.flatnonzero(varies)
        if cols.size == 0:  # every mean is the same point
            return 0.0, (0, 1)
        dist = pdist(means[:, cols] / sigma[cols], metric="chebyshev")
        i = int(dist.argmin())
        # Condensed index -> (k, l): rows of the upper triangle hold K-1, K-2, ... entries.
        starts = np.cumsum(np.arange(K - 1, 0, -1)) - np.arange(K - 1, 0, -1)
        k = int(np.searchsorted(starts, i, side="right") - 1)
        return float(dist[i]) ** 2, (k, int(k + 1 + i - starts[k]))
    # A feature with sigma 0 on which the means differ: pairs differing there are infinitely
    # separated; one row of pairs at a time, O(K d) memory.
    best, pair = math.inf, (-1, -1)
    for k in range(K - 1):
        per_pair = _normalized_sq_gaps(means[k + 1 :] - means[k], sigma[None, :]).max(axis=1)
        i = int(per_pair.argmin())
        if per_pair[i] < best:
            best, pair = float(per_pair[i]), (k, k + 1 + i)
    return best, pair


def explainability_to_noise_ratio(summary: MixtureSummary, convention: str = "paper002") -> float:
    """ENR of a mixture: min over pairs of the best single-axis squared separation in sigmas.

    ``convention="paper002"`` (Definition 2 of paper 002): min_{k!=l} max_j (mu_kj-mu_lj)^2/sigma_j^2.
    ``convention="paper000"`` (Definition 1 of paper 000): the same divided by 2.
    sigma_j is the coordinate-wise standard deviation ``summary.sigma``. A mixture with one
    component has no pair to separate: its ENR is +inf.
    """
    if convention not in CONVENTIONS:
        raise ValueError(f"convention={convention!r} is not known; choose one of {', '.join(CONVENTIONS)}")
    q, _ = closest_pair(summary)
    return q / 2.0 if convention == "paper000" else q


def mixing_alpha(weights: np.ndarray) -> float:
    """Smallest alpha with p_k <= alpha / K for all k (paper 002 Section 2.1, paper 000 Assumption 2)."""
    weights = np.asarray(weights, dtype=np.float64)
    return float(weights.size * weights.max() / weights.sum())


def mmdt_bounds(summary: MixtureSummary, alpha: float | None = None, beta: float = 1.0) -> dict[str, Any]:
    """Paper 002's explicit bounds (Theorems 4, 8, 9) evaluated for a fitted mixture.

    ``alpha`` defaults to K max_k p_k, the smallest value with p_k <= alpha/K (Section 2.1).
    ``beta`` is Assumption 3's ratio sqrt(E|x_i - mu_i|^2) / E|x_i - mu_i|; paper 002 says
    beta = 1 may be taken for Gaussian mixtures, but for a Gaussian the ratio is exactly
    sqrt(pi/2) ~ 1.2533, so the Theorem 4 bound is also given for that value
    (``price_upper_theorem4_gaussian``).

    Each bound is a dict with ``name`` (theorem and equation), ``value``, and ``vacuous``
    (an error-rate bound >= 1, or a price bound of no use, says nothing; its number is kept).
    Lower bounds (Theorem 9; paper 000 Theorem 3) are worst-case statements: *some* mixture with
    this K and ENR forces every tree to err that much; ``applies`` says whether their
    condition on q holds. The ENR q that the theorems need is in ``q`` (paper 002 convention)
    and ``q_paper000``.
    """
    K = summary.n_components
    q, pair = closest_pair(summary)
    alpha_source = "given"
    if alpha is None:
        alpha = mixing_alpha(summary.weights)
        alpha_source = "K * max_k p_k (paper 002 Section 2.1: p_k <= alpha/K)"
    alpha = float(alpha)
    beta = float(beta)
    if alpha < 1 or beta < 1:
        raise ValueError(f"alpha and beta must be >= 1 (paper 002 Section 2.1, Assumption 3); got alpha={alpha}, "
                         f"beta={beta}")
    gaussian_beta = math.sqrt(math.pi / 2.0)

    def price(b: float) -> float:
        if K == 1:
            return 1.0
        return 1.0 + PAPER002_CONSTANT * alpha * b * K * (K - 1) / math.sqrt(q) if q > 0 else math.inf

    error_upper = 0.0 if K == 1 else (PAPER002_CONSTANT * alpha * K * (K - 1) / q if q > 0 else math.inf)
    error_lower = (K - 1) / (4.0 * q) if q > 0 else math.inf
    q000 = q / 2.0
    paper000_lower = (K - 1) / (2.0 * math.exp(q000)) if q000 < 700 else 0.0
    return {
        "K": K,
        "q": q,
        "q_convention": "paper 002, Definition 2: min_{k!=l} max_j (mu_kj - mu_lj)^2 / sigma_j^2",
        "q_paper000": q000,
        "closest_pair": list(pair),
        "alpha": alpha,
        "alpha_source": alpha_source,
        "beta": beta,
        "price_upper_theorem4": {
            "name": "paper 002, Theorem 4 (eq. 9): Price(nu, T) <= 1 + (4 + 2 pi^2/3) alpha beta K (K-1) / sqrt(q)",
            "value": price(beta),
            "vacuous": False,
        },
        "price_upper_theorem4_gaussian": {
            "name": "paper 002, Theorem 4 (eq. 9) with beta = sqrt(pi/2), the exact ratio for Gaussian components",
            "value": price(gaussian_beta),
            "beta": gaussian_beta,
            "vacuous": False,
        },
        "error_upper_theorem8": {
            "name": "paper 002, Theorem 8 (eq. 21): P(mu_hat(x) != mu(x)) <= (4 + 2 pi^2/3) alpha K (K-1) / q",
            "value": error_upper,
            "vacuous": error_upper >= 1.0,
        },
        "error_lower_theorem9": {
            "name": "paper 002, Theorem 9 (eq. 22): some mixture with K components and ENR q has P(error) >= (K-1) / "
                    "(4q) for every tree",
            "value": error_lower,
            "applies": bool(q >= K),
            "requires": "q >= K",
            "vacuous": error_lower >= 1.0,
        },
        "error_lower_paper000_theorem3": {
            "name": "paper 000, Theorem 3 (eq. 3): some sub-Gaussian mixture with K components and q (paper 000) has "
                    "P(error) >= (K-1) / (2 e^q) for every tree",
            "value": paper000_lower,
            "applies": bool(q000 > math.log(2 * K)),
            "requires": "e^q > 2K (q in paper 000's convention)",
            "vacuous": paper000_lower >= 1.0,
        },
        "not_evaluated": "paper 002 Theorem 5 (price lower bound) is stated only up to a constant, Omega(alpha beta "
                         "log K / sqrt q), for q >= 2 K^3",
    }
