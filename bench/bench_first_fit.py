"""First fit in a fresh Python process against the warm fit: what numba's compilation costs a user.

For IMM, ExKMC, ExShallow and MMDT (exact thresholds) on 30,000 rows (d = 8, k = 5, centers from
scikit-learn's KMeans, computed once here so that every child fits the same thing), each child
process imports exclust, fits once (the first fit) and then three times more (the warm fit: the
best of those three). Two settings, each in its own empty numba cache folder (NUMBA_CACHE_DIR):

* ``cold``: nothing compiled yet (what the issue measured: 6-33 s);
* ``after setup``: the cache filled first by ``python -m exclust.jobs.warmup``, which ``bootstrap.py``
  runs once after installing (the setting a user meets after the README's setup).

Target: after setup, the first fit within 2x the warm one. Prints one line per algorithm and
setting, and the warm-up's own time.

Usage: python bench/bench_first_fit.py [--rows 30000] [--only-after-setup]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ALGORITHMS = ("imm", "exkmc", "exshallow", "mmdt")
ROOT = Path(__file__).resolve().parents[1]


def make_data(rows: int, d: int = 8, k: int = 5) -> tuple[np.ndarray, np.ndarray]:
    from sklearn.cluster import KMeans

    rng = np.random.default_rng(0)
    means = rng.uniform(-10, 10, (k, d))
    X = means[rng.integers(0, k, rows)] + 1.5 * rng.normal(size=(rows, d))
    centers = KMeans(k, n_init=1, random_state=0).fit(X).cluster_centers_
    return X, centers


def child(algorithm: str, data_path: str) -> None:
    """Fit ``algorithm`` four times in this fresh process; print one JSON line of seconds.

    The estimator is imported first, as a user's ``from exclust import IMM`` does, and that import is
    timed apart: the first fit is the first call to ``fit`` only.
    """
    with np.load(data_path) as saved:
        X, centers = saved["X"], saved["centers"]
    k = len(centers)

    t0 = time.perf_counter()
    import exclust

    estimator_class = {"imm": "IMM", "exkmc": "ExKMC", "exshallow": "ExShallow", "mmdt": "MMDT"}[algorithm]
    estimator_class = getattr(exclust, estimator_class)
    if algorithm == "mmdt":
        from exclust.reference.summary import MixtureSummary
    imported = time.perf_counter() - t0

    def fit():
        if algorithm == "exkmc":
            return estimator_class(k, max_leaves=2 * k, random_state=0).fit(X, centers)
        if algorithm == "mmdt":
            labels = np.argmin(((X[:, None, :] - centers[None]) ** 2).sum(axis=2), axis=1)
            return estimator_class(threshold="exact", random_state=0).fit(MixtureSummary.from_labels(X, labels))
        return estimator_class(k, random_state=0).fit(X, centers)

    seconds = []
    for _ in range(4):
        t = time.perf_counter()
        fit()
        seconds.append(time.perf_counter() - t)
    print(json.dumps({"import": imported, "first": seconds[0], "warm": min(seconds[1:]), "compiled": compiled()}))


def compiled() -> int:
    """Kernel signatures this process compiled (numba cache misses) rather than loaded from the cache."""
    from numba.core.registry import CPUDispatcher

    misses = 0
    for name, module in list(sys.modules.items()):
        if name.startswith("exclust.tree._routing"):
            for value in vars(module).values():
                if isinstance(value, CPUDispatcher):
                    misses += sum(value.stats.cache_misses.values())
    return misses


def run_child(algorithm: str, data_path: str, env: dict) -> dict:
    out = subprocess.run([sys.executable, __file__, "--child", algorithm, data_path], env=env, cwd=ROOT,
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=30_000)
    parser.add_argument("--only-after-setup", action="store_true", help="skip the cold setting (minutes)")
    parser.add_argument("--cache", help="numba cache folder of the 'after setup' setting (default: a new one); "
                                        "the warm-up runs into it unless --warmed")
    parser.add_argument("--warmed", action="store_true",
                        help="--cache was filled by python -m exclust.jobs.warmup before")
    parser.add_argument("--installed-cache", action="store_true",
                        help="'after setup' uses numba's default cache beside the sources, as filled by bootstrap.py's "
                             "warm-up (NUMBA_CACHE_DIR unset; implies --warmed)")
    parser.add_argument("--child", nargs=2, metavar=("ALGORITHM", "DATA"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return
    print(f"load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} at the start")
    with tempfile.TemporaryDirectory(prefix="exclust-first-fit-") as tmp:
        data_path = os.path.join(tmp, "data.npz")
        X, centers = make_data(args.rows)
        np.savez(data_path, X=X, centers=centers)
        settings = [] if args.only_after_setup else ["cold"]
        settings.append("after setup")
        for setting in settings:
            env = {**os.environ, "PYTHONPATH": str(ROOT)}
            if setting == "after setup" and args.installed_cache:
                env.pop("NUMBA_CACHE_DIR", None)
            else:
                cache = (args.cache if args.cache and setting == "after setup"
                         else os.path.join(tmp, setting.replace(" ", "-")))
                os.makedirs(cache, exist_ok=True)
                env["NUMBA_CACHE_DIR"] = cache
            if setting == "after setup" and not (args.warmed or args.installed_cache):
                t = time.perf_counter()
                subprocess.run([sys.executable, "-m", "exclust.jobs.warmup"], env=env, cwd=ROOT, check=True)
                print(f"warm-up (python -m exclust.jobs.warmup, once after installing): {time.perf_counter() - t:.1f} "
                      "s")
            for algorithm in ALGORITHMS:
                r = run_child(algorithm, data_path, env)
                print(f"{setting:12s} {algorithm:10s} import {r['import']:5.2f} s  first fit {r['first']:6.2f} s  "
                      f"warm fit {r['warm']:6.3f} s  first/warm {r['first'] / r['warm']:6.1f}x  "
                      f"kernels compiled {r['compiled']}", flush=True)
    print(f"load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} at the end")


if __name__ == "__main__":
    main()
