"""Compile exclust's numba kernels once, into numba's cache, so that no later run pays for it.

Every kernel is ``numba.njit(cache=True)``: compiled on its first call with a given set of
argument types (seconds each; 6-33 s for a first IMM, ExKMC or ExShallow fit) and kept in
numba's cache, which a later process loads in milliseconds. That cache lies in ``__pycache__``
beside the sources unless ``NUMBA_CACHE_DIR`` moves it, so the command line, a user's own
Python and the Dask workers of a local cluster all share it as long as none of them sets
``NUMBA_CACHE_DIR`` differently.

Because a kernel is compiled per argument types, the warm-up runs what runs do, on small data:
every tree algorithm and scoring in memory (the Python API), then an explain job on Parquet
through a local Dask cluster (the command line, the flows and the workers).
``bootstrap.py`` runs it once after installing; by hand: ``python -m exclust.warmup``.
"""
from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import numpy as np

# Algorithms warmed through the explain job (the others share their kernels with these or need
# concept columns); the in-memory part below fits every algorithm that has kernels of its own.
JOB_ALGORITHMS = ("mmdt", "imm", "exkmc", "exshallow", "kernel-mmdt", "random-cut")


def _blobs(rows: int = 3000, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    centers = np.array([[0.0, 0.0, 0.0], [6.0, 0.0, 1.0], [0.0, 6.0, -1.0]])
    truth = rng.integers(0, len(centers), rows)
    return centers[truth] + rng.normal(size=(rows, 3)), centers, truth


def warm_in_memory() -> None:
    """Fit every kernel-backed estimator and score its tree on numpy data (the Python API's types)."""
    import exclust
    from exclust.algorithms.exkmc import ExKMC
    from exclust.algorithms.exshallow import ExShallow
    from exclust.algorithms.imm import IMM
    from exclust.algorithms.kdtree import KDTree
    from exclust.algorithms.kernel_mmdt import KernelMMDT
    from exclust.algorithms.random_cut import RandomCutTree
    from exclust.kmedians import KMedians
    from exclust.reference import GaussianMixture, KMeans
    from exclust.registry import THRESHOLDS

    X, centers, truth = _blobs()
    k = len(centers)
    gmm = GaussianMixture(k, random_state=0).fit(X)
    summary = exclust.MixtureSummary.from_gmm(gmm)
    for threshold in THRESHOLDS:
        exclust.MMDT(threshold=threshold, random_state=0).fit(summary)
    KMeans(k, random_state=0).fit(X)
    KMedians(k, random_state=0).fit(X)
    trees = []
    for objective in ("kmeans", "kmedians"):
        trees.append(IMM(k, random_state=0, objective=objective).fit(X, centers).tree_)
        trees.append(ExKMC(k, max_leaves=2 * k, random_state=0, objective=objective).fit(X, centers).tree_)
        trees.append(ExShallow(k, objective=objective, random_state=0).fit(X, centers).tree_)
        trees.append(RandomCutTree(k, objective=objective, n_trials=2, random_state=0).fit(X, centers).tree_)
    trees.append(KDTree(k, random_state=0).fit(X, centers).tree_)
    KernelMMDT(k, random_state=0).fit(X)
    for tree in trees:
        exclust.score(tree, X, centers=centers, y_true=truth, kmedians=True)


def warm_explain_job() -> None:
    """Explain a small Parquet dataset on a local Dask cluster with each of ``JOB_ALGORITHMS``
    (the driver's and the workers' argument types, which may differ from numpy input's)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from exclust.cluster import dask_cluster
    from exclust.config import ExplainConfig
    from exclust.steps import explain

    X, _, truth = _blobs(6000, seed=1)
    with tempfile.TemporaryDirectory(prefix="exclust-warmup-") as tmp:
        data = Path(tmp) / "data"
        data.mkdir()
        for i, rows in enumerate(np.array_split(np.arange(len(X)), 2)):
            table = pa.table({"x0": X[rows, 0], "x1": X[rows, 1], "x2": X[rows, 2], "truth": truth[rows]})
            pq.write_table(table, data / f"part-{i}.parquet")
        with dask_cluster(None):
            for algorithm in JOB_ALGORITHMS:
                reference = "kmeans" if algorithm in ("imm", "exkmc", "exshallow", "random-cut") else "gmm"
                config = ExplainConfig(input=str(data), features=["x0", "x1", "x2"], algorithm=algorithm, k=3,
                                       reference=reference, truth="truth", random_state=0)
                explain(config)


def main() -> int:
    t0 = time.perf_counter()
    print("[warm-up] compiling exclust's numba kernels once (a few minutes; later runs load them from the cache)",
          flush=True)
    warm_in_memory()
    print(f"[warm-up] in-memory fits done in {time.perf_counter() - t0:.0f} s; now an explain job on a local "
          "Dask cluster", flush=True)
    warm_explain_job()
    print(f"[warm-up] done in {time.perf_counter() - t0:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
