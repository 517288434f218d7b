"""Labelling Parquet partitions with a saved tree; atomic output folders and path checks."""
from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from exclust.data import InputError
from exclust.labeling import label_parquet, label_table
from exclust.outputs import MARKER, atomic_output_dir, validate_input_path, validate_output_dir
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
    assert sorted(p.name for p in (tmp_path / "out").glob("*.parquet")) == ["part-0.parquet", "part-1.parquet", "part-2.parquet"]
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
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in"]  # no output, no temporary folder


def test_atomic_output_replaces_whole_or_not_at_all(tmp_path):
    target = tmp_path / "res"
    with atomic_output_dir(target) as tmp:
        (tmp / "a.txt").write_text("first")
    assert (target / "a.txt").read_text() == "first" and (target / MARKER).exists()
    with pytest.raises(RuntimeError):
        with atomic_output_dir(target) as tmp:
            (tmp / "b.txt").write_text("second, half done")
            raise RuntimeError("boom")
    assert sorted(p.name for p in target.iterdir()) == [MARKER, "a.txt"]  # the old result stands
    with atomic_output_dir(target) as tmp:
        (tmp / "c.txt").write_text("third")
    assert sorted(p.name for p in target.iterdir()) == [MARKER, "c.txt"]  # replaced whole, no mix
    assert not [p for p in tmp_path.iterdir() if ".tmp-" in p.name or ".old-" in p.name]


def test_output_paths_are_checked(tmp_path, monkeypatch):
    with pytest.raises(InputError, match="root"):
        validate_output_dir("/")
    with pytest.raises(InputError, match="home"):
        validate_output_dir("~")
    (tmp_path / "file.txt").write_text("x")
    with pytest.raises(InputError, match="existing file"):
        validate_output_dir(tmp_path / "file.txt")
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "precious.doc").write_text("x")
    with pytest.raises(InputError, match="not written by exclust"):
        validate_output_dir(tmp_path / "mine")
    base = tmp_path / "base"
    base.mkdir()
    assert validate_output_dir("run1", base=base) == base / "run1"
    with pytest.raises(InputError, match="outside the allowed base"):
        validate_output_dir("../escape", base=base)
    monkeypatch.setenv("EXCLUST_OUTPUT_BASE", str(base))
    with pytest.raises(InputError, match="outside the allowed base"):
        validate_output_dir(tmp_path / "elsewhere")
    with pytest.raises(InputError, match="input not found"):
        validate_input_path(tmp_path / "nope.parquet")
    with pytest.raises(InputError, match="no file matches"):
        validate_input_path(str(tmp_path / "*.nothing"))


def test_output_inside_the_input_folder_is_refused(tmp_path):
    write_parts(tmp_path / "in", n_files=1, rows=10)
    with pytest.raises(InputError, match="overlaps the input folder"):
        label_parquet(two_feature_tree(), tmp_path / "in", tmp_path / "in" / "labelled")
    assert sorted(p.name for p in (tmp_path / "in").iterdir()) == ["part-0.parquet"]
