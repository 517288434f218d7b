"""The per-center values of the engine's kept parts: held, or recomputed in every pass.

A kept part (``engine._encode_block``) carries, per row, either its values with every reference
center ((rows, k): dot products or distances, under ``"dots"``) or, when holding them all would
not fit (``HELD_VALUES_SHARE``), the rows themselves and how to make the values (``"rows"``,
``"recipe"``), or neither (``EncodedData(values="none")``, IMM). The criteria's blocks read them
through ``value_chunks`` / ``over_value_chunks``, so one block serves both: held values come in
one piece, recomputed ones a chunk of rows at a time, by the encoding's own kernel (the same
numbers).
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from exclust.algorithms.histogram._bin_coding import encode_and_measure, encode_and_project
from exclust.algorithms.histogram.binning import BinMapper
from exclust.dataplane.parts import add_parts, label_dtype

# The per-center values of a part ((rows, k): dot products or distances) are held where the
# part lives when all of them take at most this share of that memory (the workers' for Dask, this
# machine's free memory for numpy); else only the rows are kept and every pass recomputes the
# values, ``RECOMPUTED_CHUNK_BYTES`` of them at a time. At 10M rows x k = 160 they are 6.4 GB of
# float32, more than two 3.5 GiB workers hold; the rows are 1.6 GB, and a pass then pays the
# d multiply-adds per center of the encoding (bench/README.md, "The kept values at 10M x k = 160").
HELD_VALUES_SHARE = 0.25
RECOMPUTED_CHUNK_BYTES = 32 << 20


def encode_rows(block: np.ndarray, mapper: BinMapper, centers: np.ndarray, metric, codes: np.ndarray,
                 values: np.ndarray, labels: np.ndarray) -> tuple[float, np.ndarray]:
    """The encoding kernel on a float64 block (X's columns, then Z's when given): writes its codes,
    per-center values and nearest-center labels; returns (sum of ||z||^2, NaN per feature
    without a missing bin)."""
    d = mapper.n_features
    X = block[:, :d]
    Z = np.ascontiguousarray(block[:, d:]) if block.shape[1] > d else X
    if metric is None:
        return encode_and_project(
            X, *mapper.grid(), Z, np.ascontiguousarray(centers.T), np.einsum("ij,ij->i", centers, centers),
            codes, values, labels,
        )
    return encode_and_measure(X, *mapper.grid(), Z, centers, metric == "l1", codes, values, labels)


def recomputed_chunks(rows: np.ndarray, mapper: BinMapper, centers: np.ndarray, dtype, metric,
                      codes: np.ndarray | None = None, labels: np.ndarray | None = None
                      ) -> Iterator[tuple[int, int, np.ndarray, float, np.ndarray]]:
    """The per-center values of ``rows`` made ``RECOMPUTED_CHUNK_BYTES`` at a time, as
    (start, stop, values, sum of ||z||^2, NaN per feature without a missing bin) per chunk;
    the chunk's codes and labels go to rows ``start:stop`` of ``codes`` and ``labels`` (both or neither; None:
    scratch, dropped). ``values`` is one buffer, overwritten by the next chunk."""
    n, k = rows.shape[0], centers.shape[0]
    step = max(1024, RECOMPUTED_CHUNK_BYTES // (k * np.dtype(dtype).itemsize))
    width = min(step, n)
    values = np.empty((width, k), dtype=dtype)
    # Scratch codes and labels are written at rows 0:m of theirs, the caller's at start:stop.
    own_rows = codes is None
    codes = np.empty((width, mapper.n_features), dtype=mapper.code_dtype) if codes is None else codes
    labels = np.empty(width, dtype=label_dtype(k)) if labels is None else labels
    for start in range(0, n, step):
        stop = min(n, start + step)
        m = stop - start
        at = slice(0, m) if own_rows else slice(start, stop)
        sq, unbinned = encode_rows(rows[start:stop], mapper, centers, metric, codes[at], values[:m], labels[at])
        yield start, stop, values[:m], float(sq), unbinned


def value_chunks(part: dict) -> Iterator[tuple[int, int, np.ndarray]]:
    """The part's per-center values as (start, stop, values) over its rows: the held values in
    one piece, else recomputed from the kept rows a chunk at a time (the same kernel, so the same
    values as if held). A consumer takes rows ``start:stop`` of every per-row array with them."""
    if "dots" in part:
        yield 0, part["n"], part["dots"]
        return
    if "rows" not in part:
        raise ValueError("these encoded rows keep no per-center values (EncodedData values='none')")
    for start, stop, values, _, _ in recomputed_chunks(part["rows"], *part["recipe"]):
        yield start, stop, values


def over_value_chunks(part: dict, per_chunk: Callable[[int, int, np.ndarray], Any]) -> Any:
    """``per_chunk(start, stop, values)`` over ``value_chunks(part)``, its results summed."""
    total = None
    for start, stop, values in value_chunks(part):
        found = per_chunk(start, stop, values)
        total = found if total is None else add_parts(total, found)
    return total
