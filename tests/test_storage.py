"""Listing sources on the local filesystem: ignored names, hive keys, incomplete exclust outputs, input paths."""
from __future__ import annotations

import importlib.util

import numpy as np
import pandas as pd
import pytest

from exclust.errors import InputError
from exclust.sources.dataset import load_dataset
from exclust.sources.guards import validate_input_path
from exclust.sources.storage import OUTPUT_MARKER, SUCCESS_MANIFEST, list_source, parse_storage_options


def put(path, frame):
    path.parent.mkdir(parents=True, exist_ok=True)
    frame.to_parquet(path, index=False)


@pytest.fixture
def rows(rng):
    return pd.DataFrame({"x0": rng.normal(size=40), "x1": rng.normal(size=40)})


def test_spark_and_staging_leftovers_are_not_read(tmp_path, rows, dask_client):
    root = tmp_path / "events"
    put(root / "part-0.parquet", rows.iloc[:20])
    put(root / "part-1.parquet", rows.iloc[20:])
    put(root / "_temporary" / "0" / "part-0.parquet", rows)  # Spark's uncommitted attempt
    put(root / ".events.exclust-staging-1a2b" / "part-0.parquet", rows)  # a killed run's staging
    put(root / ".hidden.parquet", rows)
    (root / "part-0.parquet.crc").write_bytes(b"crc")
    (root / ".part-1.parquet.crc").write_bytes(b"crc")
    (root / "_SUCCESS").write_text("")
    assert [f.relpath for f in list_source(root).files] == ["part-0.parquet", "part-1.parquet"]
    data = load_dataset(root)
    assert data.n_rows == 40
    np.testing.assert_array_equal(data.X.compute(), rows.to_numpy())
    assert load_dataset(str(root / "**" / "*.parquet")).n_rows == 40  # a glob skips them too


def test_hive_keys_are_typed_columns(tmp_path, rows, dask_client):
    for day, region, part in ((3, "eu", rows.iloc[:15]), (11, "us", rows.iloc[15:30]), (20, "eu", rows.iloc[30:])):
        put(tmp_path / "ds" / f"day={day}" / f"region={region}" / "part.parquet", part)
    source = list_source(tmp_path / "ds")
    assert source.partition_keys == ["day", "region"]
    data = load_dataset(tmp_path / "ds", ["x0", "day"], extra_columns=["region", "day"])
    X = data.X.compute()
    assert data.feature_names == ["x0", "day"]
    # Files come in the order of their relative paths: day=11, day=20, day=3.
    np.testing.assert_array_equal(X[:, 0], pd.concat([rows.iloc[15:30], rows.iloc[30:], rows.iloc[:15]])["x0"])
    np.testing.assert_array_equal(X[:, 1], np.repeat([11.0, 20.0, 3.0], [15, 10, 15]))  # the integers, not codes
    assert data.category_names["region"] == ["eu", "us"]
    np.testing.assert_array_equal(data.extra["region"].compute(), np.repeat([1, 0, 0], [15, 10, 15]))
    np.testing.assert_array_equal(data.extra["day"].compute(), X[:, 1])
    # A text key is a category feature (issue 28): its codes in sorted order, its values the vocabulary.
    by_region = load_dataset(tmp_path / "ds", ["x0", "region"])
    assert by_region.categories == {1: ["eu", "us"]}
    np.testing.assert_array_equal(by_region.X.compute()[:, 1], np.repeat([1.0, 0.0, 0.0], [15, 10, 15]))


def test_a_file_outside_the_partition_folders_is_named(tmp_path, rows, dask_client):
    put(tmp_path / "ds" / "day=1" / "part.parquet", rows.iloc[:20])
    put(tmp_path / "ds" / "stray.parquet", rows.iloc[20:])
    with pytest.raises(InputError, match=r"stray\.parquet is not under a day=\.\.\. folder"):
        load_dataset(tmp_path / "ds", ["x0"], extra_columns=["day"])
    assert load_dataset(tmp_path / "ds", ["x0"]).n_rows == 40  # not asked for: no problem


def test_incomplete_exclust_outputs_are_refused(tmp_path, rows):
    out = tmp_path / "labelled"
    put(out / "part-0.parquet", rows)
    (out / OUTPUT_MARKER).write_text("{}")  # the marker is written first, the manifest last
    for source in (out, out / "part-0.parquet", str(out / "*.parquet"), tmp_path):
        with pytest.raises(InputError, match="incomplete exclust output, the run that wrote it did not finish"):
            list_source(source)
    (out / SUCCESS_MANIFEST).write_text("{}")
    for source in (out, out / "part-0.parquet", str(out / "*.parquet"), tmp_path):
        assert [f.path.rsplit("/", 1)[-1] for f in list_source(source).files] == ["part-0.parquet"]
    staging = tmp_path / ".labelled.exclust-staging-99"  # hidden staging of a later run: not read at all
    put(staging / "part-0.parquet", rows)
    (staging / OUTPUT_MARKER).write_text("{}")
    assert len(list_source(tmp_path).files) == 1


def test_input_paths_are_checked_where_they_live(tmp_path, rows):
    put(tmp_path / "d" / "p.parquet", rows)
    assert validate_input_path(f"file://{tmp_path}/d") == str(tmp_path / "d")
    assert validate_input_path(str(tmp_path / "d" / "*.parquet")) == str(tmp_path / "d" / "*.parquet")
    with pytest.raises(InputError, match="input not found: .*nowhere"):
        validate_input_path(tmp_path / "nowhere")
    with pytest.raises(InputError, match="unknown storage scheme nosuch://"):
        validate_input_path("nosuch://bucket/key")
    if importlib.util.find_spec("gcsfs") is None:
        with pytest.raises(InputError, match="needs the package gcsfs"):
            validate_input_path("gs://bucket/key")
        with pytest.raises(InputError, match="needs the package gcsfs"):
            list_source("gs://bucket/key")


def test_storage_options_parse_typed_values():
    assert parse_storage_options(["anon=true", "endpoint_url=http://127.0.0.1:9000", "max_concurrency=4"]) == {
        "anon": True, "endpoint_url": "http://127.0.0.1:9000", "max_concurrency": 4}
    with pytest.raises(InputError, match="not key=value"):
        parse_storage_options(["endpoint_url"])
