"""Shared fixtures: paths to ../shared, small Dask clusters, temporary Parquet datasets."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
SHARED_DATA = SHARED / "data"
SHARED_FIXTURES = SHARED / "fixtures"


def shared_dataset(name: str):
    """(X, labels) of a dataset in ../shared/data; skips the test when ../shared is absent."""
    data = SHARED_DATA / f"{name}.data.gz"
    if not data.exists():
        pytest.skip(f"../shared/data/{name}.data.gz is absent (tests that read shared data need ../shared beside the checkout)")
    X = np.loadtxt(data, ndmin=2)
    y = np.loadtxt(SHARED_DATA / f"{name}.labels0.gz").astype(int) - 1
    return X, y


@pytest.fixture(scope="session")
def dask_client():
    """A real multi-process LocalCluster (2 workers, 1 thread each), shared by the session."""
    from distributed import Client, LocalCluster

    cluster = LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
        dashboard_address="127.0.0.1:0", memory_limit="2GiB",
    )
    client = Client(cluster)
    yield client
    client.close()
    cluster.close()


@pytest.fixture
def rng():
    return np.random.default_rng(0)
