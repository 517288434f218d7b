"""OptimalTree (issue 30): time to proven optimality against rows and k, and the proven gap on the
shared sets. Every run is bounded by ``--nodes`` branch-and-bound nodes (OptimalTree's
``max_nodes``: the same figures on any machine), and, with ``--seconds``, by that many seconds of
search too (the statistics' pass not counted; the figures then depend on the machine's load).

    PYTHONPATH=. nice -n 10 python bench/bench_optimal.py scale --rows 10000,100000 --ks 2,3,4
    PYTHONPATH=. nice -n 10 python bench/bench_optimal.py shared --nodes 2000

Scale data: ``make_gmm_dataset`` (the papers' Appendix G mixture) with k components, 10 features.
Shared sets: ../shared/data (iris, wine, r15, d31, aggregation) and scikit-learn's bundled digits
and breast_cancer, at k = their number of classes; the greedy trees' costs beside the bound.
"""
from __future__ import annotations

import argparse
import gzip
import time
from pathlib import Path

import numpy as np

from exclust.algorithms.search.optimal import DEFAULT_MAX_NODES, OptimalTree

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def load(name: str) -> tuple[np.ndarray, int]:
    if name in ("digits", "breast_cancer"):
        from sklearn import datasets

        bunch = getattr(datasets, f"load_{name}")()
        return bunch.data.astype(np.float64), int(np.unique(bunch.target).size)
    with gzip.open(SHARED / f"{name}.data.gz") as f:
        X = np.loadtxt(f, ndmin=2)
    with gzip.open(SHARED / f"{name}.labels0.gz") as f:
        k = int(np.unique(np.loadtxt(f)).size)
    return X, k


def load_average() -> str:
    return " ".join(open("/proc/loadavg").read().split()[:3])


def line(name, n, d, k, model, seconds) -> str:
    b = model.bounds_
    return (f"| {name} | {n:,} x {d} | {k} | {model.n_cells_:,} | {model.cost_:.6g} | {model.lower_bound_:.6g} | "
            f"{'optimal' if model.proven_optimal_ else f'{model.gap_:.1%}'} | {b['greedy'] / model.cost_ - 1:.1%} | "
            f"{b['incumbent'] / model.cost_ - 1:.1%} | "
            f"{b['coordinate'] / model.cost_:.3f} | {b['scatter'] / model.cost_:.3f} | "
            f"{b['neighbour'] / model.cost_:.3f} | "
            f"{model.search_seconds_:.1f} | {seconds:.1f} | "
            f"{model.nodes_searched_} | {model.sweeps_} | {load_average()} |")


HEAD = ("| data | rows x d | k | cells | cost | lower bound | proven gap | greedy above best | first tree above best "
        "| 1-D bound / cost "
        "| scatter bound / cost | neighbour bound / cost | search s | total s | nodes | sweeps | load |\n"
        + "|---" * 17 + "|")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("what", choices=["scale", "shared"])
    parser.add_argument("--rows", default="10000,100000")
    parser.add_argument("--ks", default="2,3,4,5,6")
    parser.add_argument("--features", type=int, default=10)
    parser.add_argument("--nodes", type=int, default=DEFAULT_MAX_NODES)
    parser.add_argument("--seconds", type=float, default=None)
    parser.add_argument("--max-bins", type=int, default=256)
    parser.add_argument("--sets", default="iris,wine,r15,d31,aggregation,digits,breast_cancer")
    parser.add_argument("--without-first-cut", action="store_true",
                        help="leave Bound 8 (a side's first cut) out, as before session bound30c")
    args = parser.parse_args()
    options = {"max_nodes": args.nodes, "max_seconds": args.seconds, "max_bins": args.max_bins,
               "use_first_cut": not args.without_first_cut}
    print(HEAD, flush=True)
    if args.what == "scale":
        from exclust.datasets.synthetic import make_gmm_dataset

        for n in map(int, args.rows.split(",")):
            for k in map(int, args.ks.split(",")):
                X, _, _ = make_gmm_dataset(n, n_components=k, n_features=args.features, random_state=0)
                started = time.monotonic()
                model = OptimalTree(k, **options).fit(X)
                print(line("gmm", n, args.features, k, model, time.monotonic() - started), flush=True)
    else:
        for name in args.sets.split(","):
            X, k = load(name)
            started = time.monotonic()
            model = OptimalTree(k, **options).fit(X)
            print(line(name, X.shape[0], X.shape[1], k, model, time.monotonic() - started), flush=True)


if __name__ == "__main__":
    main()
