"""Numba kernel of the validation pass: per block, NaN and infinity counts and largest magnitudes per column."""
from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
def finite_summary(X):
    """Validation of a block in one read of each row, no temporaries: [rows holding a non-finite
    value, rows holding an infinity, non-finite count per column..., infinity count per column...,
    largest finite magnitude per column...]."""
    n, d = X.shape
    out = np.zeros(2 + 3 * d)
    for i in range(n):
        row_bad = False
        row_inf = False
        for j in range(d):
            v = X[i, j]
            if np.isfinite(v):
                a = abs(v)
                if a > out[2 + 2 * d + j]:
                    out[2 + 2 * d + j] = a
            else:
                out[2 + j] += 1.0
                row_bad = True
                if not np.isnan(v):
                    out[2 + d + j] += 1.0
                    row_inf = True
        if row_bad:
            out[0] += 1.0
        if row_inf:
            out[1] += 1.0
    return out
