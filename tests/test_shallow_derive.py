"""ExGreedy's large children derived from their parents' histograms (``shallow_derive``): the same
histograms as a direct pass up to rounding, the same trees, on numpy and on Dask."""
from __future__ import annotations

import dask.array as da
import numpy as np
import pytest

import exclust.algorithms.histogram.exshallow as exshallow
import exclust.algorithms.histogram.shallow_derive as shallow_derive
from exclust.algorithms.histogram._shallow_cut import best_shallow_cut
from exclust.algorithms.histogram.exgreedy import ExGreedy


def blobs(seed: int, n: int = 900, integer: bool = False):
    rng = np.random.default_rng(seed)
    k, d = int(rng.integers(5, 14)), int(rng.integers(1, 5))
    C = rng.uniform(-10, 10, (k, d))
    X = C[rng.integers(0, k, n)] + rng.normal(scale=2.0, size=(n, d))
    return (np.round(X) if integer else X), C


def derive_everything(monkeypatch):
    """Derive every large child, however few its centers (the default waits for 16)."""
    monkeypatch.setattr(shallow_derive, "DERIVE_MIN_CENTERS", 2)
    monkeypatch.setattr(shallow_derive, "DERIVE_SHARE", 1)


def derive_nothing(monkeypatch):
    monkeypatch.setattr(shallow_derive, "DERIVE_MIN_CENTERS", 1 << 40)


def test_derived_histograms_equal_the_direct_ones(monkeypatch):
    """Every derived node's sums (at the splits it keeps), counts and cost equal a direct pass's."""
    derive_everything(monkeypatch)
    original = exshallow._pass_histograms
    checked = []

    def both(data, criterion, tree, batch, derive, members, codes, center_codes, set_features):
        out = original(data, criterion, tree, batch, derive, members, codes, center_codes, set_features)
        if derive:
            direct = {item[0]: item for item in original(data, criterion, tree, [der.node for der in derive], [],
                                                         members, codes, center_codes, set_features)}
            for node, sums, counts, base, _ in out:
                if node not in direct:
                    continue
                _, sums_d, counts_d, base_d, _ = direct[node]
                assert np.array_equal(counts, counts_d)
                assert base == pytest.approx(base_d, rel=1e-12)
                for f in range(codes.shape[1]):
                    n_splits = np.unique(codes[members[node], f]).size - 1
                    np.testing.assert_allclose(sums[f, :, :n_splits], sums_d[f, :, :n_splits], rtol=1e-11,
                                               atol=1e-11 * base_d)
                checked.append(node)
        return out

    monkeypatch.setattr(exshallow, "_pass_histograms", both)
    for seed in range(6):
        for objective in ("kmeans", "kmedians"):
            X, C = blobs(seed, integer=seed % 2 == 1)
            ExGreedy(C.shape[0], objective=objective, max_bins=32).fit(X, C)
    assert len(checked) >= 20


@pytest.mark.parametrize("integer", [False, True])
def test_derived_trees_equal_the_direct_ones(monkeypatch, integer):
    """Same trees and passes with and without derivation, exact ties (integer data) included."""
    for seed in range(12):
        X, C = blobs(seed, integer=integer)
        for objective in ("kmeans", "kmedians"):
            derive_nothing(monkeypatch)
            direct = ExGreedy(C.shape[0], objective=objective, max_bins=32).fit(X, C)
            derive_everything(monkeypatch)
            derived = ExGreedy(C.shape[0], objective=objective, max_bins=32).fit(X, C)
            assert derived.tree_ == direct.tree_, (seed, objective)
            assert derived.n_passes_ == direct.n_passes_


def test_derived_trees_on_dask_equal_numpy(monkeypatch, dask_client):
    """Float32 distances on the workers, summed per part: the same tree as in memory."""
    derive_everything(monkeypatch)
    for seed in (0, 3):
        X, C = blobs(seed, n=2400)
        for objective in ("kmeans", "kmedians"):
            local = ExGreedy(C.shape[0], objective=objective, max_bins=64).fit(X, C)
            dist = ExGreedy(C.shape[0], objective=objective, max_bins=64).fit(da.from_array(X, chunks=(700, -1)), C)
            assert dist.tree_ == local.tree_


def test_missing_values_with_a_clustering_space(monkeypatch):
    """Rows in a feature's missing bin need both sides: derived as computed."""
    rng = np.random.default_rng(5)
    C = rng.uniform(-10, 10, (9, 3))
    Z = C[rng.integers(0, 9, 1200)] + rng.normal(size=(1200, 3))
    X = Z.copy()
    X[rng.random(1200) < 0.1, 1] = np.nan
    derive_nothing(monkeypatch)
    direct = ExGreedy(9, max_bins=32).fit(X, C, Z=Z)
    derive_everything(monkeypatch)
    assert ExGreedy(9, max_bins=32).fit(X, C, Z=Z).tree_ == direct.tree_


def test_a_tie_within_the_tolerance_goes_to_the_lowest_feature():
    """Two features whose cuts cost the same up to rounding: the lower one wins with ``tie``."""
    counts = np.array([[5, 5], [5, 5]], dtype=np.int64)
    sums = np.zeros((2, 2, 1, 2))
    sums[0, 0, 0] = [1.0, 0.0]
    sums[0, 1, 0] = [2.0, 4.0 + 1e-13]  # feature 0 costs a hair more than feature 1
    sums[1, 0, 0] = [1.0, 0.0]
    sums[1, 1, 0] = [2.0, 4.0]
    codes = np.array([[0, 0], [1, 1]], dtype=np.int64)
    bounded = np.zeros((2, 2), dtype=np.bool_)
    missing = np.full(2, -1, dtype=np.int64)
    assert best_shallow_cut(sums, counts, 8.0, codes, bounded, 0.0, True, missing)[0] == 1
    assert best_shallow_cut(sums, counts, 8.0, codes, bounded, 0.0, True, missing, 1e-9)[0] == 0
