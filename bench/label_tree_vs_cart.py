"""Issue 21 item 4: LabelTree against CART on labels of non-convex clusterings.

    .venv/bin/python bench/label_tree_vs_cart.py [--sets aggregation,moons,rings]

Sets: aggregation (../shared/data, its given labels, k = 7), two moons and two rings made here
(scikit-learn's make_moons / make_circles, 2,000 rows, seed 0; k = 2) and three
concentric rings (radii 1, 2, 3, 1,000 rows each, radial noise 0.15, seed 0; k = 3). For each set, k and 2k
leaves: the mistakes of LabelTree (default parameters) and of CART (max_leaf_nodes = leaves,
majority labels), each counted after the best one-to-one match of the tree's clusters to the
labels (the error rate times the rows); beside them each fit's seconds.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
SHARED = ROOT.parent / "shared"


def load_set(name: str) -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import make_circles, make_moons

    if name == "moons":
        return make_moons(n_samples=2000, noise=0.1, random_state=0)
    if name == "rings":
        return make_circles(n_samples=2000, noise=0.08, factor=0.5, random_state=0)
    if name == "three-rings":  # radii 1, 2, 3, 1,000 rows each, radial noise 0.15
        rng = np.random.default_rng(0)
        y = np.repeat(np.arange(3), 1000)
        angle, radius = rng.uniform(0, 2 * np.pi, y.size), y + 1 + rng.normal(0, 0.15, y.size)
        return np.column_stack([radius * np.cos(angle), radius * np.sin(angle)]), y
    X = np.loadtxt(SHARED / "data" / f"{name}.data.gz", ndmin=2)
    y = np.loadtxt(SHARED / "data" / f"{name}.labels0.gz").astype(np.int64)
    return X, y - y.min()


def matched_mistakes(pred: np.ndarray, y: np.ndarray, k: int) -> int:
    """Rows whose cluster differs from their label after the best one-to-one match."""
    from scipy.optimize import linear_sum_assignment

    table = np.zeros((k, k), dtype=np.int64)
    np.add.at(table, (pred, y), 1)
    r, c = linear_sum_assignment(-table)
    return int(y.size - table[r, c].sum())


def main() -> None:
    from exclust.algorithms.cart import CART
    from exclust.algorithms.search.label_tree import LabelTree

    parser = argparse.ArgumentParser()
    parser.add_argument("--sets", default="aggregation,moons,rings,three-rings")
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f}")
    print("| set | n | k | leaves | LabelTree mistakes | CART mistakes | LabelTree s | CART s |")
    print("|---|---|---|---|---|---|---|---|")
    for name in args.sets.split(","):
        X, y = load_set(name)
        k = int(y.max()) + 1
        for leaves in (k, 2 * k):
            start = time.perf_counter()
            ours = LabelTree(k, n_leaves=leaves, random_state=0).fit(X, y)
            ours_s = time.perf_counter() - start
            start = time.perf_counter()
            cart = CART(max_leaf_nodes=leaves, random_state=0).fit(X, y)
            cart_s = time.perf_counter() - start
            print(f"| {name} | {y.size} | {k} | {leaves} | {matched_mistakes(ours.predict(X), y, k)} | "
                  f"{matched_mistakes(cart.predict(X), y, k)} | {ours_s:.2f} | {cart_s:.2f} |", flush=True)
    print(f"load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
