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
from exclust.algorithms.search.tree_search import LOOKAHEAD_EVALUATIONS_PER_LEAF, TreeSearch


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


def blobs(seed, k, n, d, scale):
    rng = np.random.default_rng(seed)
    centers = rng.uniform(-10, 10, (k, d))
    return centers[rng.integers(0, k, n)] + rng.normal(scale=scale, size=(n, d)), centers


def test_never_worse_than_its_greedy_starts_and_names_every_center():
    X, centers = blobs(5, 6, 900, 3, 2.5)
    found = TreeSearch(6, random_state=0).fit(X, centers)
    assert {"lookahead", "lookahead-spread", "imm", "exshallow", "cart"} <= set(found.start_costs_)
    assert found.cost_ <= min(found.start_costs_.values()) + 1e-9
    assert found.cost_ == pytest.approx(partition_cost(found.predict(X), X))
    assert set(found.predict(X).tolist()) == set(range(6))
    assert found.tree_.n_leaves == 6
    more = TreeSearch(6, n_leaves=12, random_state=0).fit(X, centers)
    assert 6 < more.tree_.n_leaves <= 12 and set(more.predict(X).tolist()) <= set(range(6))
    assert {"lookahead", "lookahead-spread", "exkmc", "cart"} <= set(more.start_costs_)
    assert more.cost_ <= min(more.start_costs_.values()) + 1e-9


def test_decides_on_all_rows_beyond_its_sample_and_beats_every_greedy_tree_there():
    # 6,000 rows, a 300-row sample, k = 12: the lookahead runs on the sample, every choice is
    # priced on all rows; the price is a numpy recomputation's, never above a greedy tree's.
    X, centers = blobs(7, 12, 6000, 4, 3.0)
    found = TreeSearch(12, sample_rows=300, starts=("imm", "exgreedy", "exshallow"), random_state=0).fit(X, centers)
    assert found.n_search_rows_ == 300
    cost = partition_cost(found.predict(X), X)
    assert found.cost_ == pytest.approx(cost, rel=1e-9)
    nearest = ((X[:, None, :] - centers[None]) ** 2).sum(axis=2).argmin(axis=1)
    assert found.price_ == pytest.approx(cost / partition_cost(nearest, X), rel=1e-9)
    greedy = {name: partition_cost(m.fit(X, centers).predict(X), X)
              for name, m in (("imm", IMM(12)), ("exgreedy", ExGreedy(12)), ("exshallow", ExShallow(12)))}
    assert found.cost_ <= min(greedy.values()) * (1 + 1e-9)
    assert found.start_costs_["exshallow"] == pytest.approx(greedy["exshallow"], rel=1e-9)
    assert found.sweep_costs_[0] == pytest.approx(min(found.start_costs_.values()), rel=1e-9)
    # Many leaves: the lookahead is skipped, the greedy starts and the moves on all rows remain.
    many = TreeSearch(40, sample_rows=300, max_passes=4, random_state=0).fit(X, blobs(8, 40, 40, 4, 0)[1])
    assert many.tree_.n_leaves == 40 and many.cost_ <= min(many.start_costs_.values()) * (1 + 1e-9)
    assert many.cost_ == pytest.approx(partition_cost(many.predict(X), X), rel=1e-9)
    assert len(many.sweep_costs_) >= 1 and many.cost_ < many.sweep_costs_[0]  # the moves on all rows improved it


def test_the_default_effort_is_bounded_by_the_leaves_and_the_starts():
    # The sample's lookahead prices at most its share of nodes per leaf (unbounded it priced
    # 20,141 nodes at k = 10 on 1,000 rows), finishing what it started by growth alone; the
    # search on all rows gets as many passes as the greedy starts' trees have levels.
    X, centers = blobs(7, 10, 3000, 4, 3.0)
    found = TreeSearch(10, random_state=0).fit(X, centers)
    assert found.n_search_rows_ == 1000
    assert 0 < found.n_sample_nodes_ <= 1.25 * LOOKAHEAD_EVALUATIONS_PER_LEAF * 10  # growth finishing
    levels = sum(int(m.fit(X, centers).tree_.node_depths().max()) for m in (IMM(10), ExShallow(10)))
    assert found.max_passes_ == levels
    assert 1 <= len(found.sweep_costs_) <= levels  # one pass per sweep at 10 leaves
    assert found.cost_ <= min(found.start_costs_.values()) * (1 + 1e-9)
    assert found.cost_ == pytest.approx(partition_cost(found.predict(X), X), rel=1e-9)


def test_dask_input_gives_the_same_tree(dask_client):
    X, centers = blobs(11, 5, 2000, 3, 2.0)
    local = TreeSearch(5, random_state=0).fit(X, centers)
    dist = TreeSearch(5, random_state=0).fit(da.from_array(X, chunks=(450, 3)), centers)
    assert dist.tree_ == local.tree_
    assert dist.cost_ == pytest.approx(local.cost_, rel=1e-12)
    assert dist.price_ == pytest.approx(local.price_, rel=1e-12)
    assert dist.n_passes_ > local.n_passes_  # the sample and the bin edges' sample are passes on Dask
    # A sample smaller than the data: the same rows however the data are chunked.
    small = TreeSearch(5, sample_rows=700, random_state=3)
    assert small.fit(X, centers).tree_ == TreeSearch(**small.get_params()).fit(
        da.from_array(X, chunks=(300, 3)), centers).tree_
    assert small.n_search_rows_ == 700


def test_parquet_on_a_cluster_gives_the_in_memory_tree_and_price(tmp_path, dask_client):
    import pandas as pd

    from exclust.sources.dataset import Dataset, load_dataset

    X, centers = blobs(13, 14, 5000, 3, 2.5)
    for i in range(4):
        pd.DataFrame(X[i * 1250:(i + 1) * 1250], columns=["a", "b", "c"]).to_parquet(tmp_path / f"part-{i}.parquet")
    data = load_dataset(str(tmp_path), ["a", "b", "c"], piece_rows=1000)
    assert hasattr(data.X, "dask")
    params = dict(sample_rows=400, random_state=1)
    on_files = TreeSearch(14, **params).fit(data, centers)
    local = TreeSearch(14, **params).fit(Dataset(X, ["a", "b", "c"]), centers)
    assert on_files.tree_ == local.tree_
    assert on_files.cost_ == pytest.approx(partition_cost(local.predict(X), X), rel=1e-9)
    assert on_files.price_ == pytest.approx(local.price_, rel=1e-12)


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

    from exclust.algorithms.search._tree_search import window_minimum

    rng = np.random.default_rng(0)
    for _ in range(200):
        values = rng.normal(size=(int(rng.integers(1, 5)), int(rng.integers(2, 60))))
        values[rng.random(values.shape) < 0.2] = np.inf
        half = int(rng.integers(1, 70))
        expected = minimum_filter1d(values, 2 * half + 1, axis=1, mode="nearest")
        assert np.array_equal(window_minimum(values, half), expected)
