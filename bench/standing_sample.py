"""The standing table priced on a sample at 10M (issue 29 item 4): what it saves, and how far its prices are from
the prices on all rows.

    PYTHONPATH=. .venv/bin/python bench/standing_sample.py [--rows 10000000] [--repeat 2]

On bench_passes' data and cluster shape (10M x 20 in 10 files, k = 10, 2 workers x 1 thread x 3.5 GiB), runs
``explain --algorithm exkmc --k 10 --leaves 20 --reference kmeans`` in this process (the Python API) with the
table priced as it ships (``standing.PRICED_ROWS``: the trees the scores' pass does not route anyway on a sample
of about that many rows) and with every tree on all rows (``PRICED_ROWS`` set past the rows), alternating
``--repeat`` times on one cluster, a bare pass before and after. Prints the score step's seconds of each, and
per tree of the table its price on all rows, its price on the sample and their relative difference. The load
average is printed with them.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()

    from bench_passes import bare_pass, dataset
    from distributed import LocalCluster

    from exclust.jobs.config import ExplainConfig
    from exclust.jobs.explain import standing
    from exclust.jobs.explain.steps import run_explain

    folder = dataset(args.rows, 20, 10, 10)
    shipped = standing.PRICED_ROWS
    print(f"uptime: {os.popen('uptime').read().strip()}", flush=True)
    tables: dict[str, list[dict]] = {"sample": [], "all rows": []}
    with LocalCluster(n_workers=2, threads_per_worker=1, memory_limit="3.5GiB", processes=True, host="127.0.0.1",
                      dashboard_address="127.0.0.1:0", silence_logs=logging.ERROR) as cluster:
        files, features = sorted(str(p) for p in folder.glob("*.parquet")), [f"x{j}" for j in range(20)]
        print(f"bare pass: {bare_pass(files, features):.2f} s", flush=True)
        for mode in ["sample", "all rows"] * args.repeat:
            standing.PRICED_ROWS = shipped if mode == "sample" else 10 * args.rows
            config = ExplainConfig(input=str(folder), algorithm="exkmc", k=10, leaves=20, reference="kmeans",
                                   truth="truth")
            with tempfile.TemporaryDirectory(dir=ROOT / "bench" / "data") as tmp:
                t0 = time.perf_counter()
                run_explain(config, Path(tmp) / "out", scheduler=cluster.scheduler_address)
                total = time.perf_counter() - t0
                metrics = json.loads((Path(tmp) / "out" / "metrics.json").read_text())
            tables[mode].append(metrics["standing"])
            print(f"{mode:<9} job {total:5.1f} s, score step {metrics['seconds']['score']:.2f} s", flush=True)
        print(f"bare pass: {bare_pass(files, features):.2f} s", flush=True)
    standing.PRICED_ROWS = shipped
    exact = {r["algorithm"]: r for r in tables["all rows"][-1]["rows"]}
    print(f"\n{'tree':<10}{'all rows':>12}{'sample':>12}{'difference':>12}")
    for r in tables["sample"][-1]["rows"]:
        full = exact[r["algorithm"]]["price"]
        mark = "≈" if r["sampled"] else " "
        print(f"{r['algorithm']:<10}{full:>12.5f}{mark}{r['price']:>11.5f}{(r['price'] - full) / full:>+12.2e}")
    print(f"priced on the sample: {tables['sample'][-1]['fitted_on']}")
    print(f"uptime: {os.popen('uptime').read().strip()}")


if __name__ == "__main__":
    main()
