"""The greedy center trees at many clusters: seconds and price on all rows, per k.

Data: ``--rows`` x ``--dims`` rows around k random centers (normal noise, seeded), reference
centers from scikit-learn's KMeans (one initialisation, seeded). Every builder (IMM, ExKMC at k
leaves, ExGreedy, ExShallow, KDTree) grows a k-leaf tree in memory, each in a child process
after a warm fit on a slice (numba compiled, imports done), so its seconds are the fit alone.
The price is the tree's clusters scored by their own means over the reference cost, on all
rows. A builder not done in ``--timeout`` seconds is reported as such. Each cell: wall
seconds, the child's CPU seconds (steadier than wall time on a shared machine; with
``NUMBA_NUM_THREADS=1`` they are the work itself), the price.

    .venv/bin/python bench/greedy_many_clusters.py --rows 200000 --ks 10 40 160 640

The machine may be shared: the load average is printed with every line.
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import time
from pathlib import Path

import numpy as np

BUILDERS = ("IMM", "ExKMC", "ExGreedy", "ExShallow", "KDTree")
DATA = Path(__file__).resolve().parent / "data"


def make_data(rows: int, dims: int, k: int, seed: int = 0) -> tuple[Path, Path]:
    """The rows and scikit-learn KMeans centers for k, saved once under bench/data/."""
    DATA.mkdir(exist_ok=True)
    x_path = DATA / f"greedy_many_{rows}x{dims}_k{k}_X.npy"
    c_path = DATA / f"greedy_many_{rows}x{dims}_k{k}_centers.npy"
    if not (x_path.exists() and c_path.exists()):
        from sklearn.cluster import KMeans

        rng = np.random.default_rng(seed)
        truth = rng.normal(size=(k, dims)) * 4.0
        X = truth[rng.integers(0, k, rows)] + rng.normal(size=(rows, dims))
        centers = KMeans(k, n_init=1, random_state=seed).fit(X).cluster_centers_
        np.save(x_path, X)
        np.save(c_path, centers)
    return x_path, c_path


def price(X: np.ndarray, labels: np.ndarray, centers: np.ndarray) -> float:
    """Sum of squared distances of the tree's clusters to their own means, over the reference cost."""
    sq = np.einsum("ij,ij->i", X, X)
    reference = (sq[:, None] - 2.0 * X @ centers.T + np.einsum("ij,ij->i", centers, centers)).min(axis=1).sum()
    _, group = np.unique(labels, return_inverse=True)
    n = np.bincount(group).astype(float)
    sums = np.stack([np.bincount(group, weights=X[:, j]) for j in range(X.shape[1])], axis=1)
    tree_cost = sq.sum() - (np.einsum("ij,ij->i", sums, sums) / n).sum()
    return float(tree_cost / reference)


def _estimator(name: str, k: int):
    from exclust.algorithms.histogram.exgreedy import ExGreedy
    from exclust.algorithms.histogram.exkmc import ExKMC
    from exclust.algorithms.histogram.exshallow import ExShallow
    from exclust.algorithms.histogram.imm import IMM
    from exclust.algorithms.histogram.kdtree import KDTree

    return {"IMM": lambda: IMM(k, random_state=0), "ExKMC": lambda: ExKMC(k, k, random_state=0),
            "ExGreedy": lambda: ExGreedy(k, random_state=0), "ExShallow": lambda: ExShallow(k, random_state=0),
            "KDTree": lambda: KDTree(k, random_state=0)}[name]()


def _child(name: str, x_path: str, c_path: str, out) -> None:
    X = np.load(x_path)
    centers = np.load(c_path)
    k = centers.shape[0]
    _estimator(name, k).fit(X[: max(2000, 20 * k)], centers)  # warm: compile and import outside the timing
    t, cpu = time.perf_counter(), time.process_time()
    est = _estimator(name, k).fit(X, centers)
    seconds, cpu = time.perf_counter() - t, time.process_time() - cpu
    out.send((seconds, cpu, price(X, est.predict(X), centers)))


def run_one(name: str, x_path: Path, c_path: Path, timeout: float) -> str:
    ctx = mp.get_context("spawn")
    here, there = ctx.Pipe(duplex=False)
    child = ctx.Process(target=_child, args=(name, str(x_path), str(c_path), there))
    child.start()
    if here.poll(timeout):
        seconds, cpu, p = here.recv()
        child.join()
        return f"{seconds:.1f} s ({cpu:.1f} cpu s), {p:.4f}"
    child.kill()
    child.join()
    return f"not done in {timeout:.0f} s"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--dims", type=int, default=20)
    parser.add_argument("--ks", type=int, nargs="+", default=[10, 40, 160, 640])
    parser.add_argument("--builders", nargs="+", default=list(BUILDERS), choices=BUILDERS)
    parser.add_argument("--timeout", type=float, default=600.0)
    args = parser.parse_args()
    print(f"| k | {' | '.join(args.builders)} | load average |")
    print(f"| --- | {' | '.join('---' for _ in args.builders)} | --- |")
    for k in args.ks:
        x_path, c_path = make_data(args.rows, args.dims, k)
        cells = [run_one(name, x_path, c_path, args.timeout) for name in args.builders]
        load = " ".join(f"{v:.1f}" for v in os.getloadavg())
        print(f"| {k} | {' | '.join(cells)} | {load} |", flush=True)


if __name__ == "__main__":
    main()
