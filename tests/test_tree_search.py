"""TreeSearch: the exact optimum on small instances where greedy rules miss it, never worse
than its greedy starts, Dask equals numpy, the CLI runs it."""
from __future__ import annotations

import json

import dask.array as da
import numpy as np
import pytest

from exclust.algorithms.histogram.exgreedy import ExGreedy
from exclust.algorithms.histogram.exshallow import ExShallow
from exclust.algorithms.histogram.imm import IMM
from exclust.algorithms.search.optimal_tree import leaf_cost, optimal_tree
from exclust.algorithms.search.tree_search import TreeSearch


def partition_cost(labels, X):
    return sum(leaf_cost(X[labels == v]) for v in np.unique(labels))


def small_instance(seed):
    """30 rows, 2 features, k = 3 or 4 overlapping blobs, scikit-learn KMeans centers."""
    from sklearn.cluster import KMeans

    rng = np.random.default_rng(seed)
    k = 3 + seed % 2
    blobs = rng.uniform(-4, 4, (k, 2))
    X = blobs[rng.integers(0, k, 30)] + rng.normal(size=(30, 2))
    return X, k, KMeans(k, n_init=10, random_state=0).fit(X).cluster_centers_


def test_finds_the_optimum_where_the_greedy_rules_do_not():
    missed_by_all_greedy = 0
    for seed in range(8):
        X, k, centers = small_instance(seed)
        _, optimum = optimal_tree(X, k)
        found = TreeSearch(k).fit(X, centers)
        assert partition_cost(found.predict(X), X) == pytest.approx(optimum, rel=1e-9), seed
        assert found.cost_ == pytest.approx(optimum, rel=1e-9)
        greedy = [partition_cost(m.fit(X, centers).predict(X), X)
                  for m in (IMM(k, max_bins=65536), ExGreedy(k, max_bins=65536), ExShallow(k, max_bins=65536))]
        assert min(greedy) >= optimum * (1 - 1e-9)
        missed_by_all_greedy += min(greedy) > optimum * (1 + 1e-6)
    assert missed_by_all_greedy >= 1  # seed 3: IMM, ExGreedy and ExShallow all 1.7% above


def test_never_worse_than_its_greedy_starts_and_names_every_center():
    rng = np.random.default_rng(5)
    centers = rng.uniform(-10, 10, (6, 3))
    X = centers[rng.integers(0, 6, 900)] + rng.normal(scale=2.5, size=(900, 3))
    found = TreeSearch(6, random_state=0).fit(X, centers)
    assert set(found.seed_costs_) == {"lookahead", "lookahead-spread", "exgreedy", "exshallow", "imm", "cart"}
    assert found.cost_ <= min(found.seed_costs_.values()) + 1e-9
    assert found.cost_ == pytest.approx(partition_cost(found.predict(X), X))
    assert set(found.predict(X).tolist()) == set(range(6))
    assert found.tree_.n_leaves == 6
    more = TreeSearch(6, n_leaves=12, random_state=0).fit(X, centers)
    assert 6 < more.tree_.n_leaves <= 12 and set(more.predict(X).tolist()) <= set(range(6))
    assert set(more.seed_costs_) == {"lookahead", "lookahead-spread", "exkmc", "cart"}
    assert more.cost_ <= min(more.seed_costs_.values()) + 1e-9


def test_dask_input_gives_the_same_tree(dask_client):
    rng = np.random.default_rng(11)
    centers = rng.uniform(-10, 10, (5, 3))
    X = centers[rng.integers(0, 5, 2000)] + rng.normal(scale=2.0, size=(2000, 3))
    local = TreeSearch(5, random_state=0).fit(X, centers)
    dist = TreeSearch(5, random_state=0).fit(da.from_array(X, chunks=(450, 3)), centers)
    assert dist.tree_ == local.tree_
    assert dist.cost_ == local.cost_
    assert (dist.n_passes_, local.n_passes_) == (1, 0)
    # A sample smaller than the data: the same rows however the data are chunked.
    small = TreeSearch(5, sample_rows=700, random_state=3)
    assert small.fit(X, centers).tree_ == TreeSearch(**small.get_params()).fit(
        da.from_array(X, chunks=(300, 3)), centers).tree_
    assert small.n_search_rows_ == 700


def test_runs_from_the_command_line(tmp_path, dask_client):
    from exclust.cli import main
    from exclust.datasets.synthetic import write_gmm_parquet

    write_gmm_parquet(tmp_path / "data", 3000, n_components=3, n_features=2, rows_per_file=1000, random_state=6)
    code = main(["explain", "--input", str(tmp_path / "data"), "--features", "x0,x1", "--algorithm", "tree-search",
                 "--k", "3", "--reference", "kmeans", "--no-curve", "--scheduler", dask_client.scheduler.address,
                 "--out", str(tmp_path / "out")])
    assert code == 0
    metrics = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert metrics["algorithm"] == "tree-search" and metrics["price_kmeans"] >= 1.0 - 1e-9


def test_window_minimum_is_scipys_minimum_filter():
    from scipy.ndimage import minimum_filter1d

    from exclust.algorithms.search.tree_search import window_minimum

    rng = np.random.default_rng(0)
    for _ in range(200):
        values = rng.normal(size=(int(rng.integers(1, 5)), int(rng.integers(2, 60))))
        values[rng.random(values.shape) < 0.2] = np.inf
        half = int(rng.integers(1, 70))
        expected = minimum_filter1d(values, 2 * half + 1, axis=1, mode="nearest")
        assert np.array_equal(window_minimum(values, half), expected)
