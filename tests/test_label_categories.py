"""Issue 28 in the label job: a text column encoded with the tree's vocabulary, a boolean column, nulls routed to
each cut's missing side, categories the tree never saw counted per column (terminal and ``_labels.json``), and -1
only for an infinite value or a missing one at a cut with no side."""
from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from exclust.cli import main
from exclust.errors import InputError
from exclust.jobs.label.labeling import label_parquet, label_table
from exclust.sources.categories import UNSEEN_CATEGORY as SOURCES_UNSEEN
from exclust.sources.categories import encode_categories
from exclust.tree import MISSING_LEFT, MISSING_NONE, MISSING_RIGHT, UNSEEN_CATEGORY, ThresholdTree, TreeBuilder

COUNTRIES = ["at", "de", "fr", "it"]


def category_tree() -> ThresholdTree:
    """country in {at, fr} (missing/unseen -> right); left: age <= 41 (missing -> left); right: member in {True}
    (no missing side: a null there is not labelled)."""
    b = TreeBuilder(n_features=3)
    left, right = b.split_categories(b.add_node(), 1, [0, 2], MISSING_RIGHT)
    young, old = b.split(left, 0, 41.0, missing_side=MISSING_LEFT)
    member, other = b.split_categories(right, 2, [1], MISSING_NONE)
    for leaf, cluster in ((young, 0), (old, 1), (member, 2), (other, 3)):
        b.make_leaf(leaf, cluster)
    return b.build(feature_names=["age", "country", "member"], categories={1: COUNTRIES, 2: [False, True]})


def customer_table(rng: np.random.Generator, n: int) -> pa.Table:
    age = rng.uniform(18, 80, n)
    age[rng.random(n) < 0.1] = np.nan
    age[:3] = [np.inf, 30.0, 50.0]
    country = rng.choice(COUNTRIES + ["pt", "se"], n).astype(object)  # pt, se: never seen by the tree
    country[rng.random(n) < 0.1] = None
    member = (rng.random(n) < 0.5).astype(object)
    member[rng.random(n) < 0.05] = None
    return pa.table({"id": np.arange(n), "age": pa.array(age), "country": pa.array(country.tolist(), pa.string()),
                     "member": pa.array(member.tolist(), pa.bool_())})


def expected(table: pa.Table) -> np.ndarray:
    """The clusters recomputed in numpy from the tree's definition (issue 28's contract)."""
    age = table.column("age").to_numpy(zero_copy_only=False).astype(float)
    country = np.array(table.column("country").to_pylist(), dtype=object)
    member = np.array(table.column("member").to_pylist(), dtype=object)
    in_set = np.isin(country, ["at", "fr"])  # null and unseen -> not in the set, and the missing side is right
    young = np.isnan(age) | (age <= 41)
    member_known = np.array([m is not None for m in member])
    is_member = np.array([m is True for m in member])
    out = np.where(in_set, np.where(young, 0, 1), np.where(is_member, 2, 3))
    out[~in_set & ~member_known] = -1  # a null at a cut with no missing side
    out[np.isinf(age)] = -1
    return out


def test_encode_categories_nulls_unseen_and_the_vocabularys_type():
    assert SOURCES_UNSEEN == UNSEEN_CATEGORY
    np.testing.assert_array_equal(encode_categories(["de", None, "pt", "at", float("nan")], ["at", "de"]),
                                  [1, np.nan, UNSEEN_CATEGORY, 0, np.nan])
    np.testing.assert_array_equal(encode_categories([True, False, None, 1], [False, True]), [1, 0, np.nan, -1])
    np.testing.assert_array_equal(encode_categories([3, 3.0, 2.5, "3", np.int64(0)], [0, 3]), [1, 1, -1, -1, 0])


def test_label_table_routes_nulls_and_unseen_categories_and_counts_them(rng):
    tree = category_tree()
    table = customer_table(rng, 2000)
    unseen: dict[str, int] = {}
    out = label_table(tree, table, unseen=unseen)
    clusters = out.column("cluster").to_numpy()
    np.testing.assert_array_equal(clusters, expected(table))
    country = table.column("country").to_pylist()
    assert unseen == {"country": sum(c in ("pt", "se") for c in country), "member": 0}
    assert unseen["country"] > 300
    # a row with a null age, or a null or unseen country, is labelled; -1 only for inf or a null at the member cut
    assert (clusters[np.isnan(table.column("age").to_numpy(zero_copy_only=False))] >= 0).sum() > 100
    # dictionary-encoded text reads the same
    as_dictionary = table.set_column(2, "country", table.column("country").dictionary_encode())
    np.testing.assert_array_equal(label_table(tree, as_dictionary).column("cluster").to_numpy(), clusters)


def test_a_category_column_of_numbers_is_refused_naming_the_column():
    with pytest.raises(InputError, match="column 'country' has type double, but the tree cuts it as a category"):
        label_table(category_tree(), pa.table({"age": [1.0], "country": [1.0], "member": [True]}))


def test_label_end_to_end_from_parquet_counts_unseen_categories_on_the_terminal_and_in_labels_json(
        tmp_path, rng, capsys):
    tree = category_tree()
    tree.to_json(tmp_path / "tree.json")
    folder = tmp_path / "in"
    folder.mkdir()
    tables = [customer_table(rng, 300) for _ in range(2)]
    for i, t in enumerate(tables):
        pq.write_table(t.set_column(0, "id", pa.array(np.arange(300) + 300 * i)), folder / f"part-{i}.parquet")
    code = main(["label", "--tree", str(tmp_path / "tree.json"), "--input", str(folder), "--out",
                 str(tmp_path / "out"), "--quiet"])
    printed = capsys.readouterr().out
    assert code == 0, printed
    country = [c for t in tables for c in t.column("country").to_pylist()]
    n_unseen = sum(c in ("pt", "se") for c in country)
    assert f"unseen categories in 'country': {n_unseen} rows" in printed
    labels = json.loads((tmp_path / "out" / "_labels.json").read_text())
    assert labels["unseen_categories"] == {"country": n_unseen, "member": 0}
    want = np.concatenate([expected(t) for t in tables])
    assert labels["rows_per_cluster"] == {str(k): int(v) for k, v in zip(*np.unique(want, return_counts=True),
                                                                          strict=True)}
    out = pq.read_table(sorted((tmp_path / "out").glob("*.parquet")))
    order = np.argsort(out.column("id").to_numpy())
    np.testing.assert_array_equal(out.column("cluster").to_numpy()[order], want)
    assert out.column("country").to_pylist() == [c for t in tables for c in t.column("country").to_pylist()]


def test_label_parquet_from_an_older_tree_keeps_minus_one_for_missing_values(tmp_path):
    from pathlib import Path

    fixture = Path(__file__).parent / "fixtures" / "tree_schema_v1.json"
    folder = tmp_path / "in"
    folder.mkdir()
    pq.write_table(pa.table({"age": [30.0, None, 50.0], "income": [0.0, 0.0, 0.0], "score": [0.0, 0.0, -2.0]}),
                   folder / "part-0.parquet")
    result = label_parquet(fixture, folder, tmp_path / "out")
    assert result.counts == {0: 1, -1: 1, 2: 1} and result.unseen_categories == {}


def test_a_category_read_from_a_hive_key_is_encoded_with_the_tree_vocabulary(tmp_path):
    tree = category_tree()
    for country in ("fr", "pt"):
        folder = tmp_path / "in" / f"country={country}"
        folder.mkdir(parents=True)
        pq.write_table(pa.table({"age": [30.0, 50.0, None], "member": [True, False, None]}), folder / "p.parquet")
    result = label_parquet(tree, tmp_path / "in", tmp_path / "out")
    # fr: in the set (age 30 -> 0, 50 -> 1, missing age -> left: 0); pt: unseen -> right (member 2, other 3, null -1)
    assert result.counts == {0: 2, 1: 1, 2: 1, 3: 1, -1: 1}
    assert result.unseen_categories == {"country": 3, "member": 0}
