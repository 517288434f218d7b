"""ExKMC at 50,000,000 x 20 on a 2-worker LocalCluster whose memory cannot hold the raw data.

Data: the generator of bench_exkmc.py, streamed one Parquet file per million rows into
``bench/data/scale_50m/`` (git-ignored): ``C = default_rng(0).uniform(-10, 10, (k, d))`` as there,
and partition i draws its labels and noise from ``default_rng([0, i])`` so no partition needs
another; 50M x 20 float64 is 8 GB raw.

    python bench/scale_exkmc.py generate             # write the Parquet files (skips done ones)
    python bench/scale_exkmc.py run --via flow       # `exclust explain ... --algorithm exkmc`
    python bench/scale_exkmc.py run --via direct     # exclust.ExKMC on load_dataset(path)
    python bench/scale_exkmc.py run --files 5 ...    # the first 5M rows only

The cluster has 2 worker processes of 1 thread with ``--memory-limit`` each (default 3.5 GiB:
7.5 GB in all, below the 8 GB of raw floats). What ExKMC keeps on the workers is per row: the
uint8 codes (20 B), the uint8 label (1 B) and the float32 dot products with the 10 centers
(40 B), 3.05 GB in all; the raw floats are read from Parquet twice (sample, then encoding) and never
held. Printed: seconds, passes, and the peak resident memory of each worker (sampled every
0.5 s from the worker processes). ``--via direct`` takes its reference centers from
scikit-learn k-means on a 500,000-row uniform sample (one more pass), so that the time is
ExKMC's own; ``--via flow`` runs the whole product (reference k-means on Dask, ExKMC, scoring,
report).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "bench" / "data" / "scale_50m"
N, D, K, LEAVES, ROWS_PER_FILE = 50_000_000, 20, 10, 20, 1_000_000
FEATURES = [f"x{j}" for j in range(D)]


def generate(n: int = N, rows_per_file: int = ROWS_PER_FILE) -> None:
    """Write the Parquet files, one partition at a time (each its own seeded stream)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    DATA.mkdir(parents=True, exist_ok=True)
    C = np.random.default_rng(0).uniform(-10, 10, (K, D))
    n_files = -(-n // rows_per_file)
    t0 = time.perf_counter()
    for i in range(n_files):
        path = DATA / f"part-{i:04d}.parquet"
        if path.exists():
            continue
        rows = min(rows_per_file, n - i * rows_per_file)
        rng = np.random.default_rng([0, i])
        y = rng.integers(0, K, rows)
        X = C[y] + 2.0 * rng.normal(size=(rows, D))
        table = pa.table({**{name: X[:, j] for j, name in enumerate(FEATURES)}, "truth": y})
        tmp = path.with_name("." + path.name + ".tmp")
        pq.write_table(table, tmp, row_group_size=250_000)
        tmp.replace(path)  # never a half-written file under its final name
    size = sum(p.stat().st_size for p in DATA.glob("part-*.parquet"))
    print(f"{n_files} files, {size / 1e9:.1f} GB on disk, in {time.perf_counter() - t0:.0f} s")


class WorkerMemory:
    """Samples the resident memory of the worker processes in the background; keeps the peaks."""

    def __init__(self, client, every: float = 0.5) -> None:
        import psutil

        self.procs = {w: psutil.Process(pid) for w, pid in client.run(os.getpid).items()}
        self.peak = {w: 0 for w in self.procs}
        self.every = every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.is_set():
            for w, p in self.procs.items():
                try:
                    self.peak[w] = max(self.peak[w], p.memory_info().rss)
                except Exception:  # a worker restarted; its successor is not tracked
                    pass
            self._stop.wait(self.every)

    def stop(self) -> dict:
        self._stop.set()
        self._thread.join()
        return self.peak


def run(via: str, memory_limit: str, n_files: int | None = None) -> None:
    from distributed import Client, LocalCluster

    files = sorted(DATA.glob("part-*.parquet"))[:n_files]
    if not files:
        sys.exit("no data: run `python bench/scale_exkmc.py generate` first")
    cluster = LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, memory_limit=memory_limit,
        host="127.0.0.1", dashboard_address=":0",
    )
    client = Client(cluster)
    limit = next(iter(client.scheduler_info()["workers"].values()))["memory_limit"]
    raw = len(files) * ROWS_PER_FILE * D * 8
    print(f"cluster: 2 workers x 1 thread, memory limit {limit / 2**30:.1f} GiB each "
          f"({2 * limit / 1e9:.1f} GB in all; raw data {raw / 1e9:.1f} GB)")
    source = DATA
    if n_files is not None:  # a folder of links to the first files: the same data, fewer rows
        source = DATA.parent / f"scale_first_{n_files}"
        source.mkdir(exist_ok=True)
        for f in files:
            if not (source / f.name).exists():
                (source / f.name).symlink_to(f)
    source = str(source)
    mem = WorkerMemory(client)
    t0 = time.perf_counter()
    if via == "flow":
        out = ROOT / "bench" / "out" / "scale_exkmc"
        cmd = [
            sys.executable, "-m", "exclust.cli", "explain", "--input", source,
            "--features", ",".join(FEATURES), "--algorithm", "exkmc", "--k", str(K),
            "--leaves", str(LEAVES), "--reference", "kmeans", "--truth", "truth",
            "--scheduler", cluster.scheduler_address, "--out", str(out),
        ]
        print(" ".join(cmd[2:]))
        subprocess.run(cmd, check=True)
        seconds = time.perf_counter() - t0
        metrics = json.loads((out / "metrics.json").read_text())
        passes = metrics.get("n_passes") or metrics.get("passes")
        extra = {k: metrics.get(k) for k in ("price_kmeans", "surrogate_price", "n_leaves", "ari_truth")}
    else:
        from sklearn.cluster import KMeans

        from exclust.algorithms.histogram.exkmc import ExKMC
        from exclust.scoring.curves import kmeans_costs, reference_cost
        from exclust.sources.dataset import load_dataset

        ds = load_dataset(source, features=FEATURES)
        from exclust.dataplane.parts import uniform_sample

        (sample,) = uniform_sample(ds.X, size=500_000, random_state=0)
        centers = KMeans(K, n_init=1, random_state=0).fit(sample).cluster_centers_
        t_ref = time.perf_counter() - t0
        t1 = time.perf_counter()
        model = ExKMC(K, LEAVES, random_state=0).fit(ds.X, centers)
        t_fit = time.perf_counter() - t1
        seconds = time.perf_counter() - t0
        passes = model.n_passes_
        t2 = time.perf_counter()
        ratio = float(kmeans_costs(ds.X, [model.tree_], K)[0]) / reference_cost(ds.X, centers)
        extra = {
            "reference_sample_seconds": round(t_ref, 1),
            "exkmc_fit_seconds": round(t_fit, 1),
            "n_leaves": model.tree_.n_leaves,
            "cost_ratio": round(ratio, 4),
            "scoring_seconds (2 more passes)": round(time.perf_counter() - t2, 1),
        }
    peaks = mem.stop()
    print(f"via {via}: {seconds:.0f} s, passes {passes}, {extra}")
    for w, p in peaks.items():
        print(f"  peak RSS of worker {w}: {p / 2**30:.2f} GiB ({p / limit:.0%} of its limit)")
    client.close()
    cluster.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("generate")
    g.add_argument("--rows", type=int, default=N)
    r = sub.add_parser("run")
    r.add_argument("--via", choices=("flow", "direct"), default="flow")
    r.add_argument("--memory-limit", default="3.5GiB")
    r.add_argument("--files", type=int, help="use only the first FILES files (1M rows each)")
    args = ap.parse_args()
    if args.cmd == "generate":
        generate(args.rows)
    else:
        run(args.via, args.memory_limit, args.files)


if __name__ == "__main__":
    main()
