"""Kernel MMDT at scale: 5,000,000 noisy two-moons points from Parquet on a 2-process LocalCluster.

Writes ``bench/data/kernel_moons/part-NN.parquet`` (git-ignored; 500,000 rows per file, columns
x0, x1, truth) once, then fits ``KernelMMDT`` on the first file (n = 500,000) and on all ten files
(n = 5,000,000): kernel k-means base by k-means on random Fourier features, one sampling pass,
the tree on the driver, one kernel-price pass. It prints seconds per step and passes, and times
the tree build alone (from the per-cluster samples) to show it does not grow with n.

Run: ``.venv/bin/python bench/scale_kernel.py`` (``--files 2`` for a quick try).
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

DATA = Path(__file__).resolve().parent / "data" / "kernel_moons"
ROWS_PER_FILE = 500_000


def write_data(n_files: int) -> list[Path]:
    """Noisy two moons, 500,000 rows a file; files already there are kept."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from sklearn.datasets import make_moons

    DATA.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(n_files):
        path = DATA / f"part-{i:02d}.parquet"
        if not path.exists():
            X, y = make_moons(ROWS_PER_FILE, noise=0.1, random_state=1000 + i)
            tmp = path.with_name(f".{path.name}.tmp")
            pq.write_table(pa.table({"x0": X[:, 0], "x1": X[:, 1], "truth": y.astype(np.int64)}), tmp)
            tmp.replace(path)
        paths.append(path)
    return paths


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--files", type=int, default=10, help="Parquet files of 500,000 rows for the large run")
    p.add_argument("--bandwidth", type=float, default=0.5)
    p.add_argument("--n-components", type=int, default=32, help="random Fourier features (D)")
    p.add_argument("--samples", type=int, default=256, help="samples per cluster")
    a = p.parse_args()

    from distributed import Client, LocalCluster

    from exclust.algorithms.mmdt.kernel_mmdt import KernelMMDT, build_kernel_tree
    from exclust.sources.dataset import load_dataset

    t0 = time.perf_counter()
    paths = write_data(a.files)
    print(f"data: {len(paths)} file(s) in {DATA} ({time.perf_counter() - t0:.1f}s to write the missing ones)")
    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, memory_limit="5GiB",
                           dashboard_address=None)
    client = Client(cluster)
    print("LocalCluster: 2 worker processes x 1 thread; machine shared with other jobs (compare within this run)")
    runs = [(paths[0], ROWS_PER_FILE)] + ([(DATA, ROWS_PER_FILE * a.files)] if a.files > 1 else [])
    try:
        header = (f"{'n':>10} {'total s':>8} {'base s':>7} {'sample s':>8} {'tree s':>7} {'price s':>7} "
                  f"{'passes':>6} {'price':>7} {'agree':>6} {'build ms':>9}")
        lines = []
        for source, n in runs:
            t = time.perf_counter()
            ds = load_dataset(str(source), features=["x0", "x1"])
            load_s = time.perf_counter() - t
            model = KernelMMDT(2, kernel="gaussian", bandwidth=a.bandwidth, samples_per_cluster=a.samples,
                               n_components=a.n_components, kmeans_n_init=1, random_state=0)
            t = time.perf_counter()
            model.fit(ds)
            total = time.perf_counter() - t
            # agreement of tree and base, one more pass (not part of the fit)
            agree = float((model.predict(ds.X) == model.labels_).mean().compute())
            # the tree build alone, from the per-cluster samples: independent of n
            weights = model.cluster_sizes_ / model.cluster_sizes_.sum()
            reps = 20
            t = time.perf_counter()
            for _ in range(reps):
                build_kernel_tree(model.samples_, model.samples_taken_, weights, "gaussian", a.bandwidth,
                                  random_state=0)
            build_ms = (time.perf_counter() - t) / reps * 1e3
            tm = model.timings_
            lines.append(
                f"{n:>10,} {total:8.1f} {tm['base']:7.1f} {tm['sample']:8.1f} {tm['tree']:7.3f} {tm['price']:7.1f} "
                f"{model.n_passes_:>6} {model.kernel_price_:7.4f} {agree:6.3f} {build_ms:9.1f}"
            )
            print(f"n={n:,}: load+validate {load_s:.1f}s (one pass, in load_dataset); fit {total:.1f}s; "
                  f"k-means passes {model.base_.n_passes_}; rules: {model.tree_.rules()}", flush=True)
        print()
        print(header)
        print("\n".join(lines))
        print("passes = k-means on the features (k-means|| seeding + Lloyd) + 1 sampling + 1 price;"
              " 'tree s' = similarity moments + tree + Theorem 12 on the driver; 'build ms' = the tree build alone")
    finally:
        client.close()
        cluster.close()


if __name__ == "__main__":
    main()
