"""ExKMC (IMM base) against scikit-learn's CART on the same data and reference, in one run.

For (n, d, k, leaves) = (581012, 54, 7, 14) (covtype's shape) and (2000000, 20, 10, 20):

    rng = np.random.default_rng(0); C = rng.uniform(-10, 10, (k, d)); y = rng.integers(0, k, n)
    X = C[y] + 2.0 * rng.normal(size=(n, d))

reference = scikit-learn KMeans(k, n_init=1, random_state=0). Times DecisionTreeClassifier(
max_leaf_nodes=leaves) on the reference labels and exclust.ExKMC(k, leaves) from the same
centers, and prints time ratio, k-means cost ratios (tree clusters scored by their own means /
reference cost) and ExKMC's peak memory against X.nbytes.

ExKMC runs in a fresh child process (same generator, same centers) so that its peak resident
memory is its own: the peak is reset (``/proc/self/clear_refs``) after the data are made and the
kernels loaded, and read back (VmHWM) after the fit. Numba's one-off kernel loading (a warm-up
fit on 5000 rows) is timed and printed apart.

Figures of the authors' implementation measured on this machine (from the issue): 0.68x and
0.72x of CART's time, cost ratios 1.0004 and 1.0132. Target: at most 0.07x, cost ratio at most
0.005 above, peak memory at most 2x X.nbytes.

Usage: python bench/bench_exkmc.py [--small]   (--small: 10x fewer rows, for a quick look)
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

CONFIGS = [(581012, 54, 7, 14), (2000000, 20, 10, 20)]
AUTHORS = {(581012, 54, 7, 14): (0.68, 1.0004), (2000000, 20, 10, 20): (0.72, 1.0132)}


def make_data(n: int, d: int, k: int) -> np.ndarray:
    rng = np.random.default_rng(0)
    C = rng.uniform(-10, 10, (k, d))
    y = rng.integers(0, k, n)
    return C[y] + 2.0 * rng.normal(size=(n, d))


def _status(field: str) -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return -1


def child(n: int, d: int, k: int, leaves: int, centers_path: str, reference_cost: float) -> None:
    """Run ExKMC alone and print one JSON line of measurements."""
    import tracemalloc

    from exclust.algorithms.histogram.exkmc import ExKMC
    from exclust.scoring.curves import kmeans_costs

    X = make_data(n, d, k)
    centers = np.load(centers_path)
    t0 = time.perf_counter()
    ExKMC(k, leaves).fit(X[:5000], centers)  # loads (or compiles) the numba kernels once
    warmup = time.perf_counter() - t0
    rss_before = _status("VmRSS")
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")  # reset the peak resident size to the current one
    except OSError:
        pass
    tracemalloc.start()
    t0 = time.perf_counter()
    model = ExKMC(k, leaves).fit(X, centers)
    seconds = time.perf_counter() - t0
    _, traced_peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    peak = _status("VmHWM")
    cost = float(kmeans_costs(X, [model.tree_], k)[0])
    print(json.dumps({
        "seconds": seconds,
        "warmup_seconds": warmup,
        "passes": model.n_passes_,
        "leaves": model.tree_.n_leaves,
        "cost_ratio": cost / reference_cost,
        "surrogate_ratio": model.surrogate_costs_[-1] / reference_cost,
        "peak_rss": peak,
        "rss_before": rss_before,
        "traced_peak": traced_peak,
        "x_nbytes": X.nbytes,
    }))


def main(small: bool) -> None:
    from sklearn.cluster import KMeans
    from sklearn.tree import DecisionTreeClassifier

    from exclust.tree import ThresholdTree  # noqa: F401  (exclust importable before timing)

    print(f"cores: {os.cpu_count()}, load average: {os.getloadavg()[0]:.1f} (machine shared with other jobs)")
    for n, d, k, leaves in CONFIGS:
        if small:
            n //= 10
        X = make_data(n, d, k)
        t0 = time.perf_counter()
        km = KMeans(k, n_init=1, random_state=0).fit(X)
        t_km = time.perf_counter() - t0
        ref_cost = float(km.inertia_)
        t0 = time.perf_counter()
        cart = DecisionTreeClassifier(max_leaf_nodes=leaves).fit(X, km.labels_)
        t_cart = time.perf_counter() - t0
        cart_cost = 0.0
        pred = cart.predict(X)
        for c in np.unique(pred):
            pts = X[pred == c]
            cart_cost += float(((pts - pts.mean(0)) ** 2).sum())
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "centers.npy")
            np.save(path, km.cluster_centers_)
            nbytes = X.nbytes
            del X, pred
            out = subprocess.run(
                [sys.executable, __file__, "--child", str(n), str(d), str(k), str(leaves), path, repr(ref_cost)],
                check=True, capture_output=True, text=True,
            )
        r = json.loads(out.stdout.strip().splitlines()[-1])
        ratio = r["seconds"] / t_cart
        a_time, a_cost = AUTHORS.get((n, d, k, leaves), (None, None))
        print(f"\n(n, d, k, leaves) = ({n}, {d}, {k}, {leaves}); X = {nbytes / 2**20:.0f} MiB; k-means {t_km:.1f} s")
        print(f"  CART   : {t_cart:8.2f} s   cost ratio {cart_cost / ref_cost:.4f}")
        print(f"  ExKMC  : {r['seconds']:8.2f} s   cost ratio {r['cost_ratio']:.4f}   "
              f"(surrogate {r['surrogate_ratio']:.4f}, {r['leaves']} leaves, {r['passes']} passes; "
              f"kernel load {r['warmup_seconds']:.1f} s, not counted)")
        authors = f"   (authors' implementation: {a_time}x, cost ratio {a_cost})" if a_time else ""
        print(f"  ExKMC / CART time: {ratio:.3f}x" + authors)
        print(f"  ExKMC peak RSS {r['peak_rss'] / 2**20:.0f} MiB = {r['peak_rss'] / r['x_nbytes']:.2f}x X.nbytes "
              f"(process with X and libraries loaded: {r['rss_before'] / 2**20:.0f} MiB; fit's own numpy "
              f"allocations peak {r['traced_peak'] / r['x_nbytes']:.2f}x X.nbytes)")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        n, d, k, leaves = (int(v) for v in sys.argv[2:6])
        child(n, d, k, leaves, sys.argv[6], float(sys.argv[7]))
    else:
        main(small="--small" in sys.argv)
