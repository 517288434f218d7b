"""Numba kernels of ExShallow: per-node histograms of side costs, and the cut score with its
depth penalty (see exclust.algorithms.histogram.exshallow for the objective).

Along a feature, a node's centers fall into groups of equal bin code, ordered by code; a cut
leaves the first ``q + 1`` groups on its left (``q`` = 0 .. G - 2, the *center split*). For
every row the kernel adds, per feature and center split, the row's distance to its nearest
center on the left and on the right into the row's bin: prefix sums over the bins then give,
for every threshold, the cost of the node's rows when each goes to its nearest center on its
own side of the cut.
"""
from __future__ import annotations

import math

import numba
import numpy as np

from exclust.algorithms.histogram._code_histograms import rows_by_slot, side_of_missing

MISSING_LEFT, MISSING_RIGHT = 0, 1  # exclust.tree.node_kinds' sides

MAX_BULK_CENTERS = 7  # a slot with more centers never uses a bulk bin (centers! orders per slot)
BULK_SAMPLE = 512  # rows per slot sampled to find each feature's bulk bin
MERGE_SORT_CENTERS = 32  # a row's centers are merge sorted above this many (insertion sorted below: m^2 / 4)


@numba.njit(cache=True, nogil=True, inline="always")
def _walk_steps(flat, cell, groups, f, near, near_d, n_near, top, lim, hi):
    """Add one row's steps along one feature at ``flat[cell]``: the left side when ``lim`` starts
    at ``top``, the right side when ``hi`` starts at 0 (a side not needed starts finished).

    Left of split q: the first center in a group <= q (channels [g, lim) get it); right of split
    q: the first center in a group > q (channels [hi, g) get it). One walk down the row's
    centers, nearest first, serves both sides and writes only where the nearest one changes.
    """
    prev_left, prev_right = 0.0, 0.0
    for p in range(n_near):
        g = groups[f, near[p]]
        v = near_d[p]
        if g < lim:
            if lim < top:
                flat[cell + 1 + 2 * lim] += prev_left - v
            prev_left = v
            lim = g
        if g > hi:
            if hi > 0:
                flat[cell + 2 + 2 * hi] += v - prev_right
            else:
                flat[cell + 2] += v
            prev_right = v
            hi = g
        if lim == 0 and hi == top:
            break
    flat[cell + 1] += prev_left  # 0 when the left side is not needed


@numba.njit(cache=True, nogil=True)
def _merge_sort(near_d, near, n, tmp_d, tmp_j):
    """Sort ``near_d[:n]`` (carrying ``near``) ascending, stable: equal distances keep their order
    (the centers' index order), as the insertion sort does for few centers; n log n, not n^2."""
    width = 1
    in_tmp = False  # where the runs of the current width are
    while width < n:
        for lo in range(0, n, 2 * width):
            mid, hi = min(lo + width, n), min(lo + 2 * width, n)
            a, b = lo, mid
            for o in range(lo, hi):
                take_b = a >= mid or (b < hi and (tmp_d[b] < tmp_d[a] if in_tmp else near_d[b] < near_d[a]))
                src = b if take_b else a
                if in_tmp:
                    near_d[o], near[o] = tmp_d[src], tmp_j[src]
                else:
                    tmp_d[o], tmp_j[o] = near_d[src], near[src]
                if take_b:
                    b += 1
                else:
                    a += 1
        in_tmp = not in_tmp
        width *= 2
    if in_tmp:
        near_d[:n] = tmp_d[:n]
        near[:n] = tmp_j[:n]


@numba.njit(cache=True, nogil=True)
def _bulk_codes(codes, order, start, n_members, n_slots, bulk_min_rows):
    """Per (slot, feature) the bin holding most of the slot's rows (judged on a strided sample
    of at most BULK_SAMPLE rows), or -1 where no bin holds more than half of them, the slot is
    smaller than ``bulk_min_rows`` or has more than MAX_BULK_CENTERS centers."""
    d = codes.shape[1]
    bulk = np.full((n_slots, d), -1, dtype=np.int64)
    sample = np.empty(BULK_SAMPLE, dtype=np.int64)
    for s in range(n_slots):
        n_s = start[s + 1] - start[s]
        if n_s < max(bulk_min_rows, 1) or n_members[s] > MAX_BULK_CENTERS:
            continue
        size = min(n_s, BULK_SAMPLE)
        for f in range(d):
            for u in range(size):
                sample[u] = codes[order[start[s] + (n_s * u) // size], f]
            ordered = np.sort(sample[:size])
            best, best_run, run = ordered[0], 0, 0
            for u in range(size):
                run = run + 1 if u > 0 and ordered[u] == ordered[u - 1] else 1
                if run > best_run:
                    best, best_run = ordered[u], run
            if 2 * best_run > size:
                bulk[s, f] = best
    return bulk


@numba.njit(cache=True, nogil=True)
def _factorial(n):
    out = 1
    for i in range(2, n + 1):
        out *= i
    return out


@numba.njit(cache=True, nogil=True)
def _subset_sums(order_sums, n_members):
    """Per subset of a slot's centers (bit p: center ``members[p]``), the summed distance of the
    slot's rows to the subset's nearest center, from ``order_sums[order, p]`` (rows with that
    order of the centers by distance, Lehmer-coded, summed per center)."""
    nm = n_members
    totals = np.zeros(1 << nm, dtype=np.float64)
    rank = np.empty(nm, dtype=np.int64)
    pool = np.empty(nm, dtype=np.int64)
    for code in range(_factorial(nm)):
        used = False
        for p in range(nm):
            if order_sums[code, p] != 0.0:
                used = True
        if not used:
            continue
        rest = code  # decode: digit a counts the later centers ranked before it
        digits = np.empty(nm, dtype=np.int64)
        for a in range(nm - 1, -1, -1):
            base_a = nm - a
            digits[a] = rest % base_a
            rest //= base_a
        for p in range(nm):
            pool[p] = p
        size = nm
        for a in range(nm):
            rank[a] = pool[digits[a]]
            for b in range(digits[a], size - 1):
                pool[b] = pool[b + 1]
            size -= 1
        for msk in range(1, 1 << nm):
            for a in range(nm):
                if (msk >> rank[a]) & 1:
                    totals[msk] += order_sums[code, rank[a]]
                    break
    return totals


@numba.njit(cache=True, nogil=True, parallel=True)
def shallow_histograms(codes, dists, feature, split_bin, left, right, resume, remember, slot, n_slots, member_group,
                       n_groups, center_span, n_bins, n_splits, nt, bulk_min_rows, missing_bin=None):
    """Per (slot, feature, bin) one cell: the row count, then per center split q the *steps*
    of the distance to the nearest center on the left and on the right (summed over q they give
    the distance itself): cell ``[count, left_0, right_0, left_1, right_1, ...]``. Also, per slot,
    the summed distance to the nearest of the node's centers (the cost before any cut). The
    count shares the cell, so a row touches one place per feature.

    ``member_group[s, f, j]`` is the group of center j along feature f at slot s (-1: center
    j is not at the node); ``n_groups[s, f]`` the number of groups; ``center_span[s, f]`` the
    lowest and the highest bin code of the slot's centers. A row at or below the lowest center
    is left of every cut that parts the centers, one at or above the highest is right of all of
    them: for those only one side is ever read, and only that side is written. A row's node
    centers are sorted by distance once; along each feature ``_walk_steps`` writes the few
    splits where its nearest center on a side changes. Rows are visited slot by slot in ``nt``
    blocks, each with a private histogram. A row in a feature's missing bin (``missing_bin[f]``,
    -1: none; None: no feature has one) needs both sides: the cut search tries that bin on each.

    Bulk bins (slots of at least ``bulk_min_rows`` rows): where one bin of a feature holds most
    of a slot's rows (a one-hot or sparse feature's zero), those rows are skipped for that
    feature and the bin's cell is filled afterwards as the slot's totals less the other rows':
    the count from the slot's row count, the steps from the summed distance of every row to
    the nearest center of every subset of the slot's centers (the sets left and right of each
    split are such subsets), computed once per row for all features. The other rows of such a
    feature walk both sides once more into a separate sum, for that difference. The cell then
    equals the direct sum up to rounding.
    """
    d = codes.shape[1]
    k = dists.shape[1]
    if missing_bin is None:
        missing_code = np.full(d, -1, dtype=np.int64)
    else:
        missing_code = missing_bin
    order, row_slot = rows_by_slot(codes, feature, split_bin, left, right, slot, n_slots, resume, remember)
    m = order.shape[0]
    start = np.zeros(n_slots + 1, dtype=np.int64)
    for r in range(m):
        start[row_slot[order[r]] + 1] += 1
    for s in range(n_slots):
        start[s + 1] += start[s]
    n_members = np.zeros(n_slots, dtype=np.int64)
    members = np.full((n_slots, k), -1, dtype=np.int64)
    for s in range(n_slots):
        for j in range(k):
            if member_group[s, 0, j] >= 0:
                members[s, n_members[s]] = j
                n_members[s] += 1
    bulk = _bulk_codes(codes, order, start, n_members, n_slots, bulk_min_rows)
    uses_bulk = np.zeros(n_slots, dtype=np.bool_)
    n_orders, max_members = 1, 1
    position = np.full((n_slots, k), -1, dtype=np.int64)  # a member center's index in ``members``
    for s in range(n_slots):
        for p in range(n_members[s]):
            position[s, members[s, p]] = p
        for f in range(d):
            if bulk[s, f] >= 0:
                uses_bulk[s] = True
        if uses_bulk[s]:
            n_orders = max(n_orders, _factorial(n_members[s]))
            max_members = max(max_members, n_members[s])
    width = 1 + 2 * n_splits  # values per (slot, feature, bin)
    parts = np.zeros((nt, n_slots, d, n_bins, width), dtype=np.float64)
    base = np.zeros((nt, n_slots), dtype=np.float64)
    # Per slot, order of its centers by distance (Lehmer code) and center: summed distances.
    order_sums = np.zeros((nt, n_slots, n_orders, max_members), dtype=np.float64)
    others = np.zeros((nt, n_slots, d, width), dtype=np.float64)
    step = (m + nt - 1) // nt
    for t in numba.prange(nt):
        flat = parts[t].reshape(-1)  # one offset per (row, feature), not five strides per write
        other = others[t].reshape(-1)
        near = np.empty(k, dtype=np.int64)  # the row's node centers, nearest first
        near_d = np.empty(k)
        rank = np.empty(k, dtype=np.int64)
        sort_d = np.empty(k)  # the merge sort's second buffer
        sort_j = np.empty(k, dtype=np.int64)
        for r in range(t * step, min(m, (t + 1) * step)):
            i = order[r]
            s = row_slot[i]
            groups = member_group[s]
            n_near = 0
            if n_members[s] > MERGE_SORT_CENTERS:  # many centers (a high node of a large k)
                for j in range(k):
                    if groups[0, j] >= 0:
                        near_d[n_near], near[n_near] = dists[i, j], j
                        n_near += 1
                _merge_sort(near_d, near, n_near, sort_d, sort_j)
            for j in range(k if n_members[s] <= MERGE_SORT_CENTERS else 0):  # insertion sort: few centers
                if groups[0, j] < 0:
                    continue
                v = dists[i, j]
                p = n_near
                while p > 0 and near_d[p - 1] > v:
                    near_d[p] = near_d[p - 1]
                    near[p] = near[p - 1]
                    p -= 1
                near_d[p] = v
                near[p] = j
                n_near += 1
            base[t, s] += near_d[0]
            if uses_bulk[s]:
                # The nearest center of any subset is the subset's first in this row's order:
                # summing the distances per order and center gives every subset's sum later.
                nm = n_near
                for p in range(nm):
                    rank[p] = position[s, near[p]]
                code_of_order = 0
                for a in range(nm):
                    smaller = 0
                    for b in range(a + 1, nm):
                        if rank[b] < rank[a]:
                            smaller += 1
                    code_of_order = code_of_order * (nm - a) + smaller
                for p in range(nm):
                    order_sums[t, s, code_of_order, rank[p]] += near_d[p]
            for f in range(d):
                code = codes[i, f]
                bulk_code = bulk[s, f]
                if code == bulk_code:
                    continue
                cell = ((s * d + f) * n_bins + code) * width
                flat[cell] += 1.0
                top = n_groups[s, f] - 1
                if top < 1:
                    continue
                missing = code == missing_code[f]
                need_left = np.int64((code < center_span[s, f, 1]) | missing)
                need_right = np.int64((code > center_span[s, f, 0]) | missing)
                # Arithmetic, not a branch: which side a row needs is data, and mispredicted
                # branches would cost more than the walk.
                _walk_steps(flat, cell, groups, f, near, near_d, n_near, top, top * need_left,
                            top * (1 - need_right))
                if bulk_code >= 0:
                    _walk_steps(other, (s * d + f) * width, groups, f, near, near_d, n_near, top, top, 0)
    out = np.zeros((n_slots, d, n_bins, width), dtype=np.float64)
    out_base = np.zeros(n_slots, dtype=np.float64)
    order_total = np.zeros((n_slots, n_orders, max_members), dtype=np.float64)
    other_total = np.zeros((n_slots, d, width), dtype=np.float64)
    for t in range(nt):
        out += parts[t]
        out_base += base[t]
        order_total += order_sums[t]
        other_total += others[t]
    for s in range(n_slots):
        if not uses_bulk[s]:
            continue
        subset_total = _subset_sums(order_total[s], n_members[s])
        for f in range(d):
            b = bulk[s, f]
            if b < 0:
                continue
            rest = 0.0
            for c in range(n_bins):
                rest += out[s, f, c, 0]
            out[s, f, b, 0] = (start[s + 1] - start[s]) - rest
            top = n_groups[s, f] - 1
            if top < 1:
                continue
            missing = b == missing_code[f]
            sides = ((0, (b < center_span[s, f, 1]) | missing), (1, (b > center_span[s, f, 0]) | missing))
            for side, needed in sides:
                if not needed:
                    continue
                prev = 0.0
                for q in range(top):
                    msk = 0  # the slot's centers on this side of split q, as bits of ``members``
                    for p in range(n_members[s]):
                        g = member_group[s, f, members[s, p]]
                        if (g <= q) == (side == 0):
                            msk |= 1 << p
                    value = subset_total[msk]
                    out[s, f, b, 1 + 2 * q + side] = (value - prev) - other_total[s, f, 1 + 2 * q + side]
                    prev = value
    return out, out_base


@numba.njit(cache=True, nogil=True)
def projected_depth_total(n_rows, n_centers, alpha, beta):
    """ShallowTree's estimate of the summed leaf depth of a side with ``n_rows`` rows and
    ``n_centers`` centers, counted from depth 1: the side is assumed to be cut again and again
    in the same proportions as this cut (a share ``alpha`` of the rows and ``beta`` of the
    centers to the left, rounded up and kept inside 1 .. size - 1) until every part has one
    center; a part of one row goes left only when more centers do. The integer arithmetic,
    negative counts of rowless parts included, is ShallowTree's.
    """
    stack_h = np.empty(2 * n_centers + 4, dtype=np.int64)
    stack_n = np.empty(2 * n_centers + 4, dtype=np.int64)
    stack_k = np.empty(2 * n_centers + 4, dtype=np.int64)
    stack_h[0], stack_n[0], stack_k[0] = 1, n_rows, n_centers
    top = 1
    total = 0.0
    while top > 0:
        top -= 1
        h, n, kk = stack_h[top], stack_n[top], stack_k[top]
        if kk == 1:
            total += n * h
            continue
        k_left = min(max(int(math.ceil(kk * beta)), 1), kk - 1)
        if n == 1:
            n_left = 1 if k_left > kk - k_left else 0
        else:
            n_left = min(max(int(math.ceil(n * alpha)), 1), n - 1)
        stack_h[top], stack_n[top], stack_k[top] = h + 1, n_left, k_left
        stack_h[top + 1], stack_n[top + 1], stack_k[top + 1] = h + 1, n - n_left, kk - k_left
        top += 2
    return total


@numba.njit(cache=True, nogil=True)
def depth_penalty(n_left, n_right, k_left, k_right, bounded_left, bounded_right):
    """Projected mean leaf depth below a cut. A side already bounded on the cut's feature from
    the same direction (an ancestor cut on that feature sent the node that way) gains no
    condition in its explanation, so its rows lose one level. The proportions are rounded to
    single precision, as ShallowTree hands them over."""
    n = n_left + n_right
    alpha = np.float64(np.float32(n_left / n))
    beta = np.float64(np.float32(k_left / (k_left + k_right)))
    total_left = projected_depth_total(n_left, k_left, alpha, beta)
    total_right = projected_depth_total(n_right, k_right, alpha, beta)
    if bounded_left:
        total_left -= n_left
    if bounded_right:
        total_right -= n_right
    return (total_left + total_right) / n


@numba.njit(cache=True, nogil=True)
def cut_score(cost, base, n_left, n_right, k_left, k_right, bounded_left, bounded_right, depth_factor, require_rows):
    """The score of one cut: (cost after) / (cost before) plus, with ``require_rows``,
    ``depth_factor`` times ``depth_penalty``; inf when ``require_rows`` and a side holds fewer
    rows than centers."""
    if require_rows and (n_left < k_left or n_right < k_right):
        return np.inf
    score = cost / base if base > 0.0 else 0.0
    if require_rows and depth_factor != 0.0:
        score += depth_factor * depth_penalty(n_left, n_right, k_left, k_right, bounded_left, bounded_right)
    return score


@numba.njit(cache=True, nogil=True)
def best_shallow_cut(sums, counts, base, member_codes, bounded, depth_factor, require_rows, missing_bin, tie=0.0):
    """The (feature, bin, score, missing side) of lowest score at one node, or (-1, -1, inf, 1) when none.

    score = ``cut_score``: (cost after the cut) / (cost before) + depth_factor * depth_penalty,
    over threshold cuts that leave at least one center on each side and, with
    ``require_rows``, at least as many rows as centers on each side. Without ``require_rows``
    (the fallback when no cut has enough rows) the score is the cost ratio alone. A feature
    with a missing bin (``missing_bin[f]`` >= 0) prices every cut with that bin on each side
    and keeps the lower score (``cut_search.side_of_missing``: on a tie, the side holding more
    value rows); a feature without one sends it to the larger child. Features whose member
    codes all agree are skipped (a category feature is passed that way: its set cuts are
    ``_shallow_sets``'). Ties go to the lowest feature, then the lowest bin; with ``tie`` > 0 a
    score within ``tie`` of the lowest counts as a tie (ExGreedy's derived histograms equal the
    direct ones up to rounding, and a cut of exactly equal cost must not be chosen by it).
    """
    d = counts.shape[0]
    n_splits = sums.shape[2]
    n_centers = member_codes.shape[0]
    n = 0
    for b in range(counts.shape[1]):
        n += counts[0, b]
    best, best_f, best_b, best_side = np.inf, -1, -1, MISSING_RIGHT
    best_left, best_right = 0, 0
    n_codes = counts.shape[1]
    scores = np.full(d * n_codes, np.inf)  # per (feature, bin) when ``tie`` > 0
    sides = np.empty(d * n_codes, dtype=np.int64)
    lefts = np.empty(d * n_codes, dtype=np.int64)
    rights = np.empty(d * n_codes, dtype=np.int64)
    running_left = np.empty(n_splits)
    running_right = np.empty(n_splits)
    total_right = np.empty(n_splits)
    for f in range(d):
        center_codes = np.sort(member_codes[:, f])
        top_code = center_codes[n_centers - 1]
        if center_codes[0] == top_code:
            continue
        mb = missing_bin[f]
        n_missing = counts[f, mb] if mb >= 0 else 0
        running_left[:] = 0.0
        running_right[:] = 0.0
        total_right[:] = 0.0
        for b in range(counts.shape[1]):
            if b == mb:
                continue
            for q in range(n_splits):
                total_right[q] += sums[f, b, q, 1]
        q, k_left, n_left, nxt = -1, 0, 0, 0
        for b in range(top_code):  # a cut at or above the top center leaves no center right
            n_left += counts[f, b]
            for qq in range(n_splits):
                running_left[qq] += sums[f, b, qq, 0]
                running_right[qq] += sums[f, b, qq, 1]
            while nxt < n_centers and center_codes[nxt] <= b:
                if nxt == 0 or center_codes[nxt] != center_codes[nxt - 1]:
                    q += 1
                k_left += 1
                nxt += 1
            if k_left == 0:
                continue
            k_right, n_right = n_centers - k_left, n - n_left - n_missing
            cost = running_left[q] + total_right[q] - running_right[q]
            side = -1  # no missing bin: sided once the best cut is known
            if mb < 0:
                score = cut_score(cost, base, n_left, n_right, k_left, k_right, bounded[f, 0], bounded[f, 1],
                                  depth_factor, require_rows)
            else:
                score_left = cut_score(cost + sums[f, mb, q, 0], base, n_left + n_missing, n_right, k_left, k_right,
                                       bounded[f, 0], bounded[f, 1], depth_factor, require_rows)
                score = cut_score(cost + sums[f, mb, q, 1], base, n_left, n_right + n_missing, k_left, k_right,
                                  bounded[f, 0], bounded[f, 1], depth_factor, require_rows)
                side = side_of_missing(score_left, score, np.float64(n_left), np.float64(n_right))
                if side == MISSING_LEFT:
                    score = score_left
            if tie > 0.0:
                at = f * n_codes + b
                scores[at], sides[at], lefts[at], rights[at] = score, side, n_left, n_right
            if score < best:
                best, best_f, best_b, best_side = score, f, b, side
                best_left, best_right = n_left, n_right
    if tie > 0.0 and best < np.inf:  # the first cut, by feature then bin, within ``tie`` of the best
        for at in range(d * n_codes):
            if scores[at] <= best + tie:
                best_f, best_b = at // n_codes, at % n_codes
                best, best_side, best_left, best_right = scores[at], sides[at], lefts[at], rights[at]
                break
    if best_side < 0:  # no missing rows can come: the side of the larger child
        best_side = side_of_missing(0.0, 0.0, np.float64(best_left), np.float64(best_right))
    return best_f, best_b, best, best_side
