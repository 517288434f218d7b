"""Numba kernels of the histogram split engine: routing on codes and per-node histograms.

Rows are routed through the tree being grown by their bin codes, never by floats: a node
``(feature f, bin b)`` sends a row left when ``code[f] <= b``, which is the same test as
``x[f] <= edges[f][b]`` on the raw value (see binning.py), so the final ThresholdTree with
real-valued thresholds routes raw data exactly as the engine did.

The cuts come in one of two forms (``_goes_left``; the tree is ``engine.CodeTree``): ``split_bin``
(one bin per node, the threshold cuts as above), or a table ``(n_nodes, codes)`` saying per node
which codes go left, which also holds category set cuts and each cut's learned side for the
missing bin. A node is a leaf when its feature is -1.

Histogram kernels split the rows into one block per thread and give each thread its own
histogram, summed at the end: a row is read once, and no two threads write the same cell.
"""
from __future__ import annotations

import numba
import numpy as np
from numba.extending import overload


def _goes_left(cuts, node, code):
    """Whether a row of bin ``code`` at ``node`` goes left: ``code <= cuts[node]`` when ``cuts``
    holds one threshold bin per node, ``cuts[node, code]`` when it is a table of codes per node."""
    return code <= cuts[node] if cuts.ndim == 1 else bool(cuts[node, code])


@overload(_goes_left, inline="always")
def _goes_left_compiled(cuts, node, code):
    if cuts.ndim == 1:
        return lambda cuts, node, code: code <= cuts[node]
    return lambda cuts, node, code: cuts[node, code] != 0


ROW_CHUNK = 4096  # rows per parallel task of ``rows_in_slots``


@numba.njit(cache=True, nogil=True)
def route_codes(codes, i, feature, cuts, left, right, node):
    """Leaf reached by row ``i`` of ``codes`` from ``node`` (0: the root; feature -1 marks a leaf)."""
    while feature[node] >= 0:
        if _goes_left(cuts, node, codes[i, feature[node]]):
            node = left[node]
        else:
            node = right[node]
    return node


@numba.njit(cache=True, nogil=True)
def route_all_codes(codes, feature, cuts, left, right):
    """Leaf of every row, routed by codes."""
    n = codes.shape[0]
    out = np.empty(n, dtype=np.int64)
    for i in range(n):
        out[i] = route_codes(codes, i, feature, cuts, left, right, 0)
    return out


@numba.njit(cache=True, nogil=True, parallel=True)
def mistake_histograms(codes, labels, feature, cuts, left, right, resume, remember, slot, member_pos, offset,
                       n_bins, nt):
    """IMM: per slot, per (feature, bin, member center) the count of alive rows, all slots in one flat array.

    ``slot[node]`` is the histogram a row reaching leaf ``node`` goes to (-1: none);
    ``member_pos[s, j]`` is reference cluster j's column in slot s, -1 when a row of cluster j
    does not count there, which is how rows cut off from their center by an earlier split are
    left out. Slot s holds (d, n_bins, m_s) counts from ``offset[s]``, m_s its counted clusters:
    a node's histogram is as wide as its own centers, not all k (at many clusters a level of
    k-wide histograms would not fit in memory). ``resume`` and ``remember``: where each row's
    routing starts, see ``rows_by_slot``.
    """
    d = codes.shape[1]
    n_slots = member_pos.shape[0]
    order, row_slot = rows_by_slot(codes, feature, cuts, left, right, slot, n_slots, resume, remember, labels,
                                   member_pos)
    m = order.shape[0]
    size = offset[n_slots]
    parts = np.zeros((nt, size), dtype=np.int64)
    step = (m + nt - 1) // nt
    for t in numba.prange(nt):
        for r in range(t * step, min(m, (t + 1) * step)):
            i = order[r]
            s = row_slot[i]
            col = member_pos[s, labels[i]]  # >= 0: rows_by_slot left the others out
            width = (offset[s + 1] - offset[s]) // (d * n_bins)
            base = offset[s] + col
            for f in range(d):
                parts[t, base + (f * n_bins + codes[i, f]) * width] += 1
    out = np.zeros(size, dtype=np.int64)
    for t in range(nt):
        out += parts[t]
    return out


@numba.njit(cache=True, nogil=True, parallel=True)
def mistake_counts(codes, labels, feature, cuts, left, right, resume, remember, slot, target, column, offset, widths,
                   center_codes, missing_bin, category_features, n_bins, nt):
    """IMM without the per-center axis on numeric features: per output histogram, four (d, n_bins)
    planes and the category features' per-center counts, all outputs in one flat array.

    A row reaching leaf ``node`` of cluster j counts in output ``target[slot[node], j]`` (-1:
    none). Its planes: 0, rows per code (every feature); on a numeric feature with its code r
    and its center's code c (``center_codes[j, f]``), 1, rows per min(r, c); 2, rows per max(r, c);
    or, r being the feature's missing bin, 3, rows per c. With ``column[slot[node], j]`` >= 0 it
    also counts at that column of the output's (len(category_features), n_bins, widths[h])
    per-center counts of the category features. Output h starts at ``offset[h]``. Every plane is
    a sum over rows, so outputs add and subtract (``cut_search.MistakeCounts``).
    """
    d = codes.shape[1]
    n_slots = target.shape[0]
    order, row_slot = rows_by_slot(codes, feature, cuts, left, right, slot, n_slots, resume, remember, labels, target)
    m = order.shape[0]
    size = offset[offset.shape[0] - 1]
    plane = d * n_bins
    parts = np.zeros((nt, size), dtype=np.int64)
    step = (m + nt - 1) // nt
    for t in numba.prange(nt):
        for r in range(t * step, min(m, (t + 1) * step)):
            i = order[r]
            s = row_slot[i]
            j = labels[i]
            h = target[s, j]  # >= 0: rows_by_slot left the others out
            base = offset[h]
            for f in range(d):
                code = codes[i, f]
                at = f * n_bins
                parts[t, base + at + code] += 1
                c = center_codes[j, f]
                if code == missing_bin[f]:
                    parts[t, base + 3 * plane + at + c] += 1
                elif code <= c:
                    parts[t, base + plane + at + code] += 1
                    parts[t, base + 2 * plane + at + c] += 1
                else:
                    parts[t, base + plane + at + c] += 1
                    parts[t, base + 2 * plane + at + code] += 1
            col = column[s, j]
            if col < 0:
                continue
            width = widths[h]
            for q in range(category_features.shape[0]):
                code = codes[i, category_features[q]]
                parts[t, base + 4 * plane + (q * n_bins + code) * width + col] += 1
    out = np.zeros(size, dtype=np.int64)
    for t in range(nt):
        out += parts[t]
    return out


@numba.njit(cache=True, nogil=True, parallel=True)
def rows_in_slots(codes, feature, cuts, left, right, resume, slots):
    """Whether each row's leaf (routed from the node ``resume[i]`` it is known to pass) holds a
    slot in any of the node tables ``slots`` (m, n_nodes; -1: none): the rows a pass will read.
    Writes nothing back (the pass itself records the leaves)."""
    n = codes.shape[0]
    out = np.zeros(n, dtype=np.bool_)
    n_chunks = (n + ROW_CHUNK - 1) // ROW_CHUNK
    for c in numba.prange(n_chunks):
        for i in range(c * ROW_CHUNK, min(n, (c + 1) * ROW_CHUNK)):
            node = route_codes(codes, i, feature, cuts, left, right, resume[i])
            for t in range(slots.shape[0]):
                if slots[t, node] >= 0:
                    out[i] = True
                    break
    return out


@numba.njit(cache=True, nogil=True)
def rows_by_slot(codes, feature, cuts, left, right, slot, n_slots, resume, remember, labels=None, wanted=None):
    """Indices of the rows that reach a requested leaf, grouped by slot (a counting sort).

    Visiting rows slot by slot keeps one slot's histogram hot in cache at a time; in data
    order, the rows of several leaves interleave and every row would touch a cold histogram.

    ``resume[i]`` is a node row i is known to pass through (0, the root, when nothing is
    known): a tree that only grows keeps every node, so routing from there reaches the same
    leaf as routing from the root, in a step or two instead of the tree's whole depth. With
    ``remember`` the reached leaf is written back into ``resume`` for the next pass.

    With ``wanted`` ((n_slots, k): < 0 where a row of that slot and reference cluster counts
    nowhere) and the rows' ``labels``, such rows are left out (their ``row_slot`` is -1). IMM's
    passes read a large sibling only for its few mistakes: leaving the others out here, where
    each row is read in order anyway, spares the kernel a scattered visit of each (issue 29
    item 4: IMM's passes below the root 9-10% faster on 1M rows, where 0.4-1.0M rows sat in a
    pass's slots and 72-170k of them counted).
    """
    n = codes.shape[0]
    row_slot = np.empty(n, dtype=np.int32)
    start = np.zeros(n_slots + 1, dtype=np.int64)
    for i in range(n):
        node = route_codes(codes, i, feature, cuts, left, right, resume[i])
        if remember:
            resume[i] = node
        s = slot[node]
        if wanted is not None and s >= 0:
            if wanted[s, labels[i]] < 0:
                s = -1
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
def surrogate_histograms(codes, dots, labels, feature, cuts, left, right, resume, remember, slot, n_slots, n_bins,
                         n_features, nt):
    """ExKMC: per (slot, feature, bin) the row count, the sums of <x, mu_j>, and label counts.

    Returns ``sums`` (n_slots, n_features, n_bins, k + 1): channel 0 the count, channel 1 + j
    the sum of dot products with center j; and ``label_counts`` (n_slots, n_features, n_bins, k):
    rows per reference cluster, which tell which cuts isolate points of other centers than a
    leaf's. Only the first ``n_features`` features are counted (1: enough for a leaf's cost).

    The ``nt`` threads take the features in turn (thread t: features t, t + nt, ...), each
    writing its own features' cells: no private copy of the histograms per thread (at many
    clusters one copy is gigabytes), and every cell is summed over its slot's rows in row
    order whatever the threads and whatever other slots the pass holds, so a leaf's histogram
    is the same to the bit in any pass that computes it.
    """
    k = dots.shape[1]
    order, row_slot = rows_by_slot(codes, feature, cuts, left, right, slot, n_slots, resume, remember)
    m = order.shape[0]
    out = np.zeros((n_slots, n_features, n_bins, k + 1), dtype=np.float64)
    label_counts = np.zeros((n_slots, n_features, n_bins, k), dtype=np.int64)
    # Rows in blocks, the thread's features inside a block: a block's dot products stay in cache
    # across the features instead of being read again per feature; each cell still sums its rows
    # in row order.
    block = 256
    for t in numba.prange(nt):
        for start in range(0, m, block):
            stop = min(m, start + block)
            for f in range(t, n_features, nt):
                for r in range(start, stop):
                    i = order[r]
                    s = row_slot[i]
                    b = codes[i, f]
                    out[s, f, b, 0] += 1.0
                    label_counts[s, f, b, labels[i]] += 1
                    for j in range(k):
                        out[s, f, b, 1 + j] += dots[i, j]
    return out, label_counts


@numba.njit(cache=True, nogil=True)
def box_statistics(X, codes, feature, cuts, left, right, slot, n_slots, n_bins):
    """KDTree: per slot, counts per (feature, code) and per-feature sums of x and x^2 over the
    values that are not NaN (a missing value is only counted, in its feature's missing bin)."""
    n, d = X.shape
    counts = np.zeros((n_slots, d, n_bins), dtype=np.int64)
    sums = np.zeros((n_slots, d), dtype=np.float64)
    sq = np.zeros((n_slots, d), dtype=np.float64)
    for i in range(n):
        s = slot[route_codes(codes, i, feature, cuts, left, right, 0)]
        if s < 0:
            continue
        for f in range(d):
            v = X[i, f]
            counts[s, f, codes[i, f]] += 1
            if v == v:
                sums[s, f] += v
                sq[s, f] += v * v
    return counts, sums, sq


@numba.vectorize(["int8(float64, float64, float64, float64)"], cache=True)
def side_of_missing(cost_left, cost_right, rows_left, rows_right):
    """MISSING_LEFT where sending the missing bin left is cheaper, or equal with more rows on the left.

    A ufunc: element-wise on arrays here, and on scalars inside the numba kernels that score
    cuts (ExShallow's ``_shallow_cut.best_shallow_cut``), so every criterion sides alike (0 is
    ``MISSING_LEFT``, 1 ``MISSING_RIGHT``)."""
    if cost_left < cost_right or (cost_left == cost_right and rows_left > rows_right):
        return 0
    return 1
