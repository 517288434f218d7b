"""Labelling Parquet partitions with a saved tree: rows, relative paths, hive keys, drift, failures."""
from __future__ import annotations

import json
import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from exclust.dataplane.tasks import executing_tasks
from exclust.errors import InputError
from exclust.jobs.label.labeling import label_parquet, label_table
from exclust.sources.storage import list_source
from exclust.tree import ThresholdTree, TreeBuilder


def two_feature_tree() -> ThresholdTree:
    b = TreeBuilder(n_features=2)
    root = b.add_node()
    left, right = b.split(root, feature=0, threshold=0.0)
    b.make_leaf(left, 0)
    rl, rr = b.split(right, feature=1, threshold=1.0)
    b.make_leaf(rl, 1)
    b.make_leaf(rr, 2)
    return b.build(feature_names=["a", "b"], meta={"algorithm": "handmade"})


def write_parts(folder, n_files=3, rows=1000, seed=0):
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True)
    frames = []
    for i in range(n_files):
        a, b = rng.normal(size=rows), rng.normal(1.0, 1.0, size=rows)
        t = pa.table({"id": np.arange(i * rows, (i + 1) * rows), "a": a, "b": b, "note": ["r"] * rows})
        pq.write_table(t, folder / f"part-{i}.parquet")
        frames.append(t)
    return pa.concat_tables(frames)


def expected_clusters(a, b):
    return np.where(a <= 0.0, 0, np.where(b <= 1.0, 1, 2))


def test_label_parquet_writes_every_row_with_cluster_and_leaf(tmp_path):
    tree = two_feature_tree()
    tree.to_json(tmp_path / "tree.json")
    src = write_parts(tmp_path / "in")
    result = label_parquet(tmp_path / "tree.json", tmp_path / "in", tmp_path / "out")
    out = pq.read_table(sorted((tmp_path / "out").glob("*.parquet")))
    assert sorted(p.name for p in (tmp_path / "out").glob("*.parquet")) == [
        "part-0.parquet", "part-1.parquet", "part-2.parquet"]
    assert out.num_rows == src.num_rows == result.n_rows == 3000
    ids = out.column("id").to_numpy()
    order = np.argsort(ids)
    a = out.column("a").to_numpy()[order]
    b = out.column("b").to_numpy()[order]
    clusters = out.column("cluster").to_numpy()[order]
    np.testing.assert_array_equal(clusters, expected_clusters(a, b))
    leaves = out.column("leaf").to_numpy()[order]
    np.testing.assert_array_equal(tree.value[leaves], clusters)
    assert out.column("note").to_pylist()[0] == "r"  # other columns kept
    assert result.counts == {c: int((clusters == c).sum()) for c in range(3)}
    doc = json.loads((tmp_path / "out" / "_labels.json").read_text())
    assert doc["n_rows"] == 3000 and doc["tree"]["algorithm"] == "handmade"
    assert result.leaf_counts == {int(v): int((leaves == v).sum()) for v in np.unique(leaves)}
    assert doc["rows_per_leaf"] == {str(k): v for k, v in sorted(result.leaf_counts.items())}
    assert result.drift is None and doc["drift"] is None  # a handmade tree stores no leaf shares
    manifest = json.loads((tmp_path / "out" / "_SUCCESS").read_text())
    assert manifest["rows"] == 3000 and {f["path"] for f in manifest["files"]} >= {"part-0.parquet", "_labels.json"}


def test_label_on_dask_cluster_matches_local(tmp_path, dask_client):
    tree = two_feature_tree()
    write_parts(tmp_path / "in", n_files=4, rows=500, seed=1)
    local = label_parquet(tree, tmp_path / "in", tmp_path / "local")
    # dask_client is the default client here, so each file is one task on a worker process
    remote = label_parquet(tree, str(tmp_path / "in" / "*.parquet"), tmp_path / "remote")
    assert local.counts == remote.counts and remote.n_files == 4
    for name in ["part-0.parquet", "part-3.parquet"]:
        assert pq.read_table(tmp_path / "local" / name).equals(pq.read_table(tmp_path / "remote" / name))


def test_rows_with_missing_features_are_marked_not_guessed():
    tree = two_feature_tree()
    t = pa.table({"a": pa.array([-1.0, None, 2.0, np.nan]), "b": pa.array([0.0, 0.0, 5.0, 0.0])})
    out = label_table(tree, t)
    assert out.column("cluster").to_pylist() == [0, -1, 2, -1]
    assert out.column("leaf").to_pylist()[1] == -1


def test_label_table_names_missing_and_clashing_columns():
    tree = two_feature_tree()
    with pytest.raises(InputError, match=r"\['b'\]"):
        label_table(tree, pa.table({"a": [1.0]}))
    with pytest.raises(InputError, match="cluster"):
        label_table(tree, pa.table({"a": [1.0], "b": [1.0], "cluster": [3]}))


def test_corrupt_partition_fails_naming_it_and_leaves_no_folder(tmp_path):
    write_parts(tmp_path / "in", n_files=2, rows=100)
    (tmp_path / "in" / "part-1.parquet").write_bytes(b"PAR1 this is not parquet")
    with pytest.raises(InputError, match="part-1.parquet"):
        label_parquet(two_feature_tree(), tmp_path / "in", tmp_path / "out")
    assert not (tmp_path / "out").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in"]  # no output, no staging folder


def everything(folder) -> list[str]:
    """Every file and folder below ``folder``, hidden ones included."""
    return sorted(os.path.relpath(os.path.join(d, n), folder)
                  for d, dirs, files in os.walk(folder) for n in dirs + files)


def test_same_named_files_of_a_glob_keep_their_relative_paths(tmp_path, dask_client):
    for day in (1, 2, 3):
        write_parts(tmp_path / "data" / "hive" / f"day={day}", n_files=1, rows=2000, seed=day)
        os.rename(tmp_path / "data" / "hive" / f"day={day}" / "part-0.parquet",
                  tmp_path / "data" / "hive" / f"day={day}" / "part.parquet")
    result = label_parquet(two_feature_tree(), str(tmp_path / "data" / "hive" / "*" / "part.parquet"), tmp_path / "out")
    written = sorted(str(p.relative_to(tmp_path / "out")) for p in (tmp_path / "out").rglob("*.parquet"))
    assert written == ["day=1/part.parquet", "day=2/part.parquet", "day=3/part.parquet"]
    rows_out = sum(pq.ParquetFile(tmp_path / "out" / w).metadata.num_rows for w in written)
    assert rows_out == result.n_rows == 6000
    assert json.loads((tmp_path / "out" / "_labels.json").read_text())["n_rows"] == 6000


def test_a_hive_key_the_tree_cuts_is_read_from_the_path_and_not_written_twice(tmp_path):
    b = TreeBuilder(n_features=2)
    left, right = b.split(b.add_node(), feature=1, threshold=1.5)
    b.make_leaf(left, 0)
    b.make_leaf(right, 1)
    tree = b.build(feature_names=["a", "day"])
    for day in (1, 2):
        write_parts(tmp_path / "in" / f"day={day}", n_files=1, rows=50, seed=day)
    result = label_parquet(tree, tmp_path / "in", tmp_path / "out")
    assert result.counts == {0: 50, 1: 50}
    day2 = pq.read_table(tmp_path / "out" / "day=2" / "part-0.parquet")
    assert set(day2.column("cluster").to_pylist()) == {1} and "day" not in day2.column_names


def test_drift_of_the_rows_per_leaf_is_recorded(tmp_path):
    tree = two_feature_tree()
    leaves = tree.leaves.tolist()
    tree.meta["leaf_shares"] = {str(leaf): share for leaf, share in zip(leaves, (0.9, 0.05, 0.05), strict=True)}
    write_parts(tmp_path / "in", n_files=1, rows=3000)
    result = label_parquet(tree, tmp_path / "in", tmp_path / "out")
    assert result.drift is not None and result.drift["drifted"] and result.drift["psi"] > 0.2
    doc = json.loads((tmp_path / "out" / "_labels.json").read_text())
    assert doc["drift"]["psi"] == pytest.approx(result.drift["psi"])
    assert sum(result.leaf_counts.values()) == 3000


def test_a_bad_file_among_good_ones_on_a_cluster_leaves_nothing_anywhere(tmp_path, dask_client):
    write_parts(tmp_path / "in", n_files=12, rows=2000)
    (tmp_path / "in" / "part-9.parquet").write_bytes(b"PAR1 random bytes, not parquet PAR1")
    before = everything(tmp_path)
    with pytest.raises(InputError, match="part-9.parquet"):
        label_parquet(two_feature_tree(), tmp_path / "in", tmp_path / "out")
    # No task of the run still runs on a worker (run_tasks waited for them on the failure), so nothing can
    # be written late: what is there now is all there will be.
    assert executing_tasks(dask_client, "label_file-") == 0
    assert everything(tmp_path) == before  # no output, no hidden staging, nothing written late


def test_a_later_reader_never_sees_label_output_debris(tmp_path):
    write_parts(tmp_path / "in", n_files=2, rows=100)
    label_parquet(two_feature_tree(), tmp_path / "in", tmp_path / "out")
    listed = list_source(str(tmp_path / "out"))
    assert sorted(f.relpath for f in listed.files) == ["part-0.parquet", "part-1.parquet"]
