"""The explain job's load of a Parquet input held on the workers (issue 29 item 4): the validation's checks
and the run's sample made in the read's pass, the same sample ``run_sample`` draws from the validated rows."""
from __future__ import annotations

import numpy as np
import pandas as pd

from exclust.dataplane import parts
from exclust.datasets.synthetic import write_gmm_parquet
from exclust.jobs.config import ExplainConfig
from exclust.jobs.explain import pipeline
from exclust.jobs.explain.steps import explain


def test_the_read_checks_and_samples_the_rows_in_its_one_pass(tmp_path, dask_client, monkeypatch):
    monkeypatch.setattr(pipeline, "RUN_SAMPLE_ROWS", 700)  # fewer than the rows: a real draw
    write_gmm_parquet(tmp_path / "data", 6000, n_components=3, n_features=2, rows_per_file=2000, random_state=5)
    config = ExplainConfig(input=str(tmp_path / "data"), features=["x0", "x1"], k=3, truth="truth",
                           algorithm="imm", reference="kmeans", hold=True, random_state=3)
    data = pipeline.load(config)
    assert data.run_sample is not None  # drawn with the read
    X, truth = parts.uniform_sample(data.X, data.extra["truth"], size=700, random_state=3)
    assert data.run_sample.X.shape == (700, 2)
    np.testing.assert_array_equal(data.run_sample.X, X)
    np.testing.assert_array_equal(data.run_sample.extra["truth"], truth)
    assert data.run_sample.n_rows == 6000
    metrics = explain(config).metrics
    assert metrics["passes"]["load"] == 1 and metrics["parquet_reads"]["load"] == 1  # read, checked, sampled


def test_rows_dropped_by_the_validation_are_sampled_after_it(tmp_path, dask_client, monkeypatch):
    monkeypatch.setattr(pipeline, "RUN_SAMPLE_ROWS", 300)
    rng = np.random.default_rng(0)
    (tmp_path / "data").mkdir()
    for i in range(3):
        frame = pd.DataFrame(rng.normal(size=(1000, 2)) + 4 * (i % 2), columns=["a", "b"])
        frame.loc[rng.choice(1000, size=40, replace=False), "a"] = np.nan
        frame.to_parquet(tmp_path / "data" / f"part-{i}.parquet")
    config = ExplainConfig(input=str(tmp_path / "data"), features=["a", "b"], k=2, algorithm="imm",
                           reference="kmeans", hold=True, nan_policy="drop", random_state=4)
    data = pipeline.load(config)
    assert data.n_dropped == 120 and data.n_rows == 2880
    assert data.run_sample is None  # the read's rows are not the validated rows: drawn again when needed
    drawn = pipeline.run_sample(data, config)
    (X,) = parts.uniform_sample(data.X, size=300, random_state=4)
    np.testing.assert_array_equal(drawn.X, X)
    assert np.isfinite(drawn.X).all()
