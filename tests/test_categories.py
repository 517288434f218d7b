"""Category features and missing values as the sources read them (issue 28): text, dictionary,
boolean and named integer columns coded with one vocabulary from Parquet, a Delta table, an
Iceberg table, pandas and Dask frames; nulls kept as NaN; infinities refused; the cardinality cap;
the clustering columns (``cluster_on``) read beside the features."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from exclust.errors import InputError
from exclust.sources.categories import (
    MAX_CATEGORIES,
    UNSEEN_CATEGORY,
    arrow_category_type,
    encode_categories,
    pandas_category_dtype,
)
from exclust.sources.dataset import Dataset, clustering_input, load_dataset, require_complete

COLUMNS = ["x0", "age", "country", "member", "plan"]


def customers(n: int = 240, seed: int = 3) -> pd.DataFrame:
    """A customer-like table: numbers, a null-holding number, text with nulls, booleans, integer plan codes."""
    rng = np.random.default_rng(seed)
    age = rng.integers(18, 80, size=n).astype(float)
    age[rng.random(n) < 0.1] = np.nan
    country = rng.choice(np.array(["de", "fr", "at", "it"], dtype=object), size=n)
    country[rng.random(n) < 0.1] = None
    return pd.DataFrame({"x0": rng.normal(size=n), "age": age, "country": country,
                         "member": rng.random(n) < 0.5, "plan": rng.choice([10, 20, 40], size=n)})


def expected_matrix(frame: pd.DataFrame) -> np.ndarray:
    """The coded matrix worked out by hand: sorted vocabularies, null -> NaN."""
    country = {"at": 0.0, "de": 1.0, "fr": 2.0, "it": 3.0}
    return np.column_stack([
        frame["x0"].to_numpy(), frame["age"].to_numpy(),
        [country[v] if isinstance(v, str) else np.nan for v in frame["country"]],
        frame["member"].to_numpy(dtype=float), frame["plan"].map({10: 0.0, 20: 1.0, 40: 2.0}).to_numpy(),
    ])


EXPECTED_CATEGORIES = {2: ["at", "de", "fr", "it"], 3: [False, True], 4: [10, 20, 40]}


def as_numpy(X) -> np.ndarray:
    return np.asarray(X.compute() if hasattr(X, "compute") else X)


def test_the_tree_and_the_sources_agree_on_the_unseen_code():
    from exclust.tree import node_kinds

    assert getattr(node_kinds, "UNSEEN_CATEGORY", UNSEEN_CATEGORY) == UNSEEN_CATEGORY == -1.0


def test_encoding_nulls_unseen_values_and_every_container():
    vocabulary = ["at", "de", "fr"]
    expected = [1.0, 0.0, np.nan, UNSEEN_CATEGORY]
    for values in (pa.array(["de", "at", None, "zz"]), pa.array(["de", "at", None, "zz"]).dictionary_encode(),
                   pa.array(["de", "at", None, "zz"], pa.large_string()), pd.Series(["de", "at", None, "zz"]),
                   pd.Series(["de", "at", np.nan, "zz"]).astype("category"), ["de", "at", None, "zz"]):
        np.testing.assert_array_equal(encode_categories(values, vocabulary), expected)
    np.testing.assert_array_equal(encode_categories(pa.array([20, 5, None], pa.int8()), [5, 20, 700]),
                                  [1.0, 0.0, np.nan])
    np.testing.assert_array_equal(encode_categories(pd.Series([True, None, False], dtype="boolean"), [False, True]),
                                  [1.0, np.nan, 0.0])
    # A plain iterable (a dictionary's values) is compared value by value as the vocabulary's type.
    np.testing.assert_array_equal(encode_categories([True, False, None, 1], [False, True]), [1, 0, np.nan, -1])
    np.testing.assert_array_equal(encode_categories([3, 3.0, 2.5, "3", np.int64(0)], [0, 3]), [1, 1, -1, -1, 0])


def test_detection_from_arrow_types_and_pandas_dtypes():
    assert all(arrow_category_type(t) for t in (pa.string(), pa.large_string(), pa.bool_(),
                                                 pa.dictionary(pa.int32(), pa.string())))
    assert not any(arrow_category_type(t) for t in (pa.int64(), pa.float64(), pa.binary(),
                                                     pa.dictionary(pa.int32(), pa.float64()), pa.list_(pa.string())))
    frame = pd.DataFrame({"s": ["a", "b"], "c": pd.Categorical(["a", "b"]), "b": [True, False],
                          "n": [1.0, 2.0], "mixed": ["a", 1.0], "t": pd.array(["a", None], dtype="string")})
    detected = {c for c in frame.columns if pandas_category_dtype(frame[c].dtype, frame[c])}
    assert detected == {"s", "c", "b", "t"}


def test_parquet_categories_nulls_and_codes_identical_across_chunkings(tmp_path, dask_client):
    frame = customers()
    folder = tmp_path / "customers"
    folder.mkdir()
    pq.write_table(pa.Table.from_pandas(frame.iloc[:100], preserve_index=False), folder / "a.parquet",
                   row_group_size=30)
    # The second file dictionary-encodes its text: the same values, the same codes.
    pq.write_table(pa.Table.from_pandas(frame.iloc[100:], preserve_index=False), folder / "b.parquet",
                   use_dictionary=True)
    expected = expected_matrix(frame)
    for piece_rows in (1_000_000, 30, 7):
        data = load_dataset(folder, COLUMNS, categorical=["plan"], piece_rows=piece_rows)
        np.testing.assert_array_equal(as_numpy(data.X), expected)
        assert data.categories == EXPECTED_CATEGORIES
    assert data.missing == {"age": int(frame["age"].isna().sum()), "country": int(frame["country"].isna().sum())}
    # Without categorical, the plan codes are numbers; the clustering columns default to the numeric features.
    plain = load_dataset(folder, COLUMNS)
    assert plain.categories == {2: EXPECTED_CATEGORIES[2], 3: [False, True]}
    assert plain.cluster_names == ["x0", "age", "plan"] and "cut by the tree, not clustered on" in plain.notes[-1]
    np.testing.assert_array_equal(as_numpy(plain.cluster_X), frame[["x0", "age", "plan"]].to_numpy(dtype=float))


def test_a_fitted_trees_vocabulary_codes_new_data(tmp_path, dask_client):
    frame = customers()
    path = tmp_path / "new.parquet"
    frame.to_parquet(path, index=False)
    data = load_dataset(path, ["x0", "country"], vocabularies={"country": ["de", "fr"]})
    codes = as_numpy(data.X)[:, 1]
    expected = frame["country"].map({"de": 0.0, "fr": 1.0, "at": UNSEEN_CATEGORY, "it": UNSEEN_CATEGORY})
    np.testing.assert_array_equal(codes, expected.to_numpy(dtype=float))  # None -> NaN
    assert data.categories == {1: ["de", "fr"]}


def test_pandas_and_dask_frames_give_the_same_codes(dask_client):
    import dask.dataframe as dd

    frame = customers()
    expected = expected_matrix(frame)
    with_dtypes = frame.assign(country=frame["country"].astype("category"), member=frame["member"].astype("boolean"))
    for source in (frame, with_dtypes, dd.from_pandas(frame, npartitions=1),
                   dd.from_pandas(with_dtypes, npartitions=5)):
        data = load_dataset(source, COLUMNS, categorical=["plan"])
        np.testing.assert_array_equal(as_numpy(data.X), expected)
        assert data.categories == EXPECTED_CATEGORIES


def test_a_delta_table_and_an_iceberg_table_detect_their_categories(tmp_path, dask_client):
    deltalake = pytest.importorskip("deltalake")
    pytest.importorskip("pyiceberg")
    from pyiceberg.catalog.sql import SqlCatalog

    frame = customers()
    table = pa.Table.from_pandas(frame, preserve_index=False)
    deltalake.write_deltalake(str(tmp_path / "delta"), table)
    catalog = SqlCatalog("test", uri=f"sqlite:///{tmp_path}/catalog.db", warehouse=f"file://{tmp_path}/warehouse")
    catalog.create_namespace("ns")
    catalog.create_table("ns.customers", schema=table.schema).append(table)
    expected = expected_matrix(frame)
    for source in (str(tmp_path / "delta"), f"iceberg+sqlite:///{tmp_path}/catalog.db#test:ns.customers"):
        data = load_dataset(source, COLUMNS, categorical=["plan"])
        np.testing.assert_array_equal(as_numpy(data.X), expected)
        assert data.categories == EXPECTED_CATEGORIES, source


def test_the_cardinality_cap_names_the_column_and_its_count(tmp_path, dask_client):
    n = MAX_CATEGORIES + 44
    frame = pd.DataFrame({"x0": np.arange(n, dtype=float), "id": [f"c{i:04d}" for i in range(n)]})
    with pytest.raises(InputError, match=rf"column 'id' of the pandas DataFrame holds {n} distinct values"):
        load_dataset(frame, ["x0", "id"])
    frame.to_parquet(tmp_path / "ids.parquet", index=False, row_group_size=100)
    with pytest.raises(InputError, match=rf"column 'id' of .*ids.parquet holds {n} distinct values .* more than "
                                         rf"the {MAX_CATEGORIES}"):
        load_dataset(tmp_path / "ids.parquet", ["x0", "id"], piece_rows=100)


def test_infinities_are_refused_and_nan_kept_dropped_or_refused():
    X = np.array([[1.0, 2.0], [np.nan, 1.0], [3.0, 5.0], [4.0, 0.5]])
    kept = load_dataset(X)
    assert kept.n_rows == 4 and kept.missing == {"x0": 1}
    assert load_dataset(X, nan_policy="drop").n_rows == 3
    with pytest.raises(InputError, match=r"1 row\(s\) of array hold NaN or infinite values"):
        load_dataset(X, nan_policy="raise")
    X[2, 1] = -np.inf
    with pytest.raises(InputError, match=r"^1 row\(s\) of array hold infinite values \(per column: \{'x1': 1\}\)"):
        load_dataset(X)


def test_the_reference_fit_refuses_missing_values_in_its_columns_in_one_line(dask_client):
    from exclust.reference import KMeans

    frame = customers()
    data = load_dataset(frame, ["x0", "age", "country"], cluster_on=["x0", "age"])
    with pytest.raises(InputError, match=r"^the reference clustering needs complete rows, .*'age': \d+") as caught:
        KMeans(n_clusters=2, random_state=0).fit(data)
    assert "\n" not in str(caught.value) and caught.value.describe("cli").endswith("(--cluster-on)")
    assert "--drop-nan" in caught.value.describe("cli")
    # Complete clustering columns: fitted on them, whatever the features hold.
    complete = load_dataset(frame, ["x0", "age", "country"], cluster_on=["x0"])
    assert clustering_input(complete, "k-means").feature_names == ["x0"]
    model = KMeans(n_clusters=2, random_state=0).fit(complete)
    assert model.cluster_centers_.shape == (2, 1)
    with pytest.raises(InputError, match=r"complete rows"):
        require_complete(np.array([[1.0, np.nan]]), "k-means")
    require_complete(Dataset(np.ones((2, 2)), ["a", "b"]), "k-means")  # complete: nothing to say


def test_cluster_on_columns_are_read_beside_the_features(tmp_path, dask_client):
    frame = customers().assign(e0=lambda f: f["x0"] * 2.0, e1=lambda f: f["x0"] - 1.0)
    frame.to_parquet(tmp_path / "t.parquet", index=False)
    for source in (frame, tmp_path / "t.parquet"):
        data = load_dataset(source, ["age", "country"], cluster_on=["e0", "e1"], nan_policy="drop")
        complete = frame.dropna(subset=["age", "country"])
        assert data.n_rows == len(complete) and data.feature_names == ["age", "country"]
        assert data.cluster_names == ["e0", "e1"] and "e0" not in data.extra
        np.testing.assert_array_equal(as_numpy(data.cluster_X), complete[["e0", "e1"]].to_numpy())
    with pytest.raises(InputError, match=r"cluster_on column\(s\) \['country'\] .* are categories"):
        load_dataset(frame, ["age"], cluster_on=["country"])
    with pytest.raises(InputError, match=r"every feature of .* is a category"):
        load_dataset(frame, ["country", "member"])


def test_an_explain_run_clusters_on_its_columns_and_names_both_sets():
    from exclust.jobs.config import ExplainConfig
    from exclust.jobs.explain.steps import explain

    rng = np.random.default_rng(5)
    centers = np.array([[0.0, 0.0], [6.0, 0.0], [0.0, 6.0]])
    y = rng.integers(0, 3, size=600)
    frame = pd.DataFrame({"e0": centers[y, 0] + rng.normal(size=600), "e1": centers[y, 1] + rng.normal(size=600),
                          "country": np.array(["de", "fr", "it"], dtype=object)[y], "age": rng.normal(size=600)})
    run = explain(ExplainConfig(input=frame, features=["age", "country"], cluster_on=["e0", "e1"], n_clusters=3,
                                algorithm="cart", reference="kmeans", cost_curve=False, standing=False))
    assert run.metrics["features"] == ["age", "country"] and run.metrics["cluster_on"] == ["e0", "e1"]
    assert run.tree.feature_names == ["age", "country"]
    assert run.metrics["ari_reference"] > 0.9  # the clusters follow the country: the tree finds them
    with pytest.raises(InputError, match=r"MMDT fits a mixture over numbers, so category features \(\[.country.\]\)"):
        explain(ExplainConfig(input=frame, features=["age", "country"], n_clusters=3, algorithm="mmdt",
                              cost_curve=False, standing=False))


def test_a_text_partition_key_is_a_category_feature(tmp_path, dask_client):
    for region, n in (("eu", 5), ("us", 3), ("__HIVE_DEFAULT_PARTITION__", 2)):
        (tmp_path / f"region={region}").mkdir()
        pd.DataFrame({"x0": np.arange(n, dtype=float)}).to_parquet(tmp_path / f"region={region}" / "p.parquet",
                                                                   index=False)
    data = load_dataset(tmp_path, ["x0", "region"])
    assert data.categories == {1: ["eu", "us"]} and data.missing == {"region": 2}
    np.testing.assert_array_equal(np.sort(as_numpy(data.X)[:, 1]), [0, 0, 0, 0, 0, 1, 1, 1, np.nan, np.nan])
    given = load_dataset(tmp_path, ["x0", "region"], vocabularies={"region": ["us", "zz"]})
    codes = np.sort(as_numpy(given.X)[:, 1])
    np.testing.assert_array_equal(codes, [UNSEEN_CATEGORY] * 5 + [0, 0, 0, np.nan, np.nan])
