"""Numba kernels of ExShallow: per-node histograms of side costs, and the cut score with its
depth penalty (see exclust.algorithms.exshallow for the objective).

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

from exclust._kernels_hist import rows_by_slot


@numba.njit(cache=True, nogil=True, parallel=True)
def shallow_histograms(codes, dists, feature, split_bin, left, right, slot, n_slots, member_group,
                       n_groups, center_span, n_bins, n_splits, nt):
    """Per (slot, feature, bin) one cell: the row count, then per center split q the *steps*
    of the distance to the nearest center on the left and on the right (summed over q they give
    the distance itself): cell ``[count, left_0, right_0, left_1, right_1, ...]``. Also, per slot,
    the summed distance to the nearest of the node's centers (the cost before any cut). The
    count shares the cell, so a row touches one place per feature.

    ``member_group[s, f, j]`` is the group of center j along feature f at slot s (-1: center
    j is not at the node); ``n_groups[s, f]`` the number of groups; ``center_span[s, f]`` the
    lowest and the highest bin code of the slot's centers. A row at or below the lowest center
    is left of every cut that parts the centers, one at or above the highest is right of all of
    them: for those only one side is ever read, and only that side is written. A row's node centers are
    sorted by distance once; along each feature the nearest center on the left of split q is
    the first of them in a group <= q, so walking that order finds the few splits where it
    changes, and only those are written. Rows are visited slot by slot in ``nt`` blocks, each
    with a private histogram.
    """
    d = codes.shape[1]
    k = dists.shape[1]
    order, row_slot = rows_by_slot(codes, feature, split_bin, left, right, slot, n_slots)
    m = order.shape[0]
    width = 1 + 2 * n_splits  # values per (slot, feature, bin)
    parts = np.zeros((nt, n_slots, d, n_bins, width), dtype=np.float64)
    base = np.zeros((nt, n_slots), dtype=np.float64)
    step = (m + nt - 1) // nt
    for t in numba.prange(nt):
        flat = parts[t].reshape(-1)  # one offset per (row, feature), not five strides per write
        near = np.empty(k, dtype=np.int64)  # the row's node centers, nearest first
        near_d = np.empty(k)
        for r in range(t * step, min(m, (t + 1) * step)):
            i = order[r]
            s = row_slot[i]
            groups = member_group[s]
            n_near = 0
            for j in range(k):  # insertion sort: k is small
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
            for f in range(d):
                code = codes[i, f]
                cell = ((s * d + f) * n_bins + code) * width
                flat[cell] += 1.0
                top = n_groups[s, f] - 1
                if top < 1:
                    continue
                need_left = np.int64(code < center_span[s, f, 1])
                need_right = np.int64(code > center_span[s, f, 0])
                # Left of split q: the first center in a group <= q (channels [g, lim) get it);
                # right of split q: the first center in a group > q (channels [hi, g) get it).
                # One walk down the sorted centers serves both sides.
                # A side not needed starts finished (arithmetic, not a branch: which side a row
                # needs is data, and mispredicted branches would cost more than the walk).
                lim = top * need_left
                hi = top * (1 - need_right)
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
    out = np.zeros((n_slots, d, n_bins, width), dtype=np.float64)
    out_base = np.zeros(n_slots, dtype=np.float64)
    for t in range(nt):
        out += parts[t]
        out_base += base[t]
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
def best_shallow_cut(sums, counts, base, member_codes, bounded, depth_factor, require_rows):
    """The (feature, bin, score) of lowest score at one node, or (-1, -1, inf) when none.

    score = (cost after the cut) / (cost before) + depth_factor * depth_penalty, over cuts that
    leave at least one center on each side and, with ``require_rows``, at least as many rows
    as centers on each side. Without ``require_rows`` (the fallback when no cut has enough rows)
    the score is the cost ratio alone. Ties go to the lowest feature, then the lowest bin.
    """
    d = counts.shape[0]
    n_splits = sums.shape[2]
    n_centers = member_codes.shape[0]
    n = 0
    for b in range(counts.shape[1]):
        n += counts[0, b]
    best, best_f, best_b = np.inf, -1, -1
    running_left = np.empty(n_splits)
    running_right = np.empty(n_splits)
    total_right = np.empty(n_splits)
    for f in range(d):
        center_codes = np.sort(member_codes[:, f])
        top_code = center_codes[n_centers - 1]
        if center_codes[0] == top_code:
            continue
        running_left[:] = 0.0
        running_right[:] = 0.0
        total_right[:] = 0.0
        for b in range(counts.shape[1]):
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
            k_right, n_right = n_centers - k_left, n - n_left
            if require_rows and (n_left < k_left or n_right < k_right):
                continue
            cost = running_left[q] + total_right[q] - running_right[q]
            score = cost / base if base > 0.0 else 0.0
            if require_rows and depth_factor != 0.0:
                score += depth_factor * depth_penalty(
                    n_left, n_right, k_left, k_right, bounded[f, 0], bounded[f, 1]
                )
            if score < best:
                best, best_f, best_b = score, f, b
    return best_f, best_b, best
