"""Where an array lives is decided once as it enters (``exclust.dataplane.arrays``)."""
from __future__ import annotations

import dask.array as da
import numpy as np

from exclust.dataplane import arrays


def test_entering_decides_once_and_prepares_dask_rows():
    X = np.arange(12, dtype=np.int32).reshape(6, 2)
    same, distributed = arrays.entering(X)
    assert same is X and distributed is False  # in memory: as it is
    lazy = da.from_array(X, chunks=(3, 1))
    rows, distributed = arrays.entering(lazy)
    assert distributed is True
    assert rows.dtype == np.float64 and rows.numblocks == (2, 1)  # float64, one column chunk
    np.testing.assert_array_equal(rows.compute(), X.astype(np.float64))
    unknown = da.from_array(X, chunks=(3, 2))[da.from_array(np.arange(6) % 2 == 0, chunks=3)]
    assert any(np.isnan(c) for c in unknown.chunks[0])
    measured, _ = arrays.entering(unknown, measure_chunks=True)
    assert measured.chunks[0] == (2, 1)


def test_entering_array_and_the_helpers_of_either_kind():
    values, distributed = arrays.entering_array([1, 0, 2])
    assert isinstance(values, np.ndarray) and distributed is False
    lazy = da.from_array(np.array([1, 0, 2]), chunks=2)
    same, distributed = arrays.entering_array(lazy)
    assert same is lazy and distributed is True
    np.testing.assert_array_equal(arrays.to_memory(lazy), [1, 0, 2])
    np.testing.assert_array_equal(arrays.to_memory([1, 0, 2]), [1, 0, 2])
    assert arrays.as_lazy(np.arange(4), (2, 2)).chunks == ((2, 2),)
    assert arrays.as_lazy(da.arange(4, chunks=1), (3, 1)).chunks == ((3, 1),)
    assert arrays.array_module(True) is da and arrays.array_module(False) is np
