"""Numba kernels of exact bin coding: each value's bin code, and codes fused with projections
onto the centers (``encode_and_project``) or distances to them (``encode_and_measure``).

A value's code is found by a cell table (edges before each cell, one comparison inside the cell; crowded
cells get a finer grid of their own), the same answer as ``np.searchsorted`` on the edges (binning.py).
A category feature's value is its code; a NaN (or, on a category feature, a value that is not one of
its codes) takes the feature's missing bin. A NaN of a feature without a missing bin is counted per
feature (``unbinned``) and coded 0: the caller decides (binning.py, engine.py).

The fused kernels read the codes from X and the per-row values (dot products, distances, sum of
squares) from Z, the clustering space, which may be X itself (issue 28: cluster in one space, explain
in another).
"""
from __future__ import annotations

import numba
import numpy as np

from exclust.dataplane._row_distances import distances_to_centers


@numba.njit(cache=True, nogil=True, inline="always")
def _cell_of(v, f, origin, inv_width, top):
    """Cell of value v in feature f's uniform grid of ``top + 1`` cells.

    Monotone non-decreasing in v: IEEE subtraction and multiplication by a positive constant
    round monotonically, and the clamp (done on the float, so that +-inf and overflow land in
    the end cells; NaN goes to cell 0) and the truncation keep the order. The same function
    places the edges (``search_tables``), so a value and an edge are compared on identical floats.
    """
    t = (v - origin[f]) * inv_width[f]
    if not t > 0.0:
        t = 0.0
    if t > top:
        t = float(top)
    return int(t)


# A cell holding more edges than this gets a finer grid of its own (see ``search_tables``),
# of about SUB_CELLS_PER_EDGE sub-cells per edge, a power of two up to MAX_SUB_CELLS.
CROWDED_CELL = 1
SUB_CELLS_PER_EDGE = 32
MAX_SUB_CELLS = 8192


@numba.njit(cache=True, nogil=True)
def sub_cells(n):
    """Sub-cells of a crowded cell holding n edges."""
    g = 1
    while g < SUB_CELLS_PER_EDGE * n and g < MAX_SUB_CELLS:
        g *= 2
    return g


@numba.njit(cache=True, nogil=True)
def search_tables(edges, n_edges, origin, inv_width, cells):
    """The exact search tables of the coding kernel, built with its own cell function.

    ``base[f, c]``: the number of edges of feature f whose cell is below c (column ``cells``:
    all). As ``_cell_of`` is monotone, every edge of a lower cell is below every value of cell
    c and every edge of a higher cell is above it: only the edges of cell c itself need
    comparing. A cell with more than ``CROWDED_CELL`` edges (heavy tails crowd most edges into
    a few cells of a grid spanning them all) gets a second uniform grid over its own edges
    (``sub_cells``), numbered s by ``sub_of_cell[f, c]``: origin and 1 / width
    ``sub_origin[s]``, ``sub_inv_width[s]``, and in ``sub_base[sub_start[s]:sub_start[s + 1]]``
    the number of the cell's edges below each sub-cell (one entry more than sub-cells).
    """
    d = n_edges.shape[0]
    base = np.zeros((d, cells + 1), dtype=np.uint16)
    for f in range(d):
        ne = n_edges[f]
        b = 0
        for c in range(cells + 1):
            while b < ne and _cell_of(edges[f, b], f, origin, inv_width, cells - 1) < c:
                b += 1
            base[f, c] = b
    sub_of_cell = np.full((d, cells), -1, dtype=np.int32)
    n_sub = 0
    size = 0
    for f in range(d):
        for c in range(cells):
            n = np.int64(base[f, c + 1]) - np.int64(base[f, c])
            if n > CROWDED_CELL:
                sub_of_cell[f, c] = n_sub
                n_sub += 1
                size += sub_cells(n) + 1
    sub_origin = np.zeros(n_sub)
    sub_inv_width = np.zeros(n_sub)
    sub_start = np.zeros(n_sub + 1, dtype=np.int64)
    sub_base = np.zeros(size, dtype=np.uint16)
    for f in range(d):
        for c in range(cells):
            s = sub_of_cell[f, c]
            if s < 0:
                continue
            lo = np.int64(base[f, c])
            hi = np.int64(base[f, c + 1])
            g = sub_cells(hi - lo)
            sub_start[s + 1] = sub_start[s] + g + 1
            scale = g / (edges[f, hi - 1] - edges[f, lo])
            if np.isfinite(scale):  # else every value of the cell shares sub-cell 0
                sub_origin[s] = edges[f, lo]
                sub_inv_width[s] = scale
            b = lo
            for sc in range(g + 1):
                while b < hi and _cell_of(edges[f, b], s, sub_origin, sub_inv_width, g - 1) < sc:
                    b += 1
                sub_base[sub_start[s] + sc] = b - lo
    return base, sub_of_cell, sub_origin, sub_inv_width, sub_start, sub_base


@numba.njit(cache=True, nogil=True, inline="always")
def _code_of(v, f, edges, origin, inv_width, base, sub_of_cell, sub_origin, sub_inv_width, sub_start, sub_base,
             n_categories, missing_bin):
    """Bin of value v of feature f: its category code, its missing bin, or (numeric) the number
    of edges strictly below it; -1 for a NaN of a feature without a missing bin.

    The edges below v are those of the cells before v's cell (``base``) plus those of v's own
    cell that are below v (in a crowded cell: those of the sub-cells before v's sub-cell, plus
    those of its sub-cell below v), counted by a branch-free lower bound. Cells outnumber
    edges, so a cell mostly holds none or one and the search is just its final comparison with
    the first edge at or after the cell (with no edge in the cell, that edge lies in a later
    cell, hence above v; past the last edge it is the +inf padding).
    """
    if n_categories[f] > 0:
        if v >= 0.0 and v < n_categories[f] and v == np.floor(v):  # NaN fails every comparison
            return np.int64(v)
        return missing_bin[f]
    c = _cell_of(v, f, origin, inv_width, base.shape[1] - 2)
    lo = np.int64(base[f, c])
    n = np.int64(base[f, c + 1]) - lo
    if n > CROWDED_CELL:
        s = sub_of_cell[f, c]
        at = sub_start[s]
        at += _cell_of(v, s, sub_origin, sub_inv_width, sub_start[s + 1] - at - 2)
        lo += np.int64(sub_base[at])
        n = np.int64(sub_base[at + 1]) - np.int64(sub_base[at])
    while n > 1:
        half = n >> 1
        # A select, not a branch: the comparison's outcome is data, unpredictable.
        lo = lo + half if edges[f, lo + half] < v else lo
        n -= half
    code = lo + np.int64(edges[f, lo] < v)
    # A NaN lands in cell 0 and compares below no edge: code 0, the only code it can take.
    if code == 0 and v != v:
        return missing_bin[f]
    return code


CHUNK = 4096  # rows per parallel task of the coding kernels


@numba.njit(cache=True, nogil=True, inline="always")
def _code_row(X, i, codes, unbinned, c, edges, origin, inv_width, base, sub_of_cell, sub_origin, sub_inv_width,
              sub_start, sub_base, n_categories, missing_bin):
    """Codes of row i of X into ``codes``; its NaN without a missing bin counted in ``unbinned[c]``."""
    for f in range(X.shape[1]):
        code = _code_of(X[i, f], f, edges, origin, inv_width, base, sub_of_cell, sub_origin, sub_inv_width, sub_start,
                        sub_base, n_categories, missing_bin)
        if code < 0:
            unbinned[c, f] += 1
            code = 0
        codes[i, f] = code


@numba.njit(cache=True, nogil=True)
def _summed(per_chunk):
    out = np.zeros(per_chunk.shape[1], dtype=np.int64)
    for c in range(per_chunk.shape[0]):
        out += per_chunk[c]
    return out


@numba.njit(cache=True, nogil=True, parallel=True)
def encode_rows(X, edges, origin, inv_width, base, sub_of_cell, sub_origin, sub_inv_width, sub_start, sub_base,
                n_categories, missing_bin, codes):
    """Write into ``codes`` the bin of every value (see ``_code_of``); returns, per feature, its
    NaN that found no missing bin (coded 0)."""
    n, d = X.shape
    n_chunks = (n + CHUNK - 1) // CHUNK
    unbinned = np.zeros((n_chunks, d), dtype=np.int64)
    for c in numba.prange(n_chunks):
        for i in range(c * CHUNK, min(n, (c + 1) * CHUNK)):
            _code_row(X, i, codes, unbinned, c, edges, origin, inv_width, base, sub_of_cell, sub_origin, sub_inv_width,
                      sub_start, sub_base, n_categories, missing_bin)
    return _summed(unbinned)


@numba.njit(cache=True, nogil=True, inline="always")
def _dots_with_centers(Z, i, centers_t, acc):
    """``acc[j] = <z_i, mu_j>`` for every center, feature by feature into all k at once (a loop
    without a carried dependency, which the compiler vectorizes)."""
    acc[:] = 0.0
    for f in range(Z.shape[1]):
        v = Z[i, f]
        for j in range(centers_t.shape[1]):
            acc[j] += v * centers_t[f, j]


@numba.njit(cache=True, nogil=True, parallel=True)
def center_values(Z, centers_t, columns, measure, l1, needed, values):
    """Per row of Z with ``needed[i]``, its value with the centers ``centers_t`` ((d, s): the
    columns ``columns`` of the full table), written to ``values[i, columns]`` (``measure``:
    distances as ``_row_distances.distances_to_centers``, else dot products), the encoding kernels' numbers to
    the bit (each value is summed over the features in the same order, whichever centers are
    asked); those columns of the rows not needed get NaN, so that a reader who should have
    needed them sees it. The other columns are not written."""
    n = Z.shape[0]
    s = centers_t.shape[1]
    n_chunks = (n + CHUNK - 1) // CHUNK
    for c in numba.prange(n_chunks):
        acc = np.empty(s)
        for i in range(c * CHUNK, min(n, (c + 1) * CHUNK)):
            if not needed[i]:
                for j in range(s):
                    values[i, columns[j]] = np.nan
                continue
            if measure:
                distances_to_centers(Z, i, centers_t, l1, acc)
            else:
                _dots_with_centers(Z, i, centers_t, acc)
            for j in range(s):
                values[i, columns[j]] = acc[j]


@numba.njit(cache=True, nogil=True, parallel=True)
def encode_and_project(X, edges, origin, inv_width, base, sub_of_cell, sub_origin, sub_inv_width, sub_start, sub_base,
                       n_categories, missing_bin, Z, centers_t, center_sq, codes, dots, labels):
    """Pass 2 in one read of each row: bin codes of X, <z, mu_j> for every center, nearest center.

    Returns the block's sum of ||z||^2 and, per feature of X, its NaN without a missing bin. The
    dot products are ``_dots_with_centers``'.
    """
    n, d = X.shape
    dz = Z.shape[1]
    k = centers_t.shape[1]
    n_chunks = (n + CHUNK - 1) // CHUNK
    unbinned = np.zeros((n_chunks, d), dtype=np.int64)
    total = 0.0
    for c in numba.prange(n_chunks):
        acc = np.empty(k)  # one scratch row per chunk, not per row
        part = 0.0
        for i in range(c * CHUNK, min(n, (c + 1) * CHUNK)):
            _code_row(X, i, codes, unbinned, c, edges, origin, inv_width, base, sub_of_cell, sub_origin, sub_inv_width,
                      sub_start, sub_base, n_categories, missing_bin)
            for f in range(dz):
                v = Z[i, f]
                part += v * v
            _dots_with_centers(Z, i, centers_t, acc)
            best = np.inf
            arg = 0
            for j in range(k):
                dots[i, j] = acc[j]
                # ||x - mu_j||^2 up to the ||x||^2 every center shares.
                cost = center_sq[j] - 2.0 * acc[j]
                if cost < best:
                    best = cost
                    arg = j
            labels[i] = arg
        total += part
    return total, _summed(unbinned)


@numba.njit(cache=True, nogil=True, parallel=True)
def encode_and_measure(X, edges, origin, inv_width, base, sub_of_cell, sub_origin, sub_inv_width, sub_start, sub_base,
                       n_categories, missing_bin, Z, centers, l1, codes, dists, labels):
    """Pass 2 with distances in place of dot products: bin codes of X, the distance of every
    row of Z to every center (squared Euclidean, or l1 when ``l1``), and the nearest center.

    The distances are ``_row_distances.distances_to_centers``'. Returns the block's sum of ||z||^2 and, per
    feature of X, its NaN without a missing bin.
    """
    n, d = X.shape
    dz = Z.shape[1]
    k = centers.shape[0]
    centers_t = np.ascontiguousarray(centers.T)
    total = 0.0
    n_chunks = (n + CHUNK - 1) // CHUNK
    unbinned = np.zeros((n_chunks, d), dtype=np.int64)
    for c in numba.prange(n_chunks):
        acc = np.empty(k)  # one scratch row per chunk, not per row
        part = 0.0
        for i in range(c * CHUNK, min(n, (c + 1) * CHUNK)):
            _code_row(X, i, codes, unbinned, c, edges, origin, inv_width, base, sub_of_cell, sub_origin, sub_inv_width,
                      sub_start, sub_base, n_categories, missing_bin)
            for f in range(dz):
                v = Z[i, f]
                part += v * v
            distances_to_centers(Z, i, centers_t, l1, acc)
            best = np.inf
            arg = 0
            for j in range(k):
                dists[i, j] = acc[j]
                if acc[j] < best:
                    best = acc[j]
                    arg = j
            labels[i] = arg
        total += part
    return total, _summed(unbinned)
