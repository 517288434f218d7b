"""Input handling: every supported source, and a clear message for every kind of bad input."""
from __future__ import annotations

import dask.array as da
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest

from exclust.data import InputError, check_spread, load_dataset


def write_parts(folder, frames):
    folder.mkdir(parents=True, exist_ok=True)
    for i, frame in enumerate(frames):
        frame.to_parquet(folder / f"part-{i:03d}.parquet", index=False)
    return folder


@pytest.fixture
def frame(rng):
    return pd.DataFrame(
        {"a": rng.normal(size=300), "b": rng.normal(size=300), "name": ["p", "q", "r"] * 100, "y": np.repeat([0, 1, 2], 100)}
    )


def test_parquet_folder_glob_and_file_agree(tmp_path, frame):
    folder = write_parts(tmp_path / "ds", [frame.iloc[:100], frame.iloc[100:250], frame.iloc[250:]])
    for source in (folder, str(folder / "*.parquet")):
        ds = load_dataset(source, ["b", "a"], extra_columns=["y"])
        assert ds.feature_names == ["b", "a"]
        assert ds.X.chunks[0] == (100, 150, 50)  # one chunk per file, sizes known from footers
        np.testing.assert_array_equal(ds.X.compute(), frame[["b", "a"]].to_numpy())
        np.testing.assert_array_equal(ds.extra["y"].compute(), frame["y"].to_numpy())


def test_string_labels_are_coded(tmp_path, frame):
    folder = write_parts(tmp_path / "ds", [frame.iloc[:150], frame.iloc[150:]])
    ds = load_dataset(folder, ["a"], extra_columns=["name"])
    assert ds.category_names["name"] == ["p", "q", "r"]
    assert ds.extra["name"].compute()[:3].tolist() == [0, 1, 2]


def test_all_inputs_give_the_same_matrix(frame):
    expected = frame[["a", "b"]].to_numpy()
    sources = [
        expected,
        frame[["a", "b"]],
        da.from_array(expected, chunks=(64, 2)),
        dd.from_pandas(frame[["a", "b"]], npartitions=3),
    ]
    for source in sources:
        ds = load_dataset(source)
        got = ds.X.compute() if ds.is_distributed else ds.X
        np.testing.assert_array_equal(got, expected)
    assert not load_dataset(expected).is_distributed  # small numpy input stays numpy


def test_nan_is_named_by_column_and_count(tmp_path, frame):
    frame.loc[[3, 7], "b"] = np.nan
    frame.loc[9, "a"] = np.inf
    folder = write_parts(tmp_path / "ds", [frame])
    with pytest.raises(InputError, match=r"3 row\(s\).*'a': 1, 'b': 2.*nan_policy='drop'"):
        load_dataset(folder, ["a", "b"])
    ds = load_dataset(folder, ["a", "b"], extra_columns=["y"], nan_policy="drop")
    assert ds.n_rows == 297 and ds.n_dropped == 3
    assert np.isfinite(ds.X.compute()).all() and ds.extra["y"].compute().shape == (297,)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(features=["a", "zz"]), r"unknown column\(s\) \['zz'\]"),
        (dict(features=["a", "name"]), r"non-numeric feature column\(s\).*name"),
        (dict(features=["a"], n_clusters=1000), "300 row.*fewer than the 1000 clusters"),
    ],
)
def test_bad_columns_and_sizes(tmp_path, frame, kwargs, message):
    folder = write_parts(tmp_path / "ds", [frame])
    with pytest.raises(InputError, match=message):
        load_dataset(folder, **kwargs)


def test_no_rows_missing_and_corrupt_files(tmp_path, frame):
    with pytest.raises(InputError, match="no rows"):
        load_dataset(np.empty((0, 3)))
    with pytest.raises(InputError, match="input not found"):
        load_dataset(tmp_path / "nowhere")
    folder = write_parts(tmp_path / "ds", [frame])
    (folder / "part-999.parquet").write_bytes(b"PAR1 this is not a parquet file")
    with pytest.raises(InputError, match="part-999.parquet"):
        load_dataset(folder)


def test_constant_feature_is_named():
    with pytest.raises(InputError, match=r"\['b'\] are constant"):
        check_spread(np.array([1.0, 0.0]), ["a", "b"])
