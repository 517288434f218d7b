"""Apply a saved tree to Parquet partitions: the nightly labelling job.

Each input file becomes one output file with the same relative name and every input column,
plus a cluster column and a leaf column. Files are processed one task per file on the Dask
cluster (workers must see the input and output paths, e.g. a shared volume); each task returns
only its per-cluster counts. Rows with a missing or non-finite feature get cluster -1 and leaf
-1 rather than a guess.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from exclust.data import InputError, parquet_files
from exclust.outputs import atomic_output_dir, validate_output_dir, write_json
from exclust.tree import ThresholdTree

UNLABELLED = -1


@dataclass
class LabelResult:
    """What a labelling run wrote: the folder, files, rows and rows per cluster."""

    out: Path
    n_files: int
    n_rows: int
    counts: dict[int, int] = field(default_factory=dict)  # cluster -> rows; -1 = not labelled
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "out": str(self.out),
            "n_files": self.n_files,
            "n_rows": self.n_rows,
            "rows_per_cluster": {str(k): v for k, v in sorted(self.counts.items())},
            "seconds": round(self.seconds, 3),
        }


def label_table(tree: ThresholdTree, table, cluster_column: str = "cluster", leaf_column: str = "leaf"):
    """A pyarrow table with the tree's cluster and leaf of every row appended."""
    import pyarrow as pa

    cavs = tree.meta.get("concept_activation_vectors")
    # A Concept-MMDT tree cuts concept coordinates: read its embedding columns and project them.
    columns = list(tree.meta.get("embedding_features") or []) if cavs else list(tree.feature_names)
    missing = [c for c in columns if c not in table.column_names]
    if missing:
        raise InputError(
            f"columns {missing} used by the tree are missing; the table has {table.column_names}"
        )
    for name in (cluster_column, leaf_column):
        if name in table.column_names:
            raise InputError(f"the input already has a column '{name}'; choose another name for the output column")
    X = np.empty((table.num_rows, len(columns)), dtype=np.float64)
    for j, name in enumerate(columns):
        col = table.column(name)
        if not (pa.types.is_integer(col.type) or pa.types.is_floating(col.type) or pa.types.is_boolean(col.type)):
            raise InputError(f"column '{name}' has type {col.type}; the tree needs numbers")
        # Nulls become NaN, so they are caught with the other non-finite values below.
        X[:, j] = col.to_numpy(zero_copy_only=False).astype(np.float64, copy=False)
    if cavs:
        matrix = np.asarray(cavs["matrix"], dtype=np.float64)
        if matrix.shape != (tree.n_features, X.shape[1]):
            raise InputError(
                f"the tree's concept vectors have shape {matrix.shape}, which does not fit "
                f"{tree.n_features} concepts over {X.shape[1]} embedding columns"
            )
        X = X @ matrix.T
    ok = np.isfinite(X).all(axis=1)
    leaves = np.full(table.num_rows, UNLABELLED, dtype=np.int64)
    if ok.any():
        leaves[ok] = tree.apply(X[ok])
    clusters = np.where(leaves >= 0, tree.value[np.maximum(leaves, 0)], UNLABELLED).astype(np.int32)
    return table.append_column(cluster_column, pa.array(clusters)).append_column(
        leaf_column, pa.array(leaves.astype(np.int32))
    )


def _label_file(tree_doc: dict, src: str, dst: str, cluster_column: str, leaf_column: str) -> dict[int, int]:
    """One task: read a file, label it, write it; return rows per cluster."""
    import pyarrow.parquet as pq

    tree = ThresholdTree.from_dict(tree_doc)
    try:
        table = pq.read_table(src)
    except Exception as exc:  # pyarrow raises several types for damaged files
        raise InputError(f"cannot read Parquet file {src}: {exc}") from exc
    try:
        out = label_table(tree, table, cluster_column, leaf_column)
    except InputError as exc:
        raise InputError(f"{src}: {exc}") from exc
    Path(dst).parent.mkdir(parents=True, exist_ok=True)
    tmp = f"{dst}.tmp"
    pq.write_table(out, tmp)
    os.replace(tmp, dst)
    values, counts = np.unique(out.column(cluster_column).to_numpy(), return_counts=True)
    return {int(v): int(c) for v, c in zip(values, counts)}


def label_parquet(
    tree: ThresholdTree | str | os.PathLike,
    source: str | os.PathLike,
    out: str | os.PathLike,
    *,
    cluster_column: str = "cluster",
    leaf_column: str = "leaf",
    base: str | os.PathLike | None = None,
) -> LabelResult:
    """Label every Parquet file of ``source`` with ``tree`` and write them under ``out`` (atomically).

    ``tree`` is a ThresholdTree or the path of a ``tree.json``. Runs on the current Dask client
    when one is active (one task per file), else file by file in this process.
    """
    import dask

    start = time.perf_counter()
    target = validate_output_dir(out, base)  # fail before any work
    if not isinstance(tree, ThresholdTree):
        tree = ThresholdTree.from_json(Path(tree))
    files = parquet_files(source)
    root = Path(source) if Path(source).is_dir() else None
    if root is not None:
        src = root.resolve()
        if target == src or src in target.parents or target in src.parents:
            # The next run would read its own output (or replace its input): refuse before any work.
            raise InputError(f"output folder {out} overlaps the input folder {source}; write the labels elsewhere")
    tree_doc = tree.to_dict()
    with atomic_output_dir(target, base=base, info={"job": "label"}) as tmp:
        tasks = []
        for f in files:
            rel = f.relative_to(root) if root is not None else Path(f.name)
            tasks.append(dask.delayed(_label_file, pure=False)(tree_doc, str(f), str(tmp / rel), cluster_column, leaf_column))
        per_file = dask.compute(*tasks)
        counts: dict[int, int] = {}
        for part in per_file:
            for c, n in part.items():
                counts[c] = counts.get(c, 0) + n
        result = LabelResult(target, len(files), sum(counts.values()), counts)
        result.seconds = time.perf_counter() - start
        write_json(tmp / "_labels.json", {**result.to_dict(), "tree": tree.meta, "source": str(source)})
    result.seconds = time.perf_counter() - start
    return result
