"""What predict's input contract costs (issue 19): routing alone, the NaN/inf policy, the full check.

Times, on one in-memory matrix (numpy; best of ``--repeats``): the tree's raw routing kernel
(``ThresholdTree._route_block``), ``ThresholdTree.predict`` (routing under ``parts.label_rows``:
non-finite rows labelled -1), and ``IMM.predict`` (scikit-learn's ``validate_data`` checks, then
the same). Once on finite rows, once with 1% of the rows holding a NaN.

    .venv/bin/python bench/bench_predict.py [--rows 2000000] [--features 10] [--repeats 3]
"""
from __future__ import annotations

import argparse
import os
import time

import numpy as np


def best_of(repeats: int, call) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--features", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    from exclust.algorithms.histogram.imm import IMM

    rng = np.random.default_rng(0)
    centers = rng.normal(scale=5.0, size=(8, args.features))
    X = centers[rng.integers(0, 8, size=args.rows)] + rng.normal(size=(args.rows, args.features))
    model = IMM(8, random_state=0).fit(X[:100_000], centers)
    tree = model.tree_
    holes = X.copy()
    holes[rng.choice(args.rows, size=args.rows // 100, replace=False), 0] = np.nan
    print(f"{args.rows} x {args.features}, {tree.n_leaves} leaves; load average {os.getloadavg()[0]:.1f}")
    for name, data in (("finite rows", X), ("1% rows with NaN", holes)):
        raw = best_of(args.repeats, lambda data=data: tree._route_block(data, False))
        policy = best_of(args.repeats, lambda data=data: tree.predict(data))
        checked = best_of(args.repeats, lambda data=data: model.predict(data))
        print(f"{name}: routing {raw:.3f} s, tree.predict {policy:.3f} s ({policy / raw:.2f}x), "
              f"IMM.predict {checked:.3f} s ({checked / raw:.2f}x)")


if __name__ == "__main__":
    main()
