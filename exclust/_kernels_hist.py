"""Numba kernels of the histogram split engine: bin coding, routing on codes, histograms.

Rows are routed through the tree being grown by their bin codes, never by floats: a node
``(feature f, bin b)`` sends a row left when ``code[f] <= b``, which is the same test as
``x[f] <= edges[f][b]`` on the raw value (see binning.py), so the final ThresholdTree with
real-valued thresholds routes raw data exactly as the engine did.

Histogram kernels split the rows into one block per thread and give each thread its own
histogram, summed at the end: a row is read once, and no two threads write the same cell.
"""
from __future__ import annotations

import numba
import numpy as np


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
def _code_of(v, f, edges, origin, inv_width, base, sub_of_cell, sub_origin, sub_inv_width, sub_start, sub_base):
    """Bin of value v of feature f: the number of edges strictly below it.

    The edges below v are those of the cells before v's cell (``base``) plus those of v's own
    cell that are below v (in a crowded cell: those of the sub-cells before v's sub-cell, plus
    those of its sub-cell below v), counted by a branch-free lower bound. Cells outnumber
    edges, so a cell mostly holds none or one and the search is just its final comparison with
    the first edge at or after the cell (with no edge in the cell, that edge lies in a later
    cell, hence above v; past the last edge it is the +inf padding).
    """
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
    return lo + np.int64(edges[f, lo] < v)


@numba.njit(cache=True, nogil=True, parallel=True)
def encode_rows(X, edges, origin, inv_width, base, sub_of_cell, sub_origin, sub_inv_width, sub_start, sub_base, codes):
    """Write into ``codes`` the bin of every value (see ``_code_of``)."""
    n, d = X.shape
    for i in numba.prange(n):
        for f in range(d):
            codes[i, f] = _code_of(X[i, f], f, edges, origin, inv_width, base, sub_of_cell, sub_origin, sub_inv_width, sub_start, sub_base)


@numba.njit(cache=True, nogil=True, parallel=True)
def encode_and_project(X, edges, origin, inv_width, base, sub_of_cell, sub_origin, sub_inv_width, sub_start, sub_base, centers_t, center_sq, codes, dots, labels):
    """Pass 2 in one read of each row: bin codes, <x, mu_j> for every center, nearest center.

    Returns the block's sum of ||x||^2. The dot products accumulate feature by feature into all
    k centers at once (a loop without a carried dependency, which the compiler vectorizes).
    """
    n, d = X.shape
    k = centers_t.shape[1]
    chunk = 4096
    n_chunks = (n + chunk - 1) // chunk
    total = 0.0
    for c in numba.prange(n_chunks):
        acc = np.empty(k)  # one scratch row per chunk, not per row
        part = 0.0
        for i in range(c * chunk, min(n, (c + 1) * chunk)):
            acc[:] = 0.0
            for f in range(d):
                v = X[i, f]
                codes[i, f] = _code_of(v, f, edges, origin, inv_width, base, sub_of_cell, sub_origin, sub_inv_width, sub_start, sub_base)
                part += v * v
                for j in range(k):
                    acc[j] += v * centers_t[f, j]
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
    return total


@numba.njit(cache=True, nogil=True, parallel=True)
def encode_and_measure(X, edges, origin, inv_width, base, sub_of_cell, sub_origin, sub_inv_width, sub_start, sub_base, centers, l1, codes, dists, labels):
    """Pass 2 with distances in place of dot products: bin codes, the distance of every row to
    every center (squared Euclidean, or l1 when ``l1``), and the nearest center.

    Each distance is summed from its own differences, so it carries no cancellation error (the
    dot-product form ``||x||^2 - 2<x, mu> + ||mu||^2`` would). Returns the block's sum of ||x||^2.
    """
    n, d = X.shape
    k = centers.shape[0]
    total = 0.0
    chunk = 4096
    n_chunks = (n + chunk - 1) // chunk
    for c in numba.prange(n_chunks):
        part = 0.0
        for i in range(c * chunk, min(n, (c + 1) * chunk)):
            for f in range(d):
                v = X[i, f]
                codes[i, f] = _code_of(v, f, edges, origin, inv_width, base, sub_of_cell, sub_origin, sub_inv_width, sub_start, sub_base)
                part += v * v
            best = np.inf
            arg = 0
            for j in range(k):
                acc = 0.0
                for f in range(d):
                    diff = X[i, f] - centers[j, f]
                    acc += abs(diff) if l1 else diff * diff
                dists[i, j] = acc
                if acc < best:
                    best = acc
                    arg = j
            labels[i] = arg
        total += part
    return total


@numba.njit(cache=True, nogil=True)
def route_codes(codes, i, feature, split_bin, left, right, node):
    """Leaf reached by row ``i`` of ``codes`` from ``node`` (0: the root; split_bin < 0 marks a leaf)."""
    while split_bin[node] >= 0:
        if codes[i, feature[node]] <= split_bin[node]:
            node = left[node]
        else:
            node = right[node]
    return node


@numba.njit(cache=True, nogil=True)
def route_all_codes(codes, feature, split_bin, left, right):
    """Leaf of every row, routed by codes."""
    n = codes.shape[0]
    out = np.empty(n, dtype=np.int64)
    for i in range(n):
        out[i] = route_codes(codes, i, feature, split_bin, left, right, 0)
    return out


@numba.njit(cache=True, nogil=True, parallel=True)
def mistake_histograms(codes, labels, feature, split_bin, left, right, resume, remember, slot, center_ok, n_slots,
                       n_bins, k, nt):
    """IMM: per (slot, feature, bin, reference cluster) the count of alive rows.

    ``slot[node]`` is the histogram a row reaching leaf ``node`` goes to (-1: none);
    ``center_ok[s, j]`` says whether a row of reference cluster j counts for slot s, which is
    how rows cut off from their center by an earlier split are left out. ``resume`` and
    ``remember``: where each row's routing starts, see ``rows_by_slot``.
    """
    d = codes.shape[1]
    order, row_slot = rows_by_slot(codes, feature, split_bin, left, right, slot, n_slots, resume, remember)
    m = order.shape[0]
    parts = np.zeros((nt, n_slots, d, n_bins, k), dtype=np.int64)
    step = (m + nt - 1) // nt
    for t in numba.prange(nt):
        for r in range(t * step, min(m, (t + 1) * step)):
            i = order[r]
            s = row_slot[i]
            j = labels[i]
            if not center_ok[s, j]:
                continue
            for f in range(d):
                parts[t, s, f, codes[i, f], j] += 1
    out = np.zeros((n_slots, d, n_bins, k), dtype=np.int64)
    for t in range(nt):
        out += parts[t]
    return out


@numba.njit(cache=True, nogil=True)
def rows_by_slot(codes, feature, split_bin, left, right, slot, n_slots, resume, remember):
    """Indices of the rows that reach a requested leaf, grouped by slot (a counting sort).

    Visiting rows slot by slot keeps one slot's histogram hot in cache at a time; in data
    order, the rows of several leaves interleave and every row would touch a cold histogram.

    ``resume[i]`` is a node row i is known to pass through (0, the root, when nothing is
    known): a tree that only grows keeps every node, so routing from there reaches the same
    leaf as routing from the root, in a step or two instead of the tree's whole depth. With
    ``remember`` the reached leaf is written back into ``resume`` for the next pass.
    """
    n = codes.shape[0]
    row_slot = np.empty(n, dtype=np.int32)
    start = np.zeros(n_slots + 1, dtype=np.int64)
    for i in range(n):
        node = route_codes(codes, i, feature, split_bin, left, right, resume[i])
        if remember:
            resume[i] = node
        s = slot[node]
        row_slot[i] = s
        if s >= 0:
            start[s + 1] += 1
    for s in range(n_slots):
        start[s + 1] += start[s]
    order = np.empty(start[n_slots], dtype=np.int64)
    fill = start[:n_slots].copy()
    for i in range(n):
        s = row_slot[i]
        if s >= 0:
            order[fill[s]] = i
            fill[s] += 1
    return order, row_slot


@numba.njit(cache=True, nogil=True, parallel=True)
def surrogate_histograms(codes, dots, labels, feature, split_bin, left, right, resume, remember, slot, n_slots, n_bins,
                         nt):
    """ExKMC: per (slot, feature, bin) the row count, the sums of <x, mu_j>, and label counts.

    Returns ``sums`` (n_slots, d, n_bins, k + 1): channel 0 the count, channel 1 + j the sum of
    dot products with center j; and ``label_counts`` (n_slots, d, n_bins, k): rows per
    reference cluster, which tell which cuts isolate points of other centers than a leaf's.
    The requested rows, grouped by slot, are cut into ``nt`` blocks with a private histogram each.
    """
    d = codes.shape[1]
    k = dots.shape[1]
    order, row_slot = rows_by_slot(codes, feature, split_bin, left, right, slot, n_slots, resume, remember)
    m = order.shape[0]
    parts = np.zeros((nt, n_slots, d, n_bins, k + 1), dtype=np.float64)
    counts = np.zeros((nt, n_slots, d, n_bins, k), dtype=np.int32)
    step = (m + nt - 1) // nt
    for t in numba.prange(nt):
        for r in range(t * step, min(m, (t + 1) * step)):
            i = order[r]
            s = row_slot[i]
            lab = labels[i]
            for f in range(d):
                b = codes[i, f]
                parts[t, s, f, b, 0] += 1.0
                counts[t, s, f, b, lab] += 1
                for j in range(k):
                    parts[t, s, f, b, 1 + j] += dots[i, j]
    out = np.zeros((n_slots, d, n_bins, k + 1), dtype=np.float64)
    label_counts = np.zeros((n_slots, d, n_bins, k), dtype=np.int64)
    for t in range(nt):
        out += parts[t]
        label_counts += counts[t]
    return out, label_counts


@numba.njit(cache=True, nogil=True)
def box_statistics(X, codes, feature, split_bin, left, right, slot, n_slots, n_bins):
    """KDTree: per slot, counts per (feature, bin) and per-feature sums of x and x^2."""
    n, d = X.shape
    counts = np.zeros((n_slots, d, n_bins), dtype=np.int64)
    sums = np.zeros((n_slots, d), dtype=np.float64)
    sq = np.zeros((n_slots, d), dtype=np.float64)
    for i in range(n):
        s = slot[route_codes(codes, i, feature, split_bin, left, right, 0)]
        if s < 0:
            continue
        for f in range(d):
            v = X[i, f]
            counts[s, f, codes[i, f]] += 1
            sums[s, f] += v
            sq[s, f] += v * v
    return counts, sums, sq
