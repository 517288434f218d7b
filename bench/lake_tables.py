"""Explain on a Delta table against the same files read as plain Parquet, in one run.

    python bench/lake_tables.py [--rows 10000000] [--days 8] [--workers 2]

Writes ``--rows`` rows of a 5-component Gaussian mixture (4 features) as a Delta table partitioned
by ``day`` (``deltalake.write_deltalake``, one file a day) in ``bench/data/`` (reused), then on
one LocalCluster:

1. plans the table from its log and the same files from their footers (a glob over the day
   folders), and plans the table again with every data file moved aside: the log alone plans it
   (no data file is opened, so no pass over the data);
2. runs the whole explain job (k-means reference, MMDT exact, no cost curve) on each, twice,
   alternating, and prints the seconds of each and their ratio.
"""
from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

DATA = Path(__file__).resolve().parent / "data"


def write_table(path: Path, rows: int, days: int) -> None:
    import deltalake
    import pyarrow as pa

    from exclust.datasets.synthetic import make_gmm_dataset

    if (path / "_delta_log").is_dir():
        return
    X, y = make_gmm_dataset(rows, n_components=5, n_features=4, random_state=0)[:2]
    day = np.arange(rows) * days // rows + 1
    table = pa.table({**{f"x{j}": X[:, j] for j in range(4)}, "truth": y, "day": day})
    deltalake.write_deltalake(str(path), table, partition_by=["day"])


def plan_seconds(spec) -> tuple[float, int]:
    from exclust.sources.base import open_source

    t0 = time.perf_counter()
    columns = open_source(spec).columns(["x0", "x1", "x2", "x3"], ["truth"])
    return time.perf_counter() - t0, int(columns.X.shape[0])


def explain_seconds(spec, out: Path, scheduler: str) -> tuple[float, dict]:
    from exclust.jobs.config import ExplainConfig
    from exclust.jobs.explain.steps import run_explain

    config = ExplainConfig(input=spec, features=["x0", "x1", "x2", "x3"], k=5, reference="kmeans",
                           threshold="exact", truth="truth", cost_curve=False).check()
    t0 = time.perf_counter()
    result = run_explain(config, out, scheduler=scheduler)
    return time.perf_counter() - t0, result.metrics


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--days", type=int, default=8)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    import os

    from distributed import Client, LocalCluster

    table = DATA / f"delta-{args.rows}"
    write_table(table, args.rows, args.days)
    plain = str(table / "day=*" / "*.parquet")  # the same files, as loose Parquet (hive key day from the path)
    print(f"{args.rows} rows, {len(list(table.glob('day=*/*.parquet')))} files; load average {os.getloadavg()[0]:.1f}")
    t_log, n_log = plan_seconds(str(table))
    t_footers, n_footers = plan_seconds(plain)
    print(f"plan: Delta log {t_log:.3f} s ({n_log} rows), Parquet footers {t_footers:.3f} s ({n_footers} rows)")
    aside = Path(tempfile.mkdtemp(prefix="exclust-aside-", dir=DATA))
    moved = []
    try:
        for f in table.glob("day=*/*.parquet"):
            target = aside / f.parent.name / f.name
            target.parent.mkdir(exist_ok=True)
            shutil.move(f, target)
            moved.append((target, f))
        t_alone, n_alone = plan_seconds(str(table))
        print(f"plan with every data file moved aside: {t_alone:.3f} s, {n_alone} rows (the log alone)")
    finally:
        for target, f in moved:
            shutil.move(target, f)
        shutil.rmtree(aside, ignore_errors=True)
    with LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address="127.0.0.1:0") as cluster, Client(cluster) as client:
        with tempfile.TemporaryDirectory(prefix="exclust-lake-bench-") as tmp:
            explain_seconds(plain, Path(tmp) / "warm", client.scheduler.address)  # worker imports, numba caches
            times = {"delta": [], "parquet": []}
            for i in range(2):
                for kind, spec in (("delta", str(table)), ("parquet", plain)):
                    seconds, metrics = explain_seconds(spec, Path(tmp) / f"{kind}-{i}", client.scheduler.address)
                    times[kind].append(seconds)
                    print(f"explain {kind:8s} run {i}: {seconds:7.2f} s  n={metrics['n']} "
                          f"ari_truth={metrics['ari_truth']:.3f}  load {os.getloadavg()[0]:.1f}")
    best = {k: min(v) for k, v in times.items()}
    print(f"best of 2: Delta {best['delta']:.2f} s, Parquet {best['parquet']:.2f} s, "
          f"ratio {best['delta'] / best['parquet']:.2f}")


if __name__ == "__main__":
    main()
