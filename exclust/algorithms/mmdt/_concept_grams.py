"""Numba kernel for the CAV pass: Gram matrices of [x, 1, y] per continuous concept and fold.

The least-squares CAV of a continuous concept is solved from sum z z' over its labelled rows,
z = [x, 1, y] (``algorithms/concept.py``); each chunk adds its rows here, split into the fitting
fold and the held-out fold. Only the upper triangle is accumulated (the caller mirrors it), and
no BLAS call is made per chunk, so threads running chunks side by side do not oversubscribe the
cores. Plain numpy in and out, GIL released.
"""
from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
def accumulate_concept_grams(X, Y, held_out, concepts):
    """Upper triangles of sum z z', z = [x, 1, y_m], per concept m in ``concepts`` and fold.

    Returns an array (len(concepts), 2, d + 2, d + 2); fold 0 holds the rows with
    ``held_out`` False, fold 1 the others. Rows whose label y_m is not finite are skipped.
    """
    n, d = X.shape
    width = d + 2
    grams = np.zeros((concepts.shape[0], 2, width, width))
    z = np.empty(width)
    for i in range(n):
        fold = 1 if held_out[i] else 0
        for j in range(d):
            z[j] = X[i, j]
        z[d] = 1.0
        for c in range(concepts.shape[0]):
            y = Y[i, concepts[c]]
            if not np.isfinite(y):
                continue
            z[d + 1] = y
            for a in range(width):
                za = z[a]
                for b in range(a, width):
                    grams[c, fold, a, b] += za * z[b]
    return grams
