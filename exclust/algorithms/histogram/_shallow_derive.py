"""Numba kernel of ExGreedy's derived histograms: a node's side-cost sums from its parent's, when
a few centers were carved off the parent (``shallow_derive`` says when and how they are used).

The parent's sums (``_shallow_cut.shallow_histograms`` after its prefix sum over the center
splits) hold, per (feature, bin, split q, side), the rows' summed distance to their nearest center
left (right) of split q: per row a *profile* ``L_q`` = min over the centers in groups <= q,
``R_q`` = min over the groups > q, for each side the row needs. The large child keeps the
parent's centers but the small child's ones (``C_S``), so its sums are the parent's, column by
column for the splits it keeps, less the rows that went to the small child, plus, for its own
rows, the change of profile when ``C_S`` leaves. A center of ``C_S`` changes a row's left profile
only if it is nearer than every remaining center of the groups up to the first split it could
lower, which a few of the remaining centers usually disprove (``check_left``, ``check_right``):
only those (row, feature, side) are walked again, over the parent's centers in group order. The
sums then equal the direct ones up to rounding.
"""
from __future__ import annotations

import numba
import numpy as np

from exclust.algorithms.histogram._code_histograms import rows_by_slot


@numba.njit(cache=True, nogil=True, inline="always")
def _left_profile(out, row, order, grp, n_p, small, new_split, subtract_only):
    """Write one row's left-profile change along one feature at the splits kept: the new profile
    (without the small child's centers) less the old one, or, with ``subtract_only``, minus the
    old one; ``out[q]`` is the row's (bin) cell of split q, left side."""
    run_old, run_new = np.inf, np.inf
    p = 0
    while p < n_p:
        g = grp[p]
        while p < n_p and grp[p] == g:
            j = order[p]
            v = np.float64(row[j])
            if v < run_old:
                run_old = v
            if not small[j] and v < run_new:
                run_new = v
            p += 1
        q = new_split[g]
        if q >= 0:
            delta = -run_old if subtract_only else run_new - run_old
            if delta != 0.0:
                out[q, 0] += delta


@numba.njit(cache=True, nogil=True, inline="always")
def _right_profile(out, row, order, grp, n_p, small, new_split, subtract_only):
    """As ``_left_profile`` for the right side: at split g, the groups above g."""
    run_old, run_new = np.inf, np.inf
    p = n_p - 1
    while p >= 0:
        g = grp[p]
        q = new_split[g]
        if q >= 0:
            delta = -run_old if subtract_only else run_new - run_old
            if delta != 0.0:
                out[q, 1] += delta
        while p >= 0 and grp[p] == g:
            j = order[p]
            v = np.float64(row[j])
            if v < run_old:
                run_old = v
            if not small[j] and v < run_new:
                run_new = v
            p -= 1


@numba.njit(cache=True, nogil=True, inline="always")
def _disproved(row, dc, candidates, lo, hi):
    """Whether one of ``candidates[lo:hi]`` (remaining centers) is at most ``dc`` from the row,
    the candidates nearest the carved-off center's group tried first (from ``hi - 1`` down when
    ``lo`` is 0, else from ``lo`` up)."""
    if lo == 0:
        for p in range(hi - 1, -1, -1):
            if row[candidates[p]] <= dc:
                return True
    else:
        for p in range(lo, hi):
            if row[candidates[p]] <= dc:
                return True
    return False


@numba.njit(cache=True, nogil=True, parallel=True)
def derived_deltas(codes, dists, feature, cuts, left, right, resume, remember, slot, n_derived, parent_order,
                   parent_grp, n_parent, small, large_order, n_large, small_list, n_small, new_split, check_left,
                   check_right, span_old, span_new, missing_code, n_bins, n_splits, nt):
    """Per derivation e (a large child L of parent P, small sibling S): what to add to P's sums,
    counts and cost before the cut to get L's.

    ``slot[node]``: 2 e for S's leaf (its rows are taken off), 2 e + 1 for L's (its rows'
    profiles corrected), -1 otherwise. Per e and feature f: ``parent_order[e, f, :n_parent[e]]``
    P's centers by group along f (groups ``parent_grp``), ``large_order[e, f, :n_large[e]]``
    L's centers by group; ``small[e, j]`` center j is S's; ``new_split[e, f, g]`` the split of L
    at P's group g (-1: none kept there); ``check_left[e, c, f]`` (-1: S's c-th center,
    ``small_list[e, c]``, lowers no left profile of L) the number of L's first centers by group
    of which one at most as far as c proves c lowers no left profile; ``check_right[e, c, f]``
    (-1: none) the first of L's centers from which on one such proves it on the right;
    ``span_old`` / ``span_new`` (e, f, 2) the lowest and highest center code of P and of L (which
    sides a row needs, as the direct kernel decides); ``missing_code[f]`` the missing bin (-1).

    Returns the sums' change (n_derived, d, n_bins, n_splits, 2) at L's splits, the counts'
    (n_derived, d, n_bins) and the cost's (n_derived,).
    """
    d = codes.shape[1]
    order, row_slot = rows_by_slot(codes, feature, cuts, left, right, slot, 2 * n_derived, resume, remember)
    m = order.shape[0]
    sums = np.zeros((nt, n_derived, d, n_bins, n_splits, 2), dtype=np.float64)
    counts = np.zeros((nt, n_derived, d, n_bins), dtype=np.float64)
    base = np.zeros((nt, n_derived), dtype=np.float64)
    step = (m + nt - 1) // nt
    for t in numba.prange(nt):
        for r in range(t * step, min(m, (t + 1) * step)):
            i = order[r]
            e = row_slot[i] // 2
            in_large = row_slot[i] % 2 == 1
            row = dists[i]
            is_small = small[e]
            near_old, near_new = np.inf, np.inf
            base_known = False
            if in_large:
                # The cost before the cut moves only if a center of S was the row's nearest.
                base_known = True
                for c in range(n_small[e]):
                    dc = row[small_list[e, c]]
                    found = False
                    for p in range(n_large[e]):
                        if row[large_order[e, 0, p]] <= dc:
                            found = True
                            break
                    if not found:
                        base_known = False
                        break
            if not base_known:
                for p in range(n_parent[e]):
                    v = np.float64(row[parent_order[e, 0, p]])
                    near_old = min(near_old, v)
                    if not is_small[parent_order[e, 0, p]]:
                        near_new = min(near_new, v)
                base[t, e] += (near_new - near_old) if in_large else -near_old
            for f in range(d):
                code = codes[i, f]
                out = sums[t, e, f, code]
                if not in_large:
                    counts[t, e, f, code] -= 1.0
                if span_old[e, f, 0] == span_old[e, f, 1]:
                    continue  # one group: no split, no side costs
                missing = code == missing_code[f]
                order_f, grp_f, split_f = parent_order[e, f], parent_grp[e, f], new_split[e, f]
                old_left = (code < span_old[e, f, 1]) | missing
                old_right = (code > span_old[e, f, 0]) | missing
                if not in_large:
                    if old_left:
                        _left_profile(out, row, order_f, grp_f, n_parent[e], is_small, split_f, True)
                    if old_right:
                        _right_profile(out, row, order_f, grp_f, n_parent[e], is_small, split_f, True)
                    continue
                if span_new[e, f, 0] == span_new[e, f, 1]:
                    continue  # L keeps no split on f: nothing of f is read at L
                new_left = (code < span_new[e, f, 1]) | missing
                new_right = (code > span_new[e, f, 0]) | missing
                for side in range(2):
                    if side == 0:
                        needed_old, needed_new = old_left, new_left
                    else:
                        needed_old, needed_new = old_right, new_right
                    if not needed_old:
                        continue
                    if not needed_new:  # a side L never reads: taken out, as the direct kernel leaves it
                        if side == 0:
                            _left_profile(out, row, order_f, grp_f, n_parent[e], is_small, split_f, True)
                        else:
                            _right_profile(out, row, order_f, grp_f, n_parent[e], is_small, split_f, True)
                        continue
                    changed = False
                    for c in range(n_small[e]):
                        dc = row[small_list[e, c]]
                        if side == 0:
                            lim = check_left[e, c, f]
                            if lim >= 0 and not _disproved(row, dc, large_order[e, f], 0, lim):
                                changed = True
                        else:
                            lim = check_right[e, c, f]
                            if lim >= 0 and not _disproved(row, dc, large_order[e, f], lim, n_large[e]):
                                changed = True
                        if changed:
                            break
                    if changed:
                        if side == 0:
                            _left_profile(out, row, order_f, grp_f, n_parent[e], is_small, split_f, False)
                        else:
                            _right_profile(out, row, order_f, grp_f, n_parent[e], is_small, split_f, False)
    out_sums = np.zeros((n_derived, d, n_bins, n_splits, 2), dtype=np.float64)
    out_counts = np.zeros((n_derived, d, n_bins), dtype=np.float64)
    out_base = np.zeros(n_derived, dtype=np.float64)
    for t in range(nt):
        out_sums += sums[t]
        out_counts += counts[t]
        out_base += base[t]
    return out_sums, out_counts, out_base
