"""How long the exact optimum (``optimal_tree``) takes, by rows n, features d and leaves k.

    .venv/bin/python bench/bench_optimal_tree.py

The figures behind ``optimal_tree.FAST_SIZES``, the largest n * d per k that the report's
standing table searches exactly (a few seconds at most). Data: three Gaussian blobs 4 apart
(seed 0), the sizes below; one run each, seconds printed with the load average.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

SIZES = [(400, 40, 2), (150, 2, 3), (300, 1, 3), (200, 2, 3), (60, 2, 4), (120, 1, 4), (80, 2, 4), (40, 2, 5),
         (30, 2, 6)]


def main() -> None:
    from exclust.algorithms.search.optimal_tree import optimal_tree, small_enough

    rng = np.random.default_rng(0)
    for n, d, k in SIZES:
        X = rng.normal(size=(n, d)) + rng.integers(0, 3, size=(n, 1)) * 4
        t0 = time.perf_counter()
        optimal_tree(X, k)
        print(f"n={n:4d} d={d:3d} k={k}: {time.perf_counter() - t0:6.2f} s   small_enough: {small_enough(n, d, k)}",
              flush=True)
    with open("/proc/loadavg") as f:
        print("load average", " ".join(f.read().split()[:3]))


if __name__ == "__main__":
    main()
