"""Labelling reads what explain reads (issue 26, item 3): its input goes through ``open_source``,
so a Delta table and a plugin source are labelled like Parquet files, with ``exclust label``."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from test_extension_source import CsvSource, csv_source  # noqa: F401 (the fixture registers the plugin)

from exclust.cli import main
from exclust.sources.base import open_source
from exclust.tree import ThresholdTree, TreeBuilder


def _tree(path, features=("a", "b"), threshold=0.0) -> ThresholdTree:
    b = TreeBuilder(n_features=len(features))
    left, right = b.split(b.add_node(), feature=0, threshold=threshold)
    b.make_leaf(left, 0)
    b.make_leaf(right, 1)
    tree = b.build(feature_names=list(features))
    tree.to_json(path)
    return tree


def _labelled(folder) -> pa.Table:
    files = sorted(p for p in folder.rglob("*.parquet") if not any(part.startswith((".", "_")) for part in
                                                                    p.relative_to(folder).parts))
    return pa.concat_tables([pq.read_table(f) for f in files], promote_options="default")


def test_label_a_delta_table_labels_its_snapshot_file_by_file(tmp_path, capsys, dask_client):
    deltalake = pytest.importorskip("deltalake")
    rng = np.random.default_rng(8)

    def day_rows(day: int, n: int) -> pd.DataFrame:
        names = [f"r{day}-{i}" for i in range(n)]
        return pd.DataFrame({"a": rng.normal(size=n), "b": rng.normal(size=n), "name": names, "day": day})

    table = tmp_path / "table"
    deltalake.write_deltalake(str(table), pd.concat([day_rows(1, 300), day_rows(2, 200)], ignore_index=True),
                              partition_by=["day"])
    # Day 2 replaced: its first file is no longer in the snapshot, though it stays in the folder.
    replacement = day_rows(2, 150)
    deltalake.write_deltalake(str(table), replacement, mode="overwrite", predicate="day = 2", partition_by=["day"])
    live = deltalake.DeltaTable(str(table))
    assert len(list(table.rglob("*.parquet"))) > len(live.file_uris())
    _tree(tmp_path / "tree.json")
    code = main(["label", "--tree", str(tmp_path / "tree.json"), "--input", str(table), "--out", str(tmp_path / "lab"),
                 "--scheduler", dask_client.scheduler.address, "--quiet"])
    assert code == 0
    assert f"labelled 450 rows in {len(live.file_uris())} file(s)" in capsys.readouterr().out
    out = _labelled(tmp_path / "lab")
    assert out.num_rows == 450 and {"a", "b", "name", "cluster", "leaf"} <= set(out.column_names)
    np.testing.assert_array_equal(out.column("cluster").to_numpy(), (out.column("a").to_numpy() > 0).astype(int))
    # One output file per live data file, at its path in the table; the log is not copied.
    written = sorted(str(p.relative_to(tmp_path / "lab")) for p in (tmp_path / "lab").rglob("*.parquet"))
    assert written == sorted(f.relpath for f in open_source(str(table)).label_files().files)
    assert all(w.startswith(("day=1/", "day=2/")) for w in written) and not (tmp_path / "lab" / "_delta_log").exists()
    assert sorted(out.column("name").to_pylist()) == sorted(
        [f"r1-{i}" for i in range(300)] + replacement["name"].tolist())


def test_label_a_plugin_source_writes_one_file_per_part(tmp_path, capsys, csv_source, dask_client):  # noqa: F811
    rng = np.random.default_rng(9)
    n = 2500
    frame = pd.DataFrame({"x0": rng.normal(3.0, 3.0, n), "x1": rng.normal(size=n), "x2": rng.normal(size=n)})
    frame.loc[7, "x0"] = np.nan  # a row the tree cannot place: labelled -1, never a guess
    path = tmp_path / "points.csv"
    frame.to_csv(path, index=False)
    tree = _tree(tmp_path / "tree.json", features=("x0", "x1"), threshold=3.0)
    assert isinstance(open_source(str(path)), CsvSource) and open_source(str(path)).label_files() is None
    code = main(["label", "--tree", str(tmp_path / "tree.json"), "--input", str(path), "--out", str(tmp_path / "lab"),
                 "--scheduler", dask_client.scheduler.address, "--quiet"])
    assert code == 0
    assert f"labelled {n} rows in 1 file(s)" in capsys.readouterr().out
    out = pq.read_table(tmp_path / "lab" / "part-00000.parquet")
    assert out.column_names == ["x0", "x1", "cluster", "leaf"]
    expected = tree.predict(frame[["x0", "x1"]].to_numpy())
    np.testing.assert_array_equal(out.column("cluster").to_numpy(), expected)
    assert out.column("cluster")[7].as_py() == -1 and (tmp_path / "lab" / "_labels.json").exists()
    # The input is never written over: an output over it is refused before any work.
    assert main(["label", "--tree", str(tmp_path / "tree.json"), "--input", str(path), "--out", str(tmp_path),
                 "--quiet"]) == 2
    assert path.exists()


def test_label_parquet_takes_an_in_memory_frame_part_by_part(tmp_path):
    from exclust.jobs.label.labeling import label_parquet

    rng = np.random.default_rng(10)
    frame = pd.DataFrame({"a": rng.normal(size=400), "b": rng.normal(size=400)})
    tree = _tree(tmp_path / "tree.json")
    result = label_parquet(tree, frame, tmp_path / "lab")
    out = pq.read_table(tmp_path / "lab" / "part-00000.parquet")
    assert result.n_rows == 400 and result.n_files == 1
    np.testing.assert_array_equal(out.column("cluster").to_numpy(), tree.predict(frame.to_numpy()))
