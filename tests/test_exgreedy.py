"""ExGreedy (Laber and Murtinho, ICML 2021): its published digits figure, Dask equals numpy, the CLI."""
from __future__ import annotations

import json

import dask.array as da
import numpy as np
import pytest

from exclust.algorithms.histogram.exgreedy import ExGreedy
from exclust.algorithms.histogram.exshallow import ExShallow


def leaf_mean_cost(X, labels):
    return float(sum(((X[labels == c] - X[labels == c].mean(0)) ** 2).sum() for c in np.unique(labels)))


def test_reproduces_the_published_digits_price():
    from sklearn.cluster import KMeans
    from sklearn.datasets import load_digits

    X = load_digits().data.astype(np.float64)
    reference = KMeans(10, n_init=10, random_state=0).fit(X)
    tree = ExGreedy(10).fit(X, reference.cluster_centers_)
    # Price: the tree's clusters scored by their own means over the reference k-means cost,
    # the definition behind the paper's figure (1.212 on digits, against IMM's 1.230).
    price = leaf_mean_cost(X, tree.predict(X)) / reference.inertia_
    assert price == pytest.approx(1.212, abs=0.005)
    assert tree.tree_.n_leaves == 10 and tree.tree_.meta["algorithm"] == "exgreedy"


def test_is_exshallow_without_a_depth_penalty_and_differs_from_it():
    rng = np.random.default_rng(3)
    C = rng.uniform(-10, 10, (6, 3))
    X = C[rng.integers(0, 6, 1500)] + rng.normal(scale=2.0, size=(1500, 3))
    greedy = ExGreedy(6, max_bins=64).fit(X, C)
    same = ExShallow(6, depth_factor=0.0, max_bins=64).fit(X, C).tree_
    shallow = ExShallow(6, depth_factor=0.5, max_bins=64).fit(X, C).tree_
    assert all(np.array_equal(getattr(greedy.tree_, a), getattr(same, a), equal_nan=True)
               for a in ("feature", "threshold", "left", "right", "value"))
    assert not np.array_equal(greedy.tree_.threshold, shallow.threshold, equal_nan=True)


def test_dask_input_gives_the_same_tree(dask_client):
    rng = np.random.default_rng(11)
    C = rng.uniform(-10, 10, (5, 3))
    X = C[rng.integers(0, 5, 3000)] + rng.normal(size=(3000, 3))
    for objective in ("kmeans", "kmedians"):
        local = ExGreedy(5, objective=objective, max_bins=64).fit(X, C)
        dist = ExGreedy(5, objective=objective, max_bins=64).fit(da.from_array(X, chunks=(700, 3)), C)
        assert dist.tree_ == local.tree_
        assert dist.weighted_avg_depth_ == pytest.approx(local.weighted_avg_depth_)


def test_runs_from_the_command_line(tmp_path, capsys, dask_client):
    from exclust.cli import main
    from exclust.datasets.synthetic import write_gmm_parquet

    write_gmm_parquet(tmp_path / "data", 4000, n_components=3, n_features=2, rows_per_file=2000, random_state=6)
    code = main(["explain", "--input", str(tmp_path / "data"), "--features", "x0,x1", "--algorithm", "exgreedy",
                 "--k", "3", "--reference", "kmeans", "--no-curve", "--scheduler", dask_client.scheduler.address,
                 "--out", str(tmp_path / "out")])
    assert code == 0
    metrics = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert metrics["algorithm"] == "exgreedy"
    tree = json.loads((tmp_path / "out" / "tree.json").read_text())
    assert tree["meta"]["algorithm"] == "exgreedy"
