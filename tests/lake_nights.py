"""Nights of a feed for the lake-table label tests (Delta, Iceberg): Parquet partitions of rows around
three centres, and a tree explained on build data like them."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

CENTERS = np.array([[0.0, 0.0], [6.0, 0.0], [0.0, 6.0]])


def night(folder: Path, rows: int, seed: int, n_files: int = 2) -> None:
    """A night's partition of the feed: rows around three centres, in ``n_files`` files."""
    rng = np.random.default_rng(seed)
    X = CENTERS[rng.integers(0, 3, rows)] + rng.normal(scale=0.7, size=(rows, 2))
    folder.mkdir(parents=True)
    for i, part in enumerate(np.array_split(np.arange(rows), n_files)):
        pq.write_table(pa.table({"x0": X[part, 0], "x1": X[part, 1], "id": part + seed * 100_000}),
                       folder / f"part-{i}.parquet")


def input_rows(folder: Path) -> pa.Table:
    return pq.read_table(sorted(folder.glob("*.parquet"))).sort_by("id")


def assert_nights_labelled(rows_of, incoming: Path, tree_path: Path, days) -> None:
    """Each night's rows in the table (``rows_of(day)``) are the night's input rows, in id order, each
    with the leaf the tree gives it."""
    from exclust.tree import ThresholdTree

    tree = ThresholdTree.from_json(tree_path)
    for day in days:
        got, given = rows_of(day), input_rows(incoming / f"date={day}")
        assert got.column("id").to_pylist() == given.column("id").to_pylist()
        X = np.column_stack([given.column("x0").to_numpy(), given.column("x1").to_numpy()])
        np.testing.assert_array_equal(got.column("leaf").to_numpy(), tree.apply(X))


def explained_tree(root: Path) -> Path:
    """tree.json of a tree explained (in memory: no cluster needed) on build data like the feed's, with its
    leaf shares; a numpy input's columns are named x0, x1: the feed's names."""
    from exclust.jobs.config import ExplainConfig
    from exclust.jobs.explain.steps import run_explain

    night(root / "build", 3000, seed=0)
    build = input_rows(root / "build")
    X = np.column_stack([build.column("x0").to_numpy(), build.column("x1").to_numpy()])
    config = ExplainConfig(input=X, k=3, algorithm="imm", reference="kmeans", cost_curve=False).check()
    run_explain(config, root / "explain")
    return root / "explain" / "tree.json"
