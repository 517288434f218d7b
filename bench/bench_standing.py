"""What the report's standing table adds to an explain run (issue 21, item 5).

    .venv/bin/python bench/bench_standing.py [--rows 300000] [--repeats 2] [--algorithm exkmc]

The demo's data (``exclust demo``: a mixture of k = 5 in d = 2, 300,000 rows, Parquet files of
50,000 rows) written once into bench/data/ (git-ignored), explained on one LocalCluster of 2
worker processes with ``--reference kmeans`` (the table needs centers and the run's sample),
alternately with the table on and off. Prints, per setting, the median seconds of the score
step (where the table's trees are fitted on the sample and scored in scoring's pass) and of the
whole run, and the passes per step (equal: the table costs no pass).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=300_000)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--algorithm", default="exkmc")
    args = ap.parse_args()

    from exclust.dataplane.cluster import dask_cluster
    from exclust.datasets.synthetic import write_gmm_parquet
    from exclust.jobs.config import ExplainConfig
    from exclust.jobs.explain.steps import explain

    data = ROOT / "bench" / "data" / f"standing_{args.rows}"
    if not data.exists():
        write_gmm_parquet(data, args.rows, 5, 2, rows_per_file=max(10_000, args.rows // 6), random_state=0)
    seconds: dict[bool, list[tuple[float, float]]] = {True: [], False: []}
    passes = {}
    with dask_cluster(None):
        for repeat in range(args.repeats + 1):  # the first round warms the workers up: not counted
            for standing in (True, False):
                config = ExplainConfig(input=str(data), features=["x0", "x1"], k=5, algorithm=args.algorithm,
                                       reference="kmeans", leaves=10, standing=standing)
                t0 = time.perf_counter()
                metrics = explain(config).metrics
                total = time.perf_counter() - t0
                if repeat:
                    seconds[standing].append((metrics["seconds"]["score"], total))
                passes[standing] = metrics["passes"]
                if standing and repeat == 1:
                    rows = ", ".join(f"{r['title']} {r['price']:.3f}" for r in metrics["standing"]["rows"])
                    print(f"standing: {rows}")
    with open("/proc/loadavg") as f:
        load = f.read().split()[:3]
    for standing in (True, False):
        score = statistics.median(s for s, _ in seconds[standing])
        total = statistics.median(t for _, t in seconds[standing])
        print(f"standing {'on ' if standing else 'off'}: score step {score:.2f} s, whole run {total:.2f} s, "
              f"passes {passes[standing]}")
    print(f"load average {' '.join(load)}")


if __name__ == "__main__":
    main()
