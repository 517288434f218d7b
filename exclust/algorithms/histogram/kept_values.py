"""The per-center values of the engine's kept parts: held, or recomputed in every pass.

A kept part (``engine._encode_block``) carries, per row, either its values with every reference
center ((rows, k): dot products or distances, under ``"dots"``) or, when holding them all would
not fit (``HELD_VALUES_SHARE``), the values of as many of its first rows as fit and, for the
others, the rows themselves and how to make their values (``"rows"``, ``"recipe"``), or neither
(``EncodedData(values="none")``, IMM). The criteria's blocks read them through ``value_chunks`` /
``over_value_chunks``, so one block serves every case: held values come in one piece, recomputed
ones a chunk of rows at a time, by the encoding's own kernel (the same numbers).
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from exclust.algorithms.histogram._bin_coding import center_values, encode_and_measure, encode_and_project
from exclust.algorithms.histogram._code_histograms import rows_in_slots
from exclust.algorithms.histogram.binning import BinMapper
from exclust.dataplane.parts import add_parts

# The per-center values of a part ((rows, k): dot products or distances) are held where the
# part lives when all of them take at most this share of that memory (the workers' for Dask, this
# machine's free memory for numpy); else the values of the first rows of each part up to what
# that share holds beside the rows themselves are held (``EncodedData``), and every pass
# recomputes the others' from their rows, ``RECOMPUTED_CHUNK_BYTES`` of them at a time. At 10M
# rows x k = 160 they are 6.4 GB of float32, more than two 3.5 GiB workers hold; the rows are
# 1.6 GB, and a pass then pays the d multiply-adds per center of the encoding (bench/README.md,
# "The kept values at 10M x k = 160").
HELD_VALUES_SHARE = 0.25
# Chunks are large because every chunk is a call of the pass's kernels, each of which makes and
# sums its own per-thread histograms (tens of MB at k = 160): ExGreedy at 200,000 x k = 160 in
# memory took 16.0 s held, 28.0 s recomputed 32 MB at a time and 22.9 s 256 MB at a time.
RECOMPUTED_CHUNK_BYTES = 256 << 20


def encode_rows(block: np.ndarray, mapper: BinMapper, centers: np.ndarray, metric, codes: np.ndarray,
                 values: np.ndarray, labels: np.ndarray) -> tuple[float, np.ndarray]:
    """The encoding kernel on a float64 block (X's columns, then Z's when given): writes its codes,
    per-center values and nearest-center labels; returns (sum of ||z||^2, NaN per feature
    without a missing bin)."""
    X, Z = block[:, :mapper.n_features], clustering_columns(block, mapper)
    if metric is None:
        return encode_and_project(
            X, *mapper.grid(), Z, np.ascontiguousarray(centers.T), np.einsum("ij,ij->i", centers, centers),
            codes, values, labels,
        )
    return encode_and_measure(X, *mapper.grid(), Z, centers, metric == "l1", codes, values, labels)


def clustering_columns(block: np.ndarray, mapper: BinMapper) -> np.ndarray:
    """The clustering space's columns of an encoded block: Z's, after X's features, or X itself."""
    d = mapper.n_features
    return np.ascontiguousarray(block[:, d:]) if block.shape[1] > d else block


def chunk_rows(k: int, dtype) -> int:
    """Rows per chunk of recomputed values: ``RECOMPUTED_CHUNK_BYTES`` of them, at least 1,024."""
    return max(1024, RECOMPUTED_CHUNK_BYTES // (k * np.dtype(dtype).itemsize))


def encode_in_chunks(block: np.ndarray, mapper: BinMapper, centers: np.ndarray, dtype, metric, codes: np.ndarray,
                     labels: np.ndarray) -> tuple[float, np.ndarray]:
    """``encode_rows`` on ``block`` a chunk of rows at a time, its values into one scratch buffer
    and dropped (a part that will recompute them): codes and labels written, (sum of ||z||^2,
    NaN per feature without a missing bin) returned."""
    n, k = block.shape[0], centers.shape[0]
    step = chunk_rows(k, dtype)
    values = np.empty((min(step, n), k), dtype=dtype)
    sq, unbinned = 0.0, np.zeros(mapper.n_features, dtype=np.int64)
    for start in range(0, n, step):
        stop = min(n, start + step)
        chunk_sq, chunk_unbinned = encode_rows(block[start:stop], mapper, centers, metric, codes[start:stop],
                                               values[:stop - start], labels[start:stop])
        sq, unbinned = sq + chunk_sq, unbinned + chunk_unbinned
    return sq, unbinned


def values_recipe(block: np.ndarray, mapper: BinMapper, centers: np.ndarray, dtype, metric) -> dict:
    """What a part keeps to recompute its values: the clustering space's columns of its block
    (``"rows"``: Z's, or X itself) and the centers as the kernel takes them (``"recipe"``)."""
    recipe = (np.ascontiguousarray(centers.T), metric is not None, metric == "l1", dtype)
    return {"rows": clustering_columns(block, mapper), "recipe": recipe}


def needed_rows(part: dict, tree_arrays: tuple, resume: np.ndarray, *slots: np.ndarray) -> np.ndarray | None:
    """The rows of a part whose leaf holds a slot in one of ``slots`` (node tables, -1: none):
    the only rows whose values a pass reads. None when the part holds its values (no routing
    spent then)."""
    if "rows" not in part:
        return None
    return rows_in_slots(part["codes"], *tree_arrays, resume, np.stack([np.asarray(t, dtype=np.int64) for t in slots]))


def value_chunks(part: dict, needed: np.ndarray | None = None, centers: np.ndarray | None = None
                 ) -> Iterator[tuple[int, int, np.ndarray]]:
    """The part's per-center values as (start, stop, values) over its rows: the held values in
    one piece (all of them, or those of its first rows), then the others recomputed from the kept
    rows a chunk at a time (the encoding's arithmetic, ``_bin_coding.center_values``: the same
    values as if held), only for the rows ``needed`` (a bool mask over the part, None: all; the
    others are NaN) and the ``centers`` the pass reads (a bool mask over the k centers, None: all;
    the other columns are NaN): a deep node's pass reads only its own centers' values, so it makes
    only those. A consumer takes rows ``start:stop`` of every per-row array with them; a
    recomputed ``values`` is one buffer, overwritten by the next chunk."""
    n = part["n"]
    if "rows" not in part:
        if "dots" not in part:
            raise ValueError("these encoded rows keep no per-center values (EncodedData values='none')")
        yield 0, n, part["dots"]
        return
    held = part["dots"].shape[0] if "dots" in part else 0
    if held:
        yield 0, held, part["dots"]
    rows = part["rows"]  # those after the held ones
    centers_t, measure, l1, dtype = part["recipe"]
    k = centers_t.shape[1]
    step = chunk_rows(k, dtype)
    if centers is None or centers.all():
        columns = np.arange(k)
        values = np.empty((min(step, n - held), k), dtype=dtype)
    else:  # the columns not made stay NaN in every chunk
        columns = np.flatnonzero(centers)
        centers_t = np.ascontiguousarray(centers_t[:, columns])
        values = np.full((min(step, n - held), k), np.nan, dtype=dtype)
    needed = np.ones(n, dtype=np.bool_) if needed is None else needed
    for start in range(held, n, step) if n > held else [held]:  # an empty part gives one empty chunk
        stop = min(n, start + step)
        center_values(rows[start - held:stop - held], centers_t, columns, measure, l1, needed[start:stop],
                      values[:stop - start])
        yield start, stop, values[:stop - start]


def over_value_chunks(part: dict, per_chunk: Callable[[int, int, np.ndarray], Any],
                      needed: np.ndarray | None = None, centers: np.ndarray | None = None) -> Any:
    """``per_chunk(start, stop, values)`` over ``value_chunks(part, needed, centers)``, its results summed."""
    total = None
    for start, stop, values in value_chunks(part, needed, centers):
        found = per_chunk(start, stop, values)
        total = found if total is None else add_parts(total, found)
    return total
