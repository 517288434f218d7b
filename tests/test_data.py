"""Input handling: every supported source, and a clear message for every kind of bad input."""
from __future__ import annotations

import os

import dask.array as da
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest

from exclust.dataplane.parts import is_lazy
from exclust.errors import InputError
from exclust.sources.dataset import check_spread, load_dataset


def write_parts(folder, frames):
    folder.mkdir(parents=True, exist_ok=True)
    for i, frame in enumerate(frames):
        frame.to_parquet(folder / f"part-{i:03d}.parquet", index=False)
    return folder


@pytest.fixture
def frame(rng):
    return pd.DataFrame(
        {"a": rng.normal(size=300), "b": rng.normal(size=300), "name": ["p", "q", "r"] * 100,
         "y": np.repeat([0, 1, 2], 100)}
    )


def test_parquet_folder_glob_and_file_agree(tmp_path, frame, dask_client):
    folder = write_parts(tmp_path / "ds", [frame.iloc[:100], frame.iloc[100:250], frame.iloc[250:]])
    for source in (folder, str(folder / "*.parquet"), f"file://{folder}"):
        ds = load_dataset(source, ["b", "a"], extra_columns=["y"], piece_rows=150)
        assert ds.feature_names == ["b", "a"]
        assert ds.X.chunks[0] == (100, 150, 50)  # pieces of at most 150 rows, sizes known from footers
        assert load_dataset(source, ["b", "a"]).X.chunks[0] == (300,)  # small files share one piece
        np.testing.assert_array_equal(ds.X.compute(), frame[["b", "a"]].to_numpy())
        np.testing.assert_array_equal(ds.extra["y"].compute(), frame["y"].to_numpy())


def test_string_labels_are_coded(tmp_path, frame, dask_client):
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
        got = ds.X.compute() if is_lazy(ds.X) else ds.X
        np.testing.assert_array_equal(got, expected)
    assert not is_lazy(load_dataset(expected).X)  # small numpy input stays numpy


def test_nan_is_named_by_column_and_count(tmp_path, frame, dask_client):
    frame.loc[[3, 7], "b"] = np.nan
    frame.loc[9, "a"] = np.inf
    folder = write_parts(tmp_path / "ds", [frame])
    with pytest.raises(InputError, match=r"3 row\(s\).*'a': 1, 'b': 2.*nan_policy='drop'") as caught:
        load_dataset(folder, ["a", "b"], nan_policy="raise")
    # Each interface names the fix in its own words.
    assert caught.value.describe("cli").endswith("clean them or use --drop-nan")
    assert caught.value.describe("flow").endswith("clean them or use the nan_policy parameter (drop)")
    # By default (issue 28) NaN is a missing value the trees route; an infinity is still refused, named.
    infinite = r"^1 row\(s\) of .* hold infinite values \(per column: \{'a': 1\}\)"
    with pytest.raises(InputError, match=infinite) as caught:
        load_dataset(folder, ["a", "b"])
    assert caught.value.describe("cli").endswith("clean them or use --drop-nan")
    kept = load_dataset(folder, ["b"])
    assert kept.n_rows == 300 and kept.missing == {"b": 2} and np.isnan(kept.X.compute()[[3, 7], 0]).all()
    ds = load_dataset(folder, ["a", "b"], extra_columns=["y"], nan_policy="drop")
    assert ds.n_rows == 297 and ds.n_dropped == 3
    assert np.isfinite(ds.X.compute()).all() and ds.extra["y"].compute().shape == (297,)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(features=["a", "zz"]), r"unknown column\(s\) \['zz'\]"),
        (dict(features=["a", "blob"]),
         r"column 'blob' of Parquet file .*part-000.parquet holds binary values, not numbers or categories"),
        (dict(features=["a"], n_clusters=1000), "300 row.*fewer than the 1000 clusters"),
    ],
)
def test_bad_columns_and_sizes(tmp_path, frame, kwargs, message, dask_client):
    folder = write_parts(tmp_path / "ds", [frame.assign(blob=[b"\x00"] * len(frame))])
    with pytest.raises(InputError, match=message):
        load_dataset(folder, **kwargs)


def test_no_rows_missing_and_corrupt_files(tmp_path, frame, dask_client):
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


# --------------------------------------------------------------------------- issue 8: many files, drift, corruption
def test_numpy_and_parquet_give_the_same_dataset(tmp_path, frame, dask_client):
    folder = write_parts(tmp_path / "ds", [frame.iloc[:120], frame.iloc[120:]])
    from_parquet = load_dataset(folder, ["a", "b"], extra_columns=["y"])
    from_numpy = load_dataset(frame[["a", "b"]].to_numpy(), ["a", "b"])
    assert from_parquet.feature_names == from_numpy.feature_names
    np.testing.assert_array_equal(from_parquet.X.compute(), from_numpy.X)
    np.testing.assert_array_equal(from_parquet.extra["y"].compute(), frame["y"].to_numpy())


def test_many_small_files_are_packed_into_few_pieces(tmp_path, rng, dask_client):
    X = rng.normal(size=(500, 3))
    frames = [pd.DataFrame(part, columns=["p", "q", "r"]) for part in np.array_split(X, 50)]
    folder = write_parts(tmp_path / "small", frames)
    ds = load_dataset(folder)
    assert ds.X.numblocks[0] == 1  # 50 files of 10 rows: one task per pass, not 50
    np.testing.assert_array_equal(ds.X.compute(), X)
    ds = load_dataset(folder, piece_rows=25)
    assert ds.X.chunks[0] == (20,) * 25  # whole files packed up to 25 rows
    np.testing.assert_array_equal(ds.X.compute(), X)


def test_a_file_lacking_a_column_is_named_before_any_work(tmp_path, frame, dask_client):
    folder = write_parts(tmp_path / "ds", [frame.iloc[:100], frame.iloc[100:200].drop(columns=["b"]), frame.iloc[200:]])
    with pytest.raises(InputError, match=r"part-001\.parquet lacks column 'b'"):
        load_dataset(folder, ["a", "b"])
    with pytest.raises(InputError, match=r"part-001\.parquet lacks column 'b'"):
        load_dataset(folder)  # default features come from the first file and must be in every file


def test_text_in_a_numeric_column_is_named_and_never_coerced(tmp_path, frame, dask_client):
    drifted = frame.iloc[150:].copy()
    drifted["b"] = drifted["b"].map(lambda v: f"{v:.3f}")  # numeric strings: still not numbers
    folder = write_parts(tmp_path / "ds", [frame.iloc[:150], drifted])
    with pytest.raises(InputError,
                       match=r"column 'b' of Parquet file .*part-001\.parquet holds \w*string values, not numbers"):
        load_dataset(folder, ["a", "b"])
    labels = frame.iloc[150:].assign(y=lambda f: f["y"].astype(str))
    folder = write_parts(tmp_path / "labels", [frame.iloc[:150], labels])
    with pytest.raises(InputError, match=r"column 'y' of Parquet file .*part-001\.parquet holds strings but earlier"):
        load_dataset(folder, ["a"], extra_columns=["y"])


def _write_plain(path, frame):
    """Uncompressed, plain-encoded: damaged bytes in a data page decode to garbage instead of failing."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path, compression="none", use_dictionary=False)


def test_random_bytes_in_a_data_page_are_named_as_corruption_of_that_file(tmp_path, frame, dask_client):
    import pyarrow.parquet as pq

    folder = tmp_path / "ds"
    folder.mkdir()
    _write_plain(folder / "part-000.parquet", frame.iloc[:150])
    damaged = folder / "part-001.parquet"
    _write_plain(damaged, frame.iloc[150:])
    start = pq.read_metadata(damaged).row_group(0).column(0).data_page_offset + 64  # past the page header
    raw = bytearray(damaged.read_bytes())
    raw[start:start + 800] = np.random.default_rng(1).integers(0, 256, 800, dtype=np.uint8).tobytes()
    damaged.write_bytes(bytes(raw))
    with pytest.raises(InputError, match=r"Parquet file .*part-001\.parquet is corrupt") as caught:
        load_dataset(folder, ["a", "b"], n_clusters=3)
    assert "distinct points" not in str(caught.value)


@pytest.mark.parametrize("factor, word", [(1e300, "overflow"), (1e-300, "underflow")])
def test_extreme_scales_are_named_as_scale_problems(tmp_path, frame, factor, word, dask_client):
    scaled = frame.assign(a=frame["a"] * factor, b=frame["b"] * factor)
    folder = write_parts(tmp_path / "ds", [scaled])
    message = rf"feature\(s\) \['a', 'b'\].*{word}.*scale problem.*standardize"
    with pytest.raises(InputError, match=message):
        load_dataset(folder, ["a", "b"], n_clusters=3)
    with pytest.raises(InputError, match=message):
        load_dataset(scaled[["a", "b"]].to_numpy(), ["a", "b"])  # the same check for in-memory input
    load_dataset(frame[["a", "b"]].to_numpy() * 1e100)  # large but safe magnitudes pass


def test_input_error_names_its_fix_per_interface_and_survives_pickling():
    import pickle

    exc = InputError("column 'c' holds 3 clusters but k is 4; pass {fix}", option="k", value=3)
    assert str(exc).endswith("pass k=3")
    assert exc.describe("cli").endswith("pass --k 3")
    assert exc.describe("flow").endswith("pass the n_clusters parameter (3)")
    back = pickle.loads(pickle.dumps(exc))  # errors raised on Dask workers travel pickled
    assert isinstance(back, InputError) and back.describe("cli") == exc.describe("cli")
    assert InputError("plain").describe("cli") == "plain"
    with pytest.raises(ValueError, match="interface"):
        exc.describe("gui")


# --------------------------------------------------------------------------- reference labels
def _explain(folder, **kwargs):
    from exclust.jobs.config import ExplainConfig
    from exclust.jobs.explain.steps import explain

    return explain(ExplainConfig(input=str(folder), features=["a", "b"], **kwargs))


@pytest.fixture
def blobs(tmp_path):
    from exclust.datasets.synthetic import make_gmm_dataset

    X, y = make_gmm_dataset(2000, n_components=4, n_features=2, random_state=2)[:2]
    return pd.DataFrame({"a": X[:, 0], "b": X[:, 1], "y": y})


def test_integer_labels_with_gaps_work_as_a_reference(tmp_path, blobs, dask_client):
    folder = write_parts(tmp_path / "ds", [blobs.assign(lab=blobs["y"] * 5)])  # labels 0, 5, 10, 15
    for algorithm in ("mmdt", "imm", "cart"):
        result = _explain(folder, k=4, reference="labels", reference_column="lab", truth="y", algorithm=algorithm)
        assert result.metrics["ari_reference"] > 0.8 and result.metrics["ari_truth"] > 0.8, algorithm


def test_label_count_messages_name_a_fix_that_is_accepted(tmp_path, blobs, dask_client):
    folder = write_parts(tmp_path / "ds", [blobs.assign(one=7)])
    with pytest.raises(InputError, match=r"single cluster \(label 7\).*reference='gmm'") as caught:
        _explain(folder, k=3, reference="labels", reference_column="one")
    assert "--reference gmm" in caught.value.describe("cli")
    assert _explain(folder, k=3, reference="gmm").tree.n_leaves == 3  # the fix it names runs
    with pytest.raises(InputError, match=r"holds 4 clusters but k is 3; pass k=4") as caught:
        _explain(folder, k=3, reference="labels", reference_column="y")
    assert caught.value.describe("cli").endswith("pass --k 4")
    assert _explain(folder, k=4, reference="labels", reference_column="y").tree.n_leaves == 4


def test_held_arrays_live_in_their_own_mappings_and_behave_like_numpy_arrays():
    """residency.held_array (a read's blocks, the encoding's kept arrays): writable, C-ordered, of
    the asked shape and dtype, picklable (a Dask spill or transfer), and its memory goes back when
    the array goes (no growth over many)."""
    import pickle

    from exclust.dataplane.residency import held_array

    codes = held_array((7, 5), np.uint8)
    assert codes.shape == (7, 5) and codes.dtype == np.uint8 and codes.flags.c_contiguous and codes.flags.writeable
    block = held_array((1000, 3), np.float64)
    assert block.shape == (1000, 3) and block.dtype == np.float64 and block.flags.c_contiguous
    block[:] = np.arange(3000).reshape(1000, 3)
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(block)), block)
    assert held_array((0, 3), np.float64).shape == (0, 3) and held_array((4, 0), np.float64).shape == (4, 0)

    def resident_mb() -> float:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6

    before = resident_mb()
    for _ in range(20):  # 20 x 80 MB written and dropped
        big = held_array((1_000_000, 10), np.float64)
        big[:] = 1.0
        del big
    assert resident_mb() - before < 200


def test_default_features_leave_out_named_and_label_like_columns(tmp_path, rng, dask_client):
    """Without a feature list: the run's own label columns and whole-number columns of few values
    are never features (told from the footers for Parquet, from memory for a DataFrame); a
    whole-number column of many values, and any column named as a feature, stay usable."""
    n = 400
    frame = pd.DataFrame({"x0": rng.normal(size=n), "truth": np.repeat(np.arange(4), n // 4),
                          "count": np.arange(n) * 3, "flag": rng.integers(0, 2, n).astype(bool),
                          "x1": rng.normal(size=n), "name": ["p", "q"] * (n // 2)})
    folder = write_parts(tmp_path / "ds", [frame.iloc[:150], frame.iloc[150:]])
    for source in (folder, frame):
        ds = load_dataset(source)
        assert ds.feature_names == ["x0", "count", "x1"]
        assert len(ds.notes) == 1 and "'truth' (0..3)" in ds.notes[0] and "'flag' (0..1)" in ds.notes[0]
        named = load_dataset(source, extra_columns=["truth"])
        assert named.feature_names == ["x0", "count", "x1"] and "'truth'" not in named.notes[0]
        assert load_dataset(source, ["x0", "truth"]).feature_names == ["x0", "truth"]  # named: the user's call
        assert load_dataset(source, ["x0", "truth"]).notes == []
    only_labels = write_parts(tmp_path / "labels", [frame[["truth", "name"]]])
    with pytest.raises(InputError, match=r"no feature columns .* \['truth'\], hold few whole numbers like a label"):
        load_dataset(only_labels)
