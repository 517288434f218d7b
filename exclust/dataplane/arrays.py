"""Where an array lives, decided once as it enters (LightGBM decides it once, in the wrapper
around its serial learner): numpy in this process, or a Dask array over the workers.

Code above the data plane asks here at its entry point, gets the decision as a flag (or as a
``Dataset``'s ``distributed``) and passes that down, instead of asking each array again; the
few operations whose code differs between the two kinds (bringing a small result to memory,
making a column lazy beside lazy rows, the array module) live here too.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from exclust.dataplane.parts import is_lazy, one_column_chunk


def entering(X: Any, *, measure_chunks: bool = False) -> tuple[Any, bool]:
    """(X, distributed) for a matrix entering from outside: a Dask array comes back as float64
    with its columns in one chunk (its unknown row chunk sizes measured when
    ``measure_chunks``: one pass) and True; anything else comes back as it is, with False."""
    if not is_lazy(X):
        return X, False
    if X.dtype != np.float64:
        X = X.astype(np.float64)
    X = one_column_chunk(X)
    if measure_chunks and X.ndim == 2 and any(np.isnan(c) for c in X.chunks[0]):
        X = X.compute_chunk_sizes()
    return X, True


def entering_array(values: Any) -> tuple[Any, bool]:
    """(values, distributed) for an array entering from outside (labels, a concept column, rows
    to project): a Dask array as it is and True, anything else as a numpy array and False."""
    if is_lazy(values):
        return values, True
    return np.asarray(values), False


def to_memory(a: Any) -> np.ndarray:
    """A small array (a row, a count, labels that fit) in this process, computed if lazy."""
    return np.asarray(a.compute() if is_lazy(a) else a)


def as_lazy(a: Any, chunks: Any) -> Any:
    """A Dask array with row chunks ``chunks``: a lazy one rechunked, an in-memory one wrapped."""
    import dask.array as da

    return a.rechunk(chunks) if is_lazy(a) else da.from_array(a, chunks=chunks)


def array_module(distributed: bool) -> Any:
    """``dask.array`` for distributed data, ``numpy`` otherwise (for ``where`` and the like)."""
    if distributed:
        import dask.array as da

        return da
    return np
