"""The Dask workers of an explain run never import scikit-learn (about 1.2 s per worker process,
measured at 10M rows): every function shipped to them lives in a module that does not import
it (exclust.reference.passes, exclust.scoring.curve_pass, exclust.scoring.score_pass,
exclust.algorithms.histogram.engine, ...)."""
from __future__ import annotations

import logging
import sys

import pytest
from distributed import Client, LocalCluster

from exclust.datasets.synthetic import write_gmm_parquet
from exclust.jobs.config import ExplainConfig
from exclust.jobs.explain.steps import Run, run_steps


def _heavy_modules() -> list[str]:
    return sorted(m for m in ("sklearn", "scipy.stats", "prefect") if m in sys.modules)


@pytest.mark.parametrize("algorithm,reference", [("exkmc", "kmeans"), ("imm", "kmedians")])
def test_an_explain_run_imports_no_scikit_learn_on_the_workers(tmp_path, algorithm, reference):
    folder = tmp_path / "data"
    write_gmm_parquet(folder, 20_000, n_components=4, n_features=5, rows_per_file=5_000, random_state=0)
    config = ExplainConfig(input=str(folder), algorithm=algorithm, k=4, leaves=8, reference=reference,
                           truth="truth")
    # A fresh worker process: the session's shared workers may have imported anything.
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=None, silence_logs=logging.ERROR) as cluster, Client(cluster) as client:
        run = run_steps(Run(config))
        assert run.result.metrics["n"] == 20_000
        assert run.curve is not None  # the curve's pass ran on the workers too
        imported = list(client.run(_heavy_modules).values())
    assert imported == [[]]
