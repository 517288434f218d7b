"""A run owns its state (issue 26, item 2): its input opened once, its pass counter, its timer.

Two runs in one process (a notebook, a Prefect worker) count their passes apart, one after the
other and at once on two threads, and each run opens its input once.
"""
from __future__ import annotations

import threading

import numpy as np
import pandas as pd

from exclust.dataplane import parts
from exclust.datasets.synthetic import write_gmm_parquet
from exclust.jobs.config import ExplainConfig
from exclust.jobs.explain.steps import explain
from exclust.sources.base import open_source


def _counts(metrics: dict) -> tuple:
    return metrics["passes"], metrics["parquet_reads"], metrics["n_passes"]


def _frame(seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    centers = np.array([[0.0, 0.0], [6.0, 1.0], [1.0, 7.0]])
    X = np.vstack([c + rng.normal(size=(400, 2)) for c in centers])
    return pd.DataFrame(X, columns=["a", "b"])


def _runs_at_once(configs: list[ExplainConfig], meet_at: str = "build tree") -> list[dict]:
    """Each config explained on its own thread, the runs held together at the start of ``meet_at``
    (every run is then inside its run at once: its earlier steps counted, its later ones to come)."""
    barrier = threading.Barrier(len(configs), timeout=300)
    results: list = [None] * len(configs)
    errors: list = []

    def log(line: str) -> None:
        if line.rstrip().endswith(meet_at) or f"] {meet_at}:" in line:
            barrier.wait()

    def one(i: int) -> None:
        try:
            results[i] = explain(configs[i], log=log).metrics
        except BaseException as exc:  # re-raised on the test's thread
            errors.append(exc)
            barrier.abort()

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(configs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return results


def test_in_memory_runs_count_apart_one_after_the_other_and_at_once():
    configs = [ExplainConfig(input=_frame(seed), features=["a", "b"], k=3, algorithm="exkmc", leaves=5,
                             reference="kmeans", random_state=seed) for seed in (1, 2)]
    alone = [_counts(explain(c).metrics) for c in configs]
    assert all(sum(passes.values()) > 0 for passes, _, _ in alone)
    again = [_counts(explain(c).metrics) for c in configs]  # one after the other: nothing carried over
    assert again == alone
    assert [_counts(m) for m in _runs_at_once(configs)] == alone
    assert parts.active_passes() is None  # nothing left active on this thread once the runs ended


def test_parquet_runs_on_one_cluster_count_apart_at_once(tmp_path, dask_client):
    configs = []
    for seed in (3, 4):
        write_gmm_parquet(tmp_path / f"data{seed}", 6000, n_components=3, n_features=2, rows_per_file=2000,
                          random_state=seed)
        configs.append(ExplainConfig(input=str(tmp_path / f"data{seed}"), features=["x0", "x1"], k=3,
                                     algorithm="imm", reference="kmeans", random_state=seed, hold=seed == 3))
    alone = [_counts(explain(c).metrics) for c in configs]
    assert alone[0][1]["load"] == 1 and sum(alone[1][1].values()) > alone[0][1]["load"]  # held; streamed
    assert [_counts(m) for m in _runs_at_once(configs)] == alone


def test_estimators_outside_a_run_count_into_no_run():
    from exclust import ExKMC

    X = _frame(5).to_numpy()
    counter = parts.PassCounter()
    with parts.counting_passes(counter), counter.step("fit"):
        ExKMC(n_clusters=3, max_leaves=4, random_state=0).fit(X)
    assert counter.passes["fit"] > 0
    before = dict(counter.passes)
    ExKMC(n_clusters=3, max_leaves=4, random_state=0).fit(X)  # no run active: counted nowhere, still works
    assert counter.passes == before and parts.active_passes() is None


def test_a_run_opens_its_input_once(tmp_path, dask_client):
    from exclust.sources.base import DataSource, register_source, unregister_source
    from exclust.sources.parquet import ParquetSource

    opened: list[str] = []

    class CountedParquet(ParquetSource):
        kind = "counted Parquet"

        @classmethod
        def recognises(cls, spec, storage_options=None) -> bool:
            return str(spec).endswith("counted")

        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            opened.append(str(self.spec))

    assert issubclass(CountedParquet, DataSource)
    write_gmm_parquet(tmp_path / "counted", 3000, n_components=3, n_features=2, rows_per_file=1000, random_state=6)
    register_source(CountedParquet)
    try:
        assert isinstance(open_source(str(tmp_path / "counted")), CountedParquet)
        opened.clear()
        from exclust.jobs.explain.steps import run_explain

        run_explain(ExplainConfig(input=str(tmp_path / "counted"), features=["x0", "x1"], k=3, algorithm="kdtree",
                                  reference="kmeans"), tmp_path / "out")
    finally:
        unregister_source(CountedParquet)
    assert len(opened) == 1, opened
    assert (tmp_path / "out" / "metrics.json").exists()


def test_a_step_counts_into_its_own_run_whatever_thread_runs_it():
    """A step run on another thread than the run's (as a Prefect task may be) still counts into its run."""
    from exclust.jobs.explain.steps import STEPS, Run

    config = ExplainConfig(input=_frame(7), features=["a", "b"], k=3, algorithm="exkmc", reference="kmeans")
    lone = explain(config).metrics["passes"]["build tree"]
    assert lone > 0
    run = Run(config.check())
    for step in STEPS[:3]:
        with run.context.step(step.name):
            if step.name != "build tree":
                step.run(run)
                continue
            worker = threading.Thread(target=step.run, args=(run,))
            worker.start()
            worker.join()
    assert run.built is not None and run.context.passes.passes["build tree"] == lone
    assert parts.active_passes() is None
