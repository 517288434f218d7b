"""The one row hash of exclust: a uniform number in [0, 1) per (seed, global row index).

Whatever draws rows at random on the workers (kernel MMDT's per-cluster samples, the held-out
and sampled rows of the CAV fit) keys each row by this hash of its global index, so numpy input
and every Dask chunking of the same rows make the same draws. It is splitmix64's finalizer of
``seed * golden + row``; numba code calls ``row_key`` inline, numpy code ``row_uniforms``.
"""
from __future__ import annotations

import numba
import numpy as np

_MASK64 = (1 << 64) - 1


@numba.njit(cache=True, nogil=True, inline="always")
def row_key(seed, row):
    z = np.uint64(seed) * np.uint64(0x9E3779B97F4A7C15) + np.uint64(row) + np.uint64(0x632BE59BD9B4E019)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    z = z ^ (z >> np.uint64(31))
    return float(z >> np.uint64(11)) * (1.0 / 9007199254740992.0)


@numba.njit(cache=True, nogil=True)
def _row_keys(seed, rows):
    out = np.empty(rows.shape[0])
    for i in range(rows.shape[0]):
        out[i] = row_key(seed, rows[i])
    return out


@numba.njit(cache=True, nogil=True)
def _rows_below(seed, start, stop, share):
    out = np.empty(stop - start, dtype=np.int64)
    m = 0
    for r in range(start, stop):
        if row_key(seed, r) < share:
            out[m] = r - start
            m += 1
    return out[:m]


def rows_below(seed: int, start: int, stop: int, share: float) -> np.ndarray:
    """Local indices ``i`` of the global rows ``start + i`` (up to ``stop``) whose ``row_key(seed, ...)`` is below
    ``share``: a Bernoulli sample of about ``share`` of the rows, the same rows however they are parted."""
    return _rows_below(np.uint64(int(seed) & _MASK64), int(start), int(stop), float(share))


def stream_seed(seed: int, stream: int) -> int:
    """A seed per independent stream of draws from one user seed (stream 0, 1, ... of the same rows)."""
    return (int(seed) * 4 + int(stream)) & _MASK64


def row_uniforms(seed: int, rows) -> np.ndarray:
    """``row_key(seed, r)`` for every global row index r in ``rows``."""
    return _row_keys(np.uint64(int(seed) & _MASK64), np.ascontiguousarray(rows, dtype=np.int64))
