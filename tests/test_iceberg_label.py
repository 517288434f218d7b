"""Nightly labels as Iceberg snapshots: real tables in a SQLite catalog on local disk (and on the
moto S3 server), written by exclust through ``pyiceberg``, read back through ``pyiceberg`` and through
exclust's own Iceberg source; the session's Dask cluster."""
from __future__ import annotations

import json
from datetime import date
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from lake_nights import assert_nights_labelled, explained_tree, input_rows, night

from exclust.cli import main
from exclust.errors import InputError
from exclust.jobs.label.table_labeling import label_night_into_table

pytest.importorskip("pyiceberg")


@pytest.fixture(scope="module")
def feed(tmp_path_factory, dask_client):
    return {"tree": explained_tree(tmp_path_factory.mktemp("iceberg-nights")),
            "scheduler": dask_client.scheduler.address}


@pytest.fixture
def lake(tmp_path):
    """A SQLite catalog whose namespace ``ns`` makes its tables under ``tmp_path/warehouse/ns``."""
    from pyiceberg.catalog.sql import SqlCatalog

    catalog = SqlCatalog("default", uri=f"sqlite:///{tmp_path}/catalog.db")
    catalog.create_namespace("ns", {"location": f"file://{tmp_path}/warehouse/ns"})
    return {"catalog": catalog, "address": f"iceberg+sqlite:///{tmp_path}/catalog.db#ns.labels",
            "location": tmp_path / "warehouse" / "ns" / "labels"}


def label(feed, incoming: Path, out: str, dates: str, *extra: str) -> int:
    return main(["label", "--tree", str(feed["tree"]), "--input", f"{incoming}/date={{date}}", "--out", out,
                 "--date", dates, "--scheduler", feed["scheduler"], "--quiet", *extra])


def rows_of(table, day: str, snapshot_id: int | None = None) -> pa.Table:
    return table.scan(row_filter=f"date == '{day}'", snapshot_id=snapshot_id).to_arrow().sort_by("id")


def files_under(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()}


def live_files(table) -> set[str]:
    return {task.file.file_path.removeprefix("file://") for task in table.scan().plan_files()}


def referenced_metadata(table) -> set[str]:
    """Every manifest list and manifest some snapshot of the table references."""
    paths = set()
    for snapshot in table.snapshots():
        paths.add(snapshot.manifest_list)
        paths.update(m.manifest_path for m in snapshot.manifests(table.io))
    return {p.removeprefix("file://") for p in paths}


def test_nights_append_as_snapshots_and_a_rerun_replaces_its_night_only(feed, lake, tmp_path, capsys):
    incoming = tmp_path / "incoming"
    for i, (day, rows) in enumerate({"2026-11-20": 900, "2026-11-21": 700}.items()):
        night(incoming / f"date={day}", rows, seed=1 + i)
    assert label(feed, incoming, lake["address"], "2026-11-20..2026-11-21") == 0  # the format told by the address
    out = capsys.readouterr().out
    assert "2026-11-20: labelled 900 rows in 2 file(s)" in out and "2026-11-21: labelled 700 rows" in out
    table = lake["catalog"].load_table("ns.labels")
    assert len(table.snapshots()) == 2  # one snapshot a night
    assert [(f.name, str(f.transform)) for f in table.spec().fields] == [("date", "identity")]
    assert_nights_labelled(lambda day: rows_of(table, day), incoming, feed["tree"], ("2026-11-20", "2026-11-21"))
    figures = json.loads(table.current_snapshot().summary["exclust"])  # the night's figures ride in the snapshot
    assert figures["date"] == "2026-11-21" and figures["n_rows"] == 700
    assert sum(figures["rows_per_leaf"].values()) == 700 and figures["drift"]["psi"] >= 0

    night_20 = {p for p in live_files(table) if "/date=2026-11-20/" in p}
    before = table.current_snapshot().snapshot_id
    (incoming / "date=2026-11-21" / "part-1.parquet").unlink()  # the rerun of night 21 sees fewer rows
    assert label(feed, incoming, lake["address"], "2026-11-21", "--out-format", "iceberg") == 0
    table = lake["catalog"].load_table("ns.labels")
    assert len(table.snapshots()) == 3 and table.current_snapshot().parent_snapshot_id == before
    assert night_20 == {p for p in live_files(table) if "/date=2026-11-20/" in p}  # night 20's files untouched
    assert rows_of(table, "2026-11-20").num_rows == 900
    assert rows_of(table, "2026-11-21").num_rows == input_rows(incoming / "date=2026-11-21").num_rows == 350
    assert rows_of(table, "2026-11-21", before).num_rows == 700  # time travel: the night before its rerun


def test_a_failed_or_interrupted_night_leaves_the_table_at_its_snapshot(feed, lake, tmp_path):
    incoming = tmp_path / "incoming"
    night(incoming / "date=2026-11-20", 500, seed=3)
    night(incoming / "date=2026-11-21", 400, seed=4)
    bad = incoming / "date=2026-11-22"
    night(bad, 300, seed=5)
    part = pq.read_table(bad / "part-1.parquet")  # a real failing input: one file has a column more
    pq.write_table(part.append_column("note", pa.array([1] * part.num_rows)), bad / "part-1.parquet")
    assert label(feed, incoming, lake["address"], "2026-11-20") == 0
    snapshot = lake["catalog"].load_table("ns.labels").current_snapshot().snapshot_id
    before = files_under(lake["location"])

    with pytest.raises(InputError, match="labels into columns"):  # after both files were written into the table
        label_night_into_table(feed["tree"], bad, lake["address"], date(2026, 11, 22), table_format="iceberg")
    assert lake["catalog"].load_table("ns.labels").current_snapshot().snapshot_id == snapshot
    assert files_under(lake["location"]) == before  # its files are gone

    def interrupt():
        assert len(files_under(lake["location"])) == len(before) + 2  # written, not yet committed
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        label_night_into_table(feed["tree"], incoming / "date=2026-11-21", lake["address"], date(2026, 11, 21),
                               table_format="iceberg", before_commit=interrupt)
    assert lake["catalog"].load_table("ns.labels").current_snapshot().snapshot_id == snapshot
    assert files_under(lake["location"]) == before

    fresh = lake["address"].replace("ns.labels", "ns.fresh")
    with pytest.raises(KeyboardInterrupt):  # before a table's first snapshot: no table, no folder
        label_night_into_table(feed["tree"], incoming / "date=2026-11-21", fresh, date(2026, 11, 21),
                               table_format="iceberg", before_commit=lambda: (_ for _ in ()).throw(KeyboardInterrupt()))
    assert not lake["catalog"].table_exists("ns.fresh")
    assert not (lake["location"].parent / "fresh").exists()


def test_a_concurrent_writer_wins_and_the_other_run_fails_with_one_line(feed, lake, tmp_path, caplog):
    caplog.set_level("WARNING", logger="pyiceberg")
    incoming = tmp_path / "incoming"
    night(incoming / "date=2026-11-20", 500, seed=6)
    night(incoming / "date=2026-11-21", 300, seed=7)
    address, day = lake["address"], date(2026, 11, 21)
    previous_night_files: set[str] = set()  # the night's files the first pass left: the second keeps them
    for found in ("no table", "snapshot"):  # the first night of a new table, then a night of an existing one
        def other_writer_commits():  # a second run of the night commits while this one is between read and commit
            label_night_into_table(feed["tree"], incoming / "date=2026-11-21", address, day, table_format="iceberg")

        with pytest.raises(InputError) as caught:
            label_night_into_table(feed["tree"], incoming / "date=2026-11-21", address, day, table_format="iceberg",
                                   before_commit=other_writer_commits)
        message = str(caught.value)
        assert not [r for r in caplog.records if "retrying" in r.getMessage()]  # refused at once, not rebased
        assert f"changed while this run labelled 2026-11-21 (it found {found}" in message and "\n" not in message
        assert "another run committed to it first" in message and "keeps the other run's commit" in message
        table = lake["catalog"].load_table("ns.labels")
        night_files = {p for p in live_files(table) if "/date=2026-11-21/" in p}
        assert len(night_files) == 2 and rows_of(table, "2026-11-21").num_rows == 300  # the other run's, alone
        on_disk = {str(lake["location"] / p) for p in files_under(lake["location"])}
        assert {p for p in on_disk if "/date=2026-11-21/" in p} == night_files | (
            set() if found == "no table" else previous_night_files)  # the failed run's data files are gone
        assert {p for p in on_disk if p.endswith(".avro")} == referenced_metadata(table)  # and its manifests
        previous_night_files = night_files
    assert len(table.snapshots()) == 2


def test_a_labelled_iceberg_table_reads_back_through_the_iceberg_source(feed, lake, tmp_path, dask_client):
    from exclust.sources.dataset import load_dataset

    incoming = tmp_path / "incoming"
    night(incoming / "date=2026-11-20", 400, seed=8)
    night(incoming / "date=2026-11-21", 200, seed=9)
    assert label(feed, incoming, lake["address"], "2026-11-20..2026-11-21") == 0
    data = load_dataset(lake["address"], ["x0", "x1"], extra_columns=["cluster"])
    assert data.n_rows == 600 and data.feature_names == ["x0", "x1"]
    clusters = np.asarray(data.extra["cluster"].compute()).astype(int)
    table = lake["catalog"].load_table("ns.labels").scan().to_arrow()
    np.testing.assert_array_equal(np.bincount(clusters), np.bincount(table.column("cluster").to_numpy()))


def test_iceberg_outputs_refuse_what_they_cannot_hold(feed, lake, tmp_path, capsys):
    incoming = tmp_path / "incoming"
    night(incoming / "date=2026-11-20", 100, seed=10)
    assert label(feed, incoming, lake["address"], "2026-11-20", "--out-format", "delta") == 2
    assert "is a iceberg table, not a delta output" in capsys.readouterr().err
    lake["catalog"].create_namespace("bare")
    assert label(feed, incoming, lake["address"].replace("ns.labels", "bare.labels"), "2026-11-20") == 2
    assert "namespace bare has no location to make it in" in capsys.readouterr().err
    assert label(feed, incoming, lake["address"].replace("ns.labels", "nowhere.labels"), "2026-11-20") == 2
    assert "namespace nowhere does not exist" in capsys.readouterr().err
    lake["catalog"].create_namespace("inside", {"location": f"file://{incoming}/date=2026-11-20"})
    assert label(feed, incoming, lake["address"].replace("ns.labels", "inside.labels"), "2026-11-20") == 2
    assert "which this run reads" in capsys.readouterr().err  # the table may not lie in what the run reads
    unpartitioned = lake["catalog"].create_table("ns.plain", schema=pa.schema([("x0", pa.float64())]))
    assert label(feed, incoming, lake["address"].replace("ns.labels", "ns.plain"), "2026-11-20") == 2
    assert "is not partitioned by identity(date) alone" in capsys.readouterr().err
    assert unpartitioned.current_snapshot() is None and not lake["catalog"].table_exists("ns.labels")


def test_nights_into_an_iceberg_table_on_s3(feed, s3_server, s3_bucket, tmp_path, dask_client):
    import io

    import s3fs
    from pyiceberg.catalog.sql import SqlCatalog

    options = s3_server["storage_options"]
    fs = s3fs.S3FileSystem(**options)
    for day, rows in (("2026-11-20", 300), ("2026-11-21", 200)):
        buffer = io.BytesIO()
        night(tmp_path / day, rows, seed=rows, n_files=1)
        pq.write_table(pq.read_table(tmp_path / day / "part-0.parquet"), buffer)
        fs.pipe(f"{s3_bucket}/incoming/date={day}/part-0.parquet", buffer.getvalue())
    catalog = SqlCatalog("default", uri=f"sqlite:///{tmp_path}/catalog.db",
                         **{"s3.endpoint": s3_server["endpoint_url"], "s3.access-key-id": "testing",
                            "s3.secret-access-key": "testing", "s3.region": "us-east-1"})
    catalog.create_namespace("ns", {"location": f"s3://{s3_bucket}/lake/ns"})
    address = f"iceberg+sqlite:///{tmp_path}/catalog.db#ns.labels"
    for day in ("2026-11-20", "2026-11-21", "2026-11-21"):  # two nights, then a rerun of the second
        result = label_night_into_table(feed["tree"], f"s3://{s3_bucket}/incoming/date={day}", address,
                                        date.fromisoformat(day), table_format="iceberg", storage_options=options)
        assert result.n_rows == {"2026-11-20": 300, "2026-11-21": 200}[day]
    from exclust.sources.dataset import load_dataset

    data = load_dataset(address, ["x0", "x1"], extra_columns=["cluster"], storage_options=options)
    assert data.n_rows == 500  # the rerun replaced its night
    table = catalog.load_table("ns.labels")
    assert table.location() == f"s3://{s3_bucket}/lake/ns/labels" and len(table.snapshots()) == 3
    assert json.loads(table.current_snapshot().summary["exclust"])["n_rows"] == 200
