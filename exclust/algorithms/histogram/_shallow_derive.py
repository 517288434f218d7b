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

PROOFS = 8  # centers of L at most as far as a carved-off one, found per row before the checks


@numba.njit(cache=True, nogil=True, inline="always")
def _left_profile(sums, t, e, f, code, dists, i, order, grp, n_p, small, new_split, carved_at, subtract_only):
    """Write row i's left-profile change along feature f at the splits kept, into its bin's cell
    ``sums[t, e, f, code, q, 0]``: the new profile (without the small child's centers) less the
    old one, or, with ``subtract_only``, minus the old one. (Whole arrays and indices, no views:
    a view in this loop would cost reference counting per row and feature.)"""
    run_old, run_new = np.inf, np.inf
    p = 0
    if not subtract_only:
        # Below the lowest carved-off group both profiles are the same minimum: no change to write.
        while p < carved_at[e, f, 0]:
            v = np.float64(dists[i, order[e, f, p]])
            if v < run_old:
                run_old = v
            p += 1
        run_new = run_old
    while p < n_p:
        g = grp[e, f, p]
        while p < n_p and grp[e, f, p] == g:
            j = order[e, f, p]
            v = np.float64(dists[i, j])
            if v < run_old:
                run_old = v
            if not small[e, j] and v < run_new:
                run_new = v
            p += 1
        q = new_split[e, f, g]
        if q >= 0:
            delta = -run_old if subtract_only else run_new - run_old
            if delta != 0.0:
                sums[t, e, f, code, q, 0] += delta
        if not subtract_only and p > carved_at[e, f, 1] and run_new == run_old:
            break  # past every carved-off center, the profiles agree at every split above


@numba.njit(cache=True, nogil=True, inline="always")
def _right_profile(sums, t, e, f, code, dists, i, order, grp, n_p, small, new_split, carved_at, subtract_only):
    """As ``_left_profile`` for the right side: at split g, the groups above g."""
    run_old, run_new = np.inf, np.inf
    p = n_p - 1
    if not subtract_only:
        # Above the highest carved-off group both profiles are the same minimum.
        while p > carved_at[e, f, 1]:
            v = np.float64(dists[i, order[e, f, p]])
            if v < run_old:
                run_old = v
            p -= 1
        run_new = run_old
    while p >= 0:
        g = grp[e, f, p]
        q = new_split[e, f, g]
        if q >= 0:
            delta = -run_old if subtract_only else run_new - run_old
            if delta != 0.0:
                sums[t, e, f, code, q, 1] += delta
        while p >= 0 and grp[e, f, p] == g:
            j = order[e, f, p]
            v = np.float64(dists[i, j])
            if v < run_old:
                run_old = v
            if not small[e, j] and v < run_new:
                run_new = v
            p -= 1
        if not subtract_only and p < carved_at[e, f, 0] and run_new == run_old:
            break  # below every carved-off center, the profiles agree at every split below


@numba.njit(cache=True, nogil=True, inline="always")
def _disproved(dists, i, dc, candidates, e, f, lo, hi):
    """Whether one of ``candidates[e, f, lo:hi]`` (remaining centers) is at most ``dc`` from row
    i, the candidates nearest the carved-off center's group tried first (from ``hi - 1`` down
    when ``lo`` is 0, else from ``lo`` up)."""
    if lo == 0:
        for p in range(hi - 1, -1, -1):
            if dists[i, candidates[e, f, p]] <= dc:
                return True
    else:
        for p in range(lo, hi):
            if dists[i, candidates[e, f, p]] <= dc:
                return True
    return False


@numba.njit(cache=True, nogil=True, parallel=True)
def derived_deltas(codes, dists, feature, cuts, left, right, resume, remember, slot, n_derived, parent_order,
                   parent_grp, n_parent, small, large_order, n_large, small_list, n_small, new_split, check_left,
                   check_right, center_grp, left_group, right_group, span_old, span_new, carved_at, missing_code,
                   n_bins, n_splits, nt):
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
    ``center_grp[e, j, f]`` center j's group in P along f; ``left_group`` / ``right_group``
    (e, c, f) the group a proving center must be at or below (left) or above (right): a few
    centers at most as far as c, found once per row (``PROOFS``), settle most features at once;
    ``span_old`` / ``span_new`` (e, f, 2) the lowest and highest center code of P and of L (which
    sides a row needs, as the direct kernel decides); ``carved_at`` (e, f, 2) the first position
    in P's order of the lowest group holding a center of S and the last of the highest (a walk
    that corrects a profile changes nothing outside them and stops once the profiles agree past
    them); ``missing_code[f]`` the missing bin (-1).

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
        low = np.empty((small_list.shape[1], d), dtype=np.int32)  # per center of S and feature
        high = np.empty((small_list.shape[1], d), dtype=np.int32)
        for r in range(t * step, min(m, (t + 1) * step)):
            i = order[r]
            e = row_slot[i] // 2
            in_large = row_slot[i] % 2 == 1
            near_old, near_new = np.inf, np.inf
            base_known = False
            if in_large:
                # A few of L's centers at most as far as each center c of S: the lowest and the
                # highest group they reach per feature settle most (feature, side) at once. None
                # found: c was the row's nearest, and the cost before the cut moves.
                base_known = True
                for c in range(n_small[e]):
                    dc = dists[i, small_list[e, c]]
                    low[c, :] = n_parent[e]
                    high[c, :] = -1
                    found = 0
                    for p in range(n_large[e]):
                        j = large_order[e, 0, p]
                        if dists[i, j] <= dc:
                            for f in range(d):  # contiguous over f (center_grp is (e, j, f)): vectorised
                                g = center_grp[e, j, f]
                                low[c, f] = min(low[c, f], g)
                                high[c, f] = max(high[c, f], g)
                            found += 1
                            if found == PROOFS:
                                break
                    if found == 0:
                        base_known = False
            if not base_known:
                for p in range(n_parent[e]):
                    j = parent_order[e, 0, p]
                    v = np.float64(dists[i, j])
                    near_old = min(near_old, v)
                    if not small[e, j]:
                        near_new = min(near_new, v)
                base[t, e] += (near_new - near_old) if in_large else -near_old
            for f in range(d):
                code = codes[i, f]
                if not in_large:
                    counts[t, e, f, code] -= 1.0
                if span_old[e, f, 0] == span_old[e, f, 1]:
                    continue  # one group: no split, no side costs
                missing = code == missing_code[f]
                old_left = (code < span_old[e, f, 1]) | missing
                old_right = (code > span_old[e, f, 0]) | missing
                if not in_large:
                    if old_left:
                        _left_profile(sums, t, e, f, code, dists, i, parent_order, parent_grp, n_parent[e], small,
                                      new_split, carved_at, True)
                    if old_right:
                        _right_profile(sums, t, e, f, code, dists, i, parent_order, parent_grp, n_parent[e], small,
                                       new_split, carved_at, True)
                    continue
                if span_new[e, f, 0] == span_new[e, f, 1]:
                    continue  # L keeps no split on f: nothing of f is read at L
                new_left = (code < span_new[e, f, 1]) | missing
                new_right = (code > span_new[e, f, 0]) | missing
                if old_left:
                    # A side L never reads is taken out, as the direct kernel leaves it; a side it
                    # reads is walked again only where a carved-off center may have been nearest.
                    redo = not new_left
                    c = 0
                    while not redo and c < n_small[e]:
                        lim = check_left[e, c, f]
                        if lim >= 0 and low[c, f] > left_group[e, c, f] and \
                                not _disproved(dists, i, dists[i, small_list[e, c]], large_order, e, f, 0, lim):
                            redo = True
                        c += 1
                    if redo:
                        _left_profile(sums, t, e, f, code, dists, i, parent_order, parent_grp, n_parent[e], small,
                                      new_split, carved_at, not new_left)
                if old_right:
                    redo = not new_right
                    c = 0
                    while not redo and c < n_small[e]:
                        lim = check_right[e, c, f]
                        if lim >= 0 and high[c, f] <= right_group[e, c, f] and \
                                not _disproved(dists, i, dists[i, small_list[e, c]], large_order, e, f, lim,
                                               n_large[e]):
                            redo = True
                        c += 1
                    if redo:
                        _right_profile(sums, t, e, f, code, dists, i, parent_order, parent_grp, n_parent[e], small,
                                       new_split, carved_at, not new_right)
    if nt == 1:  # no second copy of sums as large as the node's histogram
        return sums[0], counts[0], base[0]
    out_sums = np.zeros((n_derived, d, n_bins, n_splits, 2), dtype=np.float64)
    out_counts = np.zeros((n_derived, d, n_bins), dtype=np.float64)
    out_base = np.zeros(n_derived, dtype=np.float64)
    for t in range(nt):
        out_sums += sums[t]
        out_counts += counts[t]
        out_base += base[t]
    return out_sums, out_counts, out_base


@numba.njit(cache=True, nogil=True)
def keep_columns(kept, columns, n_columns, changes, n_splits):
    """In place, the large child's sums from its parent's ``kept`` (d, bins, splits, 2): its split
    q on feature f is the parent's split ``columns[f, q]`` (q < ``n_columns[f]``; the parent's
    own column beyond), plus the pass's ``changes`` (d, bins, >= n_splits, 2), for the first
    ``n_splits`` splits. ``columns[f, q]`` >= q and rises with q, so moving the columns in order
    reads none already moved. One sweep over the histogram, no copy of it."""
    d, n_bins = kept.shape[0], kept.shape[1]
    for f in range(d):
        for b in range(n_bins):
            for q in range(n_splits):
                src = columns[f, q] if q < n_columns[f] else q
                kept[f, b, q, 0] = kept[f, b, src, 0] + changes[f, b, q, 0]
                kept[f, b, q, 1] = kept[f, b, src, 1] + changes[f, b, q, 1]
