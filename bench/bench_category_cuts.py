"""Category set cuts in the histogram family (issue 28): price and ARI against one-hot columns
and the numbers alone, and the cost of the set-cut search against the numeric build.

The table: k clusters of a 4-D clustering space Z (Gaussian blobs); the explanation features are
two noisy numeric copies of Z's first coordinates (they separate only half the clusters) and a
``segment`` category of C values that follows the cluster (each cluster owns C / k segments, a
tenth of the rows take a random one), with 5% missing values in each feature. The same builder
(IMM, then ExKMC to ``--leaves``) explains the clustering from

- ``category``: the numeric features and ``segment`` as one category feature (set cuts);
- ``one-hot``: the numeric features and one 0/1 column per segment (threshold cuts only);
- ``numbers``: the numeric features alone.

The price is the tree's k-means cost in Z over the reference clustering's (the centers' own
cost); ARI is against the reference labels. Every tree is routed by its codes (the engine's own
routing: missing values go where each cut learned). ``--time`` times the build (encoding and
tree) on ``--rows`` rows in memory for the numeric features alone, with the category, and with
its one-hot columns.

    .venv/bin/python bench/bench_category_cuts.py --rows 200000
    .venv/bin/python bench/bench_category_cuts.py --rows 10000000 --time
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from exclust.algorithms.histogram.base import encode_for_trees  # noqa: E402
from exclust.algorithms.histogram.exkmc import expand_by_surrogate  # noqa: E402
from exclust.algorithms.histogram.imm import grow_imm  # noqa: E402
from exclust.sources.dataset import Dataset  # noqa: E402


def make_table(n: int, k: int, n_segments: int, rng):
    centers = rng.normal(size=(k, 4)) * 4.0
    cluster = rng.integers(0, k, n)
    Z = centers[cluster] + rng.normal(size=(n, 4))
    numeric = Z[:, :2] + rng.normal(size=(n, 2)) * 2.0
    own = rng.integers(0, n_segments // k, n) * k + cluster  # segment s belongs to cluster s % k
    segment = np.where(rng.random(n) < 0.1, rng.integers(0, n_segments, n), own).astype(float)
    numeric[rng.random((n, 2)) < 0.05] = np.nan
    segment[rng.random(n) < 0.05] = np.nan
    return numeric, segment, Z, centers


def one_hot(segment: np.ndarray, n_segments: int) -> np.ndarray:
    out = (segment[:, None] == np.arange(n_segments)[None, :]).astype(float)
    out[np.isnan(segment)] = np.nan
    return out


def build(X: np.ndarray, categories: dict, Z: np.ndarray, centers: np.ndarray, leaves: int):
    ds = Dataset(X, [f"f{j}" for j in range(X.shape[1])], categories=categories)
    data = encode_for_trees(ds, centers, 256, random_state=0, Z=Z)
    tree, _ = grow_imm(data)
    expand_by_surrogate(data, tree, leaves)
    leaf = tree.route(data.mapper.transform(X), data.mapper)
    data.release()
    return tree, np.asarray(tree.value)[leaf]


def compare(args) -> None:
    from sklearn.metrics import adjusted_rand_score

    rng = np.random.default_rng(0)
    numeric, segment, Z, centers = make_table(args.rows, args.k, args.segments, rng)
    reference = np.argmin(((Z[:, None, :] - centers[None]) ** 2).sum(2), axis=1)
    best = float(((Z - centers[reference]) ** 2).sum())
    variants = {
        "category": (np.column_stack([numeric, segment]), {2: list(range(args.segments))}),
        "one-hot": (np.column_stack([numeric, one_hot(segment, args.segments)]), {}),
        "numbers": (numeric, {}),
    }
    print(f"{args.rows} rows, k={args.k}, {args.segments} segments, IMM then ExKMC to {args.leaves} leaves")
    for name, (X, categories) in variants.items():
        t0 = time.perf_counter()
        tree, labels = build(X, categories, Z, centers, args.leaves)
        seconds = time.perf_counter() - t0
        price = float(((Z - centers[labels]) ** 2).sum()) / best
        set_cuts = sum(bool(c) for c in tree.left_codes)
        print(f"{name:9s} price {price:.4f}  ARI {adjusted_rand_score(reference, labels):.4f}  "
              f"leaves {len(tree.leaves())}  set cuts {set_cuts}  build {seconds:.1f} s")


def timing(args) -> None:
    for rows, shown in ((5000, False), (args.rows, True)):  # the first round compiles the kernels
        rng = np.random.default_rng(1)
        numeric, segment, Z, centers = make_table(rows, args.k, args.segments, rng)
        for name, X, categories in (("numbers", numeric, {}),
                                    ("with category", np.column_stack([numeric, segment]),
                                     {2: list(range(args.segments))}),
                                    ("one-hot", np.column_stack([numeric, one_hot(segment, args.segments)]), {})):
            t0 = time.perf_counter()
            build(X, categories, Z, centers, args.leaves)
            if shown:
                print(f"build ({name}): {time.perf_counter() - t0:.1f} s on {rows} rows")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--k", type=int, default=6)
    ap.add_argument("--segments", type=int, default=24)
    ap.add_argument("--leaves", type=int, default=10)
    ap.add_argument("--time", action="store_true", help="time the build with and without the category")
    args = ap.parse_args()
    timing(args) if args.time else compare(args)
    print("load average:", open("/proc/loadavg").read().split()[:3])


if __name__ == "__main__":
    main()
