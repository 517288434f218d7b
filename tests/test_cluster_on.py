"""Cluster in one space, explain in another (issue 28, item 3): the reference clustering is fitted on
the clustering columns Z (``cluster_on``: an embedding), the tree cuts other columns X (text, category,
numbers with nulls), and every cost the run reports is measured on Z while rows are routed on X.

Each figure is recomputed here in plain numpy from the rows: route every row with the tree on X
(``tree.apply``), then cost its leaf's (cluster's) rows on Z."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from exclust.jobs.config import ExplainConfig
from exclust.jobs.explain import pipeline
from exclust.scoring.metrics import evaluate
from exclust.sources.dataset import Dataset

EMBEDDING = [f"emb{j}" for j in range(8)]
FEATURES = ["age", "country", "plan"]
LEFT_OUT = {"kdtree"}  # its fit takes no Z: it labels leaves from centers in the features' space


def customers(n: int = 900, seed: int = 7) -> pd.DataFrame:
    """Clusters of an 8-dimensional embedding; the columns people read follow them loosely: a text
    country (10% of rows elsewhere), an age with nulls, a category plan that is noise."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, size=n)
    Z = rng.normal(scale=5.0, size=(3, 8))[y] + rng.normal(size=(n, 8))
    frame = pd.DataFrame(Z, columns=EMBEDDING)
    frame["country"] = np.array(["de", "fr", "it", "at"], dtype=object)[np.where(rng.random(n) < 0.9, y, 3)]
    age = 30.0 + 10.0 * y + rng.normal(scale=3.0, size=n)
    age[::13] = np.nan
    frame["age"] = age
    frame["plan"] = pd.Categorical(np.array(["free", "pro"], dtype=object)[rng.integers(0, 2, n)])
    frame["segment"] = y
    return frame


def as_numpy(a) -> np.ndarray:
    return np.asarray(a.compute() if hasattr(a, "compute") else a)


def kmeans_cost(Z: np.ndarray, groups: np.ndarray) -> float:
    """Sum over groups of the squared distances of their rows to the group's own mean, on Z; rows of
    group -1 (a tree that learned no missing side, CART's, labels rows holding NaN -1) left out."""
    return float(sum(((Z[groups == g] - Z[groups == g].mean(axis=0)) ** 2).sum() for g in np.unique(groups) if g >= 0))


def steps_until_scored(config: ExplainConfig):
    """The run's steps by hand up to scoring (as ``steps.explain`` runs them), keeping the reference and plans."""
    config.check()
    data = pipeline.load(config)
    ref = pipeline.fit_reference(data, config)
    built = pipeline.build_tree(data, ref, config)
    curve_plan = pipeline.plan_cost_curve(data, ref, config, built)
    standing_plan = pipeline.plan_standing(data, ref, built, config, curve_plan)
    scores, curve, standing = pipeline.score_and_curve(data, ref, built, config, with_curve=True,
                                                       planned_standing=standing_plan)
    return data, ref, built, curve_plan, standing_plan, scores, curve, standing


def check_against_numpy(config: ExplainConfig) -> None:
    """Price, costs, cost curve and standing table of a run clustered on Z equal numpy's on Z."""
    data, ref, built, curve_plan, standing_plan, scores, curve, standing = steps_until_scored(config)
    X, Z = as_numpy(data.X), as_numpy(data.cluster_X)
    assert Z.shape[1] == len(EMBEDDING) and np.isnan(X[:, 0]).any()  # missing ages are routed, not dropped
    labels, centers = as_numpy(ref.labels), np.asarray(ref.centers)
    tree = built.tree
    leaves = np.asarray(tree.apply(X))
    assert (leaves >= 0).all()
    values = tree.value[leaves]
    reference = kmeans_cost(Z, labels)
    assert scores["kmeans_cost_tree"] == pytest.approx(kmeans_cost(Z, values), rel=1e-9)
    assert scores["kmeans_cost_reference"] == pytest.approx(reference, rel=1e-9)
    assert scores["price_kmeans"] == pytest.approx(kmeans_cost(Z, values) / reference, rel=1e-9)
    # Each leaf scored against its own center in Z (the reference's centers live there).
    by_label = float(((Z - centers[values]) ** 2).sum())
    assert scores["surrogate_cost_tree_by_label"] == pytest.approx(by_label, rel=1e-9)
    per_leaf = [min(float(((Z[leaves == leaf] - c) ** 2).sum()) for c in centers) for leaf in np.unique(leaves)]
    assert scores["surrogate_cost_tree"] == pytest.approx(sum(per_leaf), rel=1e-9)
    assert scores["surrogate_cost_reference"] == pytest.approx(float(((Z - centers[labels]) ** 2).sum()), rel=1e-9)

    # The cost curve: every series' tree at every leaf count, on Z; KDTree, which cannot fit there, left out.
    assert curve is not None and "kdtree" not in curve and "KDTree left out" in curve["baselines"]
    assert curve["reference_cost"] == pytest.approx(float(((Z - centers[labels]) ** 2).sum()), rel=1e-9)
    for name in ("exkmc", "cart"):
        for tree_at, ratio in zip(curve_plan.series[name].trees, curve[name], strict=True):
            expected = kmeans_cost(Z, np.asarray(tree_at.predict(X))) / curve["reference_cost"]
            assert ratio == pytest.approx(expected, rel=1e-9), name

    # The standing table: rows for the builders that fit with Z, the others named with the reason.
    rows = {r["algorithm"]: r for r in standing["rows"]}
    assert {"exkmc", "imm", "cart", "exshallow", "exgreedy"} <= set(rows) and not LEFT_OUT & set(rows)
    assert {r["algorithm"] for r in standing["left_out"]} == LEFT_OUT
    assert all("emb0..emb7" in r["reason"] for r in standing["left_out"])
    assert standing["reference_cost"] == pytest.approx(reference, rel=1e-9)
    for name, series in standing_plan.plan.series.items():
        expected = kmeans_cost(Z, np.asarray(series.trees[0].predict(X))) / reference
        assert rows[name]["price"] == pytest.approx(expected, rel=1e-9), name
    assert rows["exkmc"]["own"] and rows["exkmc"]["price"] == scores["price_kmeans"]
    assert standing["optimum"] is None and "clustering columns emb0..emb7" in standing["optimum_note"]


def config_for(source, **options) -> ExplainConfig:
    return ExplainConfig(input=source, features=FEATURES, cluster_on=EMBEDDING, k=3, algorithm="exkmc",
                         reference="kmeans", leaves=4, **options)


def test_embedding_clusters_explained_with_other_columns_in_memory_equal_numpy():
    check_against_numpy(config_for(customers()))


def test_embedding_clusters_explained_with_other_columns_on_a_local_cluster_equal_numpy(tmp_path, dask_client):
    frame = customers(seed=11)
    frame.to_parquet(tmp_path / "customers.parquet", index=False, row_group_size=300)  # three parts
    check_against_numpy(config_for(str(tmp_path / "customers.parquet")))


def test_the_score_pass_reads_x_for_routing_and_z_for_costs_on_numpy_and_dask(dask_client):
    """``evaluate(..., Z=)``: k-means and k-medians costs on Z, rows routed on X, in memory and on Dask alike."""
    import dask.array as da

    from exclust.algorithms.histogram.exkmc import ExKMC

    frame = customers(600, seed=3)
    Z = frame[EMBEDDING].to_numpy()
    X = np.column_stack([frame["age"], frame["segment"].astype(float)])  # numeric: no vocabulary needed
    labels = frame["segment"].to_numpy()
    centers = np.stack([Z[labels == c].mean(axis=0) for c in range(3)])
    tree = ExKMC(3, 4, random_state=0).fit(Dataset(X, ["age", "segment"], missing={"age": 46}), centers, Z=Z).tree_
    values = tree.value[np.asarray(tree.apply(X))]

    def l1_to_medians(groups):
        return sum(float(np.abs(Z[groups == g] - np.median(Z[groups == g], axis=0)).sum()) for g in np.unique(groups))

    inputs = {"numpy": (X, labels, Z),
              "dask": (da.from_array(X, chunks=(200, 2)), da.from_array(labels, chunks=200),
                       da.from_array(Z, chunks=(200, 8)))}
    for kind, (x, y, z) in inputs.items():
        score = evaluate(tree, x, reference_labels=y, centers=centers, Z=z, kmedians=True, max_kmedians_passes=64,
                         kmedians_tol=0.0)[0]
        assert score.kmeans_cost_tree == pytest.approx(kmeans_cost(Z, values), rel=1e-9), kind
        assert score.price_kmeans == pytest.approx(kmeans_cost(Z, values) / kmeans_cost(Z, labels), rel=1e-9), kind
        assert score.kmedians_cost_tree == pytest.approx(l1_to_medians(values), rel=1e-9), kind
        assert score.kmedians_cost_reference == pytest.approx(l1_to_medians(labels), rel=1e-9), kind
        assert score.n_features == 2 and score.passes >= 2, kind
    with pytest.raises(Exception, match="Z .*clustering columns.* 599 entries for 600 rows"):
        evaluate(tree, X, centers=centers, Z=Z[1:])


def test_metrics_and_report_name_both_column_sets_and_scoring_is_one_pass(tmp_path, dask_client):
    """On a held Parquet input: scores, curve and standing table in one pass that reads no file (X and Z
    are held together); metrics.json and the report's header name both column sets."""
    from exclust.jobs.explain.steps import explain

    customers(seed=5).to_parquet(tmp_path / "customers.parquet", index=False, row_group_size=300)
    result = explain(config_for(str(tmp_path / "customers.parquet"), hold=True))
    pipeline.write_outputs(result, tmp_path / "run")
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["features"] == FEATURES and metrics["cluster_on"] == EMBEDDING
    assert metrics["standing"]["rows"] and metrics["price_kmeans"] is not None and metrics["held"] is True
    assert metrics["passes"]["score"] == 1 and metrics["passes"].get("report", 0) == 0
    assert metrics["parquet_reads"] == {step: int(step == "load") for step in metrics["parquet_reads"]}
    html = (tmp_path / "run" / "report.html").read_text()
    header = html.split('<header class="top">', 1)[1].split("</header>", 1)[0]
    assert "Clustered on: emb0..emb7; explained with: age, country, plan." in header
    assert "k-means cost on the clustering columns is" in header
    assert "Left out: KDTree: it prices its cuts" in html


def test_an_estimator_fitted_with_z_scores_on_z():
    """``IMM.fit(X, Z=)`` then ``score(X, Z=)``: the negative k-means cost of the tree's clusters on Z,
    rows routed on X (its text and null columns included), as numpy recomputes it."""
    import exclust

    frame = customers(n=600, seed=3)
    X, Z = frame[FEATURES], frame[EMBEDDING].to_numpy()
    model = exclust.IMM(n_clusters=3, random_state=0).fit(X, Z=Z)
    groups = model.predict(X)
    assert (groups >= 0).all()  # every null age and every country routed
    assert model.score(X, Z=Z) == pytest.approx(-kmeans_cost(Z, groups), rel=1e-9)
    assert model.score(X, Z=Z[::-1]) != pytest.approx(model.score(X, Z=Z))  # the cost is read from Z
