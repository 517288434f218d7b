"""Issue 21: TreeSearch and ExGreedy against the greedy rules, the gap to the exact optimum, and
TreeSearch's build time against ExShallow's.

    .venv/bin/python bench/search_tables.py --part prices [--sets iris,d31]  # shared sets, k and 2k leaves
    .venv/bin/python bench/search_tables.py --part gap        # small random instances vs optimal_tree
    .venv/bin/python bench/search_tables.py --part timing [--rows 1000000]

prices: iris, wine, r15, d31, aggregation (../shared/data) and scikit-learn's digits and
  breast_cancer; k = number of true classes; reference centers: the fixture centers of
  ``exkmc_reference.json`` where given, else scikit-learn KMeans (n_init=10, random_state=0).
  Price = the tree's clusters scored by their own means / the reference cost (as
  bench/table_objectives.py); beside it the weighted average depth. Greedy rules with exact bins.
  At 2k leaves: ExKMC, CART and TreeSearch (several leaves per cluster). On iris, also the exact
  optimum at k leaves (``optimal_tree``, about a second there; its work grows like
  (rows * features)^(k - 1), so on no other set).
gap: random instances (30 rows, 2 features, k = 3 or 4 overlapping blobs, scikit-learn KMeans
  centers); each algorithm's cost over the exact optimum's (``optimal_tree``).
timing: the Gaussian mixture of bench_passes.py (x0..x19, K = 10) as Parquet, on bench_passes'
  LocalCluster (2 worker processes x 1 thread); the same centers (scikit-learn KMeans on a
  20,000-row sample, not timed) for ExShallow and TreeSearch, timed interleaved in one run.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
SHARED = ROOT.parent / "shared"
SETS = ("iris", "wine", "r15", "d31", "aggregation", "digits", "breast_cancer")
EXACT_BINS = 65536
OPTIMUM_SETS = ("iris",)


def load_set(name: str) -> tuple[np.ndarray, int, np.ndarray]:
    from sklearn import datasets
    from sklearn.cluster import KMeans

    if name in ("digits", "breast_cancer"):
        bunch = getattr(datasets, f"load_{name}")()
        X, k = bunch.data.astype(np.float64), int(np.unique(bunch.target).size)
    else:
        from table_objectives import load

        X, k = load(name)
    fixtures = json.loads((SHARED / "fixtures" / "exkmc_reference.json").read_text())
    if name in fixtures:
        centers = np.asarray(fixtures[name]["centers"], dtype=np.float64)
    else:
        centers = KMeans(k, n_init=10, random_state=0).fit(X).cluster_centers_
    return X, k, centers


def prices(sets: tuple[str, ...]) -> None:
    from table_objectives import kmeans_row, print_table

    from exclust import CART, IMM, ExGreedy, ExKMC, ExShallow, TreeSearch
    from exclust.algorithms.search.optimal_tree import optimal_tree

    tables: dict[str, dict] = {}
    for name in sets:
        X, k, centers = load_set(name)
        d2 = ((X[:, None, :] - centers[None]) ** 2).sum(axis=2)
        labels, reference_cost = d2.argmin(axis=1), float(d2.min(axis=1).sum())
        rows: dict[str, tuple] = {}
        for title, model in (("IMM", IMM(k, max_bins=EXACT_BINS)), ("ExGreedy", ExGreedy(k, max_bins=EXACT_BINS)),
                             ("ExShallow", ExShallow(k, max_bins=EXACT_BINS)),
                             ("TreeSearch", TreeSearch(k, random_state=0)),
                             ("ExKMC (2k leaves)", ExKMC(k, max_leaves=2 * k, max_bins=EXACT_BINS)),
                             ("TreeSearch (2k leaves)", TreeSearch(k, n_leaves=2 * k, random_state=0))):
            t0 = time.perf_counter()
            tree = model.fit(X, centers).tree_
            rows[title] = (*kmeans_row(tree, X, reference_cost), time.perf_counter() - t0)
        for leaves, title in ((k, "CART"), (2 * k, "CART (2k leaves)")):
            t0 = time.perf_counter()
            tree = CART(max_leaf_nodes=leaves, random_state=0).fit(X, labels).tree_
            rows[title] = (*kmeans_row(tree, X, reference_cost), time.perf_counter() - t0)
        if name in OPTIMUM_SETS:
            t0 = time.perf_counter()
            tree, _ = optimal_tree(X, k)
            rows["Optimum (exact)"] = (*kmeans_row(tree, X, reference_cost), time.perf_counter() - t0)
        tables[f"{name} (k={k})"] = rows
        print(name, {t: f"{r[0]:.4f}/{r[1]:.2f} {r[2]:.1f}s" for t, r in rows.items()}, flush=True)
    print_table("k-means price / weighted average depth",
                {n: {m: v[:2] for m, v in t.items()} for n, t in tables.items()})
    print("\nseconds per build (shared machine):")
    for n, t in tables.items():
        print(n, ", ".join(f"{m} {v[2]:.1f}" for m, v in t.items()))


def gap(instances: int) -> None:
    from sklearn.cluster import KMeans

    from exclust import CART, IMM, ExGreedy, ExShallow, TreeSearch
    from exclust.algorithms.search.optimal_tree import leaf_cost, optimal_tree

    names = ("IMM", "ExGreedy", "ExShallow", "CART", "TreeSearch")
    ratios = {n: [] for n in names}
    for seed in range(instances):
        rng = np.random.default_rng(seed)
        k = 3 + seed % 2
        blobs = rng.uniform(-4, 4, (k, 2))
        X = blobs[rng.integers(0, k, 30)] + rng.normal(size=(30, 2))
        centers = KMeans(k, n_init=10, random_state=0).fit(X).cluster_centers_
        labels = ((X[:, None, :] - centers[None]) ** 2).sum(axis=2).argmin(axis=1)
        _, optimum = optimal_tree(X, k)
        trees = {"IMM": IMM(k, max_bins=EXACT_BINS).fit(X, centers).tree_,
                 "ExGreedy": ExGreedy(k, max_bins=EXACT_BINS).fit(X, centers).tree_,
                 "ExShallow": ExShallow(k, max_bins=EXACT_BINS).fit(X, centers).tree_,
                 "CART": CART(max_leaf_nodes=k, random_state=0).fit(X, labels).tree_,
                 "TreeSearch": TreeSearch(k).fit(X, centers).tree_}
        for n, tree in trees.items():
            leaf = tree.apply(X)
            ratios[n].append(sum(leaf_cost(X[leaf == v]) for v in np.unique(leaf)) / optimum)
    print(f"\n{instances} instances (30 x 2, k = 3 or 4): cost / optimum\n")
    print("| algorithm | optimal on | mean gap | worst gap |")
    print("|---|---|---|---|")
    for n in names:
        r = np.asarray(ratios[n])
        print(f"| {n} | {int((r < 1 + 1e-9).sum())} / {r.size} | {100 * (r.mean() - 1):.2f}% | "
              f"{100 * (r.max() - 1):.2f}% |")


def timing(rows: int, repeats: int) -> None:
    import logging

    from bench_passes import dataset
    from distributed import Client, LocalCluster
    from sklearn.cluster import KMeans

    from exclust import ExShallow, TreeSearch, load_dataset
    from exclust.dataplane.parts import uniform_sample

    folder = dataset(rows, 20, 10, 10)
    print(f"uptime: {os.popen('uptime').read().strip()}", flush=True)
    with LocalCluster(n_workers=2, threads_per_worker=1, memory_limit="3.5GiB", processes=True, host="127.0.0.1",
                      dashboard_address="127.0.0.1:0", silence_logs=logging.ERROR) as cluster, Client(cluster):
        data = load_dataset(str(folder), [f"x{j}" for j in range(20)])
        (sample,) = uniform_sample(data.X, size=20_000, random_state=0)
        centers = KMeans(10, n_init=3, random_state=0).fit(sample).cluster_centers_
        best = {"ExShallow": np.inf, "TreeSearch": np.inf}
        for _ in range(repeats):
            for name, model in (("ExShallow", ExShallow(10, random_state=0)),
                                ("TreeSearch", TreeSearch(10, random_state=0))):
                t0 = time.perf_counter()
                model.fit(data, centers)
                took = time.perf_counter() - t0
                best[name] = min(best[name], took)
                print(f"{name}: {took:.1f} s (weighted average depth {model.weighted_avg_depth_:.2f})", flush=True)
    print(f"uptime: {os.popen('uptime').read().strip()}")
    print(f"RESULT {rows:,} x 20, k=10: ExShallow {best['ExShallow']:.1f} s, TreeSearch {best['TreeSearch']:.1f} s, "
          f"ratio {best['TreeSearch'] / best['ExShallow']:.2f} (best of {repeats})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--part", choices=("prices", "gap", "timing"), required=True)
    ap.add_argument("--sets", default=",".join(SETS), help="comma-separated sets of --part prices")
    ap.add_argument("--instances", type=int, default=20)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    print(f"uptime: {os.popen('uptime').read().strip()}", flush=True)
    if args.part == "prices":
        sets = tuple(args.sets.split(","))
        unknown = sorted(set(sets) - set(SETS))
        if unknown:
            ap.error(f"unknown sets {unknown}; choose among {', '.join(SETS)}")
        prices(sets)
    elif args.part == "gap":
        gap(args.instances)
    else:
        timing(args.rows, args.repeats)
    print(f"uptime: {os.popen('uptime').read().strip()}")


if __name__ == "__main__":
    main()
