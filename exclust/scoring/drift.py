"""Drift of a labelled batch against the data its tree was built on: the population-stability index.

explain stores the share of rows in each leaf (``tree.meta["leaf_shares"]``); a later labelling
run counts its rows per leaf and compares. The population-stability index (PSI) of two
distributions p (built on) and q (tonight) over the same bins is

    PSI = sum_i (q_i - p_i) * ln(q_i / p_i),

a symmetrised Kullback-Leibler divergence. The customary reading, used here: below 0.1 no
drift, 0.1 to 0.2 moderate, above 0.2 (``PSI_ALERT``) the population has moved and the tree's
clusters may no longer describe it. Empty bins are floored at ``EPSILON`` so a leaf that
empties or appears gives a large but finite term.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

PSI_ALERT = 0.2
EPSILON = 1e-4


def population_stability_index(expected: np.ndarray, observed: np.ndarray) -> tuple[float, np.ndarray]:
    """(PSI, per-bin terms) of two share vectors or count vectors over the same bins."""
    p = np.asarray(expected, dtype=np.float64)
    q = np.asarray(observed, dtype=np.float64)
    if p.shape != q.shape or p.ndim != 1 or p.size == 0:
        raise ValueError(f"expected and observed need the same bins, got shapes {p.shape} and {q.shape}")
    if p.sum() <= 0 or q.sum() <= 0:
        raise ValueError("both distributions need at least one row")
    p = np.maximum(p / p.sum(), EPSILON)
    q = np.maximum(q / q.sum(), EPSILON)
    terms = (q - p) * np.log(q / p)
    return float(terms.sum()), terms


def leaf_drift(tree_meta: Mapping[str, Any], leaf_counts: Mapping[int, int],
               threshold: float = PSI_ALERT) -> dict | None:
    """Tonight's rows per leaf against the built-on shares; None when the tree stored no shares.

    Returns {"psi", "threshold", "drifted", "leaves": [{"leaf", "built_share", "share", "term"}...]}.
    Rows that could not be labelled (leaf -1) are left out of both sides.
    """
    shares = tree_meta.get("leaf_shares")
    if not shares:
        return None
    leaves = sorted(int(k) for k in shares)
    built = np.array([float(shares[str(leaf)] if str(leaf) in shares else shares[leaf]) for leaf in leaves])
    counts = np.array([float(leaf_counts.get(leaf, 0)) for leaf in leaves])
    if counts.sum() == 0:
        return None
    psi, terms = population_stability_index(built, counts)
    tonight = counts / counts.sum()
    return {
        "psi": psi,
        "threshold": float(threshold),
        "drifted": bool(psi > threshold),
        "leaves": [
            {"leaf": leaf, "built_share": float(b), "share": float(s), "term": float(t)}
            for leaf, b, s, t in zip(leaves, built / built.sum(), tonight, terms, strict=True)
        ],
    }


def drift_text(drift: Mapping[str, Any] | None) -> str:
    """One phrase for a terminal line: the PSI and whether it crossed the alert threshold."""
    if drift is None:
        return "drift not checked (the tree stores no leaf shares; explain again to store them)"
    if drift["drifted"]:
        return f"leaf drift PSI {drift['psi']:.3g}: DRIFTED (above the alert threshold {drift['threshold']:g})"
    return f"leaf drift PSI {drift['psi']:.3g}: no drift (alert above {drift['threshold']:g})"
