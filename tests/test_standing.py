"""The report's standing table (issue 21, item 5): the run's tree beside the other algorithms'
trees on the same centers, scored in scoring's pass, and the exact optimum on small instances."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from exclust.algorithms.search.optimal_tree import optimal_tree
from exclust.datasets.synthetic import make_gmm_dataset, write_gmm_parquet
from exclust.jobs import registry
from exclust.jobs.config import ExplainConfig
from exclust.jobs.explain import fits_ahead, pipeline
from exclust.jobs.explain import standing as standing_module
from exclust.jobs.explain.steps import explain


def kmeans_cost(X: np.ndarray, labels: np.ndarray) -> float:
    """Sum over clusters of the squared distances to the cluster's own mean, in plain numpy."""
    return float(sum(((X[labels == c] - X[labels == c].mean(axis=0)) ** 2).sum() for c in np.unique(labels)))


def steps_until_scored(config: ExplainConfig):
    """The run's steps by hand up to scoring, with the standing table's trees (planned as scoring plans them)."""
    config.check()
    data = pipeline.load(config)
    ref = pipeline.fit_reference(data, config)
    built = pipeline.build_tree(data, ref, config)
    curve = pipeline.plan_cost_curve(data, ref, config, built)
    plan = pipeline.plan_standing(data, ref, built, config, curve)
    trees = {name: series.trees[0] for name, series in plan.plan.series.items()}
    # The plan made here is the one scored: OptimalTree's tree in it is found within a time budget.
    scores, _, standing = pipeline.score_and_curve(data, ref, built, config, planned_standing=plan)
    return data, ref, trees, scores, standing


def check_prices_independently(data, ref, trees, scores, standing, own: str) -> None:
    X = np.asarray(data.X.compute() if hasattr(data.X, "compute") else data.X)
    labels = np.asarray(ref.labels.compute() if hasattr(ref.labels, "compute") else ref.labels)
    reference = kmeans_cost(X, labels)
    assert standing["reference_cost"] == pytest.approx(reference, rel=1e-9)
    rows = {r["algorithm"]: r for r in standing["rows"]}
    assert set(rows) == set(trees) and {"imm", "exgreedy", "exshallow", "cart"} <= set(rows)
    for name, tree in trees.items():
        price = kmeans_cost(X, np.asarray(tree.predict(X))) / reference
        assert rows[name]["price"] == pytest.approx(price, rel=1e-9), name
        assert rows[name]["n_leaves"] == tree.n_leaves
        depth = tree.node_depths()[np.asarray(tree.apply(X))].mean()
        assert rows[name]["weighted_avg_depth"] == pytest.approx(depth, rel=1e-12), name
    assert [r["algorithm"] for r in standing["rows"] if r["own"]] == [own]
    assert rows[own]["price"] == scores["price_kmeans"]
    best = min(r["price"] for r in standing["rows"])
    assert all(r["best"] == (r["price"] <= best * (1 + 1e-9)) for r in standing["rows"])


def test_standing_prices_of_an_in_memory_run_equal_numpy_prices():
    X, _, _ = make_gmm_dataset(3000, n_components=4, n_features=3, random_state=4, noise_scale=4.0)
    config = ExplainConfig(input=pd.DataFrame(X, columns=["a", "b", "c"]), k=4, algorithm="exkmc",
                           reference="kmeans", leaves=6)
    data, ref, trees, scores, standing = steps_until_scored(config)
    check_prices_independently(data, ref, trees, scores, standing, "exkmc")
    leaves = {r["algorithm"]: r["n_leaves"] for r in standing["rows"]}
    assert leaves["cart"] <= 6 and leaves["imm"] == leaves["exgreedy"] == 4  # leaf budgets as a run of each
    assert standing["optimum"] is None and "too large" in standing["optimum_note"]
    # OptimalTree's branch and bound did run (its row is there): the note says so, not only what did not run.
    assert "optimal" in leaves and "OptimalTree's branch and bound ran on all rows" in standing["optimum_note"]


def test_standing_prices_of_a_parquet_run_on_a_cluster_equal_numpy_prices(tmp_path, dask_client):
    write_gmm_parquet(tmp_path / "data", 4000, n_components=3, n_features=2, rows_per_file=1000, random_state=8,
                      noise_scale=3.0)
    config = ExplainConfig(input=str(tmp_path / "data"), features=["x0", "x1"], k=3, algorithm="exshallow",
                           reference="kmeans")
    data, ref, trees, scores, standing = steps_until_scored(config)
    assert hasattr(data.X, "dask")  # the rows live on the workers: scored there
    check_prices_independently(data, ref, trees, scores, standing, "exshallow")


def test_fits_begun_during_the_build_give_the_same_curve_and_table(tmp_path, dask_client, monkeypatch):
    # issue 29 item 4: the curve's and the table's fits that need no tree run in a driver thread
    # while the workers build; the score step must come out as if it had fitted them itself.
    write_gmm_parquet(tmp_path / "data", 4000, n_components=3, n_features=3, rows_per_file=1000, random_state=5,
                      noise_scale=3.0)
    config = ExplainConfig(input=str(tmp_path / "data"), k=3, algorithm="exkmc", reference="kmeans", leaves=5)
    config.check()
    data = pipeline.load(config)
    ref = pipeline.fit_reference(data, config)
    ahead = fits_ahead.start(data, ref, config, standing_module.fit_ahead)
    assert ahead is not None  # distributed, sample drawn by the k-means seeding
    built = pipeline.build_tree(data, ref, config)
    early = ahead.result()
    assert {"cart", "kdtree"} <= set(early.curve) and "exkmc" not in early.curve  # ExKMC's waits for the run's
    assert {"imm", "exshallow", "exgreedy"} <= set(early.standing) and "exkmc" not in early.standing
    scores, curve, standing = pipeline.score_and_curve(data, ref, built, config, ahead=ahead)
    again, curve_here, standing_here = pipeline.score_and_curve(data, ref, built, config)
    assert curve == curve_here and scores["price_kmeans"] == again["price_kmeans"]
    # OptimalTree's row is found within a time budget (the sample holds every row): the others are compared.
    # "best" and "proven_gap" depend on that row too.
    def others(table):
        return [{key: r[key] for key in ("algorithm", "cost", "price", "n_leaves", "weighted_avg_depth", "own")}
                for r in table["rows"] if r["algorithm"] != "optimal"]

    assert len(others(standing)) >= 6 and others(standing) == others(standing_here)
    # The table's trees rode on the curve's sweep (the run's own, CART's and KDTree's read there, not routed
    # twice); in a sweep of their own they get the same sums to the last bit.
    assert standing_here["rows"] and {"imm", "exshallow", "exgreedy"} <= set(early.standing)
    monkeypatch.setattr(standing_module.StandingPlan, "ride_on", lambda self, curve: None)
    alone, curve_alone, standing_alone = pipeline.score_and_curve(data, ref, built, config, ahead=ahead)
    assert curve_alone == curve and alone["price_kmeans"] == scores["price_kmeans"]
    assert others(standing_alone) == others(standing)


def test_an_mmdt_run_on_parquet_stands_and_its_sample_pass_only_moves(tmp_path, dask_client):
    # MMDT on a gmm reference draws no sample before scoring (no k-means seeding, no curve); the
    # report's scatter plot draws it in any case, so the table draws it earlier: the run's passes
    # and reads in all stay the same, one pass moving from the report step to the score step.
    write_gmm_parquet(tmp_path / "data", 4000, n_components=3, n_features=2, rows_per_file=1000, random_state=9,
                      noise_scale=3.0)
    config = ExplainConfig(input=str(tmp_path / "data"), features=["x0", "x1"], k=3, algorithm="mmdt",
                           reference="gmm", hold=False)
    on = explain(config).metrics
    assert on["standing"]["rows"][0]["algorithm"] == "mmdt"
    assert {"imm", "cart"} <= {r["algorithm"] for r in on["standing"]["rows"]}
    config.standing = False
    off = explain(config).metrics
    assert "standing" not in off
    assert sum(on["passes"].values()) == sum(off["passes"].values())
    assert sum(on["parquet_reads"].values()) == sum(off["parquet_reads"].values())
    assert (on["passes"]["score"], on["passes"]["report"]) == (off["passes"]["score"] + 1, off["passes"]["report"] - 1)


def test_the_optimum_row_on_a_tiny_instance_is_optimal_trees_cost():
    X, _, _ = make_gmm_dataset(60, n_components=3, n_features=2, random_state=1, noise_scale=2.0)
    result = explain(ExplainConfig(input=X, k=3, algorithm="imm", reference="kmeans"))
    standing, metrics = result.metrics["standing"], result.metrics
    cost = optimal_tree(X, 3)[1]
    assert standing["optimum"]["cost"] == pytest.approx(cost, rel=1e-12)
    assert standing["optimum"]["price"] == pytest.approx(cost / metrics["kmeans_cost_reference"], rel=1e-12)
    best = optimal_tree(X, 3)[0]
    assert standing["optimum"]["weighted_avg_depth"] == pytest.approx(best.node_depths()[best.apply(X)].mean())
    for row in standing["rows"]:  # k-leaf trees can't beat the optimum; more leaves can
        assert row["gap"] == pytest.approx(row["price"] / standing["optimum"]["price"] - 1)
        if row["n_leaves"] == 3:
            assert row["gap"] >= -1e-9
    html = result.report_html
    assert 'id="standing"' in html and "optimum (exact)" in html and "gap to optimum" in html
    assert '<tr data-algorithm="imm" class="own' in html  # the run's own row highlighted
    assert all(f'data-algorithm="{r["algorithm"]}"' in html for r in standing["rows"])
    assert html.index('id="standing"') < html.index('id="tree"')  # near the headline, above the tree


def test_runs_without_centers_say_why_in_one_sentence():
    X, y, _ = make_gmm_dataset(600, n_components=3, n_features=2, random_state=3)
    frame = pd.DataFrame(X, columns=["a", "b"]).assign(label=y)
    result = explain(ExplainConfig(input=frame, features=["a", "b"], k=3, algorithm="cart", reference="labels",
                                   reference_column="label"))
    note = result.metrics["standing"]["note"]
    assert "given labels of column 'label'" in note and "rows" not in result.metrics["standing"]
    assert note.replace("'", "&#x27;") in result.report_html or note in result.report_html
    off = explain(ExplainConfig(input=X, k=3, algorithm="imm", reference="kmeans", standing=False))
    assert "standing" not in off.metrics and 'id="standing"' not in off.report_html


def test_an_mmdt_run_on_a_mixture_stands_beside_the_trees_on_the_mixtures_means():
    X, _, _ = make_gmm_dataset(1500, n_components=3, n_features=2, random_state=5, noise_scale=2.0)
    result = explain(ExplainConfig(input=X, k=3, algorithm="mmdt", reference="gmm"))
    rows = {r["algorithm"]: r for r in result.metrics["standing"]["rows"]}
    assert rows["mmdt"]["own"] and rows["mmdt"]["price"] == result.metrics["price_kmeans"]
    assert set(registry.standing()) <= set(rows)


def test_under_kmedians_the_table_shows_the_curves_surrogate_price():
    X, _, _ = make_gmm_dataset(1500, n_components=3, n_features=2, random_state=6, noise_scale=2.0)
    config = ExplainConfig(input=X, k=3, algorithm="exkmc", reference="kmeans", objective="kmedians", leaves=4)
    data, ref, trees, _, standing = steps_until_scored(config)
    assert standing["cost"] == "kmedians-surrogate" and standing["optimum"] is None
    assert "k-medians" in standing["optimum_note"]
    l1 = np.abs(X[:, None, :] - ref.centers[None, :, :]).sum(axis=2)  # rows x centers
    reference = l1.min(axis=1).sum()
    rows = {r["algorithm"]: r for r in standing["rows"]}
    assert "cart" in rows  # CART learns labels: it stands under either objective
    for name, tree in trees.items():  # each cluster charged to its cheapest center in l1
        clusters = np.asarray(tree.predict(X))
        cost = sum(l1[clusters == c].sum(axis=0).min() for c in np.unique(clusters))
        assert rows[name]["price"] == pytest.approx(cost / reference, rel=1e-9), name


@pytest.mark.parametrize("held_in", ["memory", "parquet on a cluster"])
def test_at_many_rows_the_trees_off_the_curve_are_priced_on_a_sample_against_the_runs_tree(held_in, monkeypatch,
                                                                                          tmp_path, request):
    """Issue 29 item 4: past ``2 x PRICED_ROWS`` rows the trees the scores' pass does not route anyway are
    priced on a uniform sample of about ``PRICED_ROWS`` rows (the rows ``row_uniforms`` keeps by global row id,
    however the data are parted), each as the run's price on all rows times its cost over the run's tree's cost
    on those rows; the others stay exact."""
    from exclust.dataplane.parts import row_uniforms
    from exclust.report.standing import standing_html

    X, _, _ = make_gmm_dataset(40_000, n_components=5, n_features=3, random_state=2, noise_scale=4.0)
    source = pd.DataFrame(X, columns=["a", "b", "c"])
    if held_in != "memory":
        request.getfixturevalue("dask_client")
        (tmp_path / "data").mkdir()
        for i in range(4):  # parts of 10,000 rows: the kept rows are chosen by global row id
            source.iloc[i * 10_000:(i + 1) * 10_000].to_parquet(tmp_path / "data" / f"part-{i}.parquet")
        source = str(tmp_path / "data")
    config = ExplainConfig(input=source, k=5, algorithm="exkmc", reference="kmeans", leaves=10)
    monkeypatch.setattr(standing_module, "PRICED_ROWS", 4000)
    monkeypatch.setattr(pipeline, "RUN_SAMPLE_ROWS", 20_000)  # a sample short of every row: no proven bound
    data, ref, trees, scores, standing = steps_until_scored(config)
    labels = np.asarray(ref.labels.compute() if hasattr(ref.labels, "compute") else ref.labels)
    reference = kmeans_cost(X, labels)
    kept = X[row_uniforms(0, 0, len(X)) < 4000 / 40_000]
    own_on_sample = kmeans_cost(kept, np.asarray(trees["exkmc"].predict(kept)))
    rows = {r["algorithm"]: r for r in standing["rows"]}
    sampled = {name for name, r in rows.items() if r["sampled"]}
    assert sampled and "exkmc" not in sampled and set(rows) - sampled - {"exkmc"}  # some rode on the curve
    assert rows["exkmc"]["price"] == scores["price_kmeans"]
    for name, tree in trees.items():
        exact = kmeans_cost(X, np.asarray(tree.predict(X))) / reference
        if name in sampled:
            estimate = scores["price_kmeans"] * kmeans_cost(kept, np.asarray(tree.predict(kept))) / own_on_sample
            assert rows[name]["price"] == pytest.approx(estimate, rel=1e-9), name
            assert rows[name]["price"] == pytest.approx(exact, rel=0.03), name  # 3,900-odd rows of 40,000
        else:
            assert rows[name]["price"] == pytest.approx(exact, rel=1e-9), name
    assert "marked ≈" in standing["fitted_on"] and "about 4,000 of the 40,000 rows" in standing["fitted_on"]
    html = standing_html(standing)
    assert html.count("≈") == len(sampled) + 1  # each sampled price, and the note that explains the mark
