"""Cost ratio and weighted average depth of k-leaf explanation trees, for k-means and k-medians.

Data: iris, wine, r15, d31, aggregation from ``../shared/data`` (k = number of true classes).
References:

- k-means: the fixture centers of ``../shared/fixtures/exkmc_reference.json`` where given
  (scikit-learn KMeans, n_init=10, random_state=0); aggregation has none and gets centers made
  by that same recipe. Reference cost = sum of squared distances to the nearest center.
- k-medians: ``exclust.KMedians(k, random_state=0)``; reference cost = its l1 cost
  (``inertia_``, every cluster at its own coordinate-wise median).

Rows (every tree has k leaves): IMM, ExKMC at k leaves and ExShallow (exact bins, so their
split search sees every threshold; both objectives), CART
(scikit-learn's tree, ``max_leaf_nodes=k``, on the reference labels), RandomCutTree (mean over
20 single trees with seeds 0-19, and the best of 20 trials kept by the one-pass scoring of
``n_trials=20``). Cost ratio: k-means = the tree's clusters scored by their own means /
reference cost; k-medians = the tree's clusters scored by their own medians (``score``'s
bisection) / reference cost. Weighted average depth: mean over points of their leaf's depth.
ShallowTree's figures from ``shallow_reference.json`` (same fixture centers) are printed for
comparison.

Usage: python bench/table_objectives.py
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
SHARED = ROOT.parent / "shared"
DATASETS = ("iris", "wine", "r15", "d31", "aggregation")
TRIALS = 20
EXACT_BINS = 65536  # more bins than distinct values: every threshold is a candidate


def load(name: str) -> tuple[np.ndarray, int]:
    X = np.loadtxt(SHARED / "data" / f"{name}.data.gz", ndmin=2)
    y = np.loadtxt(SHARED / "data" / f"{name}.labels0.gz").astype(int)
    return X, int(np.unique(y).size)


def weighted_average_depth(tree, X) -> float:
    depth = np.zeros(tree.node_count, np.int64)
    for leaf, path in tree.leaf_paths().items():
        depth[leaf] = len(path)
    return float(depth[tree.apply(X)].mean())


def kmeans_row(tree, X, reference_cost: float) -> tuple[float, float]:
    from exclust.scoring.metrics import score

    result = score(tree, X, kmedians=False)
    return result["kmeans_cost_tree"] / reference_cost, weighted_average_depth(tree, X)


def kmedians_row(tree, X, reference_cost: float) -> tuple[float, float]:
    from exclust.scoring.metrics import score

    result = score(tree, X, kmedians=True, kmedians_tol=1e-9, max_kmedians_passes=16)
    return result["kmedians_cost_tree"] / reference_cost, weighted_average_depth(tree, X)


def random_cut_rows(X, centers, objective: str, row) -> dict[str, tuple[float, float]]:
    from exclust import RandomCutTree

    k = centers.shape[0]
    singles = [row(RandomCutTree(k, objective=objective, random_state=s).fit(centers=centers).tree_, X)
               for s in range(TRIALS)]
    best = RandomCutTree(k, objective=objective, n_trials=TRIALS, random_state=0).fit(X, centers=centers)
    return {
        f"RandomCutTree mean of {TRIALS}": tuple(np.mean(singles, axis=0)),
        f"RandomCutTree best of {TRIALS}": row(best.tree_, X),
    }


def kmeans_table(name, X, k, fixtures, shallow) -> dict[str, tuple | str]:
    from sklearn.cluster import KMeans as SKKMeans

    from exclust import CART, IMM, ExKMC, ExShallow

    if name in fixtures:
        centers = np.asarray(fixtures[name]["centers"], dtype=np.float64)
    else:
        centers = SKKMeans(k, n_init=10, random_state=0).fit(X).cluster_centers_
    d2 = ((X[:, None, :] - centers[None]) ** 2).sum(axis=2)
    labels, reference_cost = d2.argmin(axis=1), float(d2.min(axis=1).sum())

    def row(tree, data):
        return kmeans_row(tree, data, reference_cost)

    rows: dict[str, tuple | str] = {
        "IMM": row(IMM(k, max_bins=EXACT_BINS).fit(X, centers=centers).tree_, X),
        "ExKMC (k leaves)": row(ExKMC(k, max_leaves=k, max_bins=EXACT_BINS).fit(X, centers=centers).tree_, X),
        "ExShallow": row(ExShallow(k, max_bins=EXACT_BINS).fit(X, centers=centers).tree_, X),
        **random_cut_rows(X, centers, "kmeans", row),
        "CART": row(CART(max_leaf_nodes=k, random_state=0).fit(X, labels).tree_, X),
    }
    if name in shallow:
        rows["ShallowTree (fixture figures)"] = (shallow[name]["cost_ratio"], shallow[name]["weighted_avg_depth"])
    return rows


def kmedians_table(X, k) -> dict[str, tuple | str]:
    from exclust import CART, IMM, ExKMC, ExShallow, KMedians

    reference = KMedians(k, random_state=0).fit(X)
    centers, labels, reference_cost = reference.cluster_centers_, reference.labels_, reference.inertia_

    def row(tree, data):
        return kmedians_row(tree, data, reference_cost)

    return {
        "IMM (kmedians)": row(IMM(k, objective="kmedians", max_bins=EXACT_BINS).fit(X, centers=centers).tree_, X),
        "ExKMC (kmedians, k leaves)": row(
            ExKMC(k, max_leaves=k, objective="kmedians", max_bins=EXACT_BINS).fit(X, centers=centers).tree_, X),
        "ExShallow (kmedians)": row(
            ExShallow(k, objective="kmedians", max_bins=EXACT_BINS).fit(X, centers=centers).tree_, X),
        **random_cut_rows(X, centers, "kmedians", row),
        "CART": row(CART(max_leaf_nodes=k, random_state=0).fit(X, labels).tree_, X),
    }


def print_table(title: str, tables: dict[str, dict]) -> None:
    names = list(tables)
    methods = list(dict.fromkeys(m for t in tables.values() for m in t))
    print(f"\n{title}: cost ratio / weighted average depth\n")
    print("| method | " + " | ".join(names) + " |")
    print("|---|" + "---|" * len(names))
    for m in methods:
        cells = []
        for n in names:
            v = tables[n].get(m, "")
            cells.append(v if isinstance(v, str) else f"{v[0]:.4f} / {v[1]:.2f}")
        print(f"| {m} | " + " | ".join(cells) + " |")


def main() -> None:
    fixtures = json.loads((SHARED / "fixtures" / "exkmc_reference.json").read_text())
    shallow = json.loads((SHARED / "fixtures" / "shallow_reference.json").read_text())["results"]
    kmeans, kmedians = {}, {}
    for name in DATASETS:
        X, k = load(name)
        kmeans[f"{name} (k={k})"] = kmeans_table(name, X, k, fixtures, shallow)
        kmedians[f"{name} (k={k})"] = kmedians_table(X, k)
    print_table("k-means (reference: fixture centers; aggregation: scikit-learn KMeans n_init=10, seed 0)", kmeans)
    print_table("k-medians (reference: exclust.KMedians, seed 0)", kmedians)


if __name__ == "__main__":
    main()
