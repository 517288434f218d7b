"""The explain job as library steps: in-memory and Parquet inputs, every reference kind, outputs."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from exclust.datasets.synthetic import make_gmm_dataset, write_gmm_parquet
from exclust.errors import InputError
from exclust.jobs.config import ExplainConfig
from exclust.jobs.explain.pipeline import sample_rows, write_outputs
from exclust.jobs.explain.steps import explain, run_explain
from exclust.sources.dataset import load_dataset
from exclust.tree import ThresholdTree


@pytest.fixture(scope="module")
def frame():
    X, y, _ = make_gmm_dataset(6000, n_components=4, n_features=3, random_state=2, noise_scale=3.0)
    df = pd.DataFrame(X, columns=["a", "b", "c"])
    df["truth"] = y
    return df


def test_mmdt_on_a_frame_explains_the_mixture(frame):
    lines = []
    result = explain(ExplainConfig(input=frame, features=["a", "b", "c"], k=4, truth="truth", threshold="gaussian"),
                     log=lines.append)
    m = result.metrics
    assert result.tree.n_leaves == 4 and result.tree.feature_names == ["a", "b", "c"]
    assert (m["algorithm"], m["k"], m["d"], m["n"], m["reference"]) == ("mmdt", 4, 3, 6000, "gmm")
    assert m["ari_truth"] > 0.9 and m["error_rate"] < 0.05 and m["enr"] > 1
    assert {"load", "fit reference", "build tree", "score"} <= set(m["seconds"])
    assert any("fit reference done in" in line for line in lines)
    assert result.rules.count("\n") == 4
    assert "<svg" in result.report_html and "curve-svg" not in result.report_html  # MMDT: no cost curve


def test_label_and_kmeans_references(frame):
    by_labels = explain(ExplainConfig(input=frame, features=["a", "b", "c"], k=4, reference="labels",
                                      reference_column="truth", truth="truth"))
    assert by_labels.metrics["reference"] == "labels:truth"
    assert by_labels.metrics["ari_reference_truth"] == pytest.approx(1.0)
    by_kmeans = explain(ExplainConfig(input=frame, features=["a", "b", "c"], k=4, reference="kmeans"))
    assert by_kmeans.metrics["reference"] == "kmeans" and by_kmeans.tree.n_leaves == 4
    with pytest.raises(InputError, match="pass k=4") as caught:  # Python wording; the CLI says --k 4
        explain(ExplainConfig(input=frame, features=["a", "b", "c"], k=3, reference="labels", reference_column="truth"))
    assert caught.value.describe("cli").endswith("pass --k 4")


@pytest.mark.parametrize("algorithm", ["imm", "exkmc", "cart", "kdtree", "kernel-mmdt"])
def test_other_algorithms_run_through_the_same_steps(frame, algorithm):
    config = ExplainConfig(input=frame, features=["a", "b", "c"], k=4, algorithm=algorithm, truth="truth",
                           leaves=6 if algorithm in ("exkmc", "kdtree", "cart") else None)
    result = explain(config)
    budget = 6 if algorithm in ("exkmc", "kdtree", "cart") else 4
    assert 4 <= result.tree.n_leaves <= budget and result.metrics["algorithm"] == algorithm
    assert set(result.tree.features_used) <= {"a", "b", "c"}
    if algorithm in ("imm", "exkmc", "kdtree", "cart"):  # data-driven trees: the report has the cost curve
        assert "curve-svg" in result.report_html
    assert result.metrics["ari_truth"] > 0.5


def test_parquet_run_writes_the_four_files(tmp_path, dask_client):
    write_gmm_parquet(tmp_path / "data", 12_000, n_components=3, n_features=2, rows_per_file=3000, random_state=4,
                      noise_scale=3.0)
    result = run_explain(
        ExplainConfig(input=str(tmp_path / "data"), features=["x0", "x1"], k=3, truth="truth"),
        tmp_path / "out", scheduler=dask_client.scheduler.address,
    )
    out = tmp_path / "out"
    assert sorted(p.name for p in out.iterdir()) == [".exclust-output", "_SUCCESS", "metrics.json", "report.html",
                                                     "rules.txt", "tree.json"]
    assert ThresholdTree.from_json(out / "tree.json") == result.tree
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["n"] == 12_000 and metrics["ari_truth"] > 0.95 and metrics["seconds"]["total"] > 0
    assert (out / "rules.txt").read_text() == result.tree.rules_text()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".out.")] in ([], [".out.lock"])


def test_failed_step_leaves_no_output_folder(tmp_path, frame):
    result = explain(ExplainConfig(input=frame, features=["a", "b", "c"], k=4))
    result.report_html = None
    result.metrics["bad"] = object()  # written as its str(): metrics must never break the write
    write_outputs(result, tmp_path / "ok")
    assert json.loads((tmp_path / "ok" / "metrics.json").read_text())["bad"].startswith("<object")
    result.tree = "not a tree"  # tree.json cannot be written: the whole folder must not appear
    with pytest.raises(AttributeError):
        write_outputs(result, tmp_path / "broken")
    assert not (tmp_path / "broken").exists()
    assert not [p for p in tmp_path.iterdir() if ".tmp-" in p.name]


def test_config_checks_choices_before_any_work(tmp_path):
    with pytest.raises(InputError, match="unknown algorithm .xgboost.; choose one of mmdt, imm"):
        ExplainConfig(input=np.zeros((5, 2)), algorithm="xgboost").check()
    with pytest.raises(InputError, match="at least the number of clusters"):
        ExplainConfig(input=np.zeros((5, 2)), k=5, leaves=3).check()
    with pytest.raises(InputError, match="input not found"):
        ExplainConfig(input=str(tmp_path / "nope")).check()
    assert ExplainConfig.parse_reference("labels:seg") == ("labels", "seg")
    with pytest.raises(InputError):
        ExplainConfig.parse_reference("labels:")


def test_sample_rows_spreads_over_chunks():
    import dask.array as da

    X = np.arange(20_000, dtype=float).reshape(-1, 2)
    s = sample_rows(da.from_array(X, chunks=(1000, 2)), max_rows=500)
    assert s.shape == (500, 2) and s[:, 0].max() > 15_000  # later chunks are represented
    assert sample_rows(X, max_rows=100).shape == (100, 2)


def test_concept_mmdt_builds_a_tree_over_concepts(frame):
    df = frame.copy()
    df["high_a"] = (df["a"] > df["a"].median()).astype(int)
    df["b_plus_c"] = df["b"] + df["c"]  # a continuous concept
    result = explain(ExplainConfig(input=df, features=["a", "b", "c"], k=4, algorithm="concept-mmdt",
                                   concepts=["high_a", "b_plus_c"], truth="truth"))
    assert set(result.tree.feature_names) == {"high_a", "b_plus_c"}
    assert result.tree.n_leaves == 4 and result.metrics["enr_convention"] == "paper000"
    assert result.metrics["ari_reference"] is not None
    # The tree file alone labels new embeddings: it carries the concept vectors and projects first.
    import pyarrow as pa

    from exclust.algorithms.mmdt.concept import ConceptActivationVectors
    from exclust.jobs.label.labeling import label_table

    saved = type(result.tree).from_json(result.tree.to_json())
    assert saved.meta["embedding_features"] == ["a", "b", "c"]
    cavs = ConceptActivationVectors.from_dict(saved.meta["concept_activation_vectors"])
    X = df[["a", "b", "c"]].to_numpy()
    labelled = label_table(saved, pa.Table.from_pandas(df[["a", "b", "c"]]))
    assert (labelled.column("cluster").to_numpy() == result.tree.predict(cavs.project(X))).all()


def test_long_steps_report_progress_with_scheduler_task_counts(dask_client):
    import time

    import dask

    from exclust.dataplane.progress import StepTimer

    lines = []
    timer = StepTimer(lines.append, heartbeat=0.3)
    with timer.step("slow pass", "8 tasks"):
        dask.compute(*[dask.delayed(time.sleep, pure=False)(0.4) for _ in range(8)])
    assert lines[0].endswith("slow pass: 8 tasks") and "slow pass done in" in lines[-1]
    beats = [line for line in lines if "running for" in line]
    assert beats and any("Dask tasks" in line for line in beats)
    assert timer.seconds["slow pass"] >= 1.0


def test_chosen_plot_features_are_checked_before_any_fit(frame):
    with pytest.raises(InputError, match=r"plot feature\(s\) \['zz'\]"):
        explain(ExplainConfig(input=frame, features=["a", "b", "c"], k=4, plot_features=["a", "zz"]))
    result = explain(ExplainConfig(input=frame, features=["a", "b", "c"], k=4, plot_features=["c", "a"]))
    assert "<svg" in result.report_html


def test_string_concept_with_gaps_stays_binary(frame):
    df = frame.copy()
    shape = np.where(df["a"] > df["a"].median(), "round", "flat").astype(object)
    shape[::7] = None  # unlabelled rows: ignored for this concept, not a third class
    df["shape"] = shape
    df["b_plus_c"] = df["b"] + df["c"]
    result = explain(ExplainConfig(input=df, features=["a", "b", "c"], k=4, algorithm="concept-mmdt",
                                   concepts=["shape", "b_plus_c"]))
    kinds = result.tree.meta["concept_kinds"]
    assert kinds == {"shape": "binary", "b_plus_c": "continuous"}


@pytest.mark.parametrize("hold", [True, False])
def test_metrics_count_the_real_parquet_reads_per_step(tmp_path, dask_client, monkeypatch, hold):
    from test_parts import counting_reads, real_reads

    write_gmm_parquet(tmp_path / "data", 9000, n_components=3, n_features=2, rows_per_file=3000, random_state=5,
                      noise_scale=3.0)
    pieces = load_dataset(str(tmp_path / "data"), ["x0", "x1"]).X.numblocks[0]
    log = tmp_path / "reads.log"
    counting_reads(monkeypatch, log)
    config = ExplainConfig(input=str(tmp_path / "data"), features=["x0", "x1"], k=3, truth="truth",
                           algorithm="cart", reference="kmeans", leaves=4, hold=hold)
    result = explain(config)
    metrics = result.metrics
    assert metrics["held"] is hold
    reads, passes = metrics["parquet_reads"], metrics["passes"]
    assert sum(reads.values()) == real_reads(log, pieces)
    if hold:
        assert reads == {step: int(step == "load") for step in reads}
    else:
        assert reads["load"] == 1 and reads["score"] == passes["score"] >= 1  # validation; scoring streams
    # Scores, the curve and the standing table share one pass; the rest of the step is the k-medians passes.
    assert passes["score"] == 1 + metrics["kmedians_passes"]
    assert "report" not in passes or passes["report"] == 0
    # The standing table (the other algorithms' trees on the run's sample) costs no pass and no read.
    assert {row["algorithm"] for row in metrics["standing"]["rows"]} >= {"cart", "imm", "exgreedy", "exshallow"}
    config.standing = False
    without = explain(config).metrics
    assert "standing" not in without
    assert (without["passes"], without["parquet_reads"]) == (passes, reads)


def test_no_curve_flag_skips_the_curve(frame):
    config = ExplainConfig(input=frame, features=["a", "b", "c"], k=4, algorithm="kdtree", reference="kmeans",
                           cost_curve=False)
    assert "curve-svg" not in explain(config).report_html
    config.cost_curve = True
    assert "curve-svg" in explain(config).report_html


def test_an_interrupt_swallowed_mid_step_stops_the_run_before_anything_is_written(tmp_path, monkeypatch):
    """A Ctrl-C whose KeyboardInterrupt lands where Python swallows it (a gc callback) still stops the run."""
    import exclust.jobs.explain.pipeline as pipeline_module
    from exclust.dataplane import progress

    X, _, _ = make_gmm_dataset(3000, 3, 2, random_state=3)
    build = pipeline_module.build_tree

    def build_then_interrupted(*args, **kwargs):
        progress.INTERRUPTED.set()  # what the CLI's handler sets before its exception is lost
        return build(*args, **kwargs)

    monkeypatch.setattr(pipeline_module, "build_tree", build_then_interrupted)
    try:
        with pytest.raises(KeyboardInterrupt):
            run_explain(ExplainConfig(input=X, k=3, algorithm="imm", reference="kmeans"), tmp_path / "out")
    finally:
        progress.INTERRUPTED.clear()
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no output, no staging left
