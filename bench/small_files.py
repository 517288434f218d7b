"""Many small Parquet files against few large ones: the same 20,000 rows, read as explain reads them.

    python bench/small_files.py [--files 2000] [--rows 20000] [--workers 2]

Writes the rows twice (``--files`` files, and 2 files), then on one LocalCluster times, for each
layout: ``load_dataset`` (listing, every footer, schema checks, the validation pass) plus one
more pass over the data (a column sum, as each step of explain makes). Prints both times, their
difference and ratio. Issue 8 measured 272 s for explain on 2,000 files of 10 rows against 9 s
on 2 files, when each file was its own Dask task.
"""
from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np


def write_layout(folder: Path, X: np.ndarray, n_files: int) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder.mkdir(parents=True)
    for i, part in enumerate(np.array_split(X, n_files)):
        table = pa.table({f"x{j}": part[:, j] for j in range(X.shape[1])})
        pq.write_table(table, folder / f"part-{i:05d}.parquet")


def load_and_pass(folder: Path) -> tuple[float, int]:
    from exclust.sources.dataset import load_dataset

    t0 = time.perf_counter()
    data = load_dataset(str(folder))
    data.X.sum(axis=0).compute()
    return time.perf_counter() - t0, data.X.numblocks[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    from distributed import Client, LocalCluster

    X = np.random.default_rng(0).normal(size=(args.rows, 4))
    with tempfile.TemporaryDirectory(prefix="exclust-small-files-") as tmp:
        many, few = Path(tmp) / "many", Path(tmp) / "few"
        write_layout(many, X, args.files)
        write_layout(few, X, 2)
        with LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True, host="127.0.0.1",
                          dashboard_address="127.0.0.1:0") as cluster, Client(cluster):
            load_and_pass(few)  # warm the workers (imports) so that neither layout pays for them
            t_few, chunks_few = load_and_pass(few)
            t_many, chunks_many = load_and_pass(many)
    print(f"2 files of {args.rows // 2} rows:        {t_few:6.2f} s ({chunks_few} task(s) per pass)")
    print(f"{args.files} files of {args.rows // args.files} rows:  {t_many:6.2f} s ({chunks_many} task(s) per pass)")
    print(f"difference {t_many - t_few:+.2f} s, ratio {t_many / t_few:.1f}x")


if __name__ == "__main__":
    main()
