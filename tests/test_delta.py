"""Delta Lake tables as a source: real tables written by ``deltalake`` on local disk and on the
S3-compatible test server, read at their latest, an older version, or a timestamp."""
from __future__ import annotations

import json
import time
from datetime import UTC, datetime

import numpy as np
import pandas as pd
import pytest

from exclust.cli import main
from exclust.errors import InputError
from exclust.sources.base import open_source
from exclust.sources.dataset import load_dataset
from exclust.sources.storage import list_source

deltalake = pytest.importorskip("deltalake")


def mixture_frame(n: int, seed: int) -> pd.DataFrame:
    """Three well-separated clusters; ``day`` (1..3) is each row's cluster, ``kind`` its name."""
    from exclust.datasets.synthetic import make_gmm_dataset

    X, y = make_gmm_dataset(n, n_components=3, n_features=2, random_state=seed)[:2]
    return pd.DataFrame({"x0": X[:, 0], "x1": X[:, 1], "day": y + 1, "kind": np.array(["a", "b", "c"])[y]})


def sorted_rows(array) -> np.ndarray:
    array = np.asarray(array)
    return array[np.lexsort(array.T[::-1])]


def write_after(table_path: str, previous_ms: int, *args, **kwargs) -> None:
    """Commit once the clock has passed the previous commit's millisecond (so timestamps order the versions)."""
    while time.time() * 1000 <= previous_ms + 1:
        time.sleep(0.001)
    deltalake.write_deltalake(table_path, *args, **kwargs)


def commit_times(table_path: str, storage_options=None) -> dict[int, int]:
    history = deltalake.DeltaTable(table_path, storage_options=storage_options).history()
    return {h["version"]: h["timestamp"] for h in history}


@pytest.fixture
def events(tmp_path):
    """A table partitioned by day: version 0 holds three days, version 1 replaces day 2 with
    fewer rows (its old file stays on disk, removed in the log), and a stray Parquet file of a
    write that never committed lies in day 1's folder."""
    path = str(tmp_path / "events")
    first = mixture_frame(3000, 1)
    deltalake.write_deltalake(path, first, partition_by=["day"])
    replacement = first[first.day == 2].iloc[:100].reset_index(drop=True)
    write_after(path, commit_times(path)[0], replacement, mode="overwrite", predicate="day = 2", partition_by=["day"])
    stray = mixture_frame(500, 9).drop(columns="day")
    stray.to_parquet(tmp_path / "events" / "day=1" / "part-99999-uncommitted.parquet", index=False)
    latest = pd.concat([first[first.day != 2], replacement])
    return path, first, latest


def test_a_delta_table_reads_its_snapshot_only(events, dask_client):
    path, first, latest = events
    assert len(list_source(path).files) == 5  # what a plain Parquet reading would take: removed and stray files too
    data = load_dataset(path, ["x0", "x1"], extra_columns=["day", "kind"])
    assert data.source == f"Delta table {path}"
    assert data.n_rows == len(latest) == len(first) - (first.day == 2).sum() + 100
    got = np.column_stack([data.X.compute(), data.extra["day"].compute()])
    np.testing.assert_array_equal(sorted_rows(got), sorted_rows(latest[["x0", "x1", "day"]].to_numpy()))
    kinds = np.asarray(data.extra["kind"].compute())  # string labels coded in sorted order
    expected = latest.kind.value_counts().sort_index().to_numpy()
    np.testing.assert_array_equal(np.bincount(kinds.astype(int)), expected)


def test_a_version_and_a_timestamp_select_older_snapshots(events, dask_client):
    path, first, latest = events
    old = load_dataset(open_source(path, None, {"table_version": 0}), ["x0", "x1", "day"])
    assert old.source == f"Delta table {path} at version 0" and old.n_rows == 3000
    np.testing.assert_array_equal(sorted_rows(old.X.compute()), sorted_rows(first[["x0", "x1", "day"]].to_numpy()))
    times = commit_times(path)
    as_of = datetime.fromtimestamp(times[0] / 1000, UTC).isoformat()
    assert load_dataset(open_source(path, None, {"as_of": as_of}), ["x0"]).n_rows == 3000
    later = datetime.fromtimestamp(times[1] / 1000, UTC).isoformat()
    assert load_dataset(open_source(path, None, {"as_of": later}), ["x0"]).n_rows == len(latest)
    with pytest.raises(InputError, match=r"has versions up to 1, not 4"):
        open_source(path, None, {"table_version": 4}).check()
    with pytest.raises(InputError, match=r"was created at .* after --as-of 2001-01-01"):
        open_source(path, None, {"as_of": "2001-01-01"}).check()
    with pytest.raises(InputError, match=r"not both"):
        open_source(path, None, {"as_of": later, "table_version": 0}).check()


def test_schema_problems_name_the_snapshot(events):
    path, _, _ = events
    with pytest.raises(InputError, match=rf"unknown column\(s\) \['x9'\] in Delta table {path} \(version 1\)"):
        load_dataset(path, ["x0", "x9"])
    # A text column is a category feature (issue 28): its codes, its vocabulary from the snapshot's files.
    assert load_dataset(path, ["x0", "kind"]).categories == {1: ["a", "b", "c"]}
    with pytest.raises(InputError,
                       match=rf"partition column 'day' of Delta table {path}-dates \(version 0\) holds date32"):
        frame = pd.DataFrame({"x0": [1.0, 2.0], "day": pd.to_datetime(["2026-11-20", "2026-11-21"]).date})
        deltalake.write_deltalake(path + "-dates", frame, partition_by=["day"])
        load_dataset(path + "-dates", ["x0", "day"])


def test_snapshot_options_are_refused_for_plain_parquet(tmp_path, capsys):
    mixture_frame(300, 2).to_parquet(tmp_path / "plain.parquet", index=False)
    code = main(["explain", "--input", str(tmp_path / "plain.parquet"), "--k", "3", "--features", "x0,x1",
                 "--table-version", "0", "--out", str(tmp_path / "out")])
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["exclust explain: error: --table-version applies to tables (Delta, Iceberg), but "
                   f"{tmp_path / 'plain.parquet'} is read as Parquet; leave --table-version out or give a table"]


def test_explain_a_delta_table_with_its_partition_column_as_truth(events, tmp_path, capsys, dask_client):
    path, _, _ = events
    code = main(["explain", "--input", path, "--features", "x0,x1", "--k", "3", "--reference", "kmeans",
                 "--truth", "day", "--table-version", "0", "--no-curve", "--quiet",
                 "--scheduler", dask_client.scheduler.address, "--out", str(tmp_path / "run")])
    assert code == 0, capsys.readouterr().err
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["n"] == 3000  # version 0: the removed file is read, the stray one is not
    assert metrics["ari_truth"] > 0.9  # the partition column is each row's true cluster
    assert not any(p.name.startswith("part-99999") for p in (tmp_path / "run").rglob("*"))


def test_a_delta_table_on_s3(s3_server, s3_bucket, dask_client):
    url = f"s3://{s3_bucket}/tables/events"
    delta_options = {"AWS_ENDPOINT_URL": s3_server["endpoint_url"], "AWS_ACCESS_KEY_ID": "testing",
                     "AWS_SECRET_ACCESS_KEY": "testing", "AWS_ALLOW_HTTP": "true", "AWS_REGION": "us-east-1",
                     "AWS_S3_ALLOW_UNSAFE_RENAME": "true"}
    first = mixture_frame(1200, 3)
    deltalake.write_deltalake(url, first, partition_by=["day"], storage_options=delta_options)
    write_after(url, commit_times(url, delta_options)[0], first[first.day == 3].iloc[:10].reset_index(drop=True),
                mode="overwrite",
                predicate="day = 3", partition_by=["day"], storage_options=delta_options)
    options = s3_server["storage_options"]  # the Parquet source's fsspec options reach delta-rs too
    source = open_source(url, options)
    assert source.kind == "Delta table"
    latest = load_dataset(source, ["x0", "x1"], extra_columns=["day"])
    per_day = [(first.day == 1).sum(), (first.day == 2).sum(), 10]
    assert latest.n_rows == sum(per_day)
    np.testing.assert_array_equal(np.bincount(np.asarray(latest.extra["day"].compute()).astype(int))[1:], per_day)
    older = load_dataset(open_source(url, options, {"table_version": 0}), ["x0", "x1"])
    assert older.n_rows == 1200
