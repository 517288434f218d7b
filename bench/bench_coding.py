"""Bin coding kernel: the exact-cell lookup against the grid-with-slack search it replaced.

    NUMBA_NUM_THREADS=1 .venv/bin/python bench/bench_coding.py [--rows 1000000] [--repeats 5]

Data: the first file of bench/data/passes-10000000x20-10files-k10 (written by bench_passes.py;
1M x 20, the Appendix G mixture with K = 10), or, when absent, the same mixture drawn here.
Edges from ``edges_from_sample`` on a 50 000-row sample (max_bins 256), k = 10 centers.

Timed on one thread, in the same run, best of ``--repeats``:

- OLD (baseline, copied below from exclust/_kernels_hist.py and BinMapper.search_grid before
  this change): a uniform grid of 1024 cells per feature, then a binary search between the
  cell's bounds, which carry one cell of slack on each side;
- NEW: ``encode_rows`` and ``encode_and_project`` as the engine calls them (``mapper.grid()``).

The codes of both are asserted identical (and equal to ``np.searchsorted``). Printed: seconds
per 1M rows, the old / new ratio, and ``uptime`` (the machine is shared). Then the same for
``encode_rows`` on heavy-tailed columns (Cauchy, log-normal), the case the crowded cells'
finer grids are for.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("NUMBA_NUM_THREADS", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numba  # noqa: E402
import numpy as np  # noqa: E402

from exclust.algorithms.histogram._bin_coding import encode_and_project, encode_rows  # noqa: E402
from exclust.algorithms.histogram.binning import edges_from_sample  # noqa: E402

DATA = ROOT.parent / "main" / "bench" / "data" / "passes-10000000x20-10files-k10" / "part-00000.parquet"


# ---- OLD kernel (baseline), verbatim from before the change --------------------------------
@numba.njit(cache=True, nogil=True, inline="always")
def _old_code_of(v, f, edges, n_edges, origin, inv_width, cell_lo, cell_hi):
    ne = n_edges[f]
    if ne == 0 or v <= edges[f, 0]:
        return 0
    if v > edges[f, ne - 1]:
        return ne
    g = cell_lo.shape[1]
    c = int((v - origin[f]) * inv_width[f])
    c = min(max(c, 0), g - 1)
    lo = cell_lo[f, c]
    hi = cell_hi[f, c]
    while lo < hi:
        mid = (lo + hi) >> 1
        if edges[f, mid] < v:
            lo = mid + 1
        else:
            hi = mid
    return lo


@numba.njit(cache=True, nogil=True, parallel=True)
def old_encode_rows(X, edges, n_edges, origin, inv_width, cell_lo, cell_hi, codes):
    n, d = X.shape
    for i in numba.prange(n):
        for f in range(d):
            codes[i, f] = _old_code_of(X[i, f], f, edges, n_edges, origin, inv_width, cell_lo, cell_hi)


@numba.njit(cache=True, nogil=True, parallel=True)
def old_encode_and_project(X, edges, n_edges, origin, inv_width, cell_lo, cell_hi, centers_t, center_sq, codes, dots,
                           labels):
    n, d = X.shape
    k = centers_t.shape[1]
    chunk = 4096
    n_chunks = (n + chunk - 1) // chunk
    total = 0.0
    for c in numba.prange(n_chunks):
        acc = np.empty(k)
        part = 0.0
        for i in range(c * chunk, min(n, (c + 1) * chunk)):
            acc[:] = 0.0
            for f in range(d):
                v = X[i, f]
                codes[i, f] = _old_code_of(v, f, edges, n_edges, origin, inv_width, cell_lo, cell_hi)
                part += v * v
                for j in range(k):
                    acc[j] += v * centers_t[f, j]
            best = np.inf
            arg = 0
            for j in range(k):
                dots[i, j] = acc[j]
                cost = center_sq[j] - 2.0 * acc[j]
                if cost < best:
                    best = cost
                    arg = j
            labels[i] = arg
        total += part
    return total


def old_grid(edges_list, cells=1024):
    """The old ``padded_edges`` + ``search_grid``: bounds per cell with one cell of slack."""
    d = len(edges_list)
    n_edges = np.array([e.size for e in edges_list], dtype=np.int64)
    pad = np.full((d, max(1, int(n_edges.max()))), np.inf)
    for f, e in enumerate(edges_list):
        pad[f, : e.size] = e
    origin, inv_width = np.zeros(d), np.zeros(d)
    lo = np.zeros((d, cells), dtype=np.int64)
    hi = np.zeros((d, cells), dtype=np.int64)
    steps = np.arange(cells)
    for f, e in enumerate(edges_list):
        if e.size < 2 or not e[-1] > e[0]:
            hi[f] = e.size
            continue
        width = (e[-1] - e[0]) / cells
        origin[f], inv_width[f] = e[0], 1.0 / width
        lo[f] = np.searchsorted(e, e[0] + (steps - 1) * width, side="left")
        hi[f] = np.searchsorted(e, e[0] + (steps + 2) * width, side="right")
    return pad, n_edges, origin, inv_width, lo, hi
# ---- end of the OLD kernel ------------------------------------------------------------------


def load(rows: int) -> tuple[np.ndarray, str]:
    if DATA.exists():
        import pyarrow.parquet as pq

        table = pq.read_table(DATA, columns=[f"x{j}" for j in range(20)]).slice(0, rows)
        return np.ascontiguousarray(np.column_stack([c.to_numpy() for c in table.columns])), str(DATA)
    from exclust.datasets.synthetic import make_gmm_dataset

    X, _, _ = make_gmm_dataset(rows, n_components=10, n_features=20, random_state=0)
    return np.ascontiguousarray(X), "make_gmm_dataset(K=10, d=20) (bench data absent)"


def best_of(repeats: int, run) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        run()
        times.append(time.perf_counter() - t0)
    return min(times)


def heavy_tails(repeats: int, n: int, rng) -> None:
    """encode_rows on heavy-tailed columns (10 Cauchy, 10 log-normal with sigma 3), where a grid
    spanning all edges crowds most of them into a few cells."""
    X = np.ascontiguousarray(np.concatenate(
        [rng.standard_cauchy((n, 10)), np.exp(rng.normal(scale=3.0, size=(n, 10)))], axis=1))
    mapper = edges_from_sample(X[rng.choice(n, 50_000, replace=False)], max_bins=256)
    old, new = old_grid(mapper.edges), mapper.grid()
    c_old, c_new = np.empty(X.shape, mapper.code_dtype), np.empty(X.shape, mapper.code_dtype)
    old_s = best_of(repeats, lambda: old_encode_rows(X, *old, c_old)) * 1e6 / n
    new_s = best_of(repeats, lambda: encode_rows(X, *new, c_new)) * 1e6 / n
    assert np.array_equal(c_old, c_new)
    print(f"heavy tails ({new[5].size} crowded cells): encode_rows OLD {old_s:.3f} s, NEW {new_s:.3f} s "
          f"per 1M rows, OLD / NEW = {old_s / new_s:.2f}x; codes identical")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    numba.set_num_threads(1)
    X, source = load(args.rows)
    n = X.shape[0]
    rng = np.random.default_rng(0)
    mapper = edges_from_sample(X[rng.choice(n, 50_000, replace=False)], max_bins=256)
    centers = X[rng.choice(n, 10, replace=False)]
    centers_t, center_sq = np.ascontiguousarray(centers.T), np.einsum("ij,ij->i", centers, centers)
    old, new = old_grid(mapper.edges), mapper.grid()
    print(f"data: {source}, {n} x {X.shape[1]}; edges per feature {min(e.size for e in mapper.edges)}"
          f"..{max(e.size for e in mapper.edges)}; new grid {new[3].shape[1] - 1} cells, {new[5].size} crowded; numba "
          f"threads {numba.get_num_threads()}")

    def buffers():
        return np.empty(X.shape, mapper.code_dtype), np.empty((n, 10)), np.empty(n, np.uint8)

    c_old, d_old, l_old = buffers()
    c_new, d_new, l_new = buffers()
    runs = {
        "encode_rows OLD": lambda: old_encode_rows(X, *old, c_old),
        "encode_rows NEW": lambda: encode_rows(X, *new, c_new),
        "encode_and_project OLD": lambda: old_encode_and_project(X, *old, centers_t, center_sq, c_old, d_old, l_old),
        "encode_and_project NEW": lambda: encode_and_project(X, *new, X, centers_t, center_sq, c_new, d_new, l_new),
    }
    for run in runs.values():  # compile (or load from cache) outside the timing
        run()
    assert np.array_equal(c_old, c_new) and np.array_equal(d_old, d_new) and np.array_equal(l_old, l_new)
    for f, e in enumerate(mapper.edges):
        assert np.array_equal(c_new[:, f], np.searchsorted(e, X[:, f], side="left")), f
    seconds = {name: best_of(args.repeats, run) * 1e6 / n for name, run in runs.items()}
    assert np.array_equal(c_old, c_new)
    for name, s in seconds.items():
        print(f"{name:24s} {s:.3f} s per 1M rows (best of {args.repeats})")
    for kernel in ("encode_rows", "encode_and_project"):
        print(f"{kernel}: OLD / NEW = {seconds[kernel + ' OLD'] / seconds[kernel + ' NEW']:.2f}x")
    print("codes identical (old, new, np.searchsorted)")
    heavy_tails(args.repeats, n, rng)
    print("uptime:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())


if __name__ == "__main__":
    main()
