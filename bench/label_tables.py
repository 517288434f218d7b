"""One night labelled into a folder, a Delta table and an Iceberg table: seconds of each, in one run.

    python bench/label_tables.py [--rows 1000000] [--files 8] [--workers 2]

Writes one night of ``--rows`` rows (a 5-component Gaussian mixture, 4 features, ``--files``
Parquet files) and a tree explained on a sample of it (k-means reference, IMM) under a temporary
folder, then on one LocalCluster labels the night, after a warm-up run, twice per output kind,
alternating: a folder (``label_parquet``), a Delta table and an Iceberg table (SQLite catalog on
local disk), the second run of a table being a rerun that replaces the night. Prints the seconds of
each run and the load average beside it.
"""
from __future__ import annotations

import argparse
import os
import tempfile
import time
from datetime import date
from pathlib import Path

import numpy as np


def write_night(folder: Path, rows: int, files: int) -> np.ndarray:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from exclust.datasets.synthetic import make_gmm_dataset

    X = make_gmm_dataset(rows, n_components=5, n_features=4, random_state=0)[0]
    folder.mkdir(parents=True)
    for i, part in enumerate(np.array_split(np.arange(rows), files)):
        pq.write_table(pa.table({f"x{j}": X[part, j] for j in range(4)}), folder / f"part-{i}.parquet")
    return X


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()

    from distributed import Client, LocalCluster
    from pyiceberg.catalog.sql import SqlCatalog

    from exclust.jobs.config import ExplainConfig
    from exclust.jobs.explain.steps import run_explain
    from exclust.jobs.label.labeling import label_parquet
    from exclust.jobs.label.table_labeling import label_night_into_table

    day = date(2026, 11, 20)
    with tempfile.TemporaryDirectory(prefix="exclust-label-bench-") as tmp:
        root = Path(tmp)
        X = write_night(root / "night", args.rows, args.files)
        sample = X[np.random.default_rng(0).choice(len(X), min(len(X), 50_000), replace=False)]
        run_explain(ExplainConfig(input=sample, k=5, algorithm="imm", reference="kmeans", cost_curve=False).check(),
                    root / "explain")
        tree = root / "explain" / "tree.json"
        catalog = SqlCatalog("default", uri=f"sqlite:///{root}/catalog.db")
        catalog.create_namespace("bench", {"location": f"file://{root}/iceberg"})
        outputs = {
            "folder": lambda i: label_parquet(tree, root / "night", root / f"folder-{i}"),
            "delta": lambda i: label_night_into_table(tree, root / "night", root / "delta", day, table_format="delta"),
            "iceberg": lambda i: label_night_into_table(tree, root / "night", f"iceberg+sqlite:///{root}/catalog.db"
                                                        "#bench.labels", day, table_format="iceberg"),
        }
        print(f"{args.rows} rows in {args.files} files; load average {os.getloadavg()[0]:.1f}")
        with LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True, host="127.0.0.1",
                          dashboard_address="127.0.0.1:0") as cluster, Client(cluster):
            label_parquet(tree, root / "night", root / "warm")  # worker imports
            best = {}
            for i in range(2):
                for kind, run in outputs.items():
                    t0 = time.perf_counter()
                    result = run(i)
                    seconds = time.perf_counter() - t0
                    best[kind] = min(best.get(kind, seconds), seconds)
                    print(f"label into {kind:8s} run {i}{' (rerun)' if i and kind != 'folder' else ''}: "
                          f"{seconds:6.2f} s  rows={result.n_rows}  load {os.getloadavg()[0]:.1f}")
        print("best of 2: " + ", ".join(f"{k} {v:.2f} s" for k, v in best.items()))


if __name__ == "__main__":
    main()
