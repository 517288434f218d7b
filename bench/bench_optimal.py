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
from exclust.algorithms.search.optimal_bnb import PROBE_MAX_LEAVES, PROBE_MIN_LEAVES, PROBE_NODES

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


def line(name, n, d, k, model, seconds, cpu) -> str:
    b = model.bounds_
    return (f"| {name} | {n:,} x {d} | {k} | {model.n_cells_:,} | {model.cost_:.6g} | {model.lower_bound_:.6g} | "
            f"{'optimal' if model.proven_optimal_ else f'{model.gap_:.1%}'} | {b['greedy'] / model.cost_ - 1:.1%} | "
            f"{b['incumbent'] / model.cost_ - 1:.1%} | "
            f"{b['coordinate'] / model.cost_:.3f} | {b['scatter'] / model.cost_:.3f} | "
            f"{b['neighbour'] / model.cost_:.3f} | "
            f"{model.search_seconds_:.1f} | {seconds:.1f} | {cpu:.1f} | "
            f"{model.nodes_searched_} | {model.sweeps_} | {load_average()} |")


def root_trace(model) -> str:
    """The root's probes in order (``OptimalTree.root_probes_``), each bound over the best tree's cost."""
    cost = model.cost_
    rows = ["| # | feature | left leaves | position (interval) | interval bound | position bound | left lb, ub "
            "| right lb, ub | position after | nodes inside | nodes after |", "|---" * 11 + "|"]
    for i, probe in enumerate(model.root_probes_):
        (lb_left, ub_left), (lb_right, ub_right) = probe["left"], probe["right"]
        rows.append(f"| {i} | {probe['feature']} | {probe['left_leaves']} | {probe['position']} {probe['interval']} "
                    f"| {probe['interval_bound'] / cost:.3f} | {probe['position_bound'] / cost:.3f} "
                    f"| {lb_left / cost:.3f}, {ub_left / cost:.3f} | {lb_right / cost:.3f}, {ub_right / cost:.3f} "
                    f"| {(lb_left + lb_right) / cost:.3f} | {probe['nodes']} | {probe['nodes_after']} |")
    return "\n".join(rows)


def root_shares(model) -> str:
    """Per left share of the root, over every feature: the positions still open before any probe
    (their bound below the first tree's cost) and how many sit below a few shares of the best tree."""
    cost, marks = model.cost_, (0.7, 0.8, 0.9, 1.0)
    rows = ["| left, right leaves | positions | open before any probe | least bound / best "
            + "".join(f"| open below {mark} " for mark in marks) + "|", "|---" * (4 + len(marks)) + "|"]
    for j in sorted({share["left_leaves"] for share in model.root_shares_}):
        shares = [share for share in model.root_shares_ if share["left_leaves"] == j]
        sums = np.concatenate([share["sums"] for share in shares])
        opened = sum(int((share["sums"] < share["best"]).sum()) for share in shares)
        rows.append(f"| {j}, {model.n_clusters - j} | {sums.size:,} | {opened:,} | {sums.min() / cost:.3f} "
                    + "".join(f"| {int((sums < mark * cost).sum()):,} " for mark in marks) + "|")
    return "\n".join(rows)


HEAD = ("| data | rows x d | k | cells | cost | lower bound | proven gap | greedy above best | first tree above best "
        "| 1-D bound / cost "
        "| scatter bound / cost | neighbour bound / cost | search s | total s | CPU s | nodes | sweeps | load |\n"
        + "|---" * 18 + "|")


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
    parser.add_argument("--probe-nodes", type=int, default=PROBE_NODES,
                        help="a probe's own node budget, doubled each time its position is probed again; "
                             "0: none (every probe runs to its cutoff, as before session bound30f)")
    parser.add_argument("--probe-depth", type=int, default=1, help="levels whose probes get their own budget")
    parser.add_argument("--probe-min-leaves", type=int, default=PROBE_MIN_LEAVES,
                        help="the probes budgeted: those with a side of at least this many leaves")
    parser.add_argument("--probe-max-leaves", type=int, default=PROBE_MAX_LEAVES,
                        help="... in a search of at most this many leaves")
    parser.add_argument("--without-slabs", action="store_true",
                        help="leave Bound 9 (the slabs added to carried side bounds) out, as before session bound30g")
    parser.add_argument("--trace-root", action="store_true",
                        help="after each fit, the root's probes (bounds as shares of the best tree's cost)")
    args = parser.parse_args()
    options = {"max_nodes": args.nodes, "max_seconds": args.seconds, "max_bins": args.max_bins,
               "use_first_cut": not args.without_first_cut, "probe_nodes": args.probe_nodes or None,
               "probe_depth": args.probe_depth, "probe_min_leaves": args.probe_min_leaves,
               "probe_max_leaves": args.probe_max_leaves, "use_slabs": not args.without_slabs}
    print(HEAD, flush=True)
    if args.what == "scale":
        from exclust.datasets.synthetic import make_gmm_dataset

        for n in map(int, args.rows.split(",")):
            for k in map(int, args.ks.split(",")):
                X, _, _ = make_gmm_dataset(n, n_components=k, n_features=args.features, random_state=0)
                started, cpu = time.monotonic(), time.process_time()
                model = OptimalTree(k, **options).fit(X)
                print(line("gmm", n, args.features, k, model, time.monotonic() - started, time.process_time() - cpu),
                      flush=True)
                if args.trace_root:
                    print(root_shares(model), root_trace(model), sep="\n\n", flush=True)
    else:
        for name in args.sets.split(","):
            X, k = load(name)
            started, cpu = time.monotonic(), time.process_time()
            model = OptimalTree(k, **options).fit(X)
            print(line(name, X.shape[0], X.shape[1], k, model, time.monotonic() - started, time.process_time() - cpu),
                  flush=True)


if __name__ == "__main__":
    main()
