"""Compile exclust's numba kernels once, into numba's cache, so that no later run pays for it.

Every kernel is ``numba.njit(cache=True)``: compiled on its first call with a given set of
argument types (seconds each; 6-33 s for a first IMM, ExKMC or ExShallow fit) and kept in
numba's cache, which a later process loads in milliseconds. That cache lies in ``__pycache__``
beside the sources unless ``NUMBA_CACHE_DIR`` moves it, so the command line, a user's own
Python and the Dask workers of a local cluster all share it as long as none of them sets
``NUMBA_CACHE_DIR`` differently.

Because a kernel is compiled per argument types, the warm-up runs what runs do, on small data:
an explain run of every registered algorithm in memory (the Python API), then the same runs on
Parquet through a local Dask cluster (the command line, the flows and the workers).
``bootstrap.py`` runs it once after installing; by hand: ``python -m exclust.jobs.warmup``.
"""
from __future__ import annotations

import contextlib
import logging
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def _blobs(rows: int = 3000, seed: int = 0):
    """Three well-separated blobs in 3 features as a DataFrame (x0, x1, x2, truth)."""
    import pandas as pd

    rng = np.random.default_rng(seed)
    centers = np.array([[0.0, 0.0, 0.0], [6.0, 0.0, 1.0], [0.0, 6.0, -1.0]])
    truth = rng.integers(0, len(centers), rows)
    X = centers[truth] + rng.normal(size=(rows, 3))
    return pd.DataFrame({"x0": X[:, 0], "x1": X[:, 1], "x2": X[:, 2], "truth": truth})


def _runs(data, every_variant: bool = True):
    """One explain config per registered algorithm and objective it builds for (and every MMDT
    threshold): whatever the registry holds, so a new algorithm is warmed without a change here.
    Algorithms that need columns the warm-up data lack (concept labels) are left out. Without
    ``every_variant``, one run per algorithm (the variants share the kernels' argument types)."""
    from exclust.jobs import registry
    from exclust.jobs.config import ExplainConfig

    common = dict(input=data, features=["x0", "x1", "x2"], k=3, truth="truth", random_state=0)
    for name, entry in registry.ALGORITHMS.items():
        if entry.requires:
            continue
        for objective in entry.objectives if every_variant else entry.objectives[:1]:
            reference = {registry.CENTERS: objective, registry.LABELS: "kmeans"}.get(entry.needs, "gmm")
            yield ExplainConfig(algorithm=name, reference=reference, objective=objective,
                                leaves=6 if entry.leaf_budget else None, **common)
        if every_variant and entry.threshold and entry.needs == registry.SUMMARY:
            for threshold in registry.THRESHOLDS:
                yield ExplainConfig(algorithm=name, reference="gmm", threshold=threshold, **common)


def _say(text: str) -> None:
    print(f"[warm-up] {text}", flush=True)


def _warm(configs: list, where: str, started: float) -> None:
    """Run each explain config, one progress line each (what it compiled, how long it took)."""
    from exclust.jobs.explain.steps import explain

    for i, config in enumerate(configs, 1):
        t0 = time.perf_counter()
        explain(config)
        variant = config.threshold if config.algorithm == "mmdt" else config.objective
        _say(f"{i:2d}/{len(configs)} {where}: {config.algorithm} ({variant}) {time.perf_counter() - t0:5.1f} s, "
             f"{time.perf_counter() - started:4.0f} s in all")


def warm_in_memory(started: float | None = None) -> None:
    """Every registered algorithm's explain run on a DataFrame in memory (the Python API's types)."""
    _warm(list(_runs(_blobs())), "in memory", time.perf_counter() if started is None else started)


@contextlib.contextmanager
def _quiet_local_cluster():
    """The warm-up's local cluster without its chatter: the workers log nothing (their errors reach
    the driver as exceptions), and its closing, whose heartbeats and comms fail on purpose as the
    scheduler stops before the workers, logs nothing in this process either."""
    saved = os.environ.get("DASK_LOGGING__DISTRIBUTED")
    os.environ["DASK_LOGGING__DISTRIBUTED"] = "critical"  # read by each worker process at its start
    # Every logger under these names: distributed's logging configuration gives some children levels
    # of their own (tornado.application: error), which a parent's level does not override.
    from distributed import LocalCluster  # noqa: F401  (loads distributed's logging configuration first)

    prefixes = ("distributed", "tornado", "asyncio")
    names = [n for n in list(logging.root.manager.loggerDict) if n.split(".")[0] in prefixes] + list(prefixes)
    loggers = [logging.getLogger(name) for name in dict.fromkeys(names)]
    levels = [logger.level for logger in loggers]
    try:
        for logger in loggers:
            logger.setLevel(logging.CRITICAL + 1)
        yield
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)
        if saved is None:
            os.environ.pop("DASK_LOGGING__DISTRIBUTED", None)
        else:
            os.environ["DASK_LOGGING__DISTRIBUTED"] = saved


def warm_explain_job(started: float | None = None) -> None:
    """The same runs on a small Parquet dataset through a local Dask cluster (the driver's and the
    workers' argument types, which may differ from numpy input's)."""
    import pyarrow as pa

    from exclust.dataplane.cluster import dask_cluster

    frame = _blobs(6000, seed=1)
    with tempfile.TemporaryDirectory(prefix="exclust-warmup-") as tmp:
        data = Path(tmp) / "data"
        data.mkdir()
        import pyarrow.parquet as pq

        for i, rows in enumerate(np.array_split(np.arange(len(frame)), 2)):
            pq.write_table(pa.Table.from_pandas(frame.iloc[rows], preserve_index=False), data / f"part-{i}.parquet")
        finished = False
        try:
            with _quiet_local_cluster(), dask_cluster(None):
                _warm(list(_runs(str(data), every_variant=False)), "on a local Dask cluster",
                      time.perf_counter() if started is None else started)
                finished = True
        except TimeoutError:
            if not finished:
                raise
            # The runs are done and their kernels cached; only the workers' exit was slow (a loaded machine).
            _say("the local cluster was slow to close; its workers were stopped (the kernels are compiled)")


def compile_bytecode(package: Path | None = None) -> int:
    """Write the ``.pyc`` of exclust's modules (and of the Prefect flows beside them, in a checkout): an editable
    install leaves them to each module's first import, which writes none where ``PYTHONDONTWRITEBYTECODE`` is
    set (as many containers set it), so every start of the command compiled its modules from source again
    (0.62-1.05 s for all of them against 0.40-0.44 s with ``.pyc``, bench/README.md). An installed wheel has
    them from pip. A ``.pyc`` older than its source is ignored, so an edit never runs stale code. ``package``:
    another package's folder (tests). Returns how many folders held a module that did not compile."""
    import compileall

    package = package or Path(__file__).resolve().parents[1]  # exclust/, this module's package's parent
    folders = [package] + [p for p in [package.parent / "flows"] if (p / "__init__.py").exists()]
    return sum(not compileall.compile_dir(str(folder), quiet=1) for folder in folders)


def main() -> int:
    t0 = time.perf_counter()
    if compile_bytecode():
        _say("some modules did not compile to bytecode; they are compiled when imported instead")
    print("[warm-up] compiling exclust's numba kernels once (a few minutes; later runs load them from the cache)",
          flush=True)
    warm_in_memory(t0)
    _say(f"in-memory fits done in {time.perf_counter() - t0:.0f} s; now the explain job on a local Dask cluster")
    warm_explain_job(t0)
    print(f"[warm-up] done in {time.perf_counter() - t0:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
