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
        pytest.skip(f"../shared/data/{name}.data.gz is absent (tests that read shared data need ../shared beside the "
                    "checkout)")
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


@pytest.fixture(scope="module")
def prefect_api():
    """A temporary Prefect server (SQLite in a temp folder) for the flow runs of one test module."""
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=240):
        yield


@pytest.fixture
def rng():
    return np.random.default_rng(0)


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def s3_server():
    """A real S3-compatible server (moto's standalone server) on 127.0.0.1, for the session.

    Yields {"endpoint_url", "storage_options", "env"}; the AWS_* variables in ``env`` are also set
    in this process (and so in subprocesses it starts), as a user would set them. Dask clusters
    started before this fixture do not see them: pass ``storage_options`` or start a new cluster.
    Skips, saying so, when the moto server is not installed.
    """
    import shutil
    import subprocess
    import sys
    import time
    import urllib.request

    server = shutil.which("moto_server") or str(Path(sys.executable).with_name("moto_server"))
    if not Path(server).exists():
        pytest.skip("moto_server (pip install 'moto[server]') is not installed: no S3-compatible server to test "
                    "against")
    port = _free_port()
    proc = subprocess.Popen([server, "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    endpoint = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            urllib.request.urlopen(endpoint, timeout=1)
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                pytest.fail(f"moto_server did not start on {endpoint}")
            time.sleep(0.2)
    env = {"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
           "AWS_DEFAULT_REGION": "us-east-1"}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield {"endpoint_url": endpoint, "env": env,
               "storage_options": {"key": "testing", "secret": "testing", "endpoint_url": endpoint}}
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        proc.terminate()
        proc.wait(timeout=10)


@pytest.fixture
def s3_bucket(s3_server):
    """A new empty bucket on the session's S3 server; yields its name."""
    import uuid

    import s3fs

    fs = s3fs.S3FileSystem(**s3_server["storage_options"])
    name = f"exclust-{uuid.uuid4().hex[:10]}"
    fs.mkdir(name)
    yield name
