"""The nearest-center search at many clusters: every center's distance at once against one center
after the other (``exclust/dataplane/_row_distances.py``).

Every kernel that searches the centers (k-means' Lloyd pass, its prediction, the scoring pass's
reference labels, the trial costs) sums each center's squared distance over the features in
order. Summed one center after the other, each center is a chain of d dependent adds; summed
for all centers at once, feature by feature, the k sums are independent and the compiler
vectorizes them. Each center's sum is the same adds in the same order either way, so the labels
and distances are the same to the bit: this script checks that, then times both.

The baseline, one center after the other, is the library's search as it was before (kept here,
not in the library), timed in ``nearest_center`` (every row's label and distance; the Lloyd pass,
prediction and scoring inline the same search). Times: best of ``--repeat`` runs of each on the
same ``--rows`` x ``--dims`` rows (normal noise around k random centers), one thread (``NUMBA_NUM_THREADS=1``, as
a Dask worker of one thread runs it).

    NUMBA_NUM_THREADS=1 .venv/bin/python bench/bench_nearest_center.py --rows 1000000 --ks 10 40 160
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numba
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


@numba.njit(nogil=True, inline="always")
def _one_center_after_another(X, i, centers):
    best = np.inf
    arg = 0
    for k in range(centers.shape[0]):
        s = 0.0
        for j in range(centers.shape[1]):
            t = X[i, j] - centers[k, j]
            s += t * t
        if s < best:
            best = s
            arg = k
    return arg, best


@numba.njit(nogil=True)
def nearest_center_before(X, centers):
    """``exclust.dataplane._center_distances.nearest_center`` with the search of before."""
    n = X.shape[0]
    labels = np.empty(n, dtype=np.int64)
    dist = np.empty(n)
    for i in range(n):
        labels[i], dist[i] = _one_center_after_another(X, i, centers)
    return labels, dist


def best_of(repeat: int, func, *args) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        func(*args)
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    from exclust.dataplane._center_distances import nearest_center

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--dims", type=int, default=20)
    ap.add_argument("--ks", type=int, nargs="+", default=[10, 40, 160])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    print(f"load average {os.getloadavg()}, numba threads {numba.get_num_threads()}", flush=True)
    rng = np.random.default_rng(0)
    print(f"{'k':>5}{'before s':>10}{'now s':>9}{'speed-up':>10}  same bits")
    for k in args.ks:
        truth = rng.normal(size=(k, args.dims)) * 5
        X = truth[rng.integers(0, k, args.rows)] + rng.normal(size=(args.rows, args.dims))
        centers = X[rng.choice(args.rows, k, replace=False)].copy()
        before = nearest_center_before(X, centers)  # compiles, and the result to compare
        now = nearest_center(X, centers)
        same = np.array_equal(before[0], now[0]) and np.array_equal(before[1], now[1])
        t_before = best_of(args.repeat, nearest_center_before, X, centers)
        t_now = best_of(args.repeat, nearest_center, X, centers)
        print(f"{k:>5}{t_before:>10.3f}{t_now:>9.3f}{t_before / t_now:>9.2f}x  {same}", flush=True)
    print(f"load average {os.getloadavg()}")


if __name__ == "__main__":
    main()
