"""How close the Fisher-ordered set cut comes to the exact one for the k-means cost (issue 28).

Beyond ``category_cuts.EXACT_CATEGORIES`` categories, TreeSearch orders a node's categories along
the leading principal direction of their means (weighted by rows) and tries the prefixes only.
On random nodes (categories whose rows sit around one of a few cluster centers, plus noise), the
cost of that cut is compared with the exact best over every partition (brute force), and with two
other orders: by the first coordinate of the means, and by a random order (a floor).

    python bench/bench_set_cut_order.py --categories 12 --trials 200
"""
from __future__ import annotations

import argparse
import itertools

import numpy as np

from exclust.algorithms.histogram.cut_search import leading_direction_order
from exclust.algorithms.search.category_cuts import own_cost


def node(rng, categories: int, clusters: int, dim: int) -> np.ndarray:
    """Per category its moments (count, sums, squared norm) of rows drawn around one cluster center."""
    centers = rng.normal(size=(clusters, dim)) * 3
    stats = np.zeros((categories, dim + 2))
    for c in range(categories):
        rows = int(rng.integers(5, 60))
        Y = centers[rng.integers(clusters)] + rng.normal(size=(rows, dim)) * rng.uniform(0.5, 2.0)
        stats[c] = [rows, *Y.sum(axis=0), (Y ** 2).sum()]
    return stats


def prefix_cost(stats: np.ndarray, order: np.ndarray) -> float:
    prefix = np.cumsum(stats[order], axis=0)[:-1]
    return float((own_cost(prefix) + own_cost(stats.sum(axis=0) - prefix)).min())


def exact_cost(stats: np.ndarray) -> float:
    C = stats.shape[0]
    parts = np.array([(True, *p) for p in itertools.product((True, False), repeat=C - 1) if not all(p)], dtype=float)
    left = parts @ stats
    return float((own_cost(left) + own_cost(stats.sum(axis=0) - left)).min())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--categories", type=int, default=12)
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--clusters", type=int, default=3)
    parser.add_argument("--dim", type=int, default=2)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    ratios: dict[str, list[float]] = {"leading direction": [], "first coordinate": [], "random": []}
    for _ in range(args.trials):
        stats = node(rng, args.categories, args.clusters, args.dim)
        best = exact_cost(stats)
        held = np.arange(args.categories)
        means = stats[:, 1:-1] / stats[:, :1]
        orders = {"leading direction": leading_direction_order(means, stats[:, 0], held),
                  "first coordinate": np.argsort(means[:, 0], kind="stable"),
                  "random": rng.permutation(args.categories)}
        for name, order in orders.items():
            ratios[name].append(prefix_cost(stats, order) / best)
    print(f"{args.trials} nodes, {args.categories} categories, {args.clusters} clusters in {args.dim}-D")
    print("order               mean cost / exact   worst   share exact")
    for name, values in ratios.items():
        v = np.array(values)
        print(f"{name:18s}  {v.mean():17.5f}  {v.max():6.4f}   {np.mean(v <= 1 + 1e-9):10.2%}")


if __name__ == "__main__":
    main()
