"""Numba kernel of the validation pass: per block, non-finite counts and largest magnitudes per column."""
from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
def finite_summary(X):
    """Validation of a block in one read of each row, no temporaries: [rows holding a non-finite
    value, non-finite count per column..., largest finite magnitude per column...]."""
    n, d = X.shape
    out = np.zeros(1 + 2 * d)
    for i in range(n):
        row_bad = False
        for j in range(d):
            v = X[i, j]
            if np.isfinite(v):
                a = abs(v)
                if a > out[1 + d + j]:
                    out[1 + d + j] = a
            else:
                out[1 + j] += 1.0
                row_bad = True
        if row_bad:
            out[0] += 1.0
    return out
