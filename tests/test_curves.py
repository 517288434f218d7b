"""The cost-versus-leaves curve under the k-medians objective: the l1 surrogate, against brute force."""
from __future__ import annotations

import dask.array as da
import numpy as np
import pandas as pd
import pytest

from exclust.dataplane.parts import run_reductions
from exclust.jobs.explain.cost_curve import cost_ratio_curve, plan_curve


def l1_data(rng, n=1200, k=3, d=3):
    C = rng.uniform(-6, 6, (k, d))
    X = C[rng.integers(0, k, n)] + rng.laplace(scale=1.5, size=(n, d))
    return X, C


def brute_force_kmedians_ratio(tree, X, C) -> float:
    """Each of the tree's clusters charged to its cheapest center by summed l1, over every row's
    l1 distance to its nearest center."""
    dist = np.abs(X[:, None, :] - C[None]).sum(-1)  # (n, k)
    pred = tree.predict(X)
    cost = sum(dist[pred == c].sum(axis=0).min() for c in np.unique(pred))
    return float(cost / dist.min(axis=1).sum())


def test_kmedians_curve_equals_brute_force_on_every_prefix_tree(rng):
    X, C = l1_data(rng)
    leaves = [3, 4, 6, 8]
    plan = plan_curve(X, None, C, leaves, objective="kmedians")
    (result,) = run_reductions(X, [plan.reduction()])
    curve = plan.finish(result)
    assert curve["cost"] == "kmedians-surrogate" and curve["leaves"] == leaves
    assert curve["reference_cost"] == pytest.approx(np.abs(X[:, None] - C).sum(-1).min(1).sum(), rel=1e-12)
    assert list(plan.series) == ["exkmc", "cart", "kdtree"]
    for name, family in ((name, s.trees) for name, s in plan.series.items()):
        assert [t.n_leaves for t in family] == leaves, name
        expected = [brute_force_kmedians_ratio(t, X, C) for t in family]
        np.testing.assert_allclose(curve[name], expected, rtol=1e-10, err_msg=name)
    # The curve's ExKMC grew by the l1 surrogate.
    assert plan.series["exkmc"].trees[-1].meta["objective"] == "kmedians"
    # ExKMC labels each new leaf with its cheapest center: its l1 surrogate never exceeds the
    # clusters' (IMM's base leaves keep IMM's labels, so it may sit above).
    assert curve["exkmc"][-1] <= curve["exkmc_surrogate"][-1] + 1e-12


def test_kmeans_curve_is_labelled_and_differs_from_kmedians(rng):
    X, C = l1_data(rng, n=900)
    means = cost_ratio_curve(X, C, [3, 5])
    medians = cost_ratio_curve(X, C, [3, 5], objective="kmedians")
    assert means["cost"] == "kmeans" and medians["cost"] == "kmedians-surrogate"
    assert means["reference_cost"] == pytest.approx(((X[:, None] - C) ** 2).sum(-1).min(1).sum(), rel=1e-12)
    assert medians["reference_cost"] != pytest.approx(means["reference_cost"])
    with pytest.raises(ValueError, match="objective"):
        cost_ratio_curve(X, C, [3], objective="kmedoids")


def test_kmedians_curve_on_dask_matches_numpy_and_reuses_a_kmedians_exkmc(dask_client, rng):
    from exclust.algorithms.histogram.exkmc import ExKMC

    X, C = l1_data(rng, n=1500)
    local = cost_ratio_curve(X, C, [3, 5], objective="kmedians")
    dist = cost_ratio_curve(da.from_array(X, chunks=(400, 3)), C, [3, 5], objective="kmedians")
    for key in ("exkmc", "kdtree"):
        np.testing.assert_allclose(dist[key], local[key], rtol=1e-9)
    assert dist["reference_cost"] == pytest.approx(local["reference_cost"], rel=1e-12)
    # A k-medians ExKMC fitted on all rows gives the curve's ExKMC trees; a k-means one does not.
    fitted = ExKMC(3, 6, objective="kmedians", random_state=0).fit(X, C)
    reused = plan_curve(X[:500], None, C, [3, 5], fitted=fitted, objective="kmedians")
    assert reused.series["exkmc"].trees == [fitted.tree_at(3), fitted.tree_at(5)]
    kmeans_fit = ExKMC(3, 6, random_state=0).fit(X, C)
    refit = plan_curve(X[:500], None, C, [3, 5], fitted=kmeans_fit, objective="kmedians")
    assert refit.series["exkmc"].trees[-1].meta["objective"] == "kmedians"


def test_an_explain_run_with_the_kmedians_objective_has_the_surrogate_curve():
    from exclust.datasets.synthetic import make_gmm_dataset
    from exclust.jobs.config import ExplainConfig
    from exclust.jobs.explain.steps import Run, run_steps

    X, _, _ = make_gmm_dataset(3000, n_components=3, n_features=2, random_state=5, noise_scale=3.0)
    frame = pd.DataFrame(X, columns=["a", "b"])
    run = run_steps(Run(ExplainConfig(input=frame, features=["a", "b"], k=3, algorithm="exkmc", leaves=6,
                                      reference="kmedians", objective="kmedians")))
    curve = run.curve
    assert curve is not None and curve["cost"] == "kmedians-surrogate"
    assert curve["leaves"] == [3, 4, 5, 6] and all(len(curve[m]) == 4 for m in ("exkmc", "cart", "kdtree"))
    # The curve's ExKMC is the run's own (fitted on all rows): its last point is the run's tree,
    # scored by brute force against the run's k-medians centers.
    ratio = brute_force_kmedians_ratio(run.built.tree, X, run.ref.centers)
    assert curve["exkmc"][-1] == pytest.approx(ratio, rel=1e-9)
    # The curve rides on scoring's pass: the score step's passes are that one and the k-medians price's.
    metrics = run.result.metrics
    assert metrics["passes"]["score"] == 1 + metrics["kmedians_passes"]
    assert "k-medians surrogate cost ratio" in run.result.report_html
    assert "k-means cost ratio" not in run.result.report_html


def test_kmeans_curve_given_the_nearest_centers_equals_the_searched_one(dask_client, rng):
    """Scoring's pass hands the curve the k-means reference's labels: the curve is the same,
    numpy and Dask, and the distances are those of the nearest-center search bit for bit."""
    from exclust.dataplane._center_distances import assigned_sq_distances, nearest_center

    X, C = l1_data(rng, n=1500)
    labels, dist = nearest_center(X, C)
    np.testing.assert_array_equal(assigned_sq_distances(X, labels, C), dist)
    plan = plan_curve(X, None, C, [3, 5])
    searched = plan.finish(run_reductions(X, [plan.reduction()])[0])
    for chunks in (1500, 400):
        Xd, labels_d = da.from_array(X, chunks=(chunks, 3)), da.from_array(labels, chunks=chunks)
        for rows, nearest in ((X, labels), (Xd, labels_d)):
            given = plan.finish(run_reductions(rows, [plan.reduction(nearest)])[0])
            assert given["reference_cost"] == pytest.approx(searched["reference_cost"], rel=1e-13)
            for key in ("exkmc", "cart", "kdtree"):
                np.testing.assert_allclose(given[key], searched[key], rtol=1e-12)
    # Wrong labels would change the reference cost: the labels are really read.
    shifted = plan.finish(run_reductions(X, [plan.reduction((labels + 1) % 3)])[0])
    assert shifted["reference_cost"] > 1.5 * searched["reference_cost"]


def _random_tree(rng, d: int, depth: int, k: int):
    """A random tree of one-sided and interval cuts, some branches shallower than others."""
    from exclust.tree import TreeBuilder

    b = TreeBuilder(n_features=d)
    todo = [(b.add_node(), 0)]
    while todo:
        node, level = todo.pop()
        if level == depth or (level and rng.random() < 0.25):
            b.make_leaf(node, int(rng.integers(0, k)))
            continue
        f = int(rng.integers(0, d))
        if rng.random() < 0.3:
            children = b.split_interval(node, f, float(rng.normal()), float(rng.uniform(0.2, 1.5)))
        else:
            children = b.split(node, f, float(rng.normal()))
        todo += [(child, level + 1) for child in children]
    return b.build()


def test_the_fused_sweep_gives_every_tree_what_one_sweep_per_tree_gives(rng):
    """Issue 29 item 4: the curve's and the standing table's trees priced in one sweep over the rows
    (``forest_moments``) hold, per tree and node, the counts, sums and first rows that routing each
    tree alone (``ThresholdTree.apply``) gives; a row holding NaN or inf counts nowhere."""
    from exclust.scoring.curve_pass import curve_block

    X = rng.normal(size=(3000, 4))
    X[7, 2], X[100, 0], X[2999, 3] = np.nan, np.inf, -np.inf
    trees = [_random_tree(rng, 4, depth, 5) for depth in (1, 2, 4, 6, 3)]
    families, ref = curve_block(X, trees, np.zeros((0, 4)))
    assert ref[0] == 0.0 and len(families) == len(trees)
    for tree, (stats, reps) in zip(trees, families, strict=True):
        leaf = tree.apply(X)
        assert stats.shape == (tree.node_count, 4 + 2)
        for node in range(tree.node_count):
            rows = np.flatnonzero(leaf == node)
            assert stats[node, 0] == rows.size
            np.testing.assert_allclose(stats[node, 1:5], X[rows].sum(axis=0), rtol=1e-12, atol=1e-9)
            np.testing.assert_allclose(stats[node, 5], (X[rows] ** 2).sum(), rtol=1e-12)
            if rows.size:
                np.testing.assert_array_equal(reps[node], X[rows[0]])
            else:
                assert np.isnan(reps[node]).all()
        assert stats[:, 0].sum() == 3000 - 3  # the non-finite rows reached no node
