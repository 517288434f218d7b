"""Adding a data source is one module plus one registration (issue 18).

This file is that module: ``CsvSource`` reads ``.csv`` files, planned from the header and the
line count (no value is parsed on the driver), each part read by a Dask worker; one
``register_source`` call makes every explain run recognise it, with no change to any other
module of exclust.
"""
from __future__ import annotations

import os
import sys

import numpy as np
import pandas as pd
import pytest

from exclust.errors import InputError
from exclust.sources.base import Columns, DataSource, open_source, register_source, unregister_source
from exclust.sources.guards import input_guards


def _read_rows(path: str, start: int, n_rows: int, columns: list[str]) -> np.ndarray:
    """One part on a worker: rows [start, start + n_rows) of the file, the asked columns, float64."""
    frame = pd.read_csv(path, skiprows=range(1, start + 1), nrows=n_rows, usecols=columns)
    return frame[columns].to_numpy(dtype=np.float64)


class CsvSource(DataSource):
    """One CSV file with a header row; every column numeric."""

    kind = "CSV"

    @classmethod
    def recognises(cls, spec, storage_options=None) -> bool:
        return isinstance(spec, (str, os.PathLike)) and str(spec).lower().endswith(".csv")

    def check(self) -> str:
        if not os.path.isfile(self.spec):
            raise InputError(f"input not found: {self.spec}")
        return str(self.spec)

    def columns(self, features, extra_columns=(), *, piece_rows=1_000_000) -> Columns:
        import dask
        import dask.array as da

        header = list(pd.read_csv(self.spec, nrows=0).columns)
        extra = list(extra_columns)
        names = list(features) if features is not None else [c for c in header if c not in extra]
        unknown = [c for c in [*names, *extra] if c not in header]
        if unknown:
            raise InputError(f"unknown column(s) {unknown} in {self.spec}; available columns: {header}")
        with open(self.spec, "rb") as f:
            n = sum(1 for _ in f) - 1
        parts = [(start, min(piece_rows, n - start)) for start in range(0, n, piece_rows)]
        columns = [*names, *extra]
        block = [da.from_delayed(dask.delayed(_read_rows)(str(self.spec), s, m, columns), (m, len(columns)), np.float64)
                 for s, m in parts]
        table = da.concatenate(block, axis=0)
        return Columns(table[:, :len(names)], names, {c: table[:, len(names) + i] for i, c in enumerate(extra)})

    def guards(self) -> list:
        return input_guards(self.spec, storage_options=self.storage_options)


@pytest.fixture
def csv_source():
    import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the workers read with this file's code
    register_source(CsvSource)
    try:
        yield CsvSource
    finally:
        unregister_source(CsvSource)
        cloudpickle.unregister_pickle_by_value(sys.modules[__name__])


def _frame(n: int = 3000, seed: int = 2) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    centers = np.array([[0.0, 0.0, 0.0], [6.0, 0.0, 1.0], [0.0, 6.0, -1.0]])
    truth = rng.integers(0, 3, n)
    X = centers[truth] + rng.normal(size=(n, 3))
    return pd.DataFrame({"x0": X[:, 0], "x1": X[:, 1], "x2": X[:, 2], "truth": truth})


def test_a_registered_source_runs_explain_and_reads_what_memory_holds(tmp_path, csv_source, dask_client):
    from exclust.jobs.config import ExplainConfig
    from exclust.jobs.explain.steps import explain, run_explain

    frame = _frame()
    path = tmp_path / "points.csv"
    frame.to_csv(path, index=False)
    source = open_source(str(path))
    assert isinstance(source, CsvSource) and source.needs_cluster  # asked before the Parquet catch-all
    assert isinstance(open_source(str(tmp_path / "points.parquet")), DataSource)

    import dask.dataframe as dd

    options = dict(features=["x0", "x1", "x2"], k=3, algorithm="imm", reference="kmeans", truth="truth")
    from_csv = explain(ExplainConfig(input=str(path), **options))
    # The same rows as a Dask collection in one part (the CSV is one part too): the same distributed path.
    in_memory = explain(ExplainConfig(input=dd.from_pandas(frame, npartitions=1), **options))
    assert from_csv.tree == in_memory.tree  # the same rows in, the same tree out
    for key in ("price_kmeans", "ari_truth", "n"):
        assert from_csv.metrics[key] == in_memory.metrics[key]
    assert from_csv.metrics["n"] == len(frame) and from_csv.metrics["ari_truth"] > 0.9

    written = run_explain(ExplainConfig(input=str(path), **options), tmp_path / "out",
                          scheduler=dask_client.scheduler.address)
    assert (written.out / "tree.json").exists()
    with pytest.raises(InputError, match="unknown column"):
        explain(ExplainConfig(input=str(path), features=["x0", "nope"], k=3, reference="kmeans"))
    with pytest.raises(InputError):  # the source's guards: an output may not replace what the run reads
        run_explain(ExplainConfig(input=str(path), **options), tmp_path, scheduler=dask_client.scheduler.address)
    assert path.exists()


def test_without_the_registration_a_csv_path_is_parquet_to_exclust(tmp_path):
    from exclust.jobs.config import ExplainConfig
    from exclust.jobs.explain.steps import explain

    path = tmp_path / "points.csv"
    _frame(50).to_csv(path, index=False)
    assert type(open_source(str(path))).__name__ == "ParquetSource"
    with pytest.raises(InputError):
        explain(ExplainConfig(input=str(path), k=3, reference="kmeans"))
