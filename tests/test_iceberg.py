"""Iceberg tables as a source: real tables written by ``pyiceberg`` with a SQLite catalog on local
disk, read at their current snapshot, an older snapshot, or a timestamp."""
from __future__ import annotations

import time
from datetime import UTC, datetime

import numpy as np
import pyarrow as pa
import pytest

from exclust.errors import InputError
from exclust.sources.base import open_source
from exclust.sources.dataset import load_dataset

pytest.importorskip("pyiceberg")


def mixture(n: int, seed: int) -> pa.Table:
    from exclust.datasets.synthetic import make_gmm_dataset

    X, y = make_gmm_dataset(n, n_components=3, n_features=2, random_state=seed)[:2]
    return pa.table({"x0": X[:, 0], "x1": X[:, 1], "day": pa.array(y + 1, pa.int64()),
                     "kind": pa.array(np.array(["a", "b", "c"])[y])})


def sorted_rows(array) -> np.ndarray:
    array = np.asarray(array)
    return array[np.lexsort(array.T[::-1])]


@pytest.fixture
def events(tmp_path):
    """ns.events partitioned by day: snapshot 1 holds 1500 rows; then day 2 is overwritten with
    50 rows (its old file stays on disk, no longer in the snapshot)."""
    from pyiceberg.catalog.sql import SqlCatalog

    catalog = SqlCatalog("test", uri=f"sqlite:///{tmp_path}/catalog.db", warehouse=f"file://{tmp_path}/warehouse")
    catalog.create_namespace("ns")
    first = mixture(1500, 4)
    table = catalog.create_table("ns.events", schema=first.schema)
    with table.update_spec() as spec:
        spec.add_identity("day")
    table.append(first)
    first_snapshot = table.current_snapshot()
    while time.time() * 1000 <= first_snapshot.timestamp_ms + 1:  # the next snapshot's time is later
        time.sleep(0.001)
    day2 = first.filter(pa.compute.equal(first.column("day"), 2))
    table.overwrite(day2.slice(0, 50), overwrite_filter="day == 2")
    latest = pa.concat_tables([first.filter(pa.compute.not_equal(first.column("day"), 2)), day2.slice(0, 50)])
    address = f"iceberg+sqlite:///{tmp_path}/catalog.db#test:ns.events"  # the catalog's name, then the table
    return address, first, latest, first_snapshot


def matrix(table: pa.Table, columns) -> np.ndarray:
    return np.column_stack([table.column(c).to_numpy() for c in columns]).astype(float)


def test_an_iceberg_table_reads_its_current_snapshot_only(events, tmp_path, dask_client):
    address, first, latest, _ = events
    on_disk = list((tmp_path / "warehouse").rglob("*.parquet"))
    assert sum(1 for _ in on_disk) > 3  # the overwritten day's old file is still there
    data = load_dataset(address, ["x0", "x1", "day"], extra_columns=["kind"])
    assert data.source == f"Iceberg table {address}" and data.n_rows == latest.num_rows
    np.testing.assert_array_equal(sorted_rows(data.X.compute()), sorted_rows(matrix(latest, ["x0", "x1", "day"])))
    kinds = np.asarray(data.extra["kind"].compute()).astype(int)
    expected = [int(pa.compute.sum(pa.compute.equal(latest.column("kind"), k)).as_py()) for k in "abc"]
    np.testing.assert_array_equal(np.bincount(kinds), expected)


def test_a_snapshot_id_and_a_timestamp_select_older_snapshots(events, dask_client):
    address, first, latest, first_snapshot = events
    old = load_dataset(open_source(address, None, {"table_version": first_snapshot.snapshot_id}), ["x0", "x1", "day"])
    assert old.n_rows == 1500
    np.testing.assert_array_equal(sorted_rows(old.X.compute()), sorted_rows(matrix(first, ["x0", "x1", "day"])))
    as_of = datetime.fromtimestamp(first_snapshot.timestamp_ms / 1000, UTC).isoformat()
    assert load_dataset(open_source(address, None, {"as_of": as_of}), ["x0"]).n_rows == 1500
    with pytest.raises(InputError, match=r"has no snapshot 12345; its snapshots are \["):
        open_source(address, None, {"table_version": 12345}).check()
    with pytest.raises(InputError, match=r"has no snapshot as of 2001-01-01"):
        open_source(address, None, {"as_of": "2001-01-01"}).check()


def test_iceberg_problems_are_named(events, tmp_path):
    address, _, _, _ = events
    # A text column is a category feature (issue 28): its codes, its vocabulary from the snapshot's files.
    assert load_dataset(address, ["x0", "kind"]).categories == {1: ["a", "b", "c"]}
    with pytest.raises(InputError, match=r"column 'x0' is named as categorical but holds double values"):
        load_dataset(address, ["x0", "kind"], categorical=["x0"])
    with pytest.raises(InputError, match=r"unknown column\(s\) \['x9'\] in Iceberg table ns.events"):
        load_dataset(address, ["x0", "x9"])
    with pytest.raises(InputError, match=r"cannot load Iceberg table ns.nothing"):
        open_source(address.replace("ns.events", "ns.nothing")).check()
    with pytest.raises(InputError, match=r"is not iceberg\+<catalog URI>#"):
        open_source("iceberg+sqlite:///x.db").check()


def test_an_iceberg_table_on_s3(s3_server, s3_bucket, tmp_path, dask_client):
    from pyiceberg.catalog.sql import SqlCatalog

    endpoint = s3_server["endpoint_url"]
    catalog = SqlCatalog("default", uri=f"sqlite:///{tmp_path}/catalog.db", warehouse=f"s3://{s3_bucket}/warehouse",
                         **{"s3.endpoint": endpoint, "s3.access-key-id": "testing",
                            "s3.secret-access-key": "testing", "s3.region": "us-east-1",
                            # writes through s3fs: pyarrow's multipart uploads fail against moto
                            "py-io-impl": "pyiceberg.io.fsspec.FsspecFileIO"})
    catalog.create_namespace("ns")
    first = mixture(900, 6)
    table = catalog.create_table("ns.events", schema=first.schema)
    table.append(first)
    snapshot = table.current_snapshot()
    table.append(first.slice(0, 100))
    address = f"iceberg+sqlite:///{tmp_path}/catalog.db#ns.events"
    options = s3_server["storage_options"]  # the data files are read through s3fs with these; the catalog too
    latest = load_dataset(open_source(address, options), ["x0", "x1"], extra_columns=["day"])
    assert latest.n_rows == 1000
    assert table.location().startswith(f"s3://{s3_bucket}/warehouse")
    older = load_dataset(open_source(address, options, {"table_version": snapshot.snapshot_id}), ["x0", "x1"])
    np.testing.assert_array_equal(sorted_rows(older.X.compute()), sorted_rows(matrix(first, ["x0", "x1"])))
