"""Nightly labels as Delta table commits: real tables written by exclust through ``deltalake``,
read back through ``deltalake`` and through exclust's own Delta source; the session's Dask cluster."""
from __future__ import annotations

from datetime import date
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from lake_nights import CENTERS, assert_nights_labelled, explained_tree, input_rows, night

from exclust.cli import main
from exclust.errors import InputError
from exclust.jobs.label.table_labeling import label_night_into_table

deltalake = pytest.importorskip("deltalake")


@pytest.fixture(scope="module")
def feed(tmp_path_factory, dask_client):
    return {"tree": explained_tree(tmp_path_factory.mktemp("delta-nights")), "scheduler": dask_client.scheduler.address}


def label(feed, incoming: Path, table: Path, dates: str, *extra: str) -> int:
    return main(["label", "--tree", str(feed["tree"]), "--input", f"{incoming}/date={{date}}", "--out", str(table),
                 "--out-format", "delta", "--date", dates, "--scheduler", feed["scheduler"], "--quiet", *extra])


def table_files(table: Path) -> set[str]:
    return {str(p.relative_to(table)) for p in table.rglob("*") if p.is_file()}


def rows_of(table: Path, day: str, version: int | None = None) -> pa.Table:
    dt = deltalake.DeltaTable(str(table), version=version)
    return pa.table(dt.to_pyarrow_table(filters=[("date", "=", date.fromisoformat(day))])).sort_by("id")


def test_nights_append_as_commits_and_a_rerun_replaces_its_night_only(feed, tmp_path, capsys):
    incoming, table = tmp_path / "incoming", tmp_path / "labelled"
    for i, (day, rows) in enumerate({"2026-11-20": 900, "2026-11-21": 700}.items()):
        night(incoming / f"date={day}", rows, seed=1 + i)
    assert label(feed, incoming, table, "2026-11-20..2026-11-21") == 0
    out = capsys.readouterr().out
    assert "2026-11-20: labelled 900 rows in 2 file(s)" in out and "2026-11-21: labelled 700 rows" in out
    dt = deltalake.DeltaTable(str(table))
    assert dt.version() == 1 and dt.metadata().partition_columns == ["date"]  # one commit a night
    assert_nights_labelled(lambda day: rows_of(table, day), incoming, feed["tree"], ("2026-11-20", "2026-11-21"))
    commit = dt.history(1)[0]["exclust"]  # the night's figures ride in the commit
    assert commit["date"] == "2026-11-21" and commit["n_rows"] == 700
    assert sum(commit["rows_per_leaf"].values()) == 700 and commit["drift"]["psi"] >= 0

    night_20 = {p for p in table_files(table) if p.startswith("date=2026-11-20/")}
    (incoming / "date=2026-11-21" / "part-1.parquet").unlink()  # the rerun of night 21 sees fewer rows
    assert label(feed, incoming, table, "2026-11-21") == 0
    dt = deltalake.DeltaTable(str(table))
    assert dt.version() == 2
    live = set(pa.table(dt.get_add_actions(flatten=True)).column("path").to_pylist())
    assert night_20 <= live  # night 20's files are untouched
    assert rows_of(table, "2026-11-20").num_rows == 900
    assert rows_of(table, "2026-11-21").num_rows == input_rows(incoming / "date=2026-11-21").num_rows == 350
    assert rows_of(table, "2026-11-21", version=1).num_rows == 700  # time travel: the night before its rerun


def test_an_interrupted_night_leaves_the_table_at_its_version(feed, tmp_path):
    incoming, table = tmp_path / "incoming", tmp_path / "labelled"
    night(incoming / "date=2026-11-20", 500, seed=3)
    night(incoming / "date=2026-11-21", 400, seed=4)
    assert label(feed, incoming, table, "2026-11-20") == 0
    before = table_files(table)

    def interrupt():
        assert len(table_files(table)) == len(before) + 2  # the night's files were written, not yet committed
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        label_night_into_table(feed["tree"], incoming / "date=2026-11-21", table, date(2026, 11, 21),
                               before_commit=interrupt)
    assert deltalake.DeltaTable(str(table)).version() == 0
    assert table_files(table) == before  # its files are gone too

    fresh = tmp_path / "fresh"
    with pytest.raises(KeyboardInterrupt):  # before a table's first commit: no folder is left at all
        label_night_into_table(feed["tree"], incoming / "date=2026-11-21", fresh, date(2026, 11, 21),
                               before_commit=lambda: (_ for _ in ()).throw(KeyboardInterrupt()))
    assert not fresh.exists()


def test_a_concurrent_writer_of_the_night_wins_and_the_other_run_fails_with_one_line(feed, tmp_path):
    incoming, table = tmp_path / "incoming", tmp_path / "labelled"
    night(incoming / "date=2026-11-20", 500, seed=5)
    night(incoming / "date=2026-11-21", 300, seed=6)
    assert label(feed, incoming, table, "2026-11-20") == 0

    def other_writer_commits():  # a second run of the same night commits while this one is between read and commit
        label_night_into_table(feed["tree"], incoming / "date=2026-11-21", table, date(2026, 11, 21))

    with pytest.raises(InputError) as caught:
        label_night_into_table(feed["tree"], incoming / "date=2026-11-21", table, date(2026, 11, 21),
                               before_commit=other_writer_commits)
    message = str(caught.value)
    assert "changed while this run labelled 2026-11-21 (it found version 0" in message and "\n" not in message
    assert "another run committed to it first" in message and "keeps the other run's commit" in message
    dt = deltalake.DeltaTable(str(table))
    assert dt.version() == 1  # the other run's commit, and only it
    assert rows_of(table, "2026-11-21").num_rows == 300  # the night's rows once: never duplicated
    live = set(pa.table(dt.get_add_actions(flatten=True)).column("path").to_pylist())
    assert {p for p in table_files(table) if p.startswith("date=2026-11-21/")} == {
        p for p in live if p.startswith("date=2026-11-21/")}  # the failed run's files are gone


def test_table_outputs_refuse_what_they_cannot_hold(feed, tmp_path, capsys):
    incoming = tmp_path / "incoming"
    night(incoming / "date=2026-11-20", 100, seed=7)
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "notes.txt").write_text("not a table")
    assert label(feed, incoming, tmp_path / "plain", "2026-11-20") == 2
    assert "exists and is not a Delta table" in capsys.readouterr().err
    assert main(["label", "--tree", str(feed["tree"]), "--input", str(incoming / "date=2026-11-20"),
                 "--out", str(tmp_path / "t"), "--out-format", "delta", "--quiet"]) == 2
    assert "takes each night as a partition of its date column: give --date" in capsys.readouterr().err
    assert label(feed, incoming, incoming, "2026-11-20") == 2  # the table may not hold what the run reads
    assert "which this run reads" in capsys.readouterr().err
    assert (tmp_path / "plain" / "notes.txt").read_text() == "not a table" and not (tmp_path / "t").exists()


def test_a_labelled_delta_table_reads_back_with_its_date_partition_as_truth(feed, tmp_path, dask_client):
    from exclust.sources.dataset import load_dataset

    incoming, table = tmp_path / "incoming", tmp_path / "labelled"
    night(incoming / "date=2026-11-20", 400, seed=8)
    night(incoming / "date=2026-11-21", 200, seed=9)
    assert label(feed, incoming, table, "2026-11-20..2026-11-21") == 0
    data = load_dataset(str(table), ["x0", "x1"], extra_columns=["date", "cluster"])
    assert data.n_rows == 600
    dates = np.asarray(data.extra["date"].compute())  # the date partition as a label column (coded in order)
    np.testing.assert_array_equal(np.bincount(dates.astype(int)), [400, 200])
    assert data.feature_names == ["x0", "x1"]


def test_nights_into_a_delta_table_on_s3(feed, s3_server, s3_bucket, dask_client):
    import io

    import s3fs

    from exclust.sources.dataset import load_dataset

    options = s3_server["storage_options"]
    fs = s3fs.S3FileSystem(**options)
    for day, rows in (("2026-11-20", 300), ("2026-11-21", 200)):
        buffer = io.BytesIO()
        X = CENTERS[np.arange(rows) % 3] + np.random.default_rng(rows).normal(scale=0.7, size=(rows, 2))
        pq.write_table(pa.table({"x0": X[:, 0], "x1": X[:, 1], "id": np.arange(rows)}), buffer)
        fs.pipe(f"{s3_bucket}/incoming/date={day}/part-0.parquet", buffer.getvalue())
    url = f"s3://{s3_bucket}/labelled"
    for day in ("2026-11-20", "2026-11-21", "2026-11-21"):  # two nights, then a rerun of the second
        result = label_night_into_table(feed["tree"], f"s3://{s3_bucket}/incoming/date={day}", url,
                                        date.fromisoformat(day), storage_options=options)
        assert result.n_rows == {"2026-11-20": 300, "2026-11-21": 200}[day]
    data = load_dataset(url, ["x0", "x1"], extra_columns=["date"], storage_options=options)
    assert data.n_rows == 500  # the rerun replaced its night
    np.testing.assert_array_equal(np.bincount(np.asarray(data.extra["date"].compute()).astype(int)), [300, 200])
    assert open_versions(url, options) == 2


def open_versions(url: str, options) -> int:
    from exclust.sources.delta import open_delta_table

    return open_delta_table(url, options).version()
