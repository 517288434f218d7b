"""Issue 27: the greedy rules, TreeSearch and BestTree at the sizes users run, on a LocalCluster.

    .venv/bin/python bench/search_at_scale.py                       # 1M x 20, k = 10, 40, 160
    .venv/bin/python bench/search_at_scale.py --rows 10000000 --ks 10 --timeout 1800

Data: ``rows`` x 20 (paper 000 Appendix G mixture with k components, ``write_gmm_parquet``),
written once per (rows, k) into bench/data/ (git-ignored) as 10 Parquet files. Reference:
scikit-learn KMeans centers (one initialisation) fitted on a 100,000-row uniform sample, not
timed. The cluster is bench_passes.py's: one LocalCluster of 2 worker processes x 1 thread x
3.5 GiB. Each builder runs in a child process that connects to it, loads the Parquet files
(held on the workers) and fits from the centers; seconds are the fit's alone (loading and
imports excluded; each child first fits untimed on the first 20,000 rows, so that numba's
kernels are compiled, or loaded from its cache, before the clock starts; ``--no-warm`` times
the first fit as it comes). A fit that passes ``--timeout`` seconds is reported as not done.
The price of every tree is computed on all rows in one pass of this process: the k-means cost of
the tree's clusters at their own means over the reference clusters' (each row with its nearest
center), as a run's headline price; beyond ``HOLD_MAX_ROWS`` rows that pass reads the files.

Printed: one Markdown table (seconds, price per cell) with the load average before and after.
The machine may be shared: quote the load average with the figures.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
# Rows of the untimed first fit of each child (the first of the cluster's parts at 1M rows):
# numba compiles a kernel per argument types (on the workers: float32 distances) on its first call,
# minutes for ExShallow's under load when the cache is cold (any change to the kernels' source).
WARM_ROWS = 20_000
# Up to this many rows this process holds the rows on the workers for its pricing passes, beside
# the child's copy; beyond, it prices from the files (at 10M two copies of 1.6 GB would fill the
# workers' 2 x 3.5 GiB).
HOLD_MAX_ROWS = 2_000_000
sys.path.insert(0, str(ROOT))

BUILDERS = {
    "IMM": "exclust.algorithms.histogram.imm:IMM",
    "ExGreedy": "exclust.algorithms.histogram.exgreedy:ExGreedy",
    "ExShallow": "exclust.algorithms.histogram.exshallow:ExShallow",
    "TreeSearch": "exclust.algorithms.search.tree_search:TreeSearch",
    "BestTree": "exclust.algorithms.search.tree_search:BestTree",
    "CART": "exclust.algorithms.cart:CART",
}


def dataset(rows: int, k: int, files: int = 10) -> Path:
    from exclust.datasets.synthetic import write_gmm_parquet

    folder = ROOT / "bench" / "data" / f"search-{rows}x20-k{k}"
    if not folder.exists():
        write_gmm_parquet(folder, rows, n_components=k, n_features=20, rows_per_file=-(-rows // files),
                          random_state=0)
    return folder


def child(args) -> None:
    """Fit one builder on the cluster; print its seconds and tree as JSON on the last line."""
    import importlib
    from contextlib import nullcontext

    from distributed import Client

    from exclust.dataplane.residency import hold
    from exclust.sources.dataset import load_dataset

    with Client(args.address) if args.address else nullcontext():
        data = load_dataset(args.folder, [f"x{j}" for j in range(20)])
        if args.address:
            (data.X,), _ = hold(data.X, force=True)
        else:  # --in-memory: the rows as one numpy array in this process
            from exclust.sources.dataset import Dataset

            data = Dataset(np.asarray(data.X.compute() if hasattr(data.X, "compute") else data.X), data.feature_names)
        centers = np.load(args.centers)
        if args.held_share is not None:  # the share of memory the per-center values may hold
            import exclust.algorithms.histogram.engine as engine

            engine.HELD_VALUES_SHARE = args.held_share
        module, _, name = BUILDERS[args.builder].partition(":")
        cls = getattr(importlib.import_module(module), name)
        if args.warm:  # compile the kernels for these argument types first (a worker without a cache takes minutes)
            from exclust.sources.dataset import Dataset

            _fit(args.builder, cls, Dataset(data.X[:WARM_ROWS], data.feature_names), centers)
        t0 = time.perf_counter()
        est = _fit(args.builder, cls, data, centers)
        seconds = time.perf_counter() - t0
    print(json.dumps({"seconds": seconds, "tree": est.tree_.to_dict()}))


def _fit(builder: str, cls, data, centers: np.ndarray):
    k = centers.shape[0]
    if builder == "CART":
        from exclust.dataplane.parts import label_rows

        return cls(max_leaf_nodes=k, random_state=0).fit(data, label_rows(nearest, data.X, centers))
    return cls(k, random_state=0).fit(data, centers)


def nearest(block, centers, rows_at_once: int = 50_000) -> np.ndarray:
    """Each row's nearest center, through |x|^2 - 2 x.c + |c|^2, ``rows_at_once`` rows at a time:
    (rows, k) floats for a whole part of 1M rows at k = 160 (two of 1.3 GB) killed 3.5 GiB workers,
    as the (rows, k, d) of the differences did at k = 40."""
    block = np.asarray(block, dtype=np.float64)
    norms = (centers ** 2).sum(axis=1)[None]
    out = np.empty(block.shape[0], dtype=np.int64)
    for low in range(0, block.shape[0], rows_at_once):
        out[low:low + rows_at_once] = (norms - 2.0 * block[low:low + rows_at_once] @ centers.T).argmin(axis=1)
    return out


def _moments(block, tree, centers, shift) -> np.ndarray:
    """(2, k, d + 2): count, sums and summed squared norms (rows moved by ``shift``, which keeps
    the costs' digits) of the tree's clusters and of the nearest-center clusters."""
    block = np.asarray(block, dtype=np.float64)
    moved = block - shift
    k, d = centers.shape
    out = np.zeros((2, k, d + 2))
    for which, labels in enumerate((np.asarray(tree.predict(block)), nearest(block, centers))):
        np.add.at(out[which, :, 0], labels, 1.0)
        np.add.at(out[which, :, 1:-1], labels, moved)
        np.add.at(out[which, :, -1], labels, (moved ** 2).sum(axis=1))
    return out


def price(X, tree, centers) -> float:
    """The tree's price on all rows (one pass): own-mean k-means cost of its clusters over the reference's."""
    from exclust.algorithms.search.row_statistics import own_cost
    from exclust.dataplane.parts import map_reduce

    m = map_reduce(_moments, X, args=(tree, centers, centers.mean(axis=0)))
    return float(own_cost(m[0]).sum() / own_cost(m[1]).sum())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--ks", default="10,40,160")
    ap.add_argument("--builders", default=",".join(BUILDERS))
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds a fit may take before it counts as not done")
    ap.add_argument("--memory", default="3.5GiB", help="memory limit of each of the 2 workers")
    ap.add_argument("--in-memory", action="store_true",
                    help="no cluster: each child fits on the rows as one numpy array in its own process")
    ap.add_argument("--no-warm", dest="warm", action="store_false",
                    help=f"time the first fit as it comes (by default each child first fits on {WARM_ROWS:,} rows, "
                         "untimed, so that compiling numba's kernels is not in the seconds)")
    ap.add_argument("--held-share", type=float,
                    help="the share of the workers' memory the engine's per-center values may take before they are "
                         "recomputed in every pass (default: the engine's HELD_VALUES_SHARE; 0: always recomputed)")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--address", help=argparse.SUPPRESS)
    ap.add_argument("--folder", help=argparse.SUPPRESS)
    ap.add_argument("--centers", help=argparse.SUPPRESS)
    ap.add_argument("--builder", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args)
        return

    import logging
    import tempfile

    from distributed import Client, LocalCluster
    from sklearn.cluster import KMeans

    from exclust.dataplane.parts import sample_ids
    from exclust.dataplane.residency import hold
    from exclust.sources.dataset import load_dataset
    from exclust.tree import ThresholdTree

    ks = [int(k) for k in args.ks.split(",")]
    builders = args.builders.split(",")
    print(f"load before: {open('/proc/loadavg').read().strip()}", flush=True)
    results: dict = {}
    from contextlib import nullcontext

    cluster = None if args.in_memory else LocalCluster(
        n_workers=2, threads_per_worker=1, memory_limit=args.memory, processes=True, host="127.0.0.1",
        dashboard_address="127.0.0.1:0", silence_logs=logging.ERROR)
    with cluster or nullcontext(), Client(cluster) if cluster is not None else nullcontext(), \
            tempfile.TemporaryDirectory() as tmp:
        for k in ks:
            folder = dataset(args.rows, k)
            data = load_dataset(str(folder), [f"x{j}" for j in range(20)])
            if args.in_memory:
                X = np.asarray(data.X.compute() if hasattr(data.X, "compute") else data.X)
            elif args.rows <= HOLD_MAX_ROWS:
                (X,), _ = hold(data.X, force=True)
            else:  # priced from the files: the children hold their own copy of the rows on the workers
                X = data.X
            sample = np.asarray(X[np.sort(sample_ids(args.rows, min(args.rows, 100_000), 0))])
            centers = KMeans(k, n_init=1, random_state=0).fit(sample).cluster_centers_
            path = Path(tmp) / f"centers-{k}.npy"
            np.save(path, centers)
            for name in builders:
                where = [] if cluster is None else ["--address", cluster.scheduler_address]
                cmd = [sys.executable, __file__, "--child", *where, "--folder", str(folder), "--centers", str(path),
                       "--builder", name, *([] if args.warm else ["--no-warm"]),
                       *([] if args.held_share is None else ["--held-share", str(args.held_share)])]
                try:
                    done = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout,
                                          env=dict(os.environ, PYTHONPATH=str(ROOT)))
                except subprocess.TimeoutExpired:
                    results[k, name] = f"not done in {args.timeout:.0f} s"
                    print(k, name, results[k, name], flush=True)
                    continue
                if done.returncode:
                    results[k, name] = "failed"
                    print(k, name, "failed:", done.stderr[-2000:], flush=True)
                    continue
                fitted = json.loads(done.stdout.strip().splitlines()[-1])
                tree = ThresholdTree.from_dict(fitted["tree"])
                results[k, name] = f"{fitted['seconds']:.1f} s, {price(X, tree, centers):.4f}"
                print(k, name, results[k, name], flush=True)
    print(f"load after: {open('/proc/loadavg').read().strip()}")
    where = "in memory, one process per fit" if args.in_memory else "on a LocalCluster (2 workers x 1 thread)"
    print(f"\n{args.rows:,} x 20 {where}; seconds of the fit, price on all rows\n")
    print("| k | " + " | ".join(builders) + " |")
    print("| --- | " + " | ".join("---" for _ in builders) + " |")
    for k in ks:
        print(f"| {k} | " + " | ".join(results.get((k, b), "") for b in builders) + " |")


if __name__ == "__main__":
    main()
