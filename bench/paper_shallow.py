"""ExShallow versus ShallowTree's figures and IMM; ExShallow's time against IMM's at covtype's shape.

    .venv/bin/python bench/paper_shallow.py [--rows 581012] [--repeats 3] [--skip-timing]

(a) For every data set of ``../shared/fixtures/shallow_reference.json`` (ShallowTree,
    lmurtinho/ShallowTree, depth_factor=0.03, built from the fixed centers of
    ``exkmc_reference.json``): k-means cost ratio (the tree's clusters scored by their own
    means / the reference cost) and weighted average depth (mean over points of their leaf's
    depth) of exclust's ExShallow and IMM with the same centers and exact bins, next to
    ShallowTree's.
(b) IMM and ExShallow timed in the same run, interleaved, at 581,012 x 54 with k = 7: the shape
    of covtype (the real data set needs internet). The data is a synthetic mixture of that
    shape: 10 continuous features with covtype-like scales and 44 one-hot features (4
    "wilderness" + 40 "soil" indicators) whose probabilities depend on the component, as in
    covtype. Both trees get the same centers (the components' sample means) and the default
    max_bins; the reference fit is not timed. Wall-clock seconds (best of ``--repeats``), their
    ratio, the CPU seconds of the process (less sensitive to other jobs), and the load average
    before and after, since the machine may be shared.
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
FIXTURES = ROOT.parent / "shared" / "fixtures"
DATA = ROOT.parent / "shared" / "data"

from exclust.algorithms.histogram.exshallow import ExShallow  # noqa: E402
from exclust.algorithms.histogram.imm import IMM  # noqa: E402


def load_fixture_data(name: str) -> np.ndarray:
    if name in ("iris", "wine", "breast_cancer"):
        from sklearn import datasets

        return getattr(datasets, f"load_{name}")().data.astype(np.float64)
    return np.loadtxt(DATA / f"{name}.data.gz", ndmin=2)


def kmeans_cost(X: np.ndarray, labels: np.ndarray) -> float:
    return float(sum(((X[labels == c] - X[labels == c].mean(0)) ** 2).sum() for c in np.unique(labels)))


def mean_leaf_depth(tree, X: np.ndarray) -> float:
    depth = np.zeros(tree.node_count, dtype=int)
    leaves = set(tree.leaves.tolist())
    for node in range(tree.node_count):  # children come after their parent
        if node not in leaves:
            depth[tree.left[node]] = depth[tree.right[node]] = depth[node] + 1
    return float(depth[tree.apply(X)].mean())


def fixture_table() -> None:
    if not (FIXTURES / "shallow_reference.json").exists():
        print("../shared/fixtures is absent: skipping the fixture table")
        return
    refs = json.loads((FIXTURES / "exkmc_reference.json").read_text())
    shallow = json.loads((FIXTURES / "shallow_reference.json").read_text())["results"]
    print("(a) k-means, ShallowTree's centers, exact bins: cost ratio / weighted average depth")
    print(f"{'data set':14s} {'k':>3s}  {'ShallowTree':>15s}  {'ExShallow':>15s}  {'IMM':>15s}")
    for name, published in shallow.items():
        ref = refs[name]
        X = load_fixture_data(name)
        centers = np.asarray(ref["centers"])
        cells = [f"{published['cost_ratio']:.4f} / {published['weighted_avg_depth']:.3f}"]
        for model in (ExShallow(ref["k"], max_bins=65536), IMM(ref["k"], max_bins=65536)):
            model.fit(X, centers)
            ratio = kmeans_cost(X, model.predict(X)) / ref["reference_cost"]
            cells.append(f"{ratio:.4f} / {mean_leaf_depth(model.tree_, X):.3f}")
        print(f"{name:14s} {ref['k']:3d}  " + "  ".join(f"{c:>15s}" for c in cells))


def covtype_like(n_rows: int, k: int = 7, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """A k-component mixture shaped like covtype: 10 continuous columns, 4 + 40 one-hot ones."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, k, n_rows)
    scales = np.array([300, 100, 10, 200, 60, 1500, 30, 20, 40, 1300.0])
    continuous = (rng.normal(scale=2.0, size=(k, 10))[y] + rng.normal(size=(n_rows, 10))) * scales
    blocks = [continuous]
    for width, concentration in ((4, 1.0), (40, 0.3)):
        probs = rng.dirichlet(np.full(width, concentration), size=k)
        pick = (rng.random(n_rows)[:, None] > np.cumsum(probs[y], axis=1)).sum(1).clip(0, width - 1)
        onehot = np.zeros((n_rows, width))
        onehot[np.arange(n_rows), pick] = 1.0
        blocks.append(onehot)
    X = np.hstack(blocks)
    return X, np.array([X[y == j].mean(0) for j in range(k)])


def timing(n_rows: int, repeats: int) -> None:
    k = 7
    X, centers = covtype_like(n_rows, k)
    ExShallow(k).fit(X[:5000], centers)  # compile the kernels outside the timing
    IMM(k).fit(X[:5000], centers)
    load_before = os.getloadavg()
    times = {"IMM": [], "ExShallow": []}
    cpu = {"IMM": [], "ExShallow": []}
    for _ in range(repeats):
        for name, make in (("IMM", lambda: IMM(k)), ("ExShallow", lambda: ExShallow(k))):
            start, start_cpu = time.perf_counter(), time.process_time()
            model = make().fit(X, centers)
            times[name].append(time.perf_counter() - start)
            cpu[name].append(time.process_time() - start_cpu)
    load_after = os.getloadavg()
    imm, shallow = min(times["IMM"]), min(times["ExShallow"])
    print(f"\n(b) {n_rows:,} x {X.shape[1]}, k = {k} (synthetic covtype-shaped mixture), best of {repeats}")
    print(f"IMM        {imm:6.2f} s   (all: {', '.join(f'{t:.2f}' for t in times['IMM'])})")
    print(f"ExShallow  {shallow:6.2f} s   (all: {', '.join(f'{t:.2f}' for t in times['ExShallow'])}); "
          f"weighted average depth {model.weighted_avg_depth_:.3f}, passes {model.n_passes_}")
    print(f"ratio ExShallow / IMM: {shallow / imm:.2f} (best of each); "
          f"median {np.median(times['ExShallow']) / np.median(times['IMM']):.2f}")
    print(f"CPU seconds of the process (all threads), best of each: IMM {min(cpu['IMM']):.2f}, "
          f"ExShallow {min(cpu['ExShallow']):.2f}, ratio {min(cpu['ExShallow']) / min(cpu['IMM']):.2f}")
    print(f"load average before: {' '.join(f'{v:.2f}' for v in load_before)}, "
          f"after: {' '.join(f'{v:.2f}' for v in load_after)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=581_012)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--skip-timing", action="store_true")
    args = parser.parse_args()
    fixture_table()
    if not args.skip_timing:
        timing(args.rows, args.repeats)


if __name__ == "__main__":
    main()
