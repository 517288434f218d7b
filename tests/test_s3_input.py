"""Reading from a real S3-compatible server (moto on 127.0.0.1): listing, hive keys, explain end to end.

The session's Dask cluster may have started before the server set the AWS_* variables, so the
library calls pass ``storage_options``; the command-line test passes them with --storage-option.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from exclust.errors import InputError
from exclust.sources.dataset import load_dataset
from exclust.sources.guards import validate_input_path
from exclust.sources.storage import OUTPUT_MARKER, SUCCESS_MANIFEST, list_source

ROOT = Path(__file__).resolve().parents[1]


def s3fs_of(server):
    import s3fs

    return s3fs.S3FileSystem(**server["storage_options"])


def upload(fs, key: str, frame: pd.DataFrame) -> None:
    import io

    buffer = io.BytesIO()
    frame.to_parquet(buffer, index=False)
    fs.pipe(key, buffer.getvalue())


@pytest.fixture
def events(s3_server, s3_bucket):
    """s3://BUCKET/events/day=D/part-0.parquet for days 1..3, one mixture component per day, plus
    the leftovers of other writers (Spark's _temporary, a .crc, _SUCCESS) that must not be read."""
    from exclust.datasets.synthetic import make_gmm_dataset

    X, y = make_gmm_dataset(3000, n_components=3, n_features=2, random_state=5)[:2]
    frame = pd.DataFrame({"x0": X[:, 0], "x1": X[:, 1]})
    fs = s3fs_of(s3_server)
    for day in range(3):
        upload(fs, f"{s3_bucket}/events/day={day + 1}/part-0.parquet", frame[y == day])
    upload(fs, f"{s3_bucket}/events/_temporary/0/day=9/part-0.parquet", frame)
    fs.pipe(f"{s3_bucket}/events/day=1/.part-0.parquet.crc", b"crc")
    fs.pipe(f"{s3_bucket}/events/_SUCCESS", b"")
    expected = pd.concat([frame[y == day].assign(day=day + 1) for day in range(3)])
    return f"s3://{s3_bucket}/events", expected


def test_hive_dataset_on_s3_reads_like_local_data(events, s3_server, dask_client):
    url, expected = events
    source = list_source(url, s3_server["storage_options"])
    assert [f.relpath for f in source.files] == [f"day={d}/part-0.parquet" for d in (1, 2, 3)]
    data = load_dataset(url, ["x0", "x1", "day"], extra_columns=["day"], storage_options=s3_server["storage_options"])
    np.testing.assert_array_equal(data.X.compute(), expected[["x0", "x1", "day"]].to_numpy())
    np.testing.assert_array_equal(data.extra["day"].compute(), expected["day"].to_numpy())
    # The environment alone (AWS_ENDPOINT_URL and keys, as a user sets them) reaches the store too.
    assert len(list_source(url).files) == 3


def test_schema_drift_on_s3_names_the_object(s3_server, s3_bucket, dask_client):
    fs = s3fs_of(s3_server)
    upload(fs, f"{s3_bucket}/drift/a.parquet", pd.DataFrame({"x0": [1.0, 2.0], "x1": [1.0, 3.0]}))
    upload(fs, f"{s3_bucket}/drift/b.parquet", pd.DataFrame({"x0": [1.0, 2.0]}))
    with pytest.raises(InputError, match=rf"Parquet file s3://{s3_bucket}/drift/b\.parquet lacks column 'x1'"):
        load_dataset(f"s3://{s3_bucket}/drift", ["x0", "x1"], storage_options=s3_server["storage_options"])


def test_missing_and_incomplete_s3_inputs_are_named(s3_server, s3_bucket):
    options = s3_server["storage_options"]
    with pytest.raises(InputError, match=rf"input s3://{s3_bucket}/missing not found on s3://{s3_bucket}"):
        validate_input_path(f"s3://{s3_bucket}/missing", options)
    with pytest.raises(InputError, match=rf"not found on s3://{s3_bucket}"):
        list_source(f"s3://{s3_bucket}/missing", options)
    fs = s3fs_of(s3_server)
    upload(fs, f"{s3_bucket}/labelled/part-0.parquet", pd.DataFrame({"x0": [1.0, 2.0]}))
    fs.pipe(f"{s3_bucket}/labelled/{OUTPUT_MARKER}", b"{}")
    assert validate_input_path(f"s3://{s3_bucket}/labelled", options) == f"s3://{s3_bucket}/labelled"
    with pytest.raises(InputError, match="incomplete exclust output, the run that wrote it did not finish"):
        list_source(f"s3://{s3_bucket}/labelled", options)
    fs.pipe(f"{s3_bucket}/labelled/{SUCCESS_MANIFEST}", b"{}")  # seen at once: listings are never stale
    assert len(list_source(f"s3://{s3_bucket}/labelled", options).files) == 1


def test_explain_from_s3_with_a_partition_column_as_truth(events, s3_server, dask_client, tmp_path):
    from exclust.jobs.config import ExplainConfig
    from exclust.jobs.explain.steps import run_explain

    url, _ = events
    config = ExplainConfig(input=url, features=["x0", "x1"], k=3, truth="day", algorithm="imm",
                           storage_options=s3_server["storage_options"])
    result = run_explain(config, tmp_path / "out", scheduler=dask_client.scheduler.address)
    assert result.metrics["n"] == 3000 and result.metrics["ari_truth"] > 0.8
    assert (tmp_path / "out" / "tree.json").exists()


def test_cli_explain_from_s3_with_storage_options(events, s3_server, dask_client, tmp_path):
    url, _ = events
    env = {**os.environ, **s3_server["env"], "PYTHONPATH": str(ROOT)}
    options = [arg for k, v in s3_server["storage_options"].items() for arg in ("--storage-option", f"{k}={v}")]
    cmd = [sys.executable, "-m", "exclust.cli", "explain", "--input", url, "--features", "x0,x1", "--k", "3",
           "--reference", "labels:day", "--truth", "day", "--out", str(tmp_path / "out"), "--quiet",
           "--scheduler", dask_client.scheduler.address, *options]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    metrics = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert metrics["reference"] == "labels:day" and metrics["n"] == 3000
    assert metrics["ari_truth"] > 0.8
    missing = subprocess.run([*cmd[:5], url + "-missing", *cmd[6:]], env=env, capture_output=True, text=True,
                             timeout=300)
    assert missing.returncode == 2 and "not found on s3://" in missing.stderr


def test_flow_parameters_take_storage_options(events, s3_server, tmp_path):
    from pydantic import ValidationError

    from flows.params import ExplainParams

    url, _ = events
    options = {**s3_server["storage_options"], "endpoint_url": "http://127.0.0.1:9"}  # nothing listens there
    with pytest.raises(ValidationError, match="cannot read s3://"):
        ExplainParams(input=url, output=str(tmp_path / "o"), storage_options={**options, "config_kwargs": {
            "connect_timeout": 1, "retries": {"max_attempts": 1}}})
    params = ExplainParams(input=url, output=str(tmp_path / "o"), storage_options=s3_server["storage_options"])
    assert params.to_config().storage_options == s3_server["storage_options"]
